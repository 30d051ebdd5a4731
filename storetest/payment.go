package storetest

import (
	"testing"
	"time"

	"github.com/surgepay/surgepay"
)

func testPaymentMethodInsertFindDelete(t *testing.T, s surgepay.Store) {
	m := newMerchant(t, s)
	c := newCustomer(t, s, m.ID)
	want := samplePaymentMethod(m.ID, c.ID)
	wantAllFieldsSet(t, want)
	apply(t, s, &surgepay.Write{PaymentMethodInsert: want})
	got, err := s.FindPaymentMethod(t.Context(), m.ID, want.ID)
	if err != nil {
		t.Fatalf("FindPaymentMethod: %v", err)
	}
	if d := diff(want, got); d != "" {
		t.Errorf("FindPaymentMethod mismatch (-want +got):\n%s", d)
	}

	apply(t, s, &surgepay.Write{PaymentMethodDelete: want})
	_, err = s.FindPaymentMethod(t.Context(), m.ID, want.ID)
	wantNotFound(t, "FindPaymentMethod(deleted)", err)
	// Deleting what is gone is not an error.
	apply(t, s, &surgepay.Write{PaymentMethodDelete: want})
	findCustomer(t, s, m.ID, c.ID)
}

func testPaymentMethodListByCustomer(t *testing.T, s surgepay.Store) {
	m := newMerchant(t, s)
	c := newCustomer(t, s, m.ID)
	other := newCustomer(t, s, m.ID)
	var ids []string
	for i := range 7 {
		ids = append(ids, newPaymentMethod(t, s, m.ID, c.ID).ID)
		if i%2 == 0 {
			newPaymentMethod(t, s, m.ID, other.ID)
		}
	}
	checkPages(t, "ListPaymentMethods", idsDesc(ids), func(p surgepay.Page) ([]string, bool) {
		t.Helper()
		pms, more, err := s.ListPaymentMethods(t.Context(), m.ID, c.ID, p)
		if err != nil {
			t.Fatalf("ListPaymentMethods(%+v): %v", p, err)
		}
		var got []string
		for _, pm := range pms {
			if pm.CustomerID != c.ID || pm.MerchantID != m.ID {
				t.Fatalf("ListPaymentMethods returned %s of customer %s, merchant %s", pm.ID, pm.CustomerID, pm.MerchantID)
			}
			got = append(got, pm.ID)
		}
		return got, more
	})
}

func testPaymentRoundTripEveryField(t *testing.T, s surgepay.Store) {
	m := newMerchant(t, s)
	want := samplePayment(m.ID, surgepay.NewID("cus"), surgepay.NewID("pm"))
	wantAllFieldsSet(t, want, "ClientSecret") // made when the payment is answered, never stored
	wantAllFieldsSet(t, want.Tax)
	wantAllFieldsSet(t, want.Pending)
	for i := range want.Transactions {
		wantAllFieldsSet(t, &want.Transactions[i])
	}
	apply(t, s, &surgepay.Write{PaymentInsert: want})
	if d := diff(want, findPayment(t, s, m.ID, want.ID)); d != "" {
		t.Errorf("FindPayment mismatch (-want +got):\n%s", d)
	}
	ps, _, err := s.ListPayments(t.Context(), m.ID, surgepay.PaymentFilter{Page: surgepay.Page{Limit: 10}})
	if err != nil {
		t.Fatalf("ListPayments: %v", err)
	}
	if d := diff([]*surgepay.Payment{want}, ps); d != "" {
		t.Errorf("ListPayments mismatch (-want +got):\n%s", d)
	}
}

func testPaymentRoundTripMinimal(t *testing.T, s surgepay.Store) {
	m := newMerchant(t, s)
	want := minimalPayment(m.ID, surgepay.StatusFailed)
	want.Updated = time.Time{}
	apply(t, s, &surgepay.Write{PaymentInsert: want})
	got := findPayment(t, s, m.ID, want.ID)
	if d := diff(want, got); d != "" {
		t.Errorf("FindPayment mismatch (-want +got):\n%s", d)
	}
	if got.Tax != nil || got.Pending != nil {
		t.Errorf("FindPayment: Tax %v, Pending %v; want nil, nil", got.Tax, got.Pending)
	}
}

