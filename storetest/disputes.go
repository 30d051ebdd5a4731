package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
)

// disputeTests cover the surgepay.DisputeLister capability (the table of
// disputes the console lists); a store without it skips them.
var disputeTests = []struct {
	name string
	fn   func(t *testing.T, s surgepay.Store)
}{
	{"DisputesTwoOnOnePaymentTwoRows", testDisputesTwoOnOnePayment},
	{"DisputesOrderFiltersCursor", testDisputesOrderFiltersCursor},
	{"DisputesGuardedByPaymentVersion", testDisputesGuardedByPaymentVersion},
	{"DisputesWithoutPaymentUpdateInvalid", testDisputesWithoutPaymentUpdateInvalid},
}

func disputeLister(t *testing.T, s surgepay.Store) surgepay.DisputeLister {
	t.Helper()
	l, ok := s.(surgepay.DisputeLister)
	if !ok {
		t.Skip("the store has no DisputeLister capability")
	}
	return l
}

// disputePayment stores a succeeded payment of merchantID and returns it.
func disputePayment(t *testing.T, s surgepay.Store, merchantID string) *surgepay.Payment {
	t.Helper()
	p := minimalPayment(merchantID, surgepay.StatusSucceeded)
	p.AuthorizationRef = "stripe_eu:pi_" + p.ID
	apply(t, s, &surgepay.Write{PaymentInsert: p})
	return p
}

// dispute records a change of dispute id on p, as the engine does for a
// processor's event: a dispute transaction, and the dispute's row in the
// same Write. It returns the payment as stored.
func dispute(t *testing.T, s surgepay.Store, p *surgepay.Payment, id, status, reason string, amount int64,
	dueBy time.Time) *surgepay.Payment {
	t.Helper()
	next := p.Clone()
	next.Version++
	next.Updated = now()
	next.Transactions = append(next.Transactions, surgepay.Transaction{ID: surgepay.NewID("txn"), Type: surgepay.TxDispute,
		Status: status, Amount: amount, ProviderRef: id, Message: reason, Created: next.Updated, DueBy: dueBy})
	d := next.Dispute(id)
	apply(t, s, &surgepay.Write{PaymentUpdate: next, Disputes: []*surgepay.Dispute{d}})
	return next
}

// listDisputes returns every page of q, at q.Limit a page, and the
// statements each page took.
func listDisputes(t *testing.T, l surgepay.DisputeLister, q surgepay.DisputeQuery) []*surgepay.Dispute {
	t.Helper()
	var out []*surgepay.Dispute
	for pages := 0; ; pages++ {
		if pages > 50 {
			t.Fatalf("ListDisputes(%+v): more than 50 pages", q)
		}
		ctx, c := ctxCounter(t)
		page, err := l.ListDisputes(ctx, q)
		if err != nil {
			t.Fatalf("ListDisputes(%+v): %v", q, err)
		}
		if n := c.Total(); n != 1 {
			t.Fatalf("ListDisputes(%+v): %d statements, want 1", q, n)
		}
		if len(page.Disputes) > q.Limit {
			t.Fatalf("ListDisputes(%+v): %d disputes, more than the limit", q, len(page.Disputes))
		}
		out = append(out, page.Disputes...)
		if page.Next == "" {
			return out
		}
		if len(page.Disputes) != q.Limit {
			t.Fatalf("ListDisputes(%+v): a page of %d with a next page, want %d", q, len(page.Disputes), q.Limit)
		}
		q.After = page.Next
	}
}

func disputeIDs(ds []*surgepay.Dispute) []string {
	var ids []string
	for _, d := range ds {
		ids = append(ids, d.ID)
	}
	return ids
}

