package settle_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/surgepay/surgepay/internal/testenv"
	"github.com/surgepay/surgepay/settle"
	"github.com/surgepay/surgepay/stage/stagetest"
)

// BenchmarkSettle settles b.N staged sales from the embedded stage of a
// real SQLite store, against the in-process simulator at 0 ms.
func BenchmarkSettle(b *testing.B) {
	e := newEnvStore(b, testenv.OpenSQLite(b))
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	for range b.N {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if _, err := stagetest.MakeSale(context.Background(), e.store, e.sim, e.sealer, nil,
				stagetest.Sale{MerchantID: e.merch, Amount: 1000, Card: cardOK}); err != nil {
				b.Error(err)
			}
		})
	}
	wg.Wait()
	cfg := e.config(nil)
	cfg.BatchSizeMax, cfg.Workers, cfg.BatchWait = settle.BatchSizeMaxDefault, settle.WorkersDefault, 10*time.Millisecond
	b.ResetTimer()
	rep, err := settle.Run(context.Background(), cfg)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	if rep.Captured != b.N {
		b.Fatalf("captured %d, want %d: %+v", rep.Captured, b.N, rep)
	}
	b.ReportMetric(float64(rep.Captured)/b.Elapsed().Seconds(), "captures/s")
}
