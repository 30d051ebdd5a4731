package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
)

// Sales: a Write of a PaymentInsert, perhaps an Idempotency record and
// Events, nothing else (the Staged record of a streamlined sale is in
// stage.go). Every store stores one with ONE statement, two with Events;
// the standard purchase (idempotency record, payment, events) is two.

// sale returns the Write of a sale without a staged record: an idempotency
// record and the payment, no events, and the payment.
func sale(merchantID string) (*surgepay.Write, *surgepay.Payment) {
	p := minimalPayment(merchantID, surgepay.StatusSucceeded)
	p.AmountAuthorized, p.AmountCaptured = p.Amount, p.Amount
	return &surgepay.Write{Idempotency: sampleIdempotency(merchantID), PaymentInsert: p}, p
}

// missingPaymentMethod returns a PaymentMethodDelete that deletes nothing:
// not a guard, it only sends a Write down the general path.
func missingPaymentMethod(merchantID string) *surgepay.PaymentMethod {
	return &surgepay.PaymentMethod{MerchantID: merchantID, ID: surgepay.NewID("pm")}
}

// testSaleStatementCounts pins the budget of a sale: ONE statement, with or
// without its idempotency record, stored or refused; with events, two.
func testSaleStatementCounts(t *testing.T, s surgepay.Store) {
	m := newMerchant(t, s)
	plain, _ := sale(m.ID)
	noKey, _ := sale(m.ID)
	noKey.Idempotency = nil
	withEvents, _ := sale(m.ID)
	withEvents.Events = saleEvents(withEvents.PaymentInsert)
	noKeyWithEvents, _ := sale(m.ID)
	noKeyWithEvents.Idempotency, noKeyWithEvents.Events = nil, saleEvents(noKeyWithEvents.PaymentInsert)
	taken, takenP := sale(m.ID)
	taken.Idempotency.Key = plain.Idempotency.Key
	takenWithEvents, takenWithEventsP := sale(m.ID)
	takenWithEvents.Idempotency.Key, takenWithEvents.Events = plain.Idempotency.Key, saleEvents(takenWithEventsP)

	tests := []applyCase{
		{"Sale", plain, "", stmtKinds{1, 0, 1, 0, 0}},
		{"SaleWithoutIdempotency", noKey, "", stmtKinds{1, 0, 1, 0, 0}},
		{"SaleWithEvents", withEvents, "", stmtKinds{2, 0, 2, 0, 0}},
		{"SaleWithoutIdempotencyWithEvents", noKeyWithEvents, "", stmtKinds{2, 0, 2, 0, 0}},
		{"SaleErrIdempotencyKeyExists", taken, "idempotency_key_exists", stmtKinds{1, 0, 1, 0, 0}},
		{"SaleWithEventsErrIdempotencyKeyExists", takenWithEvents, "idempotency_key_exists", stmtKinds{1, 0, 1, 0, 0}},
	}
	applyCounting(t, s, tests)
	for _, p := range []*surgepay.Payment{takenP, takenWithEventsP} {
		_, err := s.FindPayment(t.Context(), m.ID, p.ID)
		wantNotFound(t, "FindPayment(refused sale)", err)
		if evs := listEvents(t, s, m.ID, p.ID); len(evs) != 0 {
			t.Errorf("refused sale %s: ListEvents = %d events, want 0", p.ID, len(evs))
		}
	}
}

