package storetest

import (
	"testing"
	"time"

	"github.com/surgepay/surgepay"
)

// searchTests cover the surgepay.OperatorSearcher capability (the
// console's searches); a store without it skips them.
var searchTests = []struct {
	name string
	fn   func(t *testing.T, s surgepay.Store)
}{
	{"SearchPaymentsFilters", testSearchPaymentsFilters},
	{"SearchPaymentsPages", testSearchPaymentsPages},
	{"SearchPaymentsBounded", testSearchPaymentsBounded},
	{"SearchPaymentsByCardIndexed", testSearchPaymentsByCardIndexed},
	{"SearchPaymentsByCardFewMatch", testSearchPaymentsByCardFewMatch},
	{"FindCustomersByEmail", testFindCustomersByEmail},
	{"WebhookResendWithAuditAtomic", testWebhookResendWithAuditAtomic},
}

func operatorSearcher(t *testing.T, s surgepay.Store) surgepay.OperatorSearcher {
	t.Helper()
	o, ok := s.(surgepay.OperatorSearcher)
	if !ok {
		t.Skip("the store has no OperatorSearcher capability")
	}
	return o
}

// searchIDs runs q and returns the IDs found, Next and Bounded.
func searchIDs(t *testing.T, o surgepay.OperatorSearcher, q surgepay.PaymentSearch) ([]string, string, bool) {
	t.Helper()
	if q.Limit == 0 {
		q.Limit = surgepay.PaymentSearchLimitMax
	}
	page, err := o.SearchPayments(t.Context(), q)
	if err != nil {
		t.Fatalf("SearchPayments(%+v): %v", q, err)
	}
	var ids []string
	for _, p := range page.Payments {
		if p.MerchantID != q.MerchantID {
			t.Fatalf("SearchPayments(%s) returned merchant %s's payment %s", q.MerchantID, p.MerchantID, p.ID)
		}
		ids = append(ids, p.ID)
	}
	return ids, page.Next, page.Bounded
}

func testSearchPaymentsFilters(t *testing.T, s surgepay.Store) {
	o := operatorSearcher(t, s)
	m := newMerchant(t, s)
	c := newCustomer(t, s, m.ID)
	visa := newPaymentMethod(t, s, m.ID, c.ID) // last 4: 4242
	other := samplePaymentMethod(m.ID, c.ID)
	other.Last4 = "0005"
	apply(t, s, &surgepay.Write{PaymentMethodInsert: other})
	base := now()
	type row struct {
		status surgepay.Status
		amount int64
		pm     string
		ref    string
	}
	rows := []row{
		{surgepay.StatusSucceeded, 500, visa.ID, "sim_auth_1"},
		{surgepay.StatusFailed, 1500, other.ID, ""},
		{surgepay.StatusSucceeded, 2500, other.ID, "stripe_eu:pi_3Abc"},
		{surgepay.StatusRequiresCapture, 3500, visa.ID, "stripe_us:pi_4Def"},
		{surgepay.StatusSucceeded, 4500, visa.ID, "sim_auth_5"},
	}
	ids := make([]string, len(rows))
	created := make([]time.Time, len(rows))
	for i, r := range rows {
		p := minimalPayment(m.ID, r.status)
		p.Amount, p.AmountTax = r.amount-100, 100
		p.CustomerID, p.PaymentMethodID, p.AuthorizationRef = c.ID, r.pm, r.ref
		p.Created = base.Add(time.Duration(i) * time.Millisecond)
		apply(t, s, &surgepay.Write{PaymentInsert: p})
		ids[i], created[i] = p.ID, p.Created
	}
	// Another merchant's payment matches every filter but is never found.
	x := minimalPayment(newMerchant(t, s).ID, surgepay.StatusSucceeded)
	x.AuthorizationRef = "stripe_eu:pi_3Abc"
	apply(t, s, &surgepay.Write{PaymentInsert: x})

	pick := func(idx ...int) []string {
		var out []string
		for _, i := range idx {
			out = append(out, ids[i])
		}
		return idsDesc(out)
	}
	tests := []struct {
		name string
		q    surgepay.PaymentSearch
		want []string
	}{
		{"All", surgepay.PaymentSearch{}, pick(0, 1, 2, 3, 4)},
		{"Status", surgepay.PaymentSearch{Status: surgepay.StatusSucceeded}, pick(0, 2, 4)},
		{"AmountRangeInclusive", surgepay.PaymentSearch{AmountGTE: 1500, AmountLTE: 3500}, pick(1, 2, 3)},
		{"AmountFrom", surgepay.PaymentSearch{AmountGTE: 3501}, pick(4)},
		{"Last4", surgepay.PaymentSearch{Last4: "4242"}, pick(0, 3, 4)},
		{"Last4AndStatus", surgepay.PaymentSearch{Last4: "4242", Status: surgepay.StatusSucceeded}, pick(0, 4)},
		{"Last4None", surgepay.PaymentSearch{Last4: "1111"}, nil},
		{"RefQualified", surgepay.PaymentSearch{Ref: "stripe_eu:pi_3Abc"}, pick(2)},
		{"RefAsProcessorShowsIt", surgepay.PaymentSearch{Ref: "pi_4Def"}, pick(3)},
		{"RefUnqualified", surgepay.PaymentSearch{Ref: "sim_auth_5"}, pick(4)},
		{"RefPartNoMatch", surgepay.PaymentSearch{Ref: "pi_3"}, nil},
		{"CreatedFromInclusive", surgepay.PaymentSearch{CreatedGTE: created[2]}, pick(2, 3, 4)},
		{"CreatedBeforeExclusive", surgepay.PaymentSearch{CreatedBefore: created[2]}, pick(0, 1)},
		{"CreatedRange", surgepay.PaymentSearch{CreatedGTE: created[1], CreatedBefore: created[4]}, pick(1, 2, 3)},
		{"CreatedLongAgo", surgepay.PaymentSearch{CreatedBefore: base.Add(-time.Hour)}, nil},
		{"StartingAfter", surgepay.PaymentSearch{StartingAfter: ids[3]}, pick(0, 1, 2)},
	}
	for _, tc := range tests {
		tc.q.MerchantID = m.ID
		got, next, bounded := searchIDs(t, o, tc.q)
		if d := diff(tc.want, got); d != "" || next != "" || bounded {
			t.Errorf("%s: SearchPayments(%+v) next %q bounded %v, want none; IDs (-want +got):\n%s", tc.name, tc.q, next, bounded, d)
		}
	}
}