// nextPayment returns a copy of p changed as a capture would change it.
func nextPayment(p *surgepay.Payment) *surgepay.Payment {
	u := p.Clone()
	u.Status = surgepay.StatusSucceeded
	u.AmountCaptured = u.AmountAuthorized
	u.Pending = nil
	u.Tax = nil
	u.Metadata = map[string]string{"captured": "yes"}
	u.Transactions = append(u.Transactions, surgepay.Transaction{ID: surgepay.NewID("tx"),
		Type: surgepay.TxCapture, Status: surgepay.TxSucceeded, Amount: u.AmountCaptured,
		IdempotencyKey: p.ID + "/capture", Created: now()})
	u.Updated = p.Updated.Add(time.Second)
	u.Version = p.Version + 1
	return u
}

func testPaymentUpdate(t *testing.T, s surgepay.Store) {
	m := newMerchant(t, s)
	p := samplePayment(m.ID, "", surgepay.NewID("pm"))
	apply(t, s, &surgepay.Write{PaymentInsert: p})
	u1 := nextPayment(p)
	apply(t, s, &surgepay.Write{PaymentUpdate: u1, Events: []*surgepay.Event{
		sampleEvent(u1, surgepay.TxCapture, p.Status, u1.Status)}})
	u2 := nextPayment(u1)
	u2.Status = surgepay.StatusRefunded
	u2.AmountRefunded = u2.AmountCaptured
	u2.Description = ""
	apply(t, s, &surgepay.Write{PaymentUpdate: u2})
	if d := diff(u2, findPayment(t, s, m.ID, p.ID)); d != "" {
		t.Errorf("FindPayment after two updates mismatch (-want +got):\n%s", d)
	}
}

func testPaymentUpdateErrStale(t *testing.T, s surgepay.Store) {
	m := newMerchant(t, s)
	p := samplePayment(m.ID, "", surgepay.NewID("pm"))
	apply(t, s, &surgepay.Write{PaymentInsert: p})
	u1 := nextPayment(p)
	apply(t, s, &surgepay.Write{PaymentUpdate: u1})

	stale := nextPayment(p)
	stale.Status = surgepay.StatusCanceled
	ev := sampleEvent(stale, surgepay.TxVoid, p.Status, stale.Status)
	idem := sampleIdempotency(m.ID)
	err := s.Apply(t.Context(), &surgepay.Write{Idempotency: idem, PaymentUpdate: stale, Events: []*surgepay.Event{ev}})
	wantErr(t, err, surgepay.ECONFLICT, "concurrent_update")

	if d := diff(u1, findPayment(t, s, m.ID, p.ID)); d != "" {
		t.Errorf("payment changed by a refused update (-want +got):\n%s", d)
	}
	// Nothing of the refused Write is stored: not its event, not its key.
	evs, err := s.ListEvents(t.Context(), m.ID, p.ID)
	if err != nil {
		t.Fatalf("ListEvents: %v", err)
	}
	if len(evs) != 0 {
		t.Errorf("ListEvents = %d events, want 0: the refused Write's event was stored", len(evs))
	}
	_, err = s.FindIdempotency(t.Context(), m.ID, idem.Key)
	wantNotFound(t, "FindIdempotency(refused Write's key)", err)
}

func testPaymentUpdateErrNotFound(t *testing.T, s surgepay.Store) {
	m := newMerchant(t, s)
	p := samplePayment(m.ID, "", surgepay.NewID("pm")) // never inserted
	err := s.Apply(t.Context(), &surgepay.Write{PaymentUpdate: nextPayment(p)})
	wantErr(t, err, surgepay.ENOTFOUND, "")
	_, err = s.FindPayment(t.Context(), m.ID, p.ID)
	wantNotFound(t, "FindPayment", err)
}

func listPaymentIDs(t *testing.T, s surgepay.Store, merchantID string, f surgepay.PaymentFilter) ([]string, bool) {
	t.Helper()
	ps, more, err := s.ListPayments(t.Context(), merchantID, f)
	if err != nil {
		t.Fatalf("ListPayments(%+v): %v", f, err)
	}
	var ids []string
	for _, p := range ps {
		if p.MerchantID != merchantID {
			t.Fatalf("ListPayments(%s) returned merchant %s's payment %s", merchantID, p.MerchantID, p.ID)
		}
		ids = append(ids, p.ID)
	}
	return ids, more
}

func testPaymentListPagination(t *testing.T, s surgepay.Store) {
	m := newMerchant(t, s)
	var ids []string
	for range 7 {
		p := minimalPayment(m.ID, surgepay.StatusSucceeded)
		apply(t, s, &surgepay.Write{PaymentInsert: p})
		ids = append(ids, p.ID)
	}
	checkPages(t, "ListPayments", idsDesc(ids), func(p surgepay.Page) ([]string, bool) {
		t.Helper()
		return listPaymentIDs(t, s, m.ID, surgepay.PaymentFilter{Page: p})
	})
}

