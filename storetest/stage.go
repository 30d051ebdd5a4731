package storetest

import (
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
)

// The embedded stage: stores with the surgepay.StagedStore capability.
// These tests skip a store without it.

// stagedFetchAll is more than any test stages, and within every store's
// FetchStaged bound.
const stagedFetchAll = 500

func stagedStore(t *testing.T, s surgepay.Store) surgepay.StagedStore {
	t.Helper()
	ss, ok := s.(surgepay.StagedStore)
	if !ok {
		t.Skip("the store has no StagedStore capability")
	}
	return ss
}

func sampleStaged(p *surgepay.Payment) *surgepay.StagedRecord {
	return &surgepay.StagedRecord{
		ID:         surgepay.NewID("stg"),
		MerchantID: p.MerchantID,
		PaymentID:  p.ID,
		Sealed:     []byte{0x00, 0x01, 0xff, 'h', 'p', 'k', 'e', 0x00, 0x7f, byte(len(p.ID))},
		Created:    now(),
	}
}

// streamlinedPayment returns a streamlined sale as the engine stores it:
// succeeded, its authorization done and its capture pending.
func streamlinedPayment(merchantID string) *surgepay.Payment {
	p := minimalPayment(merchantID, surgepay.StatusSucceeded)
	p.CaptureMethod, p.Path = surgepay.CaptureAutomatic, surgepay.PathStreamlined
	p.AmountAuthorized, p.AmountCaptured = p.Amount, p.Amount
	p.AuthorizationRef = "auth_" + p.ID
	p.Transactions = []surgepay.Transaction{
		{ID: surgepay.NewID("tx"), Type: surgepay.TxAuthorization, Status: surgepay.TxSucceeded,
			Amount: p.Amount, ProviderRef: p.AuthorizationRef, IdempotencyKey: p.ID + "/authorization", Created: p.Created},
		{ID: surgepay.NewID("tx"), Type: surgepay.TxCapture, Status: surgepay.TxPending,
			Amount: p.Amount, IdempotencyKey: p.ID + "/capture", Created: p.Created},
	}
	return p
}

// stagedSale returns the Write of a streamlined sale: an idempotency
// record, the payment and its staged capture, no events (the one-statement
// shape), and the payment and the record.
func stagedSale(merchantID string) (*surgepay.Write, *surgepay.Payment, *surgepay.StagedRecord) {
	p := streamlinedPayment(merchantID)
	rec := sampleStaged(p)
	return &surgepay.Write{Idempotency: sampleIdempotency(merchantID), PaymentInsert: p, Staged: rec}, p, rec
}

// saleEvents returns the two audit rows of a sale ("detailed audit").
func saleEvents(p *surgepay.Payment) []*surgepay.Event {
	return []*surgepay.Event{
		sampleEvent(p, surgepay.TxAuthorization, "", surgepay.StatusRequiresCapture),
		sampleEvent(p, surgepay.TxCapture, surgepay.StatusRequiresCapture, surgepay.StatusSucceeded),
	}
}

func fetchStaged(t *testing.T, ss surgepay.StagedStore, afterID string, limit int) []*surgepay.StagedRecord {
	t.Helper()
	recs, err := ss.FetchStaged(t.Context(), afterID, limit)
	if err != nil {
		t.Fatalf("FetchStaged(%q, %d): %v", afterID, limit, err)
	}
	return recs
}

func stagedIDs(recs []*surgepay.StagedRecord) []string {
	ids := make([]string, len(recs))
	for i, r := range recs {
		ids[i] = r.ID
	}
	return ids
}

