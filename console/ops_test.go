package console_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/console"
	"github.com/surgepay/surgepay/engine"
	"github.com/surgepay/surgepay/provider/route"
	"github.com/surgepay/surgepay/provider/sim"
	"github.com/surgepay/surgepay/settle"
	"github.com/surgepay/surgepay/stage"
	"github.com/surgepay/surgepay/stage/jetstream"
	"github.com/surgepay/surgepay/stage/stagetest"
	"github.com/surgepay/surgepay/telemetry"
	"github.com/surgepay/surgepay/webhook"
)

// opsPages are the operations views, each with its navigation link.
var opsPages = []string{"/console/staged", "/console/unknown", "/console/processors", "/console/webhooks", "/console/audit"}

// streamlined is an env option that puts the streamlined path on (a
// settlement key) with st as the external stage (nil: the embedded one).
func streamlined(t *testing.T, st surgepay.Stage) envOption {
	pub, _, err := stage.GenerateKeys()
	if err != nil {
		t.Fatal(err)
	}
	sealer, err := stage.NewSealer(pub)
	if err != nil {
		t.Fatal(err)
	}
	return func(c *engine.Config, _ *console.Config) {
		c.Sealer = sealer
		if st != nil {
			c.Stage = st
		}
	}
}

// setStreamlined puts every merchant on the streamlined path.
func (e *env) setStreamlined() {
	s := surgepay.DefaultMerchantSettings()
	s.Processing = surgepay.PathStreamlined
	e.eng.SetSettings(&engine.Settings{Default: s})
}

// payIn makes a sale of amount in currency on a new card of a new
// customer of the test merchant.
func (e *env) payIn(amount int64, currency string) *surgepay.Payment {
	e.t.Helper()
	c := e.customer("Buyer", "buyer@example.com")
	pm := e.card(c.ID, "4242424242424242", "321")
	p, err := e.eng.CreatePayment(context.Background(), e.call, &engine.PaymentInput{Amount: amount, Currency: currency,
		CustomerID: c.ID, PaymentMethodID: pm.ID})
	if err != nil {
		e.t.Fatalf("CreatePayment %d %s: %v", amount, currency, err)
	}
	return p
}

func mustContain(t *testing.T, page, body string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(body, w) {
			t.Errorf("%s lacks %q", page, w)
		}
	}
}

func TestAuthorizationLifetimeIsSettles(t *testing.T) {
	if console.AuthorizationLifetimeDefault != settle.AuthorizationLifetimeDefault {
		t.Fatalf("console.AuthorizationLifetimeDefault = %s, want settle's %s", console.AuthorizationLifetimeDefault,
			settle.AuthorizationLifetimeDefault)
	}
}

// TestStagedEmbedded: streamlined sales on the embedded stage are counted,
// summed by currency and given the deadline of the oldest authorization.
func TestStagedEmbedded(t *testing.T) {
	e := newEnv(t, streamlined(t, nil))
	body := e.get("/console/staged", http.StatusOK)
	mustContain(t, "the empty stage's page", body, `<dd id="depth">0</dd>`)
	e.setStreamlined()
	for _, s := range []struct {
		amount   int64
		currency string
	}{{1250, "eur"}, {777, "eur"}, {5000, "usd"}} {
		if p := e.payIn(s.amount, s.currency); p.StagedCapture() == nil {
			t.Fatalf("sale %s: no staged capture (path %s)", p.ID, p.Path)
		}
	}
	body = e.get("/console/staged", http.StatusOK)
	deadline := time.Now().UTC().Add(settle.AuthorizationLifetimeDefault).Format("2006-01-02")
	mustContain(t, "the staged captures' page", body, `<dd id="depth">3</dd>`, "embedded", `id="oldest"`,
		"<td>eur</td><td class=\"num\">20.27 EUR</td>", "<td>usd</td><td class=\"num\">50.00 USD</td>",
		`id="deadline"`, deadline, "(in 6d 23h)")
	for _, no := range []string{`id="partial"`, `id="missing"`, `id="amounts-na"`} {
		if strings.Contains(body, no) {
			t.Errorf("the staged captures' page has %s", no)
		}
	}
}

