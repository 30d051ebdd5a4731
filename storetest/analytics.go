package storetest

import (
	"fmt"
	"sync"
	"testing"

	"github.com/surgepay/surgepay"
)

// Analytics counters (Write.Analytics, Store.ListAnalytics) and the
// preheat's ListRecentPaymentMethods.

var analyticsTests = []struct {
	name string
	fn   func(t *testing.T, s surgepay.Store)
}{
	{"AnalyticsBatchesAddUp", testAnalyticsBatchesAddUp},
	{"AnalyticsQueryRangeCurrencyMerchant", testAnalyticsQueryRangeCurrencyMerchant},
	{"AnalyticsAtomicWithGuards", testAnalyticsAtomicWithGuards},
	{"AnalyticsStatementCounts", testAnalyticsStatementCounts},
	{"RecentPaymentMethodsNewestFirstPaged", testRecentPaymentMethods},
}

// counted returns a delta of one created payment of amount for the key.
func counted(merchantID, date, currency string, amount int64) surgepay.AnalyticsDelta {
	return surgepay.AnalyticsDelta{MerchantID: merchantID, Date: date, Currency: currency,
		AnalyticsCounters: surgepay.AnalyticsCounters{PaymentsCreated: 1, AuthorizedCount: 1,
			AmountAuthorized: amount, CapturedCount: 1, AmountCaptured: amount}}
}

func listAnalytics(t *testing.T, s surgepay.Store, merchantID string, q surgepay.AnalyticsQuery) []*surgepay.AnalyticsDay {
	t.Helper()
	days, err := s.ListAnalytics(t.Context(), merchantID, q)
	if err != nil {
		t.Fatalf("ListAnalytics(%+v): %v", q, err)
	}
	return days
}

// day returns the counters of n payments of amount each.
func day(date, currency string, n, amount int64) *surgepay.AnalyticsDay {
	return &surgepay.AnalyticsDay{Date: date, Currency: currency, AnalyticsCounters: surgepay.AnalyticsCounters{
		PaymentsCreated: n, AuthorizedCount: n, AmountAuthorized: n * amount, CapturedCount: n, AmountCaptured: n * amount}}
}

// testAnalyticsBatchesAddUp applies many Writes with deltas at once, of
// every shape (sales with and without events or idempotency, updates), so
// that the store group-commits them and merges a batch's deltas: the
// counters are the exact sums.
func testAnalyticsBatchesAddUp(t *testing.T, s surgepay.Store) {
	m := newMerchant(t, s)
	const n = 60
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var w *surgepay.Write
			switch i % 4 {
			case 0:
				w, _ = sale(m.ID)
			case 1:
				w, _ = purchase(m.ID)
			case 2:
				w, _ = sale(m.ID)
				w.Idempotency = nil
			case 3: // the general path: a payment inserted next to a card
				w, _ = sale(m.ID)
				w.PaymentMethodDelete = missingPaymentMethod(m.ID)
			}
			cur := "usd"
			if i%3 == 0 {
				cur = "eur"
			}
			w.Analytics = []surgepay.AnalyticsDelta{counted(m.ID, "2026-05-01", cur, int64(100+i))}
			errs <- s.Apply(t.Context(), w)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("Apply: %v", err)
		}
	}
	var want [2]surgepay.AnalyticsCounters // eur, usd
	for i := range n {
		k := 1
		if i%3 == 0 {
			k = 0
		}
		want[k].Add(counted(m.ID, "", "", int64(100+i)).AnalyticsCounters)
	}
	got := listAnalytics(t, s, m.ID, surgepay.AnalyticsQuery{From: "2026-05-01", To: "2026-05-01"})
	wantDays := []*surgepay.AnalyticsDay{{Date: "2026-05-01", Currency: "eur", AnalyticsCounters: want[0]},
		{Date: "2026-05-01", Currency: "usd", AnalyticsCounters: want[1]}}
	if d := diff(wantDays, got); d != "" {
		t.Errorf("ListAnalytics (-want +got):\n%s", d)
	}
	// An update adds to the same row; every counter round-trips.
	p := minimalPayment(m.ID, surgepay.StatusRequiresCapture)
	apply(t, s, &surgepay.Write{PaymentInsert: p})
	next := nextPayment(p)
	all := surgepay.AnalyticsCounters{PaymentsCreated: 1, AuthorizedCount: 2, AmountAuthorized: 3, CapturedCount: 4,
		AmountCaptured: 5, DeclinedCount: 6, FailedCount: 7, AmountFailed: 8, VoidedCount: 9, AmountVoided: 10,
		RefundedCount: 11, AmountRefunded: 12}
	wantAllFieldsSet(t, &all)
	apply(t, s, &surgepay.Write{PaymentUpdate: next, Analytics: []surgepay.AnalyticsDelta{
		{MerchantID: m.ID, Date: "2026-05-01", Currency: "eur", AnalyticsCounters: all}}})
	want[0].Add(all)
	got = listAnalytics(t, s, m.ID, surgepay.AnalyticsQuery{From: "2026-05-01", To: "2026-05-01", Currency: "eur"})
	if d := diff([]*surgepay.AnalyticsDay{{Date: "2026-05-01", Currency: "eur", AnalyticsCounters: want[0]}}, got); d != "" {
		t.Errorf("after an update (-want +got):\n%s", d)
	}
}

