package postgres_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/postgres"
)

// BenchmarkApplyPurchaseParallel measures group-committed purchases
// (idempotency record, payment, two events) from many concurrent callers,
// as an API server under load issues them.
func BenchmarkApplyPurchaseParallel(b *testing.B) {
	for _, writers := range []int{1, 2, postgres.WritersDefault, 8} {
		b.Run(fmt.Sprintf("Writers=%d", writers), func(b *testing.B) {
			benchmarkApplyPurchase(b, postgres.Config{Writers: writers})
		})
	}
}

// BenchmarkApplyStagedSaleParallel measures group-committed streamlined
// sales (idempotency record, payment and staged capture: ONE statement,
// and a batch of them one round trip) from many concurrent callers.
func BenchmarkApplyStagedSaleParallel(b *testing.B) {
	for _, writers := range []int{1, 2, postgres.WritersDefault, 8} {
		b.Run(fmt.Sprintf("Writers=%d", writers), func(b *testing.B) {
			benchmarkApply(b, postgres.Config{Writers: writers}, func(merchantID string) *surgepay.Write {
				w, _ := stagedSale(merchantID)
				return w
			})
		})
	}
}

func benchmarkApplyPurchase(b *testing.B, cfg postgres.Config) {
	benchmarkApply(b, cfg, func(merchantID string) *surgepay.Write {
		w, _ := purchase(merchantID)
		return w
	})
}

// benchmarkApply applies the Writes of newWrite from many concurrent
// callers and reports writes/s and writes per batch.
func benchmarkApply(b *testing.B, cfg postgres.Config, newWrite func(merchantID string) *surgepay.Write) {
	db := openTest(b, cfg)
	m := newMerchant(b, db)
	before := db.CommitStats()
	b.SetParallelism(32) // callers per GOMAXPROCS: group commit needs a crowd
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			w := newWrite(m.ID)
			if err := db.Apply(context.Background(), w); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	st := db.CommitStats()
	items, batches := st.Items-before.Items, st.Batches-before.Batches
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "writes/s")
	if batches > 0 {
		b.ReportMetric(float64(items)/float64(batches), "writes/batch")
	}
}

// BenchmarkFindPayment measures one pooled point read.
func BenchmarkFindPayment(b *testing.B) {
	db := openTest(b, postgres.Config{})
	m := newMerchant(b, db)
	w, p := purchase(m.ID)
	mustApply(b, db, w)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := db.FindPayment(context.Background(), m.ID, p.ID); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reads/s")
}

var _ surgepay.Store = (*postgres.DB)(nil)