// TestStagedJetStream: on JetStream the page shows the stream's count
// and oldest, and says why it shows no amounts.
func TestStagedJetStream(t *testing.T) {
	nats := stagetest.StartNATS(t)
	js, err := jetstream.Open(context.Background(), jetstream.Config{URL: nats.URL, Stream: "T_CONSOLE", Subject: "t.console.captures"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { js.Close() })
	e := newEnv(t, streamlined(t, js))
	e.setStreamlined()
	e.payIn(1250, "eur")
	e.payIn(990, "eur")
	body := e.get("/console/staged", http.StatusOK)
	mustContain(t, "the JetStream stage's page", body, "NATS JetStream", `<dd id="depth">2 (in the stream`,
		`id="amounts-na"`, `id="deadline"`, "oldest record's staging time")
}

func TestStagedOff(t *testing.T) {
	e := newEnv(t)
	mustContain(t, "the staged captures' page", e.get("/console/staged", http.StatusOK), `id="stage-off"`)
}

// lostLookups is the simulator with every lookup lost in an outage, so
// that an unknown outcome stays unknown until the reconciler's turn.
type lostLookups struct{ *sim.Provider }

func (lostLookups) Lookup(context.Context, string) (*surgepay.ProviderResult, error) {
	return nil, &surgepay.ProviderError{Outcome: surgepay.Unknown, Op: sim.OpLookup, Err: sim.ErrOutage}
}

// TestUnknownOutcomes: a sale whose answer was lost is listed, oldest
// first, linking to its page, with the reconciler's interval; a page
// bounded by limit says more wait.
func TestUnknownOutcomes(t *testing.T) {
	e := newEnv(t, func(c *engine.Config, _ *console.Config) { c.Provider = lostLookups{sim.New(sim.DefaultConfig())} })
	body := e.get("/console/unknown", http.StatusOK)
	mustContain(t, "the empty page", body, `id="none"`, `<strong id="interval">1s</strong>`)
	c := e.customer("Lost <b>answer</b>", "lost@example.com")
	pm := e.card(c.ID, "4242424242424242", "123")
	var ids []string
	for range 2 {
		p, err := e.eng.CreatePayment(context.Background(), e.call, &engine.PaymentInput{Amount: sim.AmountUnknown,
			Currency: "eur", CustomerID: c.ID, PaymentMethodID: pm.ID})
		// The client's answer to an unknown outcome may be an error; the
		// payment is stored in processing either way.
		if err == nil && p.Status != surgepay.StatusProcessing {
			t.Fatalf("a sale of sim.AmountUnknown is %s; want its outcome unknown (processing)", p.Status)
		}
	}
	ps, err := e.eng.ListUnknownOutcomes(context.Background(), 10)
	if err != nil || len(ps) != 2 {
		t.Fatalf("ListUnknownOutcomes = %d payments, %v; want 2", len(ps), err)
	}
	for _, p := range ps {
		ids = append(ids, p.ID)
	}
	body = e.get("/console/unknown", http.StatusOK)
	mustContain(t, "the unknown outcomes' page", body, paymentPath(ps[0]), paymentPath(ps[1]), "<td>authorization</td>",
		"91.02 EUR", "<code>"+ps[0].Pending.IdempotencyKey+"</code>", "Shop &lt;b&gt;&amp;amp;&lt;/b&gt;")
	if strings.Index(body, ids[0]) > strings.Index(body, ids[1]) {
		t.Errorf("the oldest is not first")
	}
	body = e.get("/console/unknown?limit=1", http.StatusOK)
	mustContain(t, "a page of 1", body, paymentPath(ps[0]), `id="more"`)
	if strings.Contains(body, paymentPath(ps[1])) {
		t.Errorf("a page of 1 lists the second payment")
	}
	// The payment's page says the same.
	mustContain(t, "the payment's page", e.get(paymentPath(ps[0]), http.StatusOK), `id="pending"`)
}

// processorError is a processor's failed call, as a connector reports it.
type processorError struct{}

func (processorError) Error() string            { return "stripe: 402 card_declined" }
func (processorError) ProcessorStatus() int     { return 503 }
func (processorError) ProcessorCode() string    { return "api_error" }
func (processorError) ProcessorMessage() string { return "upstream <script>alert(1)</script> busy" }

// TestProcessorsPage: each processor of the router, with the state
// telemetry keeps for /metrics: healthy, failing with the processor's
// status, code and message (escaped), breaker open.
func TestProcessorsPage(t *testing.T) {
	m, err := (*telemetry.Telemetry)(nil).ProcessorMetrics([]string{route.DefaultName, "stripe_eu", "stripe_us"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	router := route.New(m)
	def := sim.New(sim.DefaultConfig())
	if err := router.Set([]route.Processor{{Name: route.DefaultName, Provider: def}, {Name: "stripe_eu", Provider: def},
		{Name: "stripe_us", Provider: def}}, func(string) route.Route { return route.Route{Processors: []string{route.DefaultName}} }); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(ec *engine.Config, cc *console.Config) {
		ec.Provider = router
		cc.ProcessorStates = m.States
	})
	m.Result("stripe_eu", "authorize", fmt.Errorf("authorize: %w", processorError{}))
	m.Result("stripe_us", "capture", errors.New("dial tcp: connection refused"))
	m.Breaker("stripe_us", "open")
	body := e.get("/console/processors", http.StatusOK)
	mustContain(t, "the processors' page", body, "<code>default</code>", `<span class="status healthy">healthy</span>`,
		"<code>stripe_eu</code>", `<span class="status failing">failing</span>`, "<td>503</td><td><code>api_error</code></td>",
		"upstream &lt;script&gt;alert(1)&lt;/script&gt; busy", "<code>stripe_us</code>",
		`<span class="status breaker_open">breaker open</span>`, "<td>capture</td><td>no answer</td><td><code>error</code></td>",
		`href="/metrics"`)
	for _, no := range []string{`id="no-states"`, `id="single"`, "<script>"} {
		if strings.Contains(body, no) {
			t.Errorf("the processors' page has %s", no)
		}
	}
}

func TestProcessorsPageWithoutStates(t *testing.T) {
	e := newEnv(t)
	mustContain(t, "the processors' page", e.get("/console/processors", http.StatusOK), `id="single"`, `id="no-states"`)
}

// TestFailingWebhookEndpoints: an endpoint that refuses every delivery
// is listed as failing, with its deliveries out of attempts linking to
// their payments; a healthy one is not listed.
func TestFailingWebhookEndpoints(t *testing.T) {
	e := newEnv(t)
	mustContain(t, "the page without endpoints", e.get("/console/webhooks", http.StatusOK), `id="none"`)
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusBadGateway)
	}))
	defer down.Close()
	ep, _, err := e.eng.CreateWebhookEndpoint(context.Background(), e.call,
		&engine.WebhookEndpointInput{URL: down.URL + "/hooks", Description: "orders <i>feed</i>"})
	if err != nil {
		t.Fatal(err)
	}
	var pays []*surgepay.Payment
	for i := range surgepay.WebhookFailingStreak {
		pays = append(pays, e.payIn(int64(100+i), "eur"))
	}
	d, err := webhook.New(webhook.Config{Store: e.store.(surgepay.WebhookStore), Vault: e.vault, AttemptsMax: 1,
		AllowPrivateNetworks: true, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for attempts := 0; attempts < surgepay.WebhookFailingStreak; {
		n, err := d.DeliverDue(context.Background())
		if err != nil || n == 0 {
			t.Fatalf("DeliverDue = %d, %v after %d attempts; want %d", n, err, attempts, surgepay.WebhookFailingStreak)
		}
		attempts += n
	}
	body := e.get("/console/webhooks?merchant="+e.merchant.ID, http.StatusOK)
	mustContain(t, "the failing endpoints' page", body, "<code>"+ep.ID+"</code>", ">failing</span>",
		fmt.Sprintf(`<td class="num">%d</td>`, surgepay.WebhookFailingStreak), "orders &lt;i&gt;feed&lt;/i&gt;", "never",
		paymentPath(pays[len(pays)-1]), "HTTP 502")
	mustContain(t, "all merchants", e.get("/console/webhooks", http.StatusOK), "<code>"+ep.ID+"</code>")
	// Another merchant's view does not list it.
	m2, err := e.eng.CreateMerchant(context.Background(), "Other")
	if err != nil {
		t.Fatal(err)
	}
	if body := e.get("/console/webhooks?merchant="+m2.ID, http.StatusOK); strings.Contains(body, ep.ID) {
		t.Errorf("another merchant's view lists the endpoint")
	}
}

// TestAuditTrailFilters: the audit trail filtered by merchant (the
// store), action and actor (the console), in pages that link on.
func TestAuditTrailFilters(t *testing.T) {
	e := newEnv(t)
	f := newFixture(t, e)
	for _, amount := range []string{"100", "200", "300"} {
		e.act(paymentPath(f.sale) + "/refund?amount=" + amount)
	}
	body := e.get("/console/audit", http.StatusOK)
	mustContain(t, "the audit trail", body, "<td>payment.refunded</td>", "console:token", "<td>merchant.created</td>", paymentPath(f.sale))
	tests := []struct {
		name, query string
		rows        int
		want        []string
		notWant     []string
	}{
		{"Action", "action=payment.refunded", 3, []string{"amount=300"}, []string{"<td>merchant.created</td>"}},
		{"ActorPrefix", "actor=CONSOLE:", 3, []string{"<td>payment.refunded</td>"}, []string{"<td>merchant.created</td>"}},
		{"Merchant", "merchant=" + f.other.MerchantID, 1, []string{"<td>merchant.created</td>"}, []string{"<td>payment.refunded</td>"}},
		{"MerchantAndAction", "merchant=" + e.merchant.ID + "&action=merchant.created", 1, nil, []string{"<td>payment.refunded</td>"}},
		{"Nothing", "action=api_key.revoked", 0, []string{`id="none"`}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body := e.get("/console/audit?"+tc.query, http.StatusOK)
			if got := strings.Count(body, "<tr><td>"); got != tc.rows {
				t.Errorf("?%s: %d rows, want %d", tc.query, got, tc.rows)
			}
			mustContain(t, "?"+tc.query, body, tc.want...)
			for _, no := range tc.notWant {
				if strings.Contains(body, no) {
					t.Errorf("?%s lists %q", tc.query, no)
				}
			}
		})
	}
	// Pages of 1 of the refunds, filtered, walk all three once, newest first.
	var seen []string
	next := "/console/audit?action=payment.refunded&limit=1"
	for next != "" {
		if len(seen) > 3 {
			t.Fatal("more than 3 pages of 1 for 3 refunds")
		}
		body := e.get(next, http.StatusOK)
		for _, a := range []string{"amount=100", "amount=200", "amount=300"} {
			if strings.Contains(body, a) {
				seen = append(seen, a)
			}
		}
		next = ""
		if i := strings.Index(body, `id="older" href="`); i >= 0 {
			rest := body[i+len(`id="older" href="`):]
			next = strings.ReplaceAll(rest[:strings.IndexByte(rest, '"')], "&amp;", "&")
		}
	}
	if strings.Join(seen, ",") != "amount=300,amount=200,amount=100" {
		t.Fatalf("pages listed %v, want the three refunds newest first", seen)
	}
}