func testPaymentListFilters(t *testing.T, s surgepay.Store) {
	m := newMerchant(t, s)
	base := now().Add(-time.Hour)
	custA, custB := surgepay.NewID("cus"), surgepay.NewID("cus")
	type row struct {
		status   surgepay.Status
		customer string
		minute   int // Created = base + minute
	}
	rows := []row{
		{surgepay.StatusSucceeded, custA, 0},
		{surgepay.StatusFailed, custA, 10},
		{surgepay.StatusSucceeded, custB, 20},
		{surgepay.StatusRequiresCapture, "", 30},
		{surgepay.StatusSucceeded, custA, 40},
		{surgepay.StatusProcessing, custB, 50},
	}
	ids := make([]string, len(rows))
	for i, r := range rows {
		p := minimalPayment(m.ID, r.status)
		p.CustomerID = r.customer
		p.Created = base.Add(time.Duration(r.minute) * time.Minute)
		apply(t, s, &surgepay.Write{PaymentInsert: p})
		ids[i] = p.ID
	}
	// Another merchant's payment matches every filter but is never listed.
	o := minimalPayment(newMerchant(t, s).ID, surgepay.StatusSucceeded)
	o.CustomerID, o.Created = custA, base.Add(5*time.Minute)
	apply(t, s, &surgepay.Write{PaymentInsert: o})

	pick := func(idx ...int) []string {
		var out []string
		for _, i := range idx {
			out = append(out, ids[i])
		}
		return idsDesc(out)
	}
	at := func(minute int) time.Time { return base.Add(time.Duration(minute) * time.Minute) }
	tests := []struct {
		name     string
		f        surgepay.PaymentFilter
		want     []string
		wantMore bool
	}{
		{"All", surgepay.PaymentFilter{}, pick(0, 1, 2, 3, 4, 5), false},
		{"Status", surgepay.PaymentFilter{Status: surgepay.StatusSucceeded}, pick(0, 2, 4), false},
		{"StatusNone", surgepay.PaymentFilter{Status: surgepay.StatusRefunded}, nil, false},
		{"Customer", surgepay.PaymentFilter{CustomerID: custA}, pick(0, 1, 4), false},
		{"CustomerAndStatus", surgepay.PaymentFilter{CustomerID: custA, Status: surgepay.StatusSucceeded}, pick(0, 4), false},
		{"CreatedGTEInclusive", surgepay.PaymentFilter{CreatedGTE: at(20)}, pick(2, 3, 4, 5), false},
		{"CreatedBeforeExclusive", surgepay.PaymentFilter{CreatedBefore: at(20)}, pick(0, 1), false},
		{"CreatedRange", surgepay.PaymentFilter{CreatedGTE: at(10), CreatedBefore: at(40)}, pick(1, 2, 3), false},
		{"CreatedRangeMicrosecond", surgepay.PaymentFilter{CreatedGTE: at(10).Add(time.Microsecond), CreatedBefore: at(40).Add(time.Microsecond)}, pick(2, 3, 4), false},
		{"StatusPaged", surgepay.PaymentFilter{Status: surgepay.StatusSucceeded, Page: surgepay.Page{Limit: 2}}, pick(0, 2, 4)[:2], true},
		{"StatusPagedRest", surgepay.PaymentFilter{Status: surgepay.StatusSucceeded,
			Page: surgepay.Page{Limit: 2, StartingAfter: pick(0, 2, 4)[1]}}, pick(0, 2, 4)[2:], false},
		{"CustomerRangePaged", surgepay.PaymentFilter{CustomerID: custA, CreatedGTE: at(0), CreatedBefore: at(41),
			Page: surgepay.Page{Limit: 1, StartingAfter: pick(0, 1, 4)[0]}}, pick(0, 1, 4)[1:2], true},
	}
	for _, tc := range tests {
		if tc.f.Limit == 0 {
			tc.f.Limit = 100
		}
		got, more := listPaymentIDs(t, s, m.ID, tc.f)
		if d := diff(tc.want, got); d != "" || more != tc.wantMore {
			t.Errorf("%s: ListPayments(%+v) has_more %v, want %v; IDs (-want +got):\n%s", tc.name, tc.f, more, tc.wantMore, d)
		}
	}
}