// testAnalyticsQueryRangeCurrencyMerchant reads days by date then
// currency, within the range only, for one currency, and only the
// merchant's own; several deltas of one Write add up.
func testAnalyticsQueryRangeCurrencyMerchant(t *testing.T, s surgepay.Store) {
	a, b := newMerchant(t, s), newMerchant(t, s)
	w, _ := sale(a.ID)
	w.Analytics = []surgepay.AnalyticsDelta{counted(a.ID, "2026-02-28", "usd", 10), counted(a.ID, "2026-03-01", "usd", 20),
		counted(a.ID, "2026-03-01", "eur", 30), counted(a.ID, "2026-03-02", "usd", 40), counted(a.ID, "2026-03-01", "usd", 5)}
	apply(t, s, w)
	wb, _ := sale(b.ID)
	wb.Analytics = []surgepay.AnalyticsDelta{counted(b.ID, "2026-03-01", "usd", 99)}
	apply(t, s, wb)

	tests := []struct {
		name string
		q    surgepay.AnalyticsQuery
		want []*surgepay.AnalyticsDay
	}{
		{"Range", surgepay.AnalyticsQuery{From: "2026-03-01", To: "2026-03-02"}, []*surgepay.AnalyticsDay{
			day("2026-03-01", "eur", 1, 30),
			{Date: "2026-03-01", Currency: "usd", AnalyticsCounters: surgepay.AnalyticsCounters{PaymentsCreated: 2,
				AuthorizedCount: 2, AmountAuthorized: 25, CapturedCount: 2, AmountCaptured: 25}},
			day("2026-03-02", "usd", 1, 40)}},
		{"Currency", surgepay.AnalyticsQuery{From: "2026-02-01", To: "2026-03-31", Currency: "eur"}, []*surgepay.AnalyticsDay{
			day("2026-03-01", "eur", 1, 30)}},
		{"OneDay", surgepay.AnalyticsQuery{From: "2026-02-28", To: "2026-02-28"}, []*surgepay.AnalyticsDay{
			day("2026-02-28", "usd", 1, 10)}},
		{"Empty", surgepay.AnalyticsQuery{From: "2026-04-01", To: "2026-04-30"}, nil},
	}
	for _, tc := range tests {
		got := listAnalytics(t, s, a.ID, tc.q)
		if len(got) == 0 && len(tc.want) == 0 {
			continue
		}
		if d := diff(tc.want, got); d != "" {
			t.Errorf("%s: ListAnalytics (-want +got):\n%s", tc.name, d)
		}
	}
	got := listAnalytics(t, s, b.ID, surgepay.AnalyticsQuery{From: "2026-01-01", To: "2026-12-31"})
	if d := diff([]*surgepay.AnalyticsDay{day("2026-03-01", "usd", 1, 99)}, got); d != "" {
		t.Errorf("merchant B (-want +got):\n%s", d)
	}
}

// testAnalyticsAtomicWithGuards sends Writes whose guard fails, next to
// Writes that hold, at once: a refused Write adds nothing, whatever the
// path (a sale alone, a sale with events, an update), and even when its
// payment exists (a retry that took the ID of the payment an earlier
// attempt stored, refused by its idempotency key).
func testAnalyticsAtomicWithGuards(t *testing.T, s surgepay.Store) {
	m := newMerchant(t, s)
	const date = "2026-07-04"
	first, p := sale(m.ID)
	first.Analytics = []surgepay.AnalyticsDelta{counted(m.ID, date, "usd", 1000)}
	apply(t, s, first)
	stored := minimalPayment(m.ID, surgepay.StatusRequiresCapture)
	apply(t, s, &surgepay.Write{PaymentInsert: stored})
	apply(t, s, &surgepay.Write{PaymentUpdate: nextPayment(stored)})

	var refused []*surgepay.Write
	retry, _ := sale(m.ID) // same key and same payment ID as first
	retry.Idempotency.Key, retry.PaymentInsert.ID = first.Idempotency.Key, p.ID
	withEvents, _ := purchase(m.ID)
	withEvents.Idempotency.Key = first.Idempotency.Key
	stale := nextPayment(stored) // version 2 again: stored is at 2
	refused = append(refused, retry, withEvents, &surgepay.Write{PaymentUpdate: stale})
	for _, w := range refused {
		w.Analytics = []surgepay.AnalyticsDelta{counted(m.ID, date, "usd", 1_000_000)}
	}
	var held []*surgepay.Write
	for i := range 10 {
		w, _ := sale(m.ID)
		if i%2 == 1 {
			w.Events = saleEvents(w.PaymentInsert)
		}
		w.Analytics = []surgepay.AnalyticsDelta{counted(m.ID, date, "usd", 1)}
		held = append(held, w)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(refused)+len(held))
	for i, w := range append(append([]*surgepay.Write(nil), refused...), held...) {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = s.Apply(t.Context(), w) }()
	}
	wg.Wait()
	for i, err := range errs {
		if i < len(refused) {
			wantErr(t, err, surgepay.ECONFLICT, "")
		} else if err != nil {
			t.Fatalf("Apply of a Write that holds: %v", err)
		}
	}
	want := day(date, "usd", 11, 0)
	want.AmountAuthorized, want.AmountCaptured = 1010, 1010
	got := listAnalytics(t, s, m.ID, surgepay.AnalyticsQuery{From: date, To: date})
	if d := diff([]*surgepay.AnalyticsDay{want}, got); d != "" {
		t.Errorf("ListAnalytics (-want +got):\n%s", d)
	}
}

