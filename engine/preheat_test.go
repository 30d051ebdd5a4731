package engine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/engine"
	"github.com/surgepay/surgepay/internal/testenv"
	"github.com/surgepay/surgepay/provider/sim"
	"github.com/surgepay/surgepay/vault"
)

// TestPreheatNewestCardsAcrossMerchants saves cards of three merchants in
// an interleaved order and preheats with room for fewer than all: exactly
// the newest ones, whatever their merchant, are cached (a lookup reads
// nothing), the others are read from the store. Merchant A's cards span
// several pages of the per-merchant reads.
func TestPreheatNewestCardsAcrossMerchants(t *testing.T) {
	for _, b := range testenv.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			store := b.Open(t)
			keys, err := vault.Generate()
			if err != nil {
				t.Fatal(err)
			}
			var merchants [3]string
			for i := range merchants {
				merchants[i] = surgepay.NewID("mer")
				if err := store.Apply(ctx, &surgepay.Write{Merchant: &surgepay.Merchant{ID: merchants[i], Name: "m", Created: time.Now()}}); err != nil {
					t.Fatal(err)
				}
			}
			// Card n belongs to merchant A, B or C in the pattern below; its
			// ID sorts by n, as IDs sort by creation time.
			const cards, budget = 90, 40
			owner := func(n int) string { return merchants[[]int{0, 0, 0, 1, 2, 0}[n%6]] }
			id := func(n int) string { return fmt.Sprintf("pm_%026d", n) }
			for n := range cards {
				pm := &surgepay.PaymentMethod{ID: id(n), MerchantID: owner(n), CustomerID: "cus_1", Brand: surgepay.BrandVisa,
					Last4: "4242", ExpMonth: 12, ExpYear: 2034, Fingerprint: "fp", SealedPAN: []byte{1}, Created: time.Now()}
				if err := store.Apply(ctx, &surgepay.Write{PaymentMethodInsert: pm}); err != nil {
					t.Fatal(err)
				}
			}
			eng, err := engine.New(engine.Config{Store: store, Provider: sim.New(sim.DefaultConfig()), Vault: keys,
				PreheatPaymentMethodsMax: budget})
			if err != nil {
				t.Fatal(err)
			}
			if err := eng.Preheat(ctx); err != nil {
				t.Fatalf("Preheat: %v", err)
			}
			for n := range cards {
				c := &surgepay.StatementCounter{}
				call := &engine.Call{MerchantID: owner(n)}
				if _, err := eng.GetPaymentMethod(surgepay.WithStatementCounter(ctx, c), call, id(n)); err != nil {
					t.Fatalf("card %d: %v", n, err)
				}
				preheated := n >= cards-budget
				if got := c.Kind(surgepay.StmtSelect) == 0; got != preheated {
					t.Errorf("card %d of %d: cached %v, want %v (the %d newest)", n, cards, got, preheated, budget)
				}
			}
		})
	}
}