func testSearchPaymentsPages(t *testing.T, s surgepay.Store) {
	o := operatorSearcher(t, s)
	m := newMerchant(t, s)
	var ids []string
	for range 5 {
		p := minimalPayment(m.ID, surgepay.StatusSucceeded)
		apply(t, s, &surgepay.Write{PaymentInsert: p})
		ids = append(ids, p.ID)
	}
	want := idsDesc(ids)
	var got []string
	q := surgepay.PaymentSearch{MerchantID: m.ID, Status: surgepay.StatusSucceeded, Limit: 2}
	for pages := 0; ; pages++ {
		if pages > 3 {
			t.Fatalf("more than 3 pages of 2 for 5 payments: %v", got)
		}
		page, next, bounded := searchIDs(t, o, q)
		if bounded {
			t.Fatalf("page %d bounded with 5 payments and the default bound", pages)
		}
		got = append(got, page...)
		if next == "" {
			break
		}
		if next != page[len(page)-1] {
			t.Fatalf("Next = %s, want the page's last payment %s", next, page[len(page)-1])
		}
		q.StartingAfter = next
	}
	if d := diff(want, got); d != "" {
		t.Fatalf("pages of SearchPayments (-want +got):\n%s", d)
	}
}

// testSearchPaymentsBounded: a filter that only the oldest payment
// passes, with a bound of 3 payments read, stops after the newest 3 and
// says where to go on; going on finds it.
func testSearchPaymentsBounded(t *testing.T, s surgepay.Store) {
	o := operatorSearcher(t, s)
	m := newMerchant(t, s)
	var ids []string
	for i := range 5 {
		p := minimalPayment(m.ID, surgepay.StatusSucceeded)
		p.Amount = int64(100 + i)
		apply(t, s, &surgepay.Write{PaymentInsert: p})
		ids = append(ids, p.ID)
	}
	q := surgepay.PaymentSearch{MerchantID: m.ID, AmountLTE: 100, ExamineMax: 3}
	got, next, bounded := searchIDs(t, o, q)
	if len(got) != 0 || !bounded || next != ids[2] {
		t.Fatalf("SearchPayments(%+v) = %v, next %q, bounded %v; want none, bounded at %s", q, got, next, bounded, ids[2])
	}
	q.StartingAfter = next
	got, next, bounded = searchIDs(t, o, q)
	if d := diff([]string{ids[0]}, got); d != "" || next != "" || bounded {
		t.Fatalf("SearchPayments(%+v) next %q bounded %v, want done; IDs (-want +got):\n%s", q, next, bounded, d)
	}
}