// TestOpsBadInput: every malformed field of the operations views is a
// 400 page naming the field, never a 500; a card number is not shown back.
func TestOpsBadInput(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct{ path, field string }{
		{"/console/unknown?limit=0", "limit"},
		{"/console/unknown?limit=abc", "limit"},
		{"/console/unknown?limit=501", "limit"},
		{"/console/unknown?limit=1&limit=2", "limit"},
		{"/console/unknown?%zz", "query"},
		{"/console/webhooks?merchant=mer_nope", "merchant"},
		{"/console/webhooks?merchant=4242424242424242", "merchant"},
		{"/console/webhooks?merchant=a%00b", "merchant"},
		{"/console/audit?action=payment.stolen", "action"},
		{"/console/audit?after=pay_1", "after"},
		{"/console/audit?limit=101", "limit"},
		{"/console/audit?merchant=mer_nope", "merchant"},
		{"/console/audit?actor=" + strings.Repeat("a", 300), "actor"},
		{"/console/audit?actor=a%E2%80%AEb", "actor"},
		{"/console/audit?actor=4242%204242%204242%204242", "actor"},
		{"/console/audit?action=a&action=b", "action"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			body := e.get(tc.path, http.StatusBadRequest)
			if !strings.Contains(body, "Field <code>"+tc.field+"</code>") {
				t.Fatalf("%s: the 400 page does not name %s:\n%s", tc.path, tc.field, body)
			}
			if surgepay.TextHasCardNumber(body) {
				t.Fatalf("%s: the page shows a card number back", tc.path)
			}
		})
	}
}