func testListProcessing(t *testing.T, s surgepay.Store) {
	m1, m2 := newMerchant(t, s), newMerchant(t, s)
	var want []string
	for i := range 6 {
		mid := m1.ID
		if i%2 == 1 {
			mid = m2.ID
		}
		p := minimalPayment(mid, surgepay.StatusProcessing)
		apply(t, s, &surgepay.Write{PaymentInsert: p})
		want = append(want, p.ID)
		// Neither a payment in another status nor one that left processing is listed.
		apply(t, s, &surgepay.Write{PaymentInsert: minimalPayment(mid, surgepay.StatusSucceeded)})
		if i == 2 {
			u := p.Clone()
			u.Status, u.Version = surgepay.StatusSucceeded, 2
			apply(t, s, &surgepay.Write{PaymentUpdate: u})
			want = want[:len(want)-1]
		}
	}
	slicesSortAsc(want)
	for _, limit := range []int{1, 3, 5, 100} {
		ps, err := s.ListProcessing(t.Context(), limit, "")
		if err != nil {
			t.Fatalf("ListProcessing(%d): %v", limit, err)
		}
		var got []string
		for _, p := range ps {
			if p.Status != surgepay.StatusProcessing {
				t.Errorf("ListProcessing returned %s in status %s", p.ID, p.Status)
			}
			got = append(got, p.ID)
		}
		w := want[:min(limit, len(want))]
		if d := diff(w, got); d != "" {
			t.Errorf("ListProcessing(%d) IDs, oldest first (-want +got):\n%s", limit, d)
		}
	}
}

func slicesSortAsc(ids []string) {
	d := idsDesc(ids)
	for i := range d {
		ids[len(d)-1-i] = d[i]
	}
}

func listEvents(t *testing.T, s surgepay.Store, merchantID, paymentID string) []*surgepay.Event {
	t.Helper()
	evs, err := s.ListEvents(t.Context(), merchantID, paymentID)
	if err != nil {
		t.Fatalf("ListEvents(%s): %v", paymentID, err)
	}
	return evs
}

func testEventsOldestFirst(t *testing.T, s surgepay.Store) {
	m := newMerchant(t, s)
	w, p := purchase(m.ID)
	// IDs that sort against the order of writing: the trail keeps the order
	// of writing.
	w.Events[0].ID, w.Events[1].ID = "evt_2_"+p.ID, "evt_1_"+p.ID
	wantAllFieldsSet(t, w.Events[1])
	apply(t, s, w)
	u := p.Clone()
	u.Status, u.AmountRefunded, u.Version = surgepay.StatusRefunded, u.AmountCaptured, 2
	refund := sampleEvent(u, surgepay.TxRefund, p.Status, u.Status)
	refund.ID = "evt_0_" + p.ID
	apply(t, s, &surgepay.Write{PaymentUpdate: u, Events: []*surgepay.Event{refund}})
	// Another payment's events are not in this trail.
	w2, _ := purchase(m.ID)
	apply(t, s, w2)

	want := append(append([]*surgepay.Event(nil), w.Events...), refund)
	if d := diff(want, listEvents(t, s, m.ID, p.ID)); d != "" {
		t.Errorf("ListEvents mismatch (-want +got):\n%s", d)
	}
	if got := listEvents(t, s, m.ID, surgepay.NewID("pay")); len(got) != 0 {
		t.Errorf("ListEvents(unknown payment) = %d events, want 0", len(got))
	}
}

// testEventsImmutable checks that a Write reusing a stored event's ID fails
// as a whole and leaves the stored event as it was.
func testEventsImmutable(t *testing.T, s surgepay.Store) {
	m := newMerchant(t, s)
	w, p := purchase(m.ID)
	apply(t, s, w)
	before := listEvents(t, s, m.ID, p.ID)

	u := nextPayment(p)
	u.Status = surgepay.StatusRefunded
	dup := *w.Events[0]
	dup.Type, dup.Amount, dup.ToStatus = "rewritten", 1, surgepay.StatusRefunded
	idem := sampleIdempotency(m.ID)
	err := s.Apply(t.Context(), &surgepay.Write{Idempotency: idem, PaymentUpdate: u, Events: []*surgepay.Event{&dup}})
	if err == nil {
		t.Fatal("Apply of a Write reusing an event ID succeeded, want an error")
	}
	if d := diff(before, listEvents(t, s, m.ID, p.ID)); d != "" {
		t.Errorf("events changed (-want +got):\n%s", d)
	}
	if d := diff(p, findPayment(t, s, m.ID, p.ID)); d != "" {
		t.Errorf("payment changed by a failed Write (-want +got):\n%s", d)
	}
	_, err = s.FindIdempotency(t.Context(), m.ID, idem.Key)
	wantNotFound(t, "FindIdempotency(failed Write's key)", err)
	// The store still works.
	w2, p2 := purchase(m.ID)
	apply(t, s, w2)
	findPayment(t, s, m.ID, p2.ID)
}

