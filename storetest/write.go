package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/groupcommit"
)

func testIdempotencyInsertFind(t *testing.T, s surgepay.Store) {
	m := newMerchant(t, s)
	want := sampleIdempotency(m.ID)
	wantAllFieldsSet(t, want)
	apply(t, s, &surgepay.Write{Idempotency: want})
	got, err := s.FindIdempotency(t.Context(), m.ID, want.Key)
	if err != nil {
		t.Fatalf("FindIdempotency: %v", err)
	}
	if d := diff(want, got); d != "" {
		t.Errorf("FindIdempotency mismatch (-want +got):\n%s", d)
	}
	_, err = s.FindIdempotency(t.Context(), m.ID, want.Key+"x")
	wantNotFound(t, "FindIdempotency(unknown key)", err)
}

func testIdempotencyConflictStoresNothing(t *testing.T, s surgepay.Store) {
	m := newMerchant(t, s)
	w1, p1 := purchase(m.ID)
	apply(t, s, w1)

	w2, p2 := purchase(m.ID)
	w2.Idempotency.Key = w1.Idempotency.Key
	w2.Idempotency.StatusCode = 500
	c := sampleCustomer(m.ID)
	w2.CustomerInsert = c
	err := s.Apply(t.Context(), w2)
	wantErr(t, err, surgepay.ECONFLICT, "idempotency_key_exists")

	_, err = s.FindPayment(t.Context(), m.ID, p2.ID)
	wantNotFound(t, "FindPayment(refused Write's payment)", err)
	_, err = s.FindCustomer(t.Context(), m.ID, c.ID)
	wantNotFound(t, "FindCustomer(refused Write's customer)", err)
	if evs := listEvents(t, s, m.ID, p2.ID); len(evs) != 0 {
		t.Errorf("ListEvents(refused Write's payment) = %d events, want 0", len(evs))
	}
	got, err := s.FindIdempotency(t.Context(), m.ID, w1.Idempotency.Key)
	if err != nil {
		t.Fatalf("FindIdempotency: %v", err)
	}
	if d := diff(w1.Idempotency, got); d != "" {
		t.Errorf("stored record is not the first Write's (-want +got):\n%s", d)
	}
	findPayment(t, s, m.ID, p1.ID)
}

func testIdempotencyKeyPerMerchant(t *testing.T, s surgepay.Store) {
	m1, m2 := newMerchant(t, s), newMerchant(t, s)
	r1 := sampleIdempotency(m1.ID)
	r2 := sampleIdempotency(m2.ID)
	r2.Key, r2.StatusCode = r1.Key, 402
	apply(t, s, &surgepay.Write{Idempotency: r1})
	apply(t, s, &surgepay.Write{Idempotency: r2})
	for _, want := range []*surgepay.IdempotencyRecord{r1, r2} {
		got, err := s.FindIdempotency(t.Context(), want.MerchantID, want.Key)
		if err != nil {
			t.Fatalf("FindIdempotency(%s): %v", want.MerchantID, err)
		}
		if d := diff(want, got); d != "" {
			t.Errorf("FindIdempotency(%s) mismatch (-want +got):\n%s", want.MerchantID, d)
		}
	}
}