// sortedStaged returns recs sorted by ID, the order of FetchStaged.
func sortedStaged(recs ...*surgepay.StagedRecord) []*surgepay.StagedRecord {
	out := append([]*surgepay.StagedRecord(nil), recs...)
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// stmtKinds is a statement count by kind.
type stmtKinds struct{ total, sel, ins, upd, del int64 }

// wantStatements fails t unless c counted want, and some store time.
func wantStatements(t *testing.T, what string, c *surgepay.StatementCounter, want stmtKinds) {
	t.Helper()
	got := stmtKinds{c.Total(), c.Kind(surgepay.StmtSelect), c.Kind(surgepay.StmtInsert),
		c.Kind(surgepay.StmtUpdate), c.Kind(surgepay.StmtDelete)}
	if got != want {
		t.Errorf("%s: statements {total select insert update delete} = %v, want %v", what, got, want)
	}
	if c.StoreTime() <= 0 {
		t.Errorf("%s: StoreTime = %v, want > 0", what, c.StoreTime())
	}
}

// applyCase is one Write of a statement-count table: applied, it must
// succeed (reason "") or fail with the ECONFLICT reason, and count want.
type applyCase struct {
	name   string
	w      *surgepay.Write
	reason string
	want   stmtKinds
}

// applyCounting applies each case in order on its own statement counter.
func applyCounting(t *testing.T, s surgepay.Store, cases []applyCase) {
	t.Helper()
	for _, tc := range cases {
		ctx, c := ctxCounter(t)
		err := s.Apply(ctx, tc.w)
		if tc.reason == "" && err != nil {
			t.Fatalf("%s: Apply: %v", tc.name, err)
		}
		if tc.reason != "" {
			wantErr(t, err, surgepay.ECONFLICT, tc.reason)
			// A refusal is held to the total: a store may refuse a
			// taken key by the refused INSERT, or by a read of its own
			// index instead (SQLite, for the keys it holds in memory).
			if c.Total() != tc.want.total {
				t.Errorf("Apply(%s): %d statements, want %d", tc.name, c.Total(), tc.want.total)
			}
			continue
		}
		wantStatements(t, "Apply("+tc.name+")", c, tc.want)
	}
}

// testStagedSaleStatementCounts pins the budget of the streamlined path: a
// staged sale is ONE statement, with or without its idempotency record,
// stored or refused; with events, two.
func testStagedSaleStatementCounts(t *testing.T, s surgepay.Store) {
	ss := stagedStore(t, s)
	m := newMerchant(t, s)
	sale, p, rec := stagedSale(m.ID)
	noKey, _, _ := stagedSale(m.ID)
	noKey.Idempotency = nil
	withEvents, _, _ := stagedSale(m.ID)
	withEvents.Events = saleEvents(withEvents.PaymentInsert)
	taken, _, _ := stagedSale(m.ID)
	taken.Idempotency.Key = sale.Idempotency.Key
	settled := p.Clone()
	settled.SettleCapture("cap_1", now())

	tests := []applyCase{
		{"StagedSale", sale, "", stmtKinds{1, 0, 1, 0, 0}},
		{"StagedSaleWithoutIdempotency", noKey, "", stmtKinds{1, 0, 1, 0, 0}},
		{"StagedSaleWithEvents", withEvents, "", stmtKinds{2, 0, 2, 0, 0}},
		{"StagedSaleErrIdempotencyKeyExists", taken, "idempotency_key_exists", stmtKinds{1, 0, 1, 0, 0}},
		{"SettleWithAck", &surgepay.Write{PaymentUpdate: settled, StagedAck: []string{rec.ID}}, "", stmtKinds{2, 0, 0, 1, 1}},
		{"AckAlone", &surgepay.Write{StagedAck: []string{rec.ID, surgepay.NewID("stg")}}, "", stmtKinds{1, 0, 0, 0, 1}},
		{"StagedAlone", &surgepay.Write{Staged: sampleStaged(p)}, "", stmtKinds{1, 0, 1, 0, 0}},
	}
	applyCounting(t, s, tests)

	ctx, c := ctxCounter(t)
	if _, err := ss.FetchStaged(ctx, "", 10); err != nil {
		t.Fatalf("FetchStaged: %v", err)
	}
	wantStatements(t, "FetchStaged", c, stmtKinds{1, 1, 0, 0, 0})
	ctx, c = ctxCounter(t)
	if _, _, err := ss.StagedBacklog(ctx); err != nil {
		t.Fatalf("StagedBacklog: %v", err)
	}
	wantStatements(t, "StagedBacklog", c, stmtKinds{1, 1, 0, 0, 0})
}

// testStagedSaleIdempotencyConflict fires staged sales that reuse a stored
// key (one statement, with events, and with a part that takes the general
// path) at once with 20 neighbours: each refused sale stores nothing, not
// its payment, events, staged record or customer, and every neighbour is
// stored whole.
func testStagedSaleIdempotencyConflict(t *testing.T, s surgepay.Store) {
	const neighbours = 20
	ss := stagedStore(t, s)
	m := newMerchant(t, s)
	first, firstP, firstRec := stagedSale(m.ID)
	apply(t, s, first)

	type sale struct {
		w   *surgepay.Write
		p   *surgepay.Payment
		rec *surgepay.StagedRecord
	}
	var refused, stored []sale
	for i := range 3 {
		w, p, rec := stagedSale(m.ID)
		w.Idempotency.Key, w.Idempotency.StatusCode = first.Idempotency.Key, 500
		switch i {
		case 1:
			w.Events = saleEvents(p)
		case 2:
			w.CustomerInsert = sampleCustomer(m.ID)
		}
		refused = append(refused, sale{w, p, rec})
	}
	for i := range neighbours {
		w, p, rec := stagedSale(m.ID)
		switch i % 3 {
		case 1:
			w.Events = saleEvents(p)
		case 2:
			w.Idempotency = nil
		}
		stored = append(stored, sale{w, p, rec})
	}
	all := append(append([]sale(nil), refused...), stored...)
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

	wantRecs := []*surgepay.StagedRecord{firstRec}
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
		wantRecs = append(wantRecs, n.rec)
	}
	if d := diff(sortedStaged(wantRecs...), fetchStaged(t, ss, "", stagedFetchAll)); d != "" {
		t.Errorf("FetchStaged: want the first sale's and the neighbours' records only (-want +got):\n%s", d)
	}
}