// testAnalyticsStatementCounts pins the cost: one more statement on a Write
// with deltas, none on one without, none on a refused one.
func testAnalyticsStatementCounts(t *testing.T, s surgepay.Store) {
	m := newMerchant(t, s)
	delta := []surgepay.AnalyticsDelta{counted(m.ID, "2026-01-01", "usd", 1)}
	plain, _ := sale(m.ID)
	withDelta, _ := sale(m.ID)
	withDelta.Analytics = delta
	withEvents, _ := purchase(m.ID)
	withEvents.Analytics = delta
	taken, _ := sale(m.ID)
	taken.Idempotency.Key, taken.Analytics = plain.Idempotency.Key, delta
	p := minimalPayment(m.ID, surgepay.StatusRequiresCapture)
	apply(t, s, &surgepay.Write{PaymentInsert: p})
	update := &surgepay.Write{PaymentUpdate: nextPayment(p), Analytics: delta}
	tests := []applyCase{
		{"SaleWithoutDeltas", plain, "", stmtKinds{1, 0, 1, 0, 0}},
		{"Sale", withDelta, "", stmtKinds{2, 0, 2, 0, 0}},
		{"SaleWithEvents", withEvents, "", stmtKinds{3, 0, 3, 0, 0}},
		{"Update", update, "", stmtKinds{2, 0, 1, 1, 0}},
		{"SaleErrIdempotencyKeyExists", taken, "idempotency_key_exists", stmtKinds{1, 0, 1, 0, 0}},
	}
	applyCounting(t, s, tests)
	ctx, c := ctxCounter(t)
	if _, err := s.ListAnalytics(ctx, m.ID, surgepay.AnalyticsQuery{From: "2026-01-01", To: "2026-12-31"}); err != nil {
		t.Fatal(err)
	}
	wantStatements(t, "ListAnalytics", c, stmtKinds{1, 1, 0, 0, 0})
}

// testRecentPaymentMethods pages through a merchant's cards newest first,
// never another merchant's, in one statement a page of at most the limit.
func testRecentPaymentMethods(t *testing.T, s surgepay.Store) {
	a, b := newMerchant(t, s), newMerchant(t, s)
	ca, cb := newCustomer(t, s, a.ID), newCustomer(t, s, b.ID)
	var ids []string
	for range 7 {
		ids = append(ids, newPaymentMethod(t, s, a.ID, ca.ID).ID)
		newPaymentMethod(t, s, b.ID, cb.ID)
	}
	ids = idsDesc(ids)
	var got []string
	before := ""
	for page := 0; ; page++ {
		ctx, c := ctxCounter(t)
		pms, err := s.ListRecentPaymentMethods(ctx, a.ID, before, 3)
		if err != nil {
			t.Fatalf("ListRecentPaymentMethods: %v", err)
		}
		wantStatements(t, fmt.Sprintf("ListRecentPaymentMethods page %d", page), c, stmtKinds{1, 1, 0, 0, 0})
		if len(pms) > 3 {
			t.Fatalf("page of %d, limit 3", len(pms))
		}
		for _, pm := range pms {
			if pm.MerchantID != a.ID {
				t.Fatalf("another merchant's card %s", pm.ID)
			}
			got = append(got, pm.ID)
		}
		if len(pms) < 3 {
			break
		}
		before = pms[len(pms)-1].ID
	}
	if d := diff(ids, got); d != "" {
		t.Errorf("cards (-want +got):\n%s", d)
	}
	pms, err := s.ListRecentPaymentMethods(t.Context(), a.ID, "", surgepay.RecentPaymentMethodsPageMax+1)
	if err != nil || len(pms) != 7 {
		t.Fatalf("a limit over the maximum: %d cards, %v", len(pms), err)
	}
	if d := diff(samplePaymentMethodLike(pms[0]), pms[0]); d != "" || pms[0].ID != ids[0] {
		t.Errorf("the newest card does not round-trip (-want +got):\n%s", d)
	}
	if pms, err := s.ListRecentPaymentMethods(t.Context(), "mch_none", "", 10); err != nil || len(pms) != 0 {
		t.Errorf("a merchant without cards: %d, %v", len(pms), err)
	}
}

// samplePaymentMethodLike returns what samplePaymentMethod made for pm.
func samplePaymentMethodLike(pm *surgepay.PaymentMethod) *surgepay.PaymentMethod {
	want := samplePaymentMethod(pm.MerchantID, pm.CustomerID)
	want.ID, want.Created = pm.ID, pm.Created
	return want
}