// testIdempotencyConcurrentConflicts fires 50 purchases at once, five per
// key: per key exactly one is stored, the others are refused whole, and a
// refusal never fails a neighbour in the same batch.
func testIdempotencyConcurrentConflicts(t *testing.T, s surgepay.Store) {
	const writes, keys = 50, 10
	m := newMerchant(t, s)
	ws := make([]*surgepay.Write, writes)
	ps := make([]*surgepay.Payment, writes)
	errs := make([]error, writes)
	for i := range ws {
		ws[i], ps[i] = purchase(m.ID)
		ws[i].Idempotency.Key = fmt.Sprintf("concurrent-%d", i%keys)
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range ws {
		wg.Go(func() {
			<-start
			errs[i] = s.Apply(t.Context(), ws[i])
		})
	}
	close(start)
	wg.Wait()

	winners := make(map[string]int) // key → index of the stored Write
	for i, err := range errs {
		key := ws[i].Idempotency.Key
		if err == nil {
			if j, ok := winners[key]; ok {
				t.Errorf("writes %d and %d both stored key %s", j, i, key)
			}
			winners[key] = i
			continue
		}
		wantErr(t, err, surgepay.ECONFLICT, "idempotency_key_exists")
	}
	if len(winners) != keys {
		t.Fatalf("%d keys stored, want %d", len(winners), keys)
	}
	for i, err := range errs {
		_, ferr := s.FindPayment(t.Context(), m.ID, ps[i].ID)
		switch {
		case err == nil && ferr != nil:
			t.Errorf("write %d succeeded but FindPayment: %v", i, ferr)
		case err != nil:
			wantNotFound(t, fmt.Sprintf("FindPayment(refused write %d)", i), ferr)
		}
	}
	for key, i := range winners {
		got, err := s.FindIdempotency(t.Context(), m.ID, key)
		if err != nil {
			t.Fatalf("FindIdempotency(%s): %v", key, err)
		}
		if d := diff(ws[i].Idempotency, got); d != "" {
			t.Errorf("FindIdempotency(%s) is not the stored Write's (-want +got):\n%s", key, d)
		}
		if evs := listEvents(t, s, m.ID, ps[i].ID); len(evs) != 2 {
			t.Errorf("ListEvents(write %d) = %d events, want 2", i, len(evs))
		}
	}
}

func testDeleteIdempotencyBeforeLimit(t *testing.T, s surgepay.Store) {
	m := newMerchant(t, s)
	cutoff := now().Add(-time.Hour)
	var old, fresh []*surgepay.IdempotencyRecord
	for i := range 5 {
		r := sampleIdempotency(m.ID)
		r.Created = cutoff.Add(-time.Duration(i+1) * time.Minute)
		old = append(old, r)
		apply(t, s, &surgepay.Write{Idempotency: r})
	}
	for _, created := range []time.Time{cutoff, now()} { // created == t is kept
		r := sampleIdempotency(m.ID)
		r.Created = created
		fresh = append(fresh, r)
		apply(t, s, &surgepay.Write{Idempotency: r})
	}
	for _, step := range []struct{ limit, want int }{{3, 3}, {3, 2}, {3, 0}} {
		n, err := s.DeleteIdempotencyBefore(t.Context(), cutoff, step.limit)
		if err != nil {
			t.Fatalf("DeleteIdempotencyBefore: %v", err)
		}
		if n != step.want {
			t.Errorf("DeleteIdempotencyBefore(limit %d) = %d, want %d", step.limit, n, step.want)
		}
	}
	for _, r := range old {
		_, err := s.FindIdempotency(t.Context(), m.ID, r.Key)
		wantNotFound(t, "FindIdempotency(expired)", err)
	}
	for _, r := range fresh {
		if _, err := s.FindIdempotency(t.Context(), m.ID, r.Key); err != nil {
			t.Errorf("FindIdempotency(created %v, not before the cutoff): %v", r.Created, err)
		}
	}
	// A key freed by expiry can be used again.
	apply(t, s, &surgepay.Write{Idempotency: old[0]})
}

// testTenantIsolation checks that merchant B sees none of merchant A's
// objects through any read and cannot change them through any Write.
func testTenantIsolation(t *testing.T, s surgepay.Store) {
	a, b := newMerchant(t, s), newMerchant(t, s)
	c := newCustomer(t, s, a.ID)
	pm := newPaymentMethod(t, s, a.ID, c.ID)
	w, p := purchase(a.ID)
	p.CustomerID, p.PaymentMethodID = c.ID, pm.ID
	apply(t, s, w)
	ctx := t.Context()

	_, err := s.FindCustomer(ctx, b.ID, c.ID)
	wantNotFound(t, "FindCustomer(B, A's customer)", err)
	_, err = s.FindPaymentMethod(ctx, b.ID, pm.ID)
	wantNotFound(t, "FindPaymentMethod(B, A's card)", err)
	_, err = s.FindPayment(ctx, b.ID, p.ID)
	wantNotFound(t, "FindPayment(B, A's payment)", err)
	_, err = s.FindIdempotency(ctx, b.ID, w.Idempotency.Key)
	wantNotFound(t, "FindIdempotency(B, A's key)", err)

	page := surgepay.Page{Limit: 100}
	if cs, _, err := s.ListCustomers(ctx, b.ID, page); err != nil || len(cs) != 0 {
		t.Errorf("ListCustomers(B) = %d, %v; want none", len(cs), err)
	}
	if pms, _, err := s.ListPaymentMethods(ctx, b.ID, c.ID, page); err != nil || len(pms) != 0 {
		t.Errorf("ListPaymentMethods(B, A's customer) = %d, %v; want none", len(pms), err)
	}
	for _, f := range []surgepay.PaymentFilter{{Page: page}, {Page: page, CustomerID: c.ID}, {Page: page, Status: p.Status}} {
		if ps, _, err := s.ListPayments(ctx, b.ID, f); err != nil || len(ps) != 0 {
			t.Errorf("ListPayments(B, %+v) = %d, %v; want none", f, len(ps), err)
		}
	}
	if evs, err := s.ListEvents(ctx, b.ID, p.ID); err != nil || len(evs) != 0 {
		t.Errorf("ListEvents(B, A's payment) = %d, %v; want none", len(evs), err)
	}

	// Writes naming B do not reach A's rows.
	cu := updatedCustomer(c)
	cu.MerchantID = b.ID
	wantErr(t, s.Apply(ctx, &surgepay.Write{CustomerUpdate: cu}), surgepay.ENOTFOUND, "")
	cd := *c
	cd.MerchantID = b.ID
	wantErr(t, s.Apply(ctx, &surgepay.Write{CustomerDelete: &cd}), surgepay.ENOTFOUND, "")
	pu := nextPayment(p)
	pu.MerchantID = b.ID
	wantErr(t, s.Apply(ctx, &surgepay.Write{PaymentUpdate: pu}), surgepay.ENOTFOUND, "")
	pmd := *pm
	pmd.MerchantID = b.ID
	apply(t, s, &surgepay.Write{PaymentMethodDelete: &pmd})
	// The same idempotency key is free for B.
	rb := *w.Idempotency
	rb.MerchantID = b.ID
	apply(t, s, &surgepay.Write{Idempotency: &rb})

	if d := diff(c, findCustomer(t, s, a.ID, c.ID)); d != "" {
		t.Errorf("A's customer changed by B's writes (-want +got):\n%s", d)
	}
	if got, err := s.FindPaymentMethod(ctx, a.ID, pm.ID); err != nil || diff(pm, got) != "" {
		t.Errorf("A's card after B's delete: %v, diff %s", err, diff(pm, got))
	}
	if d := diff(p, findPayment(t, s, a.ID, p.ID)); d != "" {
		t.Errorf("A's payment changed by B's writes (-want +got):\n%s", d)
	}
	if got, err := s.FindIdempotency(ctx, a.ID, w.Idempotency.Key); err != nil || diff(w.Idempotency, got) != "" {
		t.Errorf("A's idempotency record after B's: %v, diff %s", err, diff(w.Idempotency, got))
	}
}

// testStatementCounts pins the statement budget of the hot paths: a
// purchase is two statements (its idempotency record and payment are one,
// a sale, and its events one more), a payment update three (events of one
// Write are one statement), a read one.
func testStatementCounts(t *testing.T, s surgepay.Store) {
	m := newMerchant(t, s)
	type kinds = stmtKinds
	check := func(what string, c *surgepay.StatementCounter, want kinds) {
		t.Helper()
		wantStatements(t, what, c, want)
	}

	w, p := purchase(m.ID)
	ctx, c := ctxCounter(t)
	if err := s.Apply(ctx, w); err != nil {
		t.Fatalf("Apply(purchase): %v", err)
	}
	check("Apply(purchase: idempotency and payment, 2 events)", c, kinds{2, 0, 2, 0, 0})

	u := nextPayment(p)
	ctx, c = ctxCounter(t)
	err := s.Apply(ctx, &surgepay.Write{Idempotency: sampleIdempotency(m.ID), PaymentUpdate: u,
		Events: []*surgepay.Event{sampleEvent(u, surgepay.TxRefund, p.Status, u.Status)}})
	if err != nil {
		t.Fatalf("Apply(update): %v", err)
	}
	check("Apply(update: idempotency, payment, 1 event)", c, kinds{3, 0, 2, 1, 0})

	reads := []struct {
		name string
		fn   func(ctx context.Context) error
	}{
		{"FindPayment", func(ctx context.Context) error { _, err := s.FindPayment(ctx, m.ID, p.ID); return err }},
		{"FindMerchant", func(ctx context.Context) error { _, err := s.FindMerchant(ctx, m.ID); return err }},
		{"FindIdempotency", func(ctx context.Context) error { _, err := s.FindIdempotency(ctx, m.ID, w.Idempotency.Key); return err }},
		{"ListPayments", func(ctx context.Context) error {
			_, _, err := s.ListPayments(ctx, m.ID, surgepay.PaymentFilter{Page: surgepay.Page{Limit: 10}, Status: u.Status})
			return err
		}},
		{"ListEvents", func(ctx context.Context) error { _, err := s.ListEvents(ctx, m.ID, p.ID); return err }},
		{"ListCustomers", func(ctx context.Context) error {
			_, _, err := s.ListCustomers(ctx, m.ID, surgepay.Page{Limit: 10})
			return err
		}},
		{"ListProcessing", func(ctx context.Context) error { _, err := s.ListProcessing(ctx, 10, ""); return err }},
	}
	for _, r := range reads {
		ctx, c := ctxCounter(t)
		if err := r.fn(ctx); err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		check(r.name, c, kinds{1, 1, 0, 0, 0})
	}
}

// testGroupCommitConcurrentApplies fires 200 purchases at once: every one
// is stored with its events, none is lost, and a store that reports commit
// statistics committed them in fewer transactions than writes.
func testGroupCommitConcurrentApplies(t *testing.T, s surgepay.Store) {
	const writes = 200
	m := newMerchant(t, s)
	ws := make([]*surgepay.Write, writes)
	ps := make([]*surgepay.Payment, writes)
	for i := range ws {
		ws[i], ps[i] = purchase(m.ID)
	}
	var before groupcommit.Stats
	stats, hasStats := s.(interface{ CommitStats() groupcommit.Stats })
	if hasStats {
		before = stats.CommitStats()
	}
	errs := make([]error, writes)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range ws {
		wg.Go(func() {
			<-start
			errs[i] = s.Apply(t.Context(), ws[i])
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Apply(write %d): %v", i, err)
		}
	}

	for i, want := range ps {
		if d := diff(want, findPayment(t, s, m.ID, want.ID)); d != "" {
			t.Fatalf("write %d: FindPayment mismatch (-want +got):\n%s", i, d)
		}
		if d := diff(ws[i].Events, listEvents(t, s, m.ID, want.ID)); d != "" {
			t.Fatalf("write %d: ListEvents mismatch (-want +got):\n%s", i, d)
		}
	}
	// Page through the whole list: no loss, no duplicates.
	seen := make(map[string]bool)
	var after string
	for pages := 0; ; pages++ {
		if pages > writes {
			t.Fatal("ListPayments does not terminate")
		}
		ids, more := listPaymentIDs(t, s, m.ID, surgepay.PaymentFilter{Page: surgepay.Page{Limit: 100, StartingAfter: after}})
		for _, id := range ids {
			if seen[id] {
				t.Fatalf("ListPayments returned %s twice", id)
			}
			seen[id] = true
		}
		if !more {
			break
		}
		after = ids[len(ids)-1]
	}
	if len(seen) != writes {
		t.Errorf("ListPayments paged over %d payments, want %d", len(seen), writes)
	}

	if hasStats {
		st := stats.CommitStats()
		items, batches := st.Items-before.Items, st.Batches-before.Batches
		t.Logf("group commit: %d writes in %d batches", items, batches)
		if items < writes || batches >= items {
			t.Errorf("CommitStats: %d writes in %d batches, want %d writes in fewer batches", items, batches, writes)
		}
	}
}

func testApplyAfterCloseErr(t *testing.T, s surgepay.Store) {
	m := newMerchant(t, s)
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	w, _ := purchase(m.ID)
	if err := s.Apply(t.Context(), w); err == nil {
		t.Fatal("Apply after Close succeeded, want an error")
	}
}