// testSaleIdempotencyConflict fires sales that reuse a stored key (one
// statement, with events, and with a part that takes the general path) at
// once with 20 neighbours: each refused sale stores nothing, not its
// payment, events or customer, and every neighbour is stored whole.
func testSaleIdempotencyConflict(t *testing.T, s surgepay.Store) {
	const neighbours = 20
	m := newMerchant(t, s)
	first, firstP := sale(m.ID)
	apply(t, s, first)

	type write struct {
		w *surgepay.Write
		p *surgepay.Payment
	}
	var refused, stored []write
	for i := range 3 {
		w, p := sale(m.ID)
		w.Idempotency.Key, w.Idempotency.StatusCode = first.Idempotency.Key, 500
		switch i {
		case 1:
			w.Events = saleEvents(p)
		case 2:
			w.CustomerInsert = sampleCustomer(m.ID)
		}
		refused = append(refused, write{w, p})
	}
	for i := range neighbours {
		w, p := sale(m.ID)
		switch i % 4 {
		case 1:
			w.Events = saleEvents(p)
		case 2:
			w.Idempotency = nil
		case 3:
			w.Idempotency, w.Events = nil, saleEvents(p)
		}
		stored = append(stored, write{w, p})
	}
	all := append(append([]write(nil), refused...), stored...)
	errs := make([]error, len(all))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range all {
		wg.Go(func() {
			<-start
			errs[i] = s.Apply(t.Context(), all[i].w)
		})
	}
	close(start)
	wg.Wait()

	for i, r := range refused {
		wantErr(t, errs[i], surgepay.ECONFLICT, "idempotency_key_exists")
		_, err := s.FindPayment(t.Context(), m.ID, r.p.ID)
		wantNotFound(t, fmt.Sprintf("FindPayment(refused sale %d)", i), err)
		if evs := listEvents(t, s, m.ID, r.p.ID); len(evs) != 0 {
			t.Errorf("refused sale %d: ListEvents = %d events, want 0", i, len(evs))
		}
		if c := r.w.CustomerInsert; c != nil {
			_, err := s.FindCustomer(t.Context(), m.ID, c.ID)
			wantNotFound(t, fmt.Sprintf("FindCustomer(refused sale %d)", i), err)
		}
	}
	got, err := s.FindIdempotency(t.Context(), m.ID, first.Idempotency.Key)
	if err != nil {
		t.Fatalf("FindIdempotency: %v", err)
	}
	if d := diff(first.Idempotency, got); d != "" {
		t.Errorf("stored record is not the first sale's (-want +got):\n%s", d)
	}
	if d := diff(firstP, findPayment(t, s, m.ID, firstP.ID)); d != "" {
		t.Errorf("first sale's payment (-want +got):\n%s", d)
	}
	for i, n := range stored {
		if err := errs[len(refused)+i]; err != nil {
			t.Errorf("neighbour %d: Apply = %v, want nil", i, err)
			continue
		}
		if d := diff(n.p, findPayment(t, s, m.ID, n.p.ID)); d != "" {
			t.Errorf("neighbour %d: FindPayment (-want +got):\n%s", i, d)
		}
		if d := diff(n.w.Events, listEvents(t, s, m.ID, n.p.ID)); d != "" {
			t.Errorf("neighbour %d: ListEvents (-want +got):\n%s", i, d)
		}
		if r := n.w.Idempotency; r != nil {
			got, err := s.FindIdempotency(t.Context(), m.ID, r.Key)
			if err != nil || diff(r, got) != "" {
				t.Errorf("neighbour %d: FindIdempotency = %v; diff %s", i, err, diff(r, got))
			}
		}
	}
}

// testSaleStoresWhatGeneralPathStores checks that the one statement of a
// sale stores the rows the general path stores: the same payment and
// idempotency record, stored by a Write that a PaymentMethodDelete of a
// missing card sends down the general path, read back identically, for a
// payment with every field set and for a minimal one (NULL columns).
func testSaleStoresWhatGeneralPathStores(t *testing.T, s surgepay.Store) {
	m := newMerchant(t, s)
	minimal := minimalPayment(m.ID, surgepay.StatusSucceeded)
	minimal.Updated = time.Time{}
	for _, tc := range []struct {
		name string
		p    *surgepay.Payment
	}{
		{"EveryField", samplePayment(m.ID, surgepay.NewID("cus"), surgepay.NewID("pm"))},
		{"Minimal", minimal},
	} {
		pa, ra := tc.p, sampleIdempotency(m.ID)
		pb := pa.Clone()
		pb.ID = surgepay.NewID("pay")
		rb := *ra
		rb.Key = ra.Key + "-b"

		ctx, c := ctxCounter(t)
		if err := s.Apply(ctx, &surgepay.Write{Idempotency: ra, PaymentInsert: pa}); err != nil {
			t.Fatalf("%s: Apply(sale): %v", tc.name, err)
		}
		wantStatements(t, tc.name+": sale", c, stmtKinds{1, 0, 1, 0, 0})
		ctx, c = ctxCounter(t)
		err := s.Apply(ctx, &surgepay.Write{Idempotency: &rb, PaymentInsert: pb,
			PaymentMethodDelete: missingPaymentMethod(m.ID)})
		if err != nil {
			t.Fatalf("%s: Apply(general path): %v", tc.name, err)
		}
		wantStatements(t, tc.name+": general path", c, stmtKinds{3, 0, 2, 0, 1})

		gotA, gotB := findPayment(t, s, m.ID, pa.ID), findPayment(t, s, m.ID, pb.ID)
		if d := diff(pa, gotA); d != "" {
			t.Errorf("%s: FindPayment(sale) (-want +got):\n%s", tc.name, d)
		}
		gotB.ID = gotA.ID
		if d := diff(gotB, gotA); d != "" {
			t.Errorf("%s: FindPayment: sale (+) differs from the general path (-):\n%s", tc.name, d)
		}
		idemA, errA := s.FindIdempotency(t.Context(), m.ID, ra.Key)
		idemB, errB := s.FindIdempotency(t.Context(), m.ID, rb.Key)
		if errA != nil || errB != nil {
			t.Fatalf("%s: FindIdempotency: %v, %v", tc.name, errA, errB)
		}
		if d := diff(ra, idemA); d != "" {
			t.Errorf("%s: FindIdempotency(sale) (-want +got):\n%s", tc.name, d)
		}
		idemB.Key = idemA.Key
		if d := diff(idemB, idemA); d != "" {
			t.Errorf("%s: FindIdempotency: sale (+) differs from the general path (-):\n%s", tc.name, d)
		}
	}
}
