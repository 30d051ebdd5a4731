package console_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/console"
	"github.com/surgepay/surgepay/engine"
	"github.com/surgepay/surgepay/provider/sim"
)

// newSimDisputesEnv is an env whose simulator's dispute webhooks are
// applied as the API's receiver applies them; each applied event's
// result comes on the channel.
func newSimDisputesEnv(t *testing.T) (*env, <-chan string) {
	t.Helper()
	var simulator *sim.Provider
	e := newEnv(t, func(ec *engine.Config, _ *console.Config) { simulator = ec.Provider.(*sim.Provider) })
	applied := make(chan string, 4)
	simulator.OnEvent(func(ctx context.Context, payload []byte, header http.Header) bool {
		res, err := e.eng.ApplyProcessorEvent(ctx, "default", payload, header)
		if err != nil || res == engine.EventUnknownPayment {
			return true // the sale is not stored yet: the simulator tries again
		}
		applied <- res
		return false
	})
	return e, applied
}

// disputedSale makes a sale of c with pm that the simulator's
// cardholder disputes, and waits until the dispute is applied.
func disputedSale(t *testing.T, e *env, applied <-chan string, c *surgepay.Customer, pm *surgepay.PaymentMethod) *surgepay.Payment {
	t.Helper()
	sale := e.pay(c, pm, sim.AmountDisputed, false, "")
	select {
	case res := <-applied:
		if res != engine.EventApplied {
			t.Fatalf("the simulator's dispute: %s, want applied", res)
		}
	case <-t.Context().Done():
		t.Fatal("the simulator's dispute never arrived")
	}
	return sale
}

// TestDisputesPageSimulatorDispute: the simulator's dispute of a sale of
// sim.AmountDisputed, applied as its webhook is, is on the disputes page
// (needing a response, the default) with its deadline, its reason and a
// link to its payment, whose page shows the deadline too; a sale that is
// not disputed is not listed.
func TestDisputesPageSimulatorDispute(t *testing.T) {
	e, applied := newSimDisputesEnv(t)
	c := e.customer("Dee", "dee@example.com")
	pm := e.card(c.ID, "4242424242424242", "123")
	quiet := e.pay(c, pm, 1000, false, "")
	sale := disputedSale(t, e, applied, c, pm)
	ds := e.payment(sale.ID).Disputes()
	if len(ds) != 1 || ds[0].DueBy.IsZero() {
		t.Fatalf("the sale's disputes: %+v, want one with a deadline", ds)
	}
	due := ds[0].DueBy
	body := e.get("/console/disputes", http.StatusOK)
	for _, want := range []string{`href="` + paymentPath(sale) + `"`, due.UTC().Format("2006-01-02 15:04:05 UTC"),
		"fraudulent", surgepay.DisputeNeedsResponse, "91.05 EUR", ds[0].ID} {
		if !strings.Contains(body, want) {
			t.Errorf("the disputes page lacks %q", want)
		}
	}
	if strings.Contains(body, paymentPath(quiet)) {
		t.Errorf("the disputes page lists payment %s, which is not disputed", quiet.ID)
	}
	page := e.get(paymentPath(sale), http.StatusOK)
	if i := strings.Index(page, `id="disputes"`); i < 0 || !strings.Contains(page[i:], due.UTC().Format("2006-01-02 15:04:05 UTC")) {
		t.Errorf("the payment's page shows no deadline %s in its disputes", due)
	}
}

// unsignedEvents is the simulator, whose processor webhooks a test
// writes itself: ParseEvent reads a surgepay.ProcessorEvent as JSON.
type unsignedEvents struct{ *sim.Provider }

func (unsignedEvents) ParseEvent(_ string, payload []byte, _ http.Header) (*surgepay.ProcessorEvent, error) {
	var ev surgepay.ProcessorEvent
	if err := json.Unmarshal(payload, &ev); err != nil {
		return nil, surgepay.Invalid("body", "invalid_json", "%v", err)
	}
	return &ev, nil
}

// disputesNow is the engine's clock in the tests that place deadlines.
var disputesNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// newDisputesEnv is an env whose engine's clock is disputesNow and whose
// processor's webhooks are unsigned (unsignedEvents).
func newDisputesEnv(t *testing.T) *env {
	return newEnv(t, func(ec *engine.Config, _ *console.Config) {
		ec.Provider = unsignedEvents{ec.Provider.(*sim.Provider)}
		ec.Now = func() time.Time { return disputesNow }
	})
}