// testStagedSaleStoresWhatGeneralPathStores checks that the one statement
// of a staged sale stores the rows the general path stores: the same
// payment, idempotency record and staged record, stored by a Write that a
// PaymentMethodDelete of a missing card sends down the general path (four
// statements), read back identically, for a payment with every field set
// and for a minimal one (NULL columns).
func testStagedSaleStoresWhatGeneralPathStores(t *testing.T, s surgepay.Store) {
	ss := stagedStore(t, s)
	m := newMerchant(t, s)
	minimal := minimalPayment(m.ID, surgepay.StatusSucceeded)
	minimal.Updated = time.Time{}
	var want []*surgepay.StagedRecord
	for _, tc := range []struct {
		name string
		p    *surgepay.Payment
	}{
		{"EveryField", samplePayment(m.ID, surgepay.NewID("cus"), surgepay.NewID("pm"))},
		{"Minimal", minimal},
	} {
		pa, ra := tc.p, sampleIdempotency(m.ID)
		sa := sampleStaged(pa)
		pb := pa.Clone()
		pb.ID = surgepay.NewID("pay")
		rb := *ra
		rb.Key = ra.Key + "-b"
		sb := *sa
		sb.ID, sb.PaymentID = surgepay.NewID("stg"), pb.ID

		ctx, c := ctxCounter(t)
		if err := s.Apply(ctx, &surgepay.Write{Idempotency: ra, PaymentInsert: pa, Staged: sa}); err != nil {
			t.Fatalf("%s: Apply(staged sale): %v", tc.name, err)
		}
		wantStatements(t, tc.name+": staged sale", c, stmtKinds{1, 0, 1, 0, 0})
		ctx, c = ctxCounter(t)
		err := s.Apply(ctx, &surgepay.Write{Idempotency: &rb, PaymentInsert: pb, Staged: &sb,
			PaymentMethodDelete: missingPaymentMethod(m.ID)})
		if err != nil {
			t.Fatalf("%s: Apply(general path): %v", tc.name, err)
		}
		wantStatements(t, tc.name+": general path", c, stmtKinds{4, 0, 3, 0, 1})
		want = append(want, sa, &sb)

		gotA, gotB := findPayment(t, s, m.ID, pa.ID), findPayment(t, s, m.ID, pb.ID)
		if d := diff(pa, gotA); d != "" {
			t.Errorf("%s: FindPayment(staged sale) (-want +got):\n%s", tc.name, d)
		}
		gotB.ID = gotA.ID
		if d := diff(gotB, gotA); d != "" {
			t.Errorf("%s: FindPayment: staged sale (+) differs from the general path (-):\n%s", tc.name, d)
		}
		idemA, errA := s.FindIdempotency(t.Context(), m.ID, ra.Key)
		idemB, errB := s.FindIdempotency(t.Context(), m.ID, rb.Key)
		if errA != nil || errB != nil {
			t.Fatalf("%s: FindIdempotency: %v, %v", tc.name, errA, errB)
		}
		if d := diff(ra, idemA); d != "" {
			t.Errorf("%s: FindIdempotency(staged sale) (-want +got):\n%s", tc.name, d)
		}
		idemB.Key = idemA.Key
		if d := diff(idemB, idemA); d != "" {
			t.Errorf("%s: FindIdempotency: staged sale (+) differs from the general path (-):\n%s", tc.name, d)
		}
	}
	recs := fetchStaged(t, ss, "", stagedFetchAll)
	if d := diff(sortedStaged(want...), recs); d != "" {
		t.Errorf("FetchStaged: staged sales' and general path's records (-want +got):\n%s", d)
	}
	for _, r := range recs {
		if p := findPayment(t, s, m.ID, r.PaymentID); r.MerchantID != p.MerchantID {
			t.Errorf("staged record %s: merchant %s, want %s", r.ID, r.MerchantID, p.MerchantID)
		}
	}
}