// testPaymentFindByRef: a payment authorized at a configured processor is
// found by its qualified reference, of any merchant, whether it was stored
// with it or given it by an update; the default processor's references
// (no "name:") are not indexed and not found.
func testPaymentFindByRef(t *testing.T, s surgepay.Store) {
	f, ok := s.(surgepay.PaymentByRefFinder)
	if !ok {
		t.Skip("the store does not find payments by reference")
	}
	m := newMerchant(t, s)
	routed := samplePayment(m.ID, "", surgepay.NewID("pm"))
	routed.AuthorizationRef = "stripe_eu:pi_" + routed.ID
	plain := samplePayment(m.ID, "", surgepay.NewID("pm"))
	plain.AuthorizationRef = "auth_" + plain.ID
	apply(t, s, &surgepay.Write{PaymentInsert: routed})
	apply(t, s, &surgepay.Write{PaymentInsert: plain})
	got, err := f.FindPaymentByRef(t.Context(), routed.AuthorizationRef)
	if err != nil || got.ID != routed.ID || got.MerchantID != m.ID {
		t.Fatalf("FindPaymentByRef(%s): got %v, %v; want payment %s", routed.AuthorizationRef, got, err, routed.ID)
	}
	_, err = f.FindPaymentByRef(t.Context(), plain.AuthorizationRef)
	wantNotFound(t, "FindPaymentByRef(a default processor's reference)", err)
	_, err = f.FindPaymentByRef(t.Context(), "stripe_eu:pi_unknown")
	wantNotFound(t, "FindPaymentByRef(unknown)", err)

	// Routed by an update: stored with no reference yet (in processing),
	// then given one.
	later := samplePayment(m.ID, "", surgepay.NewID("pm"))
	later.AuthorizationRef = ""
	apply(t, s, &surgepay.Write{PaymentInsert: later})
	u := nextPayment(later)
	u.AuthorizationRef = "stripe_us:pi_" + later.ID
	apply(t, s, &surgepay.Write{PaymentUpdate: u})
	got, err = f.FindPaymentByRef(t.Context(), u.AuthorizationRef)
	if err != nil || got.ID != later.ID || got.Version != u.Version {
		t.Fatalf("FindPaymentByRef(%s, set by an update): got %v, %v; want payment %s", u.AuthorizationRef, got, err, later.ID)
	}
}

// testListProcessingRequiresAction: the payments awaiting a shopper's
// authentication are listed after those in processing, oldest first,
// RequiresActionListed(limit) of them, so that abandoned ones never
// crowd out unknown outcomes.
func testListProcessingRequiresAction(t *testing.T, s surgepay.Store) {
	m := newMerchant(t, s)
	var processing, action []string
	for i := range 8 {
		st := surgepay.StatusRequiresAction
		if i%3 == 0 {
			st = surgepay.StatusProcessing
		}
		p := minimalPayment(m.ID, st)
		apply(t, s, &surgepay.Write{PaymentInsert: p})
		if st == surgepay.StatusProcessing {
			processing = append(processing, p.ID)
		} else {
			action = append(action, p.ID)
		}
	}
	for _, limit := range []int{4, 100} {
		ps, err := s.ListProcessing(t.Context(), limit, "")
		if err != nil {
			t.Fatalf("ListProcessing(%d): %v", limit, err)
		}
		want := append(append([]string(nil), processing...), action[:min(len(action), surgepay.RequiresActionListed(limit))]...)
		var got []string
		for _, p := range ps {
			got = append(got, p.ID)
		}
		if d := diff(want, got); d != "" {
			t.Errorf("ListProcessing(%d): processing then requires_action, oldest first (-want +got):\n%s", limit, d)
		}
	}
	// After an ID: the next page of those in requires_action, the
	// processing ones all the same.
	for _, after := range []int{0, 2, len(action) - 1} {
		ps, err := s.ListProcessing(t.Context(), 4, action[after])
		if err != nil {
			t.Fatalf("ListProcessing(4, %s): %v", action[after], err)
		}
		rest := action[after+1:]
		want := append(append([]string(nil), processing...), rest[:min(len(rest), surgepay.RequiresActionListed(4))]...)
		var got []string
		for _, p := range ps {
			got = append(got, p.ID)
		}
		if d := diff(want, got); d != "" {
			t.Errorf("ListProcessing(4) after the %d-th in requires_action (-want +got):\n%s", after, d)
		}
	}
}
