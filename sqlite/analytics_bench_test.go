package sqlite_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/sqlite"
)

// BenchmarkApplyStagedSaleAnalyticsParallel measures streamlined sales of
// ONE merchant from many concurrent callers, group-committed by the one
// writer, with and without analytics deltas (one upsert per batch).
func BenchmarkApplyStagedSaleAnalyticsParallel(b *testing.B) {
	day := time.Now().UTC().Format(time.DateOnly)
	for _, analytics := range []bool{false, true} {
		b.Run(fmt.Sprintf("Analytics=%v", analytics), func(b *testing.B) {
			db := open(b, sqlite.Config{})
			m := newMerchant(b, db)
			before := db.CommitStats()
			b.SetParallelism(32)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					w, _ := stagedSale(m.ID)
					if analytics {
						d, _ := surgepay.AnalyticsOf(nil, w.PaymentInsert, time.Now())
						d.Date = day
						w.Analytics = []surgepay.AnalyticsDelta{d}
					}
					if err := db.Apply(context.Background(), w); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			st := db.CommitStats()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "writes/s")
			if n := st.Batches - before.Batches; n > 0 {
				b.ReportMetric(float64(st.Items-before.Items)/float64(n), "writes/batch")
			}
		})
	}
}