// dispute applies a processor's dispute event to p, as its webhook is.
func (e *env) dispute(p *surgepay.Payment, id, status, reason string, due time.Time) {
	e.t.Helper()
	ev := surgepay.ProcessorEvent{ID: "evt_" + id + "_" + status, Kind: surgepay.ProcessorEventDisputeCreated,
		PaymentRef: p.AuthorizationRef, MerchantID: p.MerchantID, PaymentID: p.ID, DisputeID: id, Status: status,
		Amount: p.Amount, Reason: reason, DueBy: due}
	body, _ := json.Marshal(ev)
	res, err := e.eng.ApplyProcessorEvent(context.Background(), "default", body, nil)
	if err != nil || res != engine.EventApplied {
		e.t.Fatalf("dispute %s: %s, %v; want applied", id, res, err)
	}
}

// TestDisputesPageOrderMarksFilters: soonest deadline first, unknown
// last; a deadline gone by is marked passed, one within a day due soon;
// the merchant and state filters; names and reasons escaped.
func TestDisputesPageOrderMarksFilters(t *testing.T) {
	e := newDisputesEnv(t)
	c := e.customer("Lee", "lee@example.com")
	pm := e.card(c.ID, "4242424242424242", "123")
	pay := func() *surgepay.Payment { return e.pay(c, pm, 2500, false, "") }
	e.dispute(pay(), "dp_later", surgepay.DisputeNeedsResponse, "product_not_received", disputesNow.Add(5*24*time.Hour))
	e.dispute(pay(), "dp_past", surgepay.DisputeNeedsResponse, "fraudulent", disputesNow.Add(-time.Hour))
	e.dispute(pay(), "dp_soon", surgepay.DisputeWarningNeedsResponse, "<script>alert('reason')</script>", disputesNow.Add(2*time.Hour))
	e.dispute(pay(), "dp_unknown", surgepay.DisputeNeedsResponse, "duplicate", time.Time{})
	e.dispute(pay(), "dp_won", surgepay.DisputeWon, "fraudulent", disputesNow.Add(-48*time.Hour))
	m2, err := e.eng.CreateMerchant(context.Background(), "Other <img src=x onerror=alert(1)>")
	if err != nil {
		t.Fatal(err)
	}
	e2 := *e
	e2.merchant, e2.call = m2, &engine.Call{MerchantID: m2.ID, KeyID: "key_test"}
	c2 := e2.customer("Mo", "mo@example.com")
	pm2 := e2.card(c2.ID, "4242424242424242", "123")
	e2.dispute(e2.pay(c2, pm2, 700, false, ""), "dp_other", surgepay.DisputeNeedsResponse, "fraudulent", disputesNow.Add(3*time.Hour))

	order := func(t *testing.T, body string, want ...string) {
		t.Helper()
		last := -1
		for _, id := range want {
			i := strings.Index(body, "<code>"+id+"</code>")
			if i < 0 {
				t.Fatalf("%s not listed", id)
			}
			if i < last {
				t.Fatalf("%s listed out of order; want %v", id, want)
			}
			last = i
		}
	}
	t.Run("NeedingResponseByDeadline", func(t *testing.T) {
		body := e.get("/console/disputes", http.StatusOK)
		order(t, body, "dp_past", "dp_soon", "dp_other", "dp_later", "dp_unknown")
		if strings.Contains(body, "dp_won") {
			t.Error("a won dispute is listed among those needing a response")
		}
		row := func(id string) string {
			i := strings.Index(body, "<code>"+id+"</code>")
			return body[strings.LastIndex(body[:i], "<tr"):i]
		}
		if !strings.Contains(row("dp_past"), `class="past"`) || !strings.Contains(row("dp_past"), "passed") {
			t.Errorf("dp_past is not marked passed: %s", row("dp_past"))
		}
		if !strings.Contains(row("dp_soon"), `class="near"`) || !strings.Contains(row("dp_soon"), "due soon") {
			t.Errorf("dp_soon is not marked due soon: %s", row("dp_soon"))
		}
		if strings.HasPrefix(row("dp_later"), "<tr class=") {
			t.Errorf("dp_later, due in 5 days, is marked: %s", row("dp_later"))
		}
		for _, bad := range []string{"<script>alert", "<img src=x"} {
			if strings.Contains(body, bad) {
				t.Errorf("the page holds %q unescaped", bad)
			}
		}
		if !strings.Contains(body, "&lt;script&gt;alert(&#39;reason&#39;)&lt;/script&gt;") {
			t.Error("the hostile reason is not shown escaped")
		}
	})
	t.Run("Merchant", func(t *testing.T) {
		body := e.get("/console/disputes?merchant="+m2.ID, http.StatusOK)
		order(t, body, "dp_other")
		if strings.Contains(body, "dp_past") {
			t.Error("another merchant's dispute is listed")
		}
	})
	t.Run("State", func(t *testing.T) {
		body := e.get("/console/disputes?status=won", http.StatusOK)
		order(t, body, "dp_won")
		if strings.Contains(body, "dp_past") || strings.Contains(body, `<tr class="past"`) {
			t.Error("status=won lists another state, or marks a won dispute's deadline")
		}
		order(t, e.get("/console/disputes?status=any", http.StatusOK), "dp_won", "dp_past", "dp_soon", "dp_unknown")
	})
}