// testFetchStagedOrderPagingMax stages records of two merchants in an
// order other than their IDs': FetchStaged returns them by ID, pages with
// afterID (a stored ID or an acknowledged one), and returns at most max.
func testFetchStagedOrderPagingMax(t *testing.T, s surgepay.Store) {
	ss := stagedStore(t, s)
	m1, m2 := newMerchant(t, s), newMerchant(t, s)
	if got := fetchStaged(t, ss, "", 10); len(got) != 0 {
		t.Fatalf("FetchStaged on an empty stage = %d records, want 0", len(got))
	}
	var recs []*surgepay.StagedRecord
	var ws []*surgepay.Write
	for i := range 7 {
		mid := m1.ID
		if i%2 == 1 {
			mid = m2.ID
		}
		w, _, rec := stagedSale(mid)
		if i%3 == 2 { // staged alone, on the general path
			w = &surgepay.Write{Staged: rec}
		}
		recs, ws = append(recs, rec), append(ws, w)
	}
	for _, i := range []int{3, 0, 6, 1, 5, 2, 4} {
		apply(t, s, ws[i])
	}
	want := sortedStaged(recs...)

	if d := diff(want, fetchStaged(t, ss, "", stagedFetchAll)); d != "" {
		t.Errorf("FetchStaged(\"\", all) (-want +got):\n%s", d)
	}
	var pages [][]string
	after := ""
	for range len(want) + 1 {
		page := fetchStaged(t, ss, after, 3)
		if len(page) == 0 {
			break
		}
		pages = append(pages, stagedIDs(page))
		after = page[len(page)-1].ID
	}
	ids := stagedIDs(want)
	if d := diff([][]string{ids[0:3], ids[3:6], ids[6:7]}, pages); d != "" {
		t.Errorf("FetchStaged pages of 3 (-want +got):\n%s", d)
	}
	for _, tc := range []struct {
		after string
		max   int
		want  []string
	}{
		{"", 1, ids[:1]},
		{ids[6], 3, nil},
		{"", 0, nil},
		{"", -1, nil},
		{ids[1], 100, ids[2:]},
	} {
		if d := diff(tc.want, stagedIDs(fetchStaged(t, ss, tc.after, tc.max))); d != "" {
			t.Errorf("FetchStaged(%q, %d) IDs (-want +got):\n%s", tc.after, tc.max, d)
		}
	}
	// Settlement pages on from a record it has acknowledged.
	apply(t, s, &surgepay.Write{StagedAck: []string{ids[2]}})
	if d := diff(ids[3:5], stagedIDs(fetchStaged(t, ss, ids[2], 2))); d != "" {
		t.Errorf("FetchStaged(acknowledged ID, 2) IDs (-want +got):\n%s", d)
	}
}

