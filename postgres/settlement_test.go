package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/postgres"
	"github.com/surgepay/surgepay/provider/sim"
	"github.com/surgepay/surgepay/stage"
	"github.com/surgepay/surgepay/stage/stagetest"
)

// settlementSales stores n streamlined sales of a new merchant, each with
// its staged record (the embedded stage).
func settlementSales(t *testing.T, db *postgres.DB, n int) (*surgepay.Merchant, []*stagetest.Staged) {
	t.Helper()
	ctx := context.Background()
	pub, _, err := stage.GenerateKeys()
	if err != nil {
		t.Fatal(err)
	}
	sealer, _ := stage.NewSealer(pub)
	m, err := stagetest.NewMerchant(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	prov := sim.New(sim.DefaultConfig())
	var sales []*stagetest.Staged
	for i := range n {
		s, err := stagetest.MakeSale(ctx, db, prov, sealer, nil, stagetest.Sale{MerchantID: m.ID, Amount: int64(1000 + i), Card: "4242424242424242"})
		if err != nil {
			t.Fatal(err)
		}
		sales = append(sales, s)
	}
	return m, sales
}

func TestFindPayments(t *testing.T) {
	db := openTest(t, postgres.Config{})
	m, sales := settlementSales(t, db, 3)
	other, _ := settlementSales(t, db, 1)
	keys := []surgepay.PaymentKey{{MerchantID: m.ID, ID: sales[0].Payment.ID}, {MerchantID: m.ID, ID: sales[2].Payment.ID},
		{MerchantID: m.ID, ID: "pay_missing"}, {MerchantID: other.ID, ID: sales[1].Payment.ID}}
	got, err := db.FindPayments(context.Background(), keys)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, p := range got {
		ids[p.ID] = true
		if p.Amount == 0 || len(p.Transactions) != 2 || p.Version != 1 {
			t.Errorf("payment %s read back incomplete: %+v", p.ID, p)
		}
	}
	if len(got) != 2 || !ids[sales[0].Payment.ID] || !ids[sales[2].Payment.ID] {
		t.Errorf("got %v, want the two payments that exist under their merchant", ids)
	}
	if _, err := db.FindPayments(context.Background(), make([]surgepay.PaymentKey, postgres.PaymentsFindMax+1)); err == nil {
		t.Error("more than PaymentsFindMax keys: got nil error")
	}
}

// TestApplySettlements: one statement stores the settlements whose guard
// holds, each with its events, staged acknowledgement and webhook fan-out,
// and nothing of the others.
func TestApplySettlements(t *testing.T) {
	db := openTest(t, postgres.Config{})
	ctx := context.Background()
	m, sales := settlementSales(t, db, 3)
	now := time.Now().UTC()
	endpoint := &surgepay.WebhookEndpoint{ID: surgepay.NewID("we"), MerchantID: m.ID, URL: "https://example.com/hook",
		SealedSecret: []byte("sealed"), Created: now}
	if err := db.Apply(ctx, &surgepay.Write{WebhookEndpointInsert: endpoint}); err != nil {
		t.Fatal(err)
	}
	settlement := func(s *stagetest.Staged, version int64) *surgepay.Write {
		next := s.Payment.Clone()
		next.SettleCapture("cap_"+s.Payment.ID, now)
		next.Version = version
		return &surgepay.Write{ProviderActed: true, PaymentUpdate: next, StagedAck: []string{s.Record.ID},
			Events: []*surgepay.Event{{ID: surgepay.NewID("evt"), PaymentID: next.ID, MerchantID: m.ID, Type: "capture",
				FromStatus: s.Payment.Status, ToStatus: next.Status, Amount: next.Amount, ActorKeyID: "settle",
				RequestID: s.Record.ID, Created: now}},
			Webhook: &surgepay.WebhookEvent{ID: surgepay.NewID("evt"), MerchantID: m.ID, PaymentID: next.ID,
				Type: surgepay.WebhookPaymentCaptured, Payload: []byte(`{}`), Created: now}}
	}
	missing := settlement(sales[2], 2)
	missing.PaymentUpdate.ID = "pay_missing"
	missing.Events[0].PaymentID, missing.Webhook.PaymentID = "pay_missing", "pay_missing"
	ws := []*surgepay.Write{settlement(sales[0], 2), settlement(sales[1], 3), missing}
	stored, err := db.ApplySettlements(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != 3 || !stored[0] || stored[1] || stored[2] {
		t.Fatalf("stored %v, want [true false false]: the second's version is stale, the third's payment missing", stored)
	}
	p0, _ := db.FindPayment(ctx, m.ID, sales[0].Payment.ID)
	p1, _ := db.FindPayment(ctx, m.ID, sales[1].Payment.ID)
	if p0.Version != 2 || p0.StagedCapture() != nil || p1.Version != 1 || p1.StagedCapture() == nil {
		t.Errorf("after: first version %d staged %v, second version %d staged %v; want the first settled only",
			p0.Version, p0.StagedCapture() != nil, p1.Version, p1.StagedCapture() != nil)
	}
	for i, want := range []int{1, 0} {
		evs, err := db.ListEvents(ctx, m.ID, sales[i].Payment.ID)
		if err != nil || len(evs) != want {
			t.Errorf("sale %d: %d events (%v), want %d", i, len(evs), err, want)
		}
	}
	if n, _, _ := db.StagedBacklog(ctx); n != 2 {
		t.Errorf("staged backlog %d, want 2: only the settled record acknowledged", n)
	}
	if b, err := db.WebhookBacklog(ctx); err != nil || b.Pending != 1 {
		t.Errorf("webhook deliveries pending %d (%v), want 1", b.Pending, err)
	}

	t.Run("ErrOtherPart", func(t *testing.T) {
		w := settlement(sales[1], 2)
		w.Staged = sales[1].Record
		if _, err := db.ApplySettlements(ctx, []*surgepay.Write{w}); err == nil {
			t.Error("a Write with a staged record: got nil error")
		}
	})
	t.Run("ErrPaymentTwice", func(t *testing.T) {
		if _, err := db.ApplySettlements(ctx, []*surgepay.Write{settlement(sales[1], 2), settlement(sales[1], 2)}); err == nil {
			t.Error("two settlements of one payment: got nil error")
		}
		if p, _ := db.FindPayment(ctx, m.ID, sales[1].Payment.ID); p.Version != 1 {
			t.Errorf("version %d after a refused batch, want 1", p.Version)
		}
	})
}