// TestDisputesPagePages: 25 a page by default, or limit; "Next →" goes on
// by the cursor, each dispute once, in deadline order.
func TestDisputesPagePages(t *testing.T) {
	e := newDisputesEnv(t)
	c := e.customer("Pat", "pat@example.com")
	pm := e.card(c.ID, "4242424242424242", "123")
	var ids []string
	for i := range 5 {
		id := "dp_" + string(rune('a'+i))
		e.dispute(e.pay(c, pm, int64(100+i), false, ""), id, surgepay.DisputeNeedsResponse, "fraudulent",
			disputesNow.Add(time.Duration(5-i)*time.Hour))
		ids = append([]string{id}, ids...) // the last made is due first
	}
	var seen []string
	next := "/console/disputes?limit=2"
	for pages := 0; next != ""; pages++ {
		if pages > 3 {
			t.Fatal("more than 3 pages of 2 for 5 disputes")
		}
		body := e.get(next, http.StatusOK)
		for _, id := range ids {
			if strings.Contains(body, "<code>"+id+"</code>") {
				seen = append(seen, id)
			}
		}
		next = ""
		if i := strings.Index(body, `id="next" href="`); i >= 0 {
			rest := body[i+len(`id="next" href="`):]
			next = strings.ReplaceAll(rest[:strings.IndexByte(rest, '"')], "&amp;", "&")
		}
	}
	if strings.Join(seen, ",") != strings.Join(ids, ",") {
		t.Fatalf("the pages listed %v, want %v once each, in order", seen, ids)
	}
}

// TestDisputesPageBadInput: a malformed field is a 400 page naming it;
// a card number typed into a field is not shown back.
func TestDisputesPageBadInput(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct{ name, query, field string }{
		{"ErrUnknownState", "status=paid", "status"},
		{"ErrPaymentStatus", "status=succeeded", "status"},
		{"ErrStateTwice", "status=won&status=lost", "status"},
		{"ErrLimitZero", "limit=0", "limit"},
		{"ErrLimitAboveMax", "limit=101", "limit"},
		{"ErrLimitNotNumber", "limit=ten", "limit"},
		{"ErrCursor", "after=not-a-cursor!", "after"},
		{"ErrUnknownMerchant", "merchant=mch_nope", "merchant"},
		{"ErrCardNumber", "status=4242424242424242", "status"},
		{"ErrCardNumberMerchant", "merchant=4242+4242+4242+4242", "merchant"},
		{"ErrControl", "status=won%00", "status"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := e.get("/console/disputes?"+tc.query, http.StatusBadRequest)
			if !strings.Contains(body, "Field <code>"+tc.field+"</code>") {
				t.Fatalf("?%s: the 400 page does not name %s:\n%s", tc.query, tc.field, body)
			}
			if strings.Contains(body, "4242424242424242") || strings.Contains(body, "4242 4242") {
				t.Fatalf("?%s: the card number is shown back", tc.query)
			}
		})
	}
}

// TestSearchByDisputeState: the search page's "Dispute state" form goes
// to the disputes page, with every state to choose from; every page's
// navigation links to it.
func TestSearchByDisputeState(t *testing.T) {
	e := newEnv(t)
	body := e.get("/console/", http.StatusOK)
	i := strings.Index(body, `action="/console/disputes"`)
	if i < 0 {
		t.Fatal("the search page has no form to /console/disputes")
	}
	start := strings.LastIndex(body[:i], "<form")
	form := body[start : i+strings.Index(body[i:], "</form>")]
	for _, s := range append([]string{"any"}, surgepay.DisputeStatuses...) {
		if !strings.Contains(form, `<option value="`+s+`">`) {
			t.Errorf("the dispute state select lacks %s", s)
		}
	}
	if !strings.Contains(form, `name="status"`) || !strings.Contains(form, `method="get"`) {
		t.Errorf("the dispute form is not a GET of status: %s", form)
	}
	for _, page := range []string{"/console/", "/console/audit", "/console/disputes"} {
		if !strings.Contains(e.get(page, http.StatusOK), `<a href="/console/disputes"`) {
			t.Errorf("%s has no link to the disputes page", page)
		}
	}
}