// testDisputesTwoOnOnePayment: two disputes on one payment are two rows,
// each in its latest state (its first created, the latest reason given,
// its latest deadline); a change replaces the row, not adds one.
func testDisputesTwoOnOnePayment(t *testing.T, s surgepay.Store) {
	l := disputeLister(t, s)
	m := newMerchant(t, s)
	p := disputePayment(t, s, m.ID)
	due := now().Add(7 * 24 * time.Hour)
	p = dispute(t, s, p, "stripe_eu:dp_1", surgepay.DisputeNeedsResponse, "fraudulent", 500, due)
	p = dispute(t, s, p, "stripe_eu:dp_1", surgepay.DisputeLost, "", 500, time.Time{})
	p = dispute(t, s, p, "stripe_eu:dp_2", surgepay.DisputeWarningNeedsResponse, "duplicate", 200, due.Add(time.Hour))
	p = dispute(t, s, p, "stripe_eu:dp_2", surgepay.DisputeNeedsResponse, "duplicate", 150, due.Add(2*time.Hour))
	got := listDisputes(t, l, surgepay.DisputeQuery{MerchantID: m.ID, Limit: 10})
	want := []*surgepay.Dispute{p.Dispute("stripe_eu:dp_1"), p.Dispute("stripe_eu:dp_2")}
	if d := diff(want, got); d != "" {
		t.Fatalf("the payment's two disputes (-want +got):\n%s", d)
	}
	first := got[0]
	if first.Status != surgepay.DisputeLost || first.Reason != "fraudulent" || !first.DueBy.Equal(due) ||
		first.Currency != "eur" || first.PaymentID != p.ID || first.Created.Equal(first.Updated) {
		t.Fatalf("dp_1 = %+v; want lost, the reason and deadline it was opened with, the payment's currency, "+
			"created before updated", first)
	}
	if got[1].Amount != 150 || !got[1].DueBy.Equal(due.Add(2*time.Hour)) {
		t.Fatalf("dp_2 = %+v; want its latest amount (150) and deadline", got[1])
	}
}

// testDisputesOrderFiltersCursor: disputes are listed by deadline
// (unknown last), then ID, then merchant; filtered by merchant and by
// any of several statuses; page after page by the cursor, each dispute
// once, in one statement a page.
func testDisputesOrderFiltersCursor(t *testing.T, s surgepay.Store) {
	l := disputeLister(t, s)
	m1, m2 := newMerchant(t, s), newMerchant(t, s)
	base := now().Add(24 * time.Hour)
	type row struct {
		m      *surgepay.Merchant
		id     string
		status string
		due    time.Duration // after base; -1: unknown
	}
	rows := []row{
		{m1, "dp_a", surgepay.DisputeNeedsResponse, 3 * time.Hour},
		{m1, "dp_b", surgepay.DisputeWarningNeedsResponse, time.Hour},
		{m1, "dp_c", surgepay.DisputeUnderReview, 2 * time.Hour},
		{m1, "dp_d", surgepay.DisputeNeedsResponse, -1},
		{m2, "dp_e", surgepay.DisputeNeedsResponse, 2 * time.Hour},
		{m2, "dp_a", surgepay.DisputeNeedsResponse, 3 * time.Hour}, // the same ID and deadline as m1's: by merchant
		{m2, "dp_f", surgepay.DisputeWon, -1},
		{m1, "dp_g", surgepay.DisputeLost, -time.Hour * 48}, // past
		{m2, "dp_h", surgepay.DisputeNeedsResponse, -1},
	}
	for _, r := range rows {
		due := time.Time{}
		if r.due != -1 {
			due = base.Add(r.due)
		}
		dispute(t, s, disputePayment(t, s, r.m.ID), r.id, r.status, "fraudulent", 100, due)
	}
	key := func(r row) string { return r.m.ID + "/" + r.id }
	sorted := func(idx ...int) []string {
		var out []string
		for _, i := range idx {
			out = append(out, key(rows[i]))
		}
		return out
	}
	// By deadline: g (past), b, c, e, a(m1), a(m2); unknown: d, h, f by ID.
	m1First := rows[0].m.ID < rows[5].m.ID
	aa := []int{0, 5}
	if !m1First {
		aa = []int{5, 0}
	}
	all := append(append([]int{7, 1, 2, 4}, aa...), 3, 6, 8)
	var needing []int
	for _, i := range all {
		if st := rows[i].status; st == surgepay.DisputeNeedsResponse || st == surgepay.DisputeWarningNeedsResponse {
			needing = append(needing, i)
		}
	}
	var m1Needing []int
	for _, i := range needing {
		if rows[i].m == m1 {
			m1Needing = append(m1Needing, i)
		}
	}
	tests := []struct {
		name string
		q    surgepay.DisputeQuery
		want []string
	}{
		{"All", surgepay.DisputeQuery{}, sorted(all...)},
		{"NeedingResponse", surgepay.DisputeQuery{Statuses: surgepay.DisputeStatusesNeedingResponse}, sorted(needing...)},
		{"OneMerchantNeedingResponse", surgepay.DisputeQuery{MerchantID: m1.ID,
			Statuses: surgepay.DisputeStatusesNeedingResponse}, sorted(m1Needing...)},
		{"OneStatus", surgepay.DisputeQuery{Statuses: []string{surgepay.DisputeWon}}, sorted(6)},
		{"OneMerchantAny", surgepay.DisputeQuery{MerchantID: m2.ID}, sorted(4, 5, 6, 8)},
		{"NoneInStatus", surgepay.DisputeQuery{Statuses: []string{surgepay.DisputePrevented}}, nil},
	}
	for _, tc := range tests {
		for _, limit := range []int{1, 2, 3, surgepay.DisputeListLimitMax} {
			t.Run(fmt.Sprintf("%s/Limit%d", tc.name, limit), func(t *testing.T) {
				q := tc.q
				q.Limit = limit
				var got []string
				for _, d := range listDisputes(t, l, q) {
					got = append(got, d.MerchantID+"/"+d.ID)
				}
				if d := diff(tc.want, got); d != "" {
					t.Fatalf("ListDisputes(%+v) (-want +got):\n%s", q, d)
				}
			})
		}
	}
}

