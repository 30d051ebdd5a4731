package settle_test

import (
	"context"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/internal/testenv"
	"github.com/surgepay/surgepay/provider/sim"
	"github.com/surgepay/surgepay/settle"
	"github.com/surgepay/surgepay/stage/stagetest"
)

// benchStageConcurrency bounds the sales staged at once before a
// benchmark's timer starts.
const benchStageConcurrency = 64

// BenchmarkSettle settles b.N staged sales from the embedded stage of a
// real SQLite store, against the in-process simulator at 0 ms.
func BenchmarkSettle(b *testing.B) {
	e := newEnvStore(b, testenv.OpenSQLite(b))
	stageSales(b, e, nil)
	cfg := e.config(nil)
	benchRun(b, cfg)
}

// BenchmarkSettlePostgresJetStream settles b.N sales staged at a real
// nats-server, with their payments in PostgreSQL (the production stack),
// against the simulator at 0 ms: in process (InProcess), and behind HTTP
// on loopback (HTTP), as `surgepay settle` talks to `surgepay simulator`.
// It needs SURGEPAY_TEST_POSTGRES_URL and nats-server.
func BenchmarkSettlePostgresJetStream(b *testing.B) {
	for _, name := range []string{"InProcess", "HTTP"} {
		b.Run(name, func(b *testing.B) {
			e := newEnvStore(b, testenv.OpenPostgres(b))
			srv := stagetest.StartNATS(b)
			js := openJS(b, srv.URL)
			stageSales(b, e, js)
			cfg := e.config(nil)
			cfg.Consumer = js
			if name == "HTTP" {
				hs := httptest.NewServer(sim.NewHandler(e.sim))
				b.Cleanup(hs.Close)
				c, err := sim.NewClient(hs.URL, nil)
				if err != nil {
					b.Fatal(err)
				}
				cfg.Provider = c
			}
			benchRun(b, cfg)
		})
	}
}

// stageSales makes b.N streamlined sales, staged at st (nil: the
// embedded stage).
func stageSales(b *testing.B, e *env, st surgepay.Stage) {
	b.Helper()
	sem := make(chan struct{}, benchStageConcurrency)
	var wg sync.WaitGroup
	for range b.N {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if _, err := stagetest.MakeSale(context.Background(), e.store, e.sim, e.sealer, st,
				stagetest.Sale{MerchantID: e.merch, Amount: 1000, Card: cardOK}); err != nil {
				b.Error(err)
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
}

// benchRun settles with the default batch size and workers, and reports
// captures per second.
func benchRun(b *testing.B, cfg settle.Config) {
	b.Helper()
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