func testFindCustomersByEmail(t *testing.T, s surgepay.Store) {
	o := operatorSearcher(t, s)
	m := newMerchant(t, s)
	var want []string
	for i, email := range []string{"zoe@example.com", "ann@example.com", "Zoe@Example.COM"} {
		c := sampleCustomer(m.ID)
		c.Email = email
		apply(t, s, &surgepay.Write{CustomerInsert: c})
		if i != 1 {
			want = append(want, c.ID)
		}
	}
	x := sampleCustomer(newMerchant(t, s).ID) // zoe@example.com, another merchant's
	apply(t, s, &surgepay.Write{CustomerInsert: x})
	cs, err := o.FindCustomersByEmail(t.Context(), m.ID, "ZOE@example.com")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range cs {
		got = append(got, c.ID)
	}
	if d := diff(idsDesc(want), got); d != "" {
		t.Fatalf("FindCustomersByEmail IDs (-want +got):\n%s", d)
	}
	cs, err = o.FindCustomersByEmail(t.Context(), m.ID, "nobody@example.com")
	if err != nil || len(cs) != 0 {
		t.Fatalf("FindCustomersByEmail(nobody) = %v, %v; want none", cs, err)
	}
}

// testSearchPaymentsByCardIndexed: a search by a card's last 4 goes
// through the index of cards to their customers' payments, so it finds
// the oldest payment where the bounded scan of the newest would stop
// first; when the cards' customers have more payments in the range than
// the bound, it is the bounded scan again.
func testSearchPaymentsByCardIndexed(t *testing.T, s surgepay.Store) {
	o := operatorSearcher(t, s)
	m := newMerchant(t, s)
	ann, bob, carol := newCustomer(t, s, m.ID), newCustomer(t, s, m.ID), newCustomer(t, s, m.ID)
	annCard := samplePaymentMethod(m.ID, ann.ID)
	annCard.Last4 = "1881"
	annOther := samplePaymentMethod(m.ID, ann.ID)
	annOther.Last4 = "0005"
	bobCard := samplePaymentMethod(m.ID, bob.ID)
	bobCard.Last4 = "1881"
	carolCard := samplePaymentMethod(m.ID, carol.ID)
	carolCard.Last4 = "7777"
	for _, pm := range []*surgepay.PaymentMethod{annCard, annOther, bobCard, carolCard} {
		apply(t, s, &surgepay.Write{PaymentMethodInsert: pm})
	}
	pay := func(pm *surgepay.PaymentMethod, status surgepay.Status) string {
		p := minimalPayment(m.ID, status)
		p.CustomerID, p.PaymentMethodID = pm.CustomerID, pm.ID
		apply(t, s, &surgepay.Write{PaymentInsert: p})
		return p.ID
	}
	oldest := pay(annCard, surgepay.StatusSucceeded)
	for range 6 {
		pay(annOther, surgepay.StatusSucceeded)
	}
	bobs := pay(bobCard, surgepay.StatusRefunded)
	var carols []string
	for range 6 {
		carols = append(carols, pay(carolCard, surgepay.StatusSucceeded))
	}
	newest := pay(annCard, surgepay.StatusSucceeded)

	// 15 payments; the cards' customers have 9 of them. A scan bounded
	// at 9 would stop before the oldest.
	q := surgepay.PaymentSearch{MerchantID: m.ID, Last4: "1881", ExamineMax: 9}
	got, next, bounded := searchIDs(t, o, q)
	if d := diff([]string{newest, bobs, oldest}, got); d != "" || next != "" || bounded {
		t.Fatalf("SearchPayments(%+v) next %q bounded %v, want all three; IDs (-want +got):\n%s", q, next, bounded, d)
	}
	q.Status = surgepay.StatusRefunded
	got, _, _ = searchIDs(t, o, q)
	if d := diff([]string{bobs}, got); d != "" {
		t.Fatalf("SearchPayments(%+v) (-want +got):\n%s", q, d)
	}
	q.Status = ""
	q.Limit = 2
	got, next, _ = searchIDs(t, o, q)
	if d := diff([]string{newest, bobs}, got); d != "" || next != bobs {
		t.Fatalf("first page of 2: next %q, want %s; IDs (-want +got):\n%s", next, bobs, d)
	}
	q.StartingAfter = next
	got, next, _ = searchIDs(t, o, q)
	if d := diff([]string{oldest}, got); d != "" || next != "" {
		t.Fatalf("second page: next %q, want done; IDs (-want +got):\n%s", next, d)
	}
	// A bound of 5, below the cards' customers' 9 payments: the newest 5
	// are scanned, and the search says where it stopped.
	q = surgepay.PaymentSearch{MerchantID: m.ID, Last4: "1881", ExamineMax: 5}
	got, next, bounded = searchIDs(t, o, q)
	if d := diff([]string{newest}, got); d != "" || !bounded || next != carols[2] {
		t.Fatalf("SearchPayments(%+v) next %q bounded %v, want bounded at %s; IDs (-want +got):\n%s", q, next, bounded, carols[2], d)
	}
}