// testDisputesGuardedByPaymentVersion: a Write whose payment changed
// meanwhile stores neither the payment nor its dispute's row.
func testDisputesGuardedByPaymentVersion(t *testing.T, s surgepay.Store) {
	l := disputeLister(t, s)
	m := newMerchant(t, s)
	p := disputePayment(t, s, m.ID)
	stale := p.Clone()
	stale.Version += 2 // not the stored version + 1
	stale.Transactions = append(stale.Transactions, surgepay.Transaction{ID: surgepay.NewID("txn"), Type: surgepay.TxDispute,
		Status: surgepay.DisputeNeedsResponse, Amount: 500, ProviderRef: "dp_stale", Created: now()})
	err := s.Apply(t.Context(), &surgepay.Write{PaymentUpdate: stale, Disputes: []*surgepay.Dispute{stale.Dispute("dp_stale")}})
	wantErr(t, err, surgepay.ECONFLICT, surgepay.ReasonConcurrentUpdate)
	if got := listDisputes(t, l, surgepay.DisputeQuery{MerchantID: m.ID, Limit: 10}); len(got) != 0 {
		t.Fatalf("after a refused Write: %v listed, want none", disputeIDs(got))
	}
}

// testDisputesWithoutPaymentUpdateInvalid: a dispute's row goes with the
// payment change that records it, or not at all.
func testDisputesWithoutPaymentUpdateInvalid(t *testing.T, s surgepay.Store) {
	m := newMerchant(t, s)
	p := disputePayment(t, s, m.ID)
	d := &surgepay.Dispute{MerchantID: m.ID, ID: "dp_1", PaymentID: p.ID, Status: surgepay.DisputeNeedsResponse,
		Created: now(), Updated: now()}
	if err := s.Apply(t.Context(), &surgepay.Write{Disputes: []*surgepay.Dispute{d}}); !errors.Is(err, surgepay.ErrWriteInvalid) {
		t.Fatalf("Apply of a dispute without its payment: %v, want ErrWriteInvalid", err)
	}
	other := p.Clone()
	other.Version++
	d.PaymentID = "pay_other"
	if err := s.Apply(t.Context(), &surgepay.Write{PaymentUpdate: other, Disputes: []*surgepay.Dispute{d}}); !errors.Is(err, surgepay.ErrWriteInvalid) {
		t.Fatalf("Apply of another payment's dispute: %v, want ErrWriteInvalid", err)
	}
}