// testStagedBacklog checks the count and the oldest creation time as
// records are staged and acknowledged.
func testStagedBacklog(t *testing.T, s surgepay.Store) {
	ss := stagedStore(t, s)
	m := newMerchant(t, s)
	check := func(what string, wantN int, wantOldest time.Time) {
		t.Helper()
		n, oldest, err := ss.StagedBacklog(t.Context())
		if err != nil {
			t.Fatalf("%s: StagedBacklog: %v", what, err)
		}
		if n != wantN || diff(wantOldest, oldest) != "" {
			t.Errorf("%s: StagedBacklog = %d, %v; want %d, %v", what, n, oldest, wantN, wantOldest)
		}
	}
	check("empty", 0, time.Time{})

	base := now().Add(-time.Hour)
	var recs []*surgepay.StagedRecord
	for range 3 {
		_, _, rec := stagedSale(m.ID)
		recs = append(recs, rec)
	}
	recs = sortedStaged(recs...) // IDs sort by creation time: so do Created
	for i, r := range recs {
		r.Created = base.Add(time.Duration(i) * time.Second)
	}
	for _, i := range []int{2, 0, 1} {
		apply(t, s, &surgepay.Write{Staged: recs[i]})
	}
	check("3 staged", 3, base)
	apply(t, s, &surgepay.Write{StagedAck: []string{recs[0].ID}})
	check("oldest acknowledged", 2, base.Add(time.Second))
	apply(t, s, &surgepay.Write{StagedAck: []string{recs[1].ID, recs[2].ID}})
	check("all acknowledged", 0, time.Time{})
}

// testStagedAckAtomicWithPaymentUpdate checks that a settlement Write
// (payment update, event, acknowledgement) is one unit: a refused update
// keeps the staged record; a stored one removes it, once; acknowledging it
// again is not an error.
func testStagedAckAtomicWithPaymentUpdate(t *testing.T, s surgepay.Store) {
	ss := stagedStore(t, s)
	m := newMerchant(t, s)
	w, p, rec := stagedSale(m.ID)
	apply(t, s, w)
	_, _, other := stagedSale(m.ID)
	apply(t, s, &surgepay.Write{Staged: other})
	settle := func(p *surgepay.Payment) *surgepay.Write {
		u := p.Clone()
		if !u.SettleCapture("cap_"+p.ID, now()) {
			t.Fatal("SettleCapture: no staged capture")
		}
		return &surgepay.Write{PaymentUpdate: u, StagedAck: []string{rec.ID},
			Events: []*surgepay.Event{sampleEvent(u, surgepay.TxCapture, p.Status, u.Status)}}
	}
	wantStaged := func(what string, want ...*surgepay.StagedRecord) {
		t.Helper()
		if d := diff(sortedStaged(want...), fetchStaged(t, ss, "", stagedFetchAll)); d != "" {
			t.Errorf("%s: FetchStaged (-want +got):\n%s", what, d)
		}
	}

	moved := p.Clone()
	moved.Version = p.Version + 1
	moved.Description = "moved on"
	apply(t, s, &surgepay.Write{PaymentUpdate: moved}) // another request moved the payment on
	err := s.Apply(t.Context(), settle(p))
	wantErr(t, err, surgepay.ECONFLICT, "concurrent_update")
	wantStaged("after a stale update", rec, other)
	if evs := listEvents(t, s, m.ID, p.ID); len(evs) != 0 {
		t.Errorf("stale update: ListEvents = %d events, want 0", len(evs))
	}

	gone := streamlinedPayment(m.ID) // never stored
	err = s.Apply(t.Context(), settle(gone))
	wantErr(t, err, surgepay.ENOTFOUND, "")
	wantStaged("after an update of a missing payment", rec, other)

	ok := settle(moved)
	ok.StagedAck = append(ok.StagedAck, surgepay.NewID("stg")) // unknown: not an error
	apply(t, s, ok)
	if d := diff(ok.PaymentUpdate, findPayment(t, s, m.ID, p.ID)); d != "" {
		t.Errorf("settled payment (-want +got):\n%s", d)
	}
	wantStaged("after settlement", other)

	// Settlement runs again after a crash: the record is gone, no error.
	apply(t, s, &surgepay.Write{StagedAck: []string{rec.ID}})
	wantStaged("after a repeated acknowledgement", other)
}

// testStagedAckMissingIsFine acknowledges records that were never staged,
// alone and beside a stored one.
func testStagedAckMissingIsFine(t *testing.T, s surgepay.Store) {
	ss := stagedStore(t, s)
	m := newMerchant(t, s)
	apply(t, s, &surgepay.Write{StagedAck: []string{surgepay.NewID("stg")}})
	w, _, rec := stagedSale(m.ID)
	apply(t, s, w)
	apply(t, s, &surgepay.Write{StagedAck: []string{surgepay.NewID("stg"), rec.ID + "x", ""}})
	if d := diff([]*surgepay.StagedRecord{rec}, fetchStaged(t, ss, "", stagedFetchAll)); d != "" {
		t.Errorf("FetchStaged after acknowledging unknown IDs (-want +got):\n%s", d)
	}
}
