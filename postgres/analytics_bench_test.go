package postgres_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/postgres"
)

// BenchmarkApplyStagedSaleAnalyticsParallel measures streamlined sales of
// ONE merchant (a single-merchant surge: every batch adds to the same
// day's counters) with and without analytics deltas, from many concurrent
// callers on the default committers.
func BenchmarkApplyStagedSaleAnalyticsParallel(b *testing.B) {
	day := time.Now().UTC().Format(time.DateOnly)
	for _, analytics := range []bool{false, true} {
		b.Run(fmt.Sprintf("Analytics=%v", analytics), func(b *testing.B) {
			benchmarkApply(b, postgres.Config{Writers: postgres.WritersDefault}, func(merchantID string) *surgepay.Write {
				w, _ := stagedSale(merchantID)
				if analytics {
					d, _ := surgepay.AnalyticsOf(nil, w.PaymentInsert, time.Now())
					d.Date = day
					w.Analytics = []surgepay.AnalyticsDelta{d}
				}
				return w
			})
		})
	}
}