// TestOpsPagesNavigationAndNoCardData: every page links every view and
// the live dashboard (not a copy of it), marks its own, and shows no
// card number or CVC.
func TestOpsPagesNavigationAndNoCardData(t *testing.T) {
	e := newEnv(t)
	f := newFixture(t, e)
	e.act(paymentPath(f.sale) + "/refund?amount=100")
	for _, p := range append([]string{"/console/", paymentPath(f.sale)}, opsPages...) {
		body := e.get(p, http.StatusOK)
		for _, link := range append([]string{"/dashboard"}, opsPages...) {
			if !strings.Contains(body, `href="`+link+`"`) {
				t.Errorf("%s does not link %s", p, link)
			}
		}
		if p != paymentPath(f.sale) && !strings.Contains(body, `href="`+p+`" aria-current="page"`) {
			t.Errorf("%s does not mark itself in the navigation", p)
		}
		if surgepay.TextHasCardNumber(body) || strings.Contains(body, "4242424242424242") || strings.Contains(body, ">987<") {
			t.Errorf("%s shows card data", p)
		}
		if strings.Contains(body, "<b>&amp;</b>") || strings.Contains(strings.ToLower(body), "<script") {
			t.Errorf("%s has unescaped text or a script", p)
		}
	}
}

// clock is a settable engine clock.
type clock struct{ t atomic.Pointer[time.Time] }

