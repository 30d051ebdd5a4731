package sqlite_test

import (
	"context"
	"testing"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/provider/sim"
	"github.com/surgepay/surgepay/sqlite"
	"github.com/surgepay/surgepay/stage"
	"github.com/surgepay/surgepay/stage/stagetest"
)

// TestFindPayments: one statement reads the payments that exist under
// their merchant, and nothing for a missing key or another merchant's.
func TestFindPayments(t *testing.T) {
	db := open(t, sqlite.Config{})
	ctx := context.Background()
	pub, _, err := stage.GenerateKeys()
	if err != nil {
		t.Fatal(err)
	}
	sealer, _ := stage.NewSealer(pub)
	prov := sim.New(sim.DefaultConfig())
	sale := func(m *surgepay.Merchant) *surgepay.Payment {
		s, err := stagetest.MakeSale(ctx, db, prov, sealer, nil, stagetest.Sale{MerchantID: m.ID, Amount: 1000, Card: "4242424242424242"})
		if err != nil {
			t.Fatal(err)
		}
		return s.Payment
	}
	m, err := stagetest.NewMerchant(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	other, err := stagetest.NewMerchant(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	a, b, c := sale(m), sale(m), sale(other)
	got, err := db.FindPayments(ctx, []surgepay.PaymentKey{{MerchantID: m.ID, ID: a.ID}, {MerchantID: m.ID, ID: b.ID},
		{MerchantID: m.ID, ID: "pay_missing"}, {MerchantID: m.ID, ID: c.ID}})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, p := range got {
		ids[p.ID] = true
		if p.Amount != 1000 || len(p.Transactions) != 2 || p.Version != 1 {
			t.Errorf("payment %s read back incomplete: %+v", p.ID, p)
		}
	}
	if len(got) != 2 || !ids[a.ID] || !ids[b.ID] {
		t.Errorf("got %v, want the merchant's two payments", ids)
	}
	if _, err := db.FindPayments(ctx, make([]surgepay.PaymentKey, sqlite.PaymentsFindMax+1)); err == nil {
		t.Error("more than PaymentsFindMax keys: got nil error")
	}
}