// testSearchPaymentsByCardFewMatch: the card's one payment is the oldest
// of its customer's 151 (a store that reads the candidates' rows in
// batches, newest first, reads several before it finds it).
func testSearchPaymentsByCardFewMatch(t *testing.T, s surgepay.Store) {
	o := operatorSearcher(t, s)
	m := newMerchant(t, s)
	c := newCustomer(t, s, m.ID)
	card, other := samplePaymentMethod(m.ID, c.ID), samplePaymentMethod(m.ID, c.ID)
	card.Last4, other.Last4 = "4321", "0005"
	apply(t, s, &surgepay.Write{PaymentMethodInsert: card})
	apply(t, s, &surgepay.Write{PaymentMethodInsert: other})
	var want string
	for i := range 151 {
		p := minimalPayment(m.ID, surgepay.StatusSucceeded)
		p.CustomerID, p.PaymentMethodID = c.ID, other.ID
		if i == 0 {
			p.PaymentMethodID, want = card.ID, p.ID
		}
		apply(t, s, &surgepay.Write{PaymentInsert: p})
	}
	q := surgepay.PaymentSearch{MerchantID: m.ID, Last4: "4321", Limit: 1}
	got, next, bounded := searchIDs(t, o, q)
	if d := diff([]string{want}, got); d != "" || next != "" || bounded {
		t.Fatalf("SearchPayments(%+v) next %q bounded %v; IDs (-want +got):\n%s", q, next, bounded, d)
	}
}

// testWebhookResendWithAuditAtomic: an operator's resend carries its
// audit row (the console); a resend its guard refuses stores no row.
func testWebhookResendWithAuditAtomic(t *testing.T, s surgepay.Store) {
	ws := webhookStore(t, s)
	m := newMerchant(t, s)
	e := newEndpoint(t, s, m.ID, 1)
	ev := queued(t, s, m.ID)
	t0 := now().Add(time.Second)
	claim(t, ws, t0, t0.Add(time.Minute), 10)
	resend := &surgepay.WebhookResend{MerchantID: m.ID, EventID: ev.ID, EndpointID: e.ID, At: t0}
	refused := auditEvent(m.ID, ev.PaymentID, surgepay.AuditWebhookResent)
	wantErr(t, s.Apply(t.Context(), &surgepay.Write{WebhookResend: resend, Audit: []*surgepay.AuditEvent{refused}}),
		surgepay.ECONFLICT, "concurrent_update")
	record(t, ws, &surgepay.WebhookResult{EventID: ev.ID, EndpointID: e.ID, MerchantID: m.ID, Attempt: 1,
		Outcome: surgepay.WebhookDelivered, StatusCode: 200, At: t0, Sent: true})
	done := auditEvent(m.ID, ev.PaymentID, surgepay.AuditWebhookResent)
	resend.At = t0.Add(time.Hour)
	apply(t, s, &surgepay.Write{WebhookResend: resend, Audit: []*surgepay.AuditEvent{done}})
	es, _, err := s.ListAuditEvents(t.Context(), surgepay.AuditFilter{ObjectID: ev.PaymentID, Page: surgepay.Page{Limit: 10}})
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 1 || es[0].ID != done.ID {
		t.Fatalf("audit rows of the payment = %+v, want only the stored resend's %s", es, done.ID)
	}
}