func (c *clock) now() time.Time  { return *c.t.Load() }
func (c *clock) set(t time.Time) { c.t.Store(&t) }

// TestStagedDeadlineNearAndPast: a staged capture whose authorization is
// within a day of its deadline is marked, and one past it says so.
func TestStagedDeadlineNearAndPast(t *testing.T) {
	clk := &clock{}
	start := time.Now().UTC()
	clk.set(start.Add(-settle.AuthorizationLifetimeDefault + 12*time.Hour))
	e := newEnv(t, streamlined(t, nil), func(c *engine.Config, _ *console.Config) { c.Now = clk.now })
	e.setStreamlined()
	e.payIn(1250, "eur")
	clk.set(start)
	mustContain(t, "a deadline in 12 hours", e.get("/console/staged", http.StatusOK), `<span class="warn">`, "(in 12h)")
	clk.set(start.Add(24 * time.Hour))
	mustContain(t, "a deadline past", e.get("/console/staged", http.StatusOK), `<span class="err">`, "(12h ago): passed")
}

// TestAuditTrailBounded: a filter that matches nothing in more than
// AuditExamineMax rows stops there, says so, and links on.
func TestAuditTrailBounded(t *testing.T) {
	e := newEnv(t)
	for i := range console.AuditExamineMax {
		if _, err := e.eng.CreateMerchant(context.Background(), fmt.Sprintf("M%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	body := e.get("/console/audit?action=payment.voided", http.StatusOK)
	mustContain(t, "a bounded page", body, `id="bounded"`, `id="none"`, `id="older"`)
	i := strings.Index(body, `id="older" href="`)
	next := body[i+len(`id="older" href="`):]
	next = strings.ReplaceAll(next[:strings.IndexByte(next, '"')], "&amp;", "&")
	body = e.get(next, http.StatusOK)
	if strings.Contains(body, `id="bounded"`) || strings.Contains(body, `id="older"`) {
		t.Fatalf("the second page (the last row left) is bounded or links on")
	}
}
