package route_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/cache"
	"github.com/surgepay/surgepay/cache/redistest"
	"github.com/surgepay/surgepay/provider/providertest"
	"github.com/surgepay/surgepay/provider/route"
	"github.com/surgepay/surgepay/provider/sim"
	"github.com/surgepay/surgepay/provider/stripe"
	"github.com/surgepay/surgepay/provider/stripe/stripedouble"
	"github.com/surgepay/surgepay/ratelimit"
)

func card(n string) surgepay.ProviderCard {
	return surgepay.ProviderCard{Number: surgepay.PAN(n), ExpMonth: 12, ExpYear: 2034, CVC: "123"}
}

func authReq(key string) *surgepay.AuthorizeRequest {
	return &surgepay.AuthorizeRequest{IdempotencyKey: key, MerchantID: "mer_1", PaymentID: "pay_" + key,
		Amount: 1000, Currency: "usd", Card: card("4242424242424242")}
}

func fixed(names ...string) func(string) route.Route {
	return func(string) route.Route { return route.Route{Processors: names} }
}

// refusing is a Stripe connector pointed at a closed loopback port: every
// call is refused before anything is sent (not performed).
func refusing(t *testing.T) surgepay.Provider {
	p, err := stripe.New(stripe.Config{SecretKey: "sk_test_x", BaseURL: "http://127.0.0.1:1", Name: "down"})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestConformance: a router over the simulator is a conformant provider
// (references carry the processor's name and go back to it).
func TestConformance(t *testing.T) {
	r := route.New(nil)
	if err := r.Set([]route.Processor{{Name: route.DefaultName, Provider: sim.New(sim.DefaultConfig())},
		{Name: "sim_b", Provider: sim.New(sim.DefaultConfig())}}, fixed("sim_b")); err != nil {
		t.Fatal(err)
	}
	providertest.Run(t, func(*testing.T) surgepay.Provider { return r })
}

func TestFailoverWhenRefused(t *testing.T) {
	b := sim.New(sim.DefaultConfig())
	r := route.New(nil)
	if err := r.Set([]route.Processor{{Name: route.DefaultName, Provider: sim.New(sim.DefaultConfig())},
		{Name: "down", Provider: refusing(t)}, {Name: "b", Provider: b}}, fixed("down", "b")); err != nil {
		t.Fatal(err)
	}
	res, err := r.Authorize(t.Context(), authReq("k1"))
	if err != nil || !res.Approved || !strings.HasPrefix(res.Reference, "b:") {
		t.Fatalf("got %+v, %v; want approved at b", res, err)
	}
	// The capture goes back to b, named by the reference.
	c, err := r.Capture(t.Context(), &surgepay.CaptureRequest{IdempotencyKey: "k1/cap", AuthorizationRef: res.Reference, Amount: 1000, Currency: "usd"})
	if err != nil || !c.Approved {
		t.Fatalf("capture: %+v, %v", c, err)
	}
	if fx := b.Effects("pay_k1"); fx.Captures != 1 {
		t.Fatalf("b's effects %+v, want the capture there", fx)
	}
}

// TestNoFailoverWhenUnknown: a processor that may have charged is never
// followed by another.
func TestNoFailoverWhenUnknown(t *testing.T) {
	proxy := stripedouble.NewProxy(t, stripedouble.StartLocalstripe(t))
	proxy.Faults = func(r *http.Request) stripedouble.Fault {
		if r.Method == "POST" && r.URL.Path == "/v1/payment_intents" {
			return stripedouble.DropAfter
		}
		return stripedouble.Pass
	}
	a, err := stripe.New(stripe.Config{SecretKey: "sk_test_x", BaseURL: proxy.URL, RetriesMax: -1, Name: "a"})
	if err != nil {
		t.Fatal(err)
	}
	b := sim.New(sim.DefaultConfig())
	r := route.New(nil)
	if err := r.Set([]route.Processor{{Name: route.DefaultName, Provider: b}, {Name: "a", Provider: a}}, fixed("a", route.DefaultName)); err != nil {
		t.Fatal(err)
	}
	_, err = r.Authorize(t.Context(), authReq("k-unknown"))
	if !surgepay.IsUnknown(err) || surgepay.ProcessorOf(err) != "a" {
		t.Fatalf("got %v (processor %q), want unknown at a", err, surgepay.ProcessorOf(err))
	}
	if fx := b.Effects("pay_k-unknown"); fx.Authorizations != 0 {
		t.Fatalf("the default processor authorized after an unknown outcome: %+v", fx)
	}
	// The lookup goes to a, which finds the authorization it made.
	res, err := r.LookupOperation(t.Context(), &surgepay.LookupQuery{Key: "k-unknown", Operation: surgepay.TxAuthorization,
		Processor: "a", Attempted: time.Now().Add(-time.Hour)})
	if err != nil || !res.Approved || !strings.HasPrefix(res.Reference, "a:pi_") {
		t.Fatalf("lookup: %+v, %v; want approved a:pi_…", res, err)
	}
}

// TestBudget: past its call budget a processor is not called; the payment
// goes to the next one, or, with none, is refused with a Retry-After.
func TestBudget(t *testing.T) {
	a, b := sim.New(sim.DefaultConfig()), sim.New(sim.DefaultConfig())
	var refused atomic.Int64
	obs := &observer{refused: &refused}
	r := route.New(obs)
	procs := []route.Processor{{Name: route.DefaultName, Provider: b},
		{Name: "a", Provider: a, CallsPerSecond: 0.001, Burst: 2, BudgetWait: time.Millisecond}}
	if err := r.Set(procs, fixed("a")); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if res, err := r.Authorize(t.Context(), authReq(fmt.Sprint("b", i))); err != nil || !strings.HasPrefix(res.Reference, "a:") {
			t.Fatalf("call %d within the budget: %+v, %v", i, res, err)
		}
	}
	_, err := r.Authorize(t.Context(), authReq("b2"))
	var pe *surgepay.ProviderError
	if !surgepay.IsNotPerformed(err) || !errors.As(err, &pe) || pe.RetryAfter < time.Second {
		t.Fatalf("past the budget: got %v, want not performed with a Retry-After", err)
	}
	if fx := a.Effects("pay_b2"); fx.Authorizations != 0 || refused.Load() != 1 {
		t.Fatalf("a was called past its budget (%+v), refusals %d", fx, refused.Load())
	}
	// With a second processor in the route, the payment goes there.
	if err := r.Set(procs, fixed("a", route.DefaultName)); err != nil {
		t.Fatal(err)
	}
	res, err := r.Authorize(t.Context(), authReq("b3"))
	if err != nil || !res.Approved || strings.Contains(res.Reference, ":") {
		t.Fatalf("failover past the budget: %+v, %v; want approved at the default", res, err)
	}
	// A lookup the budget refuses is unknown, never "not performed".
	_, err = r.LookupOperation(t.Context(), &surgepay.LookupQuery{Key: "b0", Operation: surgepay.TxAuthorization, Processor: "a"})
	if !surgepay.IsUnknown(err) {
		t.Fatalf("lookup refused by the budget: got %v, want unknown", err)
	}
}

// TestBudgetCountsOperations: an authorization that costs the processor
// two API operations (Stripe with card data) spends two of its budget.
func TestBudgetCountsOperations(t *testing.T) {
	r := route.New(nil)
	two := func(*surgepay.AuthorizeRequest) int { return 2 }
	if err := r.Set([]route.Processor{{Name: route.DefaultName, Provider: sim.New(sim.DefaultConfig())},
		{Name: "a", Provider: sim.New(sim.DefaultConfig()), CallsPerSecond: 0.001, Burst: 4, BudgetWait: time.Millisecond,
			AuthorizeCalls: two}}, fixed("a")); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		_, err := r.Authorize(t.Context(), authReq(fmt.Sprint("c", i)))
		if want := i < 2; (err == nil) != want {
			t.Fatalf("authorization %d with a budget of 4 operations at 2 each: got %v, want allowed %v", i, err, want)
		}
	}
}

// TestBreakerOpensAndFailsOver: after BreakerFailuresMax refused calls
// the breaker opens and the processor is no longer called at all.
func TestBreakerOpensAndFailsOver(t *testing.T) {
	var calls atomic.Int64
	down := &counting{Provider: refusing(t), calls: &calls}
	b := sim.New(sim.DefaultConfig())
	var opened atomic.Bool
	r := route.New(&observer{opened: &opened})
	if err := r.Set([]route.Processor{{Name: route.DefaultName, Provider: b}, {Name: "down", Provider: down}},
		fixed("down", route.DefaultName)); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		res, err := r.Authorize(t.Context(), authReq(fmt.Sprint("br", i)))
		if err != nil || !res.Approved {
			t.Fatalf("payment %d: %+v, %v", i, res, err)
		}
	}
	if n := calls.Load(); n != route.BreakerFailuresMax || !opened.Load() {
		t.Fatalf("calls to the refusing processor: got %d (breaker opened %v), want %d then open", n, opened.Load(), route.BreakerFailuresMax)
	}
}

// TestFailoverFaultsNeverChargeTwice sends authorizations to a Stripe
// double behind a fault-injecting proxy (drops, 500s, timeouts, 429s,
// each before or after the request arrives), failing over to the
// simulator, and resolves each unknown outcome at the processor named in
// the error. Afterwards no key holds money at both, nor twice at one.
func TestFailoverFaultsNeverChargeTwice(t *testing.T) {
	ls := stripedouble.StartLocalstripe(t)
	proxy := stripedouble.NewProxy(t, ls)
	proxy.Slow = 300 * time.Millisecond
	var injected atomic.Int64
	faults := []stripedouble.Fault{stripedouble.DropBefore, stripedouble.DropAfter, stripedouble.Error500Before,
		stripedouble.Error500After, stripedouble.SlowAfter, stripedouble.RateLimited}
	proxy.Faults = func(r *http.Request) stripedouble.Fault {
		if r.Method != "POST" || rand.IntN(2) == 0 {
			return stripedouble.Pass
		}
		injected.Add(1)
		return faults[rand.IntN(len(faults))]
	}
	// SearchLag covers localstripe still executing a request whose client
	// gave up: a lookup before then must stay unknown (with 1 ns it said
	// "not performed" and the retry failed over: charged twice).
	a, err := stripe.New(stripe.Config{SecretKey: "sk_test_x", BaseURL: proxy.URL, CallTimeout: 150 * time.Millisecond,
		RetriesMax: 1, SearchLag: 2 * time.Second, Name: "a"})
	if err != nil {
		t.Fatal(err)
	}
	b := sim.New(sim.DefaultConfig())
	r := route.New(nil)
	if err := r.Set([]route.Processor{{Name: route.DefaultName, Provider: b}, {Name: "a", Provider: a}}, fixed("a", route.DefaultName)); err != nil {
		t.Fatal(err)
	}
	results := map[string]*surgepay.ProviderResult{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	work := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range work {
				key := fmt.Sprint("ff/", i)
				res := resolve(t, r, key)
				mu.Lock()
				results[key] = res
				mu.Unlock()
			}
		})
	}
	// Bounded in count: while a's breaker is open no fault is injected.
	for i := 0; injected.Load() < 1000 && i < 5000; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	live := map[string]int{}
	for _, pi := range liveKeys(t, ls) {
		live[pi]++
	}
	for key, res := range results {
		atB, _ := b.Lookup(t.Context(), key)
		bHolds := atB != nil && atB.Approved
		switch {
		case live[key] > 1:
			t.Errorf("%s: %d live payment intents at a", key, live[key])
		case live[key] == 1 && bHolds:
			v, _ := trace.Load(key)
			t.Errorf("%s: charged at a and at the simulator: %q", key, *v.(*[]string))
		case res != nil && res.Approved && strings.HasPrefix(res.Reference, "a:") && live[key] != 1:
			t.Errorf("%s: answered approved at a, a holds %d", key, live[key])
		case res != nil && res.Approved && !strings.HasPrefix(res.Reference, "a:") && !bHolds:
			t.Errorf("%s: answered approved at the simulator, which holds nothing", key)
		}
	}
	t.Logf("%d faults over %d authorizations", injected.Load(), len(results))
}

// resolve authorizes key until it has a final result, as the engine, its
// reconciler and a retrying client do together.
func resolve(t *testing.T, r *route.Router, key string) *surgepay.ProviderResult {
	for try := 0; try < 50; try++ {
		sent := time.Now()
		res, err := r.Authorize(t.Context(), authReq(key))
		note(key, fmt.Sprintf("authorize %v %v", res, err))
		for look := 0; surgepay.IsUnknown(err) && look < 100; look++ {
			if look > 0 {
				time.Sleep(50 * time.Millisecond)
			}
			res, err = r.LookupOperation(t.Context(), &surgepay.LookupQuery{Key: key, Operation: surgepay.TxAuthorization,
				Processor: surgepay.ProcessorOf(err), Attempted: sent})
			note(key, fmt.Sprintf("lookup %v %v", res, err))
		}
		if err == nil {
			return res
		}
		if surgepay.IsUnknown(err) {
			t.Errorf("%s: unknown after lookups: %v", key, err)
			return nil
		}
	}
	return nil
}

func liveKeys(t *testing.T, base string) []string {
	t.Helper()
	var out []string
	after := ""
	for {
		path := "/v1/payment_intents?limit=100"
		if after != "" {
			path += "&starting_after=" + after
		}
		list := struct {
			Data []struct {
				ID       string            `json:"id"`
				Status   string            `json:"status"`
				Metadata map[string]string `json:"metadata"`
			} `json:"data"`
			HasMore bool `json:"has_more"`
		}{}
		stripedouble.GetJSON(t, base, path, &list)
		for _, pi := range list.Data {
			after = pi.ID
			if pi.Status == "requires_capture" || pi.Status == "succeeded" {
				out = append(out, pi.Metadata[stripe.MetadataKey])
			}
		}
		if !list.HasMore || len(list.Data) == 0 {
			return out
		}
	}
}

type counting struct {
	surgepay.Provider
	calls *atomic.Int64
}

func (c *counting) Authorize(ctx context.Context, r *surgepay.AuthorizeRequest) (*surgepay.ProviderResult, error) {
	c.calls.Add(1)
	return c.Provider.Authorize(ctx, r)
}

type observer struct {
	refused *atomic.Int64
	opened  *atomic.Bool
}

func (o *observer) Call(string, string, string, time.Duration) {}
func (o *observer) Failover(string, string)                    {}
func (o *observer) Refused(string, string) {
	if o.refused != nil {
		o.refused.Add(1)
	}
}
func (o *observer) Breaker(_ string, state string) {
	if o.opened != nil && state == "open" {
		o.opened.Store(true)
	}
}

// trace records what happened to each key, to explain a failure.
var trace sync.Map

func note(key, what string) {
	v, _ := trace.LoadOrStore(key, &[]string{})
	l := v.(*[]string)
	*l = append(*l, what)
}

// TestRemovedProcessorNotDefault: once a processor leaves the
// configuration, its payments' captures are refused (not performed) and
// their lookups stay unknown: never sent to the default processor, which
// would answer "no such authorization" about money the other one holds.
func TestRemovedProcessorNotDefault(t *testing.T) {
	def, a := sim.New(sim.DefaultConfig()), sim.New(sim.DefaultConfig())
	r := route.New(nil)
	if err := r.Set([]route.Processor{{Name: route.DefaultName, Provider: def}, {Name: "a", Provider: a}}, fixed("a")); err != nil {
		t.Fatal(err)
	}
	res, err := r.Authorize(t.Context(), authReq("rm1"))
	if err != nil || !strings.HasPrefix(res.Reference, "a:") {
		t.Fatalf("authorize: %+v %v", res, err)
	}
	if err := r.Set([]route.Processor{{Name: route.DefaultName, Provider: def}}, fixed(route.DefaultName)); err != nil {
		t.Fatal(err)
	}
	_, err = r.Capture(t.Context(), &surgepay.CaptureRequest{IdempotencyKey: "rm1/cap", AuthorizationRef: res.Reference, Amount: 1000, Currency: "usd"})
	if !surgepay.IsNotPerformed(err) {
		t.Fatalf("capture at a removed processor: got %v, want not performed", err)
	}
	_, err = r.LookupOperation(t.Context(), &surgepay.LookupQuery{Key: "rm1/cap", Operation: surgepay.TxCapture, AuthorizationRef: res.Reference})
	if !surgepay.IsUnknown(err) {
		t.Fatalf("lookup at a removed processor: got %v, want unknown", err)
	}
	if fx := def.Effects("pay_rm1"); fx.Captures != 0 {
		t.Fatalf("the default processor was asked: %+v", fx)
	}
}

// TestBudgetSharedAcrossNodes: three routers (three nodes) on one Redis
// spend one processor budget between them: its burst in all, not three
// times it. With Redis gone, each node falls back to its own bucket of
// the whole budget (the stated fallback) rather than refusing every call.
func TestBudgetSharedAcrossNodes(t *testing.T) {
	srv := redistest.Start(t)
	cc := cache.DefaultConfig()
	cc.Redis.GlobalAddrs = []string{srv.URL()}
	opt, err := cache.ClientOption(cache.ScopeGlobal, cc)
	if err != nil {
		t.Fatal(err)
	}
	const burst = 6
	a := sim.New(sim.DefaultConfig())
	nodes := make([]*route.Router, 3)
	for i := range nodes {
		// A generous timeout: a stalled call on a shared machine would be
		// a fallback to the node's own bucket.
		rl, err := ratelimit.New(ratelimit.Config{Client: opt, Namespace: "test:", Timeout: 5 * time.Second,
			BreakerOpenDuration: 20 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(rl.Close)
		nodes[i] = route.New(nil)
		if err := nodes[i].Set([]route.Processor{{Name: route.DefaultName, Provider: sim.New(sim.DefaultConfig())},
			{Name: "a", Provider: a, CallsPerSecond: 0.001, Burst: burst, BudgetWait: time.Millisecond}}, fixed("a")); err != nil {
			t.Fatal(err)
		}
		nodes[i].SetSharedBudget(rl)
	}
	admitted := 0
	for i := range 4 * burst {
		if _, err := nodes[i%len(nodes)].Authorize(t.Context(), authReq(fmt.Sprint("sh", i))); err == nil {
			admitted++
		} else if !surgepay.IsNotPerformed(err) {
			t.Fatalf("call %d: %v, want allowed or not performed", i, err)
		}
	}
	if admitted != burst {
		t.Fatalf("%d calls admitted across 3 nodes with a shared burst of %d, want %d", admitted, burst, burst)
	}

	srv.Kill()
	for i, n := range nodes {
		if _, err := n.Authorize(t.Context(), authReq(fmt.Sprint("down", i))); err != nil {
			t.Errorf("node %d with Redis gone: %v, want its own bucket to admit the call", i, err)
		}
	}
}

// TestRequiresActionIsFinal: the router passes ReturnURL to the processor
// it picks and RequiresAction and ActionURL back, never fails over after
// it (the first processor holds the challenge), serves the challenge's
// page from that processor, and finds the authorization there once the
// cardholder has authenticated.
func TestRequiresActionIsFinal(t *testing.T) {
	a, b := sim.New(sim.DefaultConfig()), sim.New(sim.DefaultConfig())
	r := route.New(nil)
	if err := r.Set([]route.Processor{{Name: route.DefaultName, Provider: sim.New(sim.DefaultConfig())},
		{Name: "a", Provider: a}, {Name: "b", Provider: b}}, fixed("a", "b")); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(surgepay.PagesPrefix, r.Pages())
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	ret := srv.URL + "/return?payment=pay_k"

	req := authReq("k")
	req.Card, req.ReturnURL, req.Capture = card(sim.Card3DSChallenge), ret, true
	res, err := r.Authorize(t.Context(), req)
	if err != nil || !res.RequiresAction || !strings.HasPrefix(res.ActionURL, srv.URL+surgepay.PagesPrefix+"3ds/") || res.Approved {
		t.Fatalf("authorize: got %+v, %v; want RequiresAction with an action URL on %s", res, err, srv.URL)
	}
	again, err := r.Authorize(t.Context(), req)
	if err != nil || !again.RequiresAction || again.ActionURL != res.ActionURL {
		t.Fatalf("replay: got %+v, %v; want the same RequiresAction", again, err)
	}
	if tb := b.TotalEffects(); tb.Authorizations+tb.AuthorizationsDeclined+tb.Records != 0 {
		t.Fatalf("b's totals %+v: want nothing, no failover after RequiresAction", tb)
	}
	q := &surgepay.LookupQuery{Key: "k", Operation: surgepay.TxAuthorization, MerchantID: "mer_1"}
	if got, err := r.LookupOperation(t.Context(), q); err != nil || !got.RequiresAction || got.ActionURL != res.ActionURL {
		t.Fatalf("lookup while pending: got %+v, %v; want RequiresAction", got, err)
	}

	page, err := http.Get(res.ActionURL)
	if err != nil {
		t.Fatal(err)
	}
	page.Body.Close()
	if page.StatusCode != http.StatusOK {
		t.Fatalf("GET the challenge through the router: got %d", page.StatusCode)
	}
	noRedirects := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	post, err := noRedirects.Post(res.ActionURL, "application/x-www-form-urlencoded", strings.NewReader("outcome=authenticate"))
	if err != nil {
		t.Fatal(err)
	}
	post.Body.Close()
	if post.StatusCode != http.StatusSeeOther || post.Header.Get("Location") != ret {
		t.Fatalf("POST through the router: got %d to %q, want 303 to %q", post.StatusCode, post.Header.Get("Location"), ret)
	}
	got, err := r.LookupOperation(t.Context(), q)
	if err != nil || !got.Approved || !strings.HasPrefix(got.Reference, "a:") {
		t.Fatalf("lookup after authenticating: got %+v, %v; want approved at a", got, err)
	}
	if fx := a.Effects("pay_k"); fx.Authorizations != 1 || fx.Captures != 1 {
		t.Fatalf("a's effects %+v: want the sale", fx)
	}

	missing, err := http.Get(srv.URL + surgepay.PagesPrefix + "3ds/" + strings.Repeat("a", 32))
	if err != nil {
		t.Fatal(err)
	}
	missing.Body.Close()
	css, err := http.Get(srv.URL + surgepay.PagesPrefix + "3ds.css")
	if err != nil {
		t.Fatal(err)
	}
	css.Body.Close()
	if missing.StatusCode != http.StatusNotFound || css.StatusCode != http.StatusOK {
		t.Fatalf("unknown challenge: got %d, want 404; 3ds.css: got %d, want 200", missing.StatusCode, css.StatusCode)
	}
}

// TestRequiresActionAfterRefusal: a processor that refuses before the
// call is failed over, and the next one's RequiresAction is the answer.
func TestRequiresActionAfterRefusal(t *testing.T) {
	b := sim.New(sim.DefaultConfig())
	r := route.New(nil)
	if err := r.Set([]route.Processor{{Name: route.DefaultName, Provider: sim.New(sim.DefaultConfig())},
		{Name: "down", Provider: refusing(t)}, {Name: "b", Provider: b}}, fixed("down", "b")); err != nil {
		t.Fatal(err)
	}
	req := authReq("k")
	req.Card, req.ReturnURL = card(sim.Card3DSChallenge), "https://shop.example/return"
	res, err := r.Authorize(t.Context(), req)
	if err != nil || !res.RequiresAction || !strings.HasPrefix(res.ActionURL, "https://shop.example/simulator/v1/3ds/") {
		t.Fatalf("got %+v, %v; want RequiresAction from b", res, err)
	}
	if !b.HasChallenge(res.ActionURL[strings.LastIndex(res.ActionURL, "/")+1:]) {
		t.Fatal("b holds no challenge")
	}
}

// TestPagesWithoutPageServer: a router over no simulator answers 404.
func TestPagesWithoutPageServer(t *testing.T) {
	r := route.New(nil)
	if err := r.Set([]route.Processor{{Name: route.DefaultName, Provider: refusing(t)}}, fixed()); err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	r.Pages().ServeHTTP(w, httptest.NewRequest(http.MethodGet, surgepay.PagesPrefix+"3ds.css", nil))
	if w.Code != http.StatusNotFound {
		t.Fatalf("got %d, want 404", w.Code)
	}
}

// liveSim is a simulator that says it moves real money, as a live Stripe
// key does.
type liveSim struct{ *sim.Provider }

func (liveSim) Mode() string { return "live" }

// TestModeLiveIfAnyProcessorIs: the router is live (its merchants'
// publishable keys pk_live_) as soon as one of its processors is.
func TestModeLiveIfAnyProcessorIs(t *testing.T) {
	r := route.New(nil)
	procs := []route.Processor{{Name: route.DefaultName, Provider: sim.New(sim.DefaultConfig())},
		{Name: "sim_b", Provider: sim.New(sim.DefaultConfig())}}
	if err := r.Set(procs, fixed("sim_b")); err != nil {
		t.Fatal(err)
	}
	if m := r.Mode(); m != "test" {
		t.Fatalf("simulators only: mode %q, want test", m)
	}
	procs[1].Provider = liveSim{sim.New(sim.DefaultConfig())}
	if err := r.Set(procs, fixed("sim_b")); err != nil {
		t.Fatal(err)
	}
	if m := surgepay.ModeOf(r); m != "live" {
		t.Fatalf("with a live processor: mode %q, want live", m)
	}
}

// TestLookupByOwnReference: an authorization awaiting 3-D Secure at a
// named processor is looked up there by its own reference, which the
// router gave qualified ("eu:pi_…") and passes on bare. Stripe's search
// lags its writes (an hour here): by key alone the lookup finds nothing
// yet and the outcome stays unknown.
func TestLookupByOwnReference(t *testing.T) {
	proxy := stripedouble.NewProxy(t, stripedouble.StartLocalstripe(t))
	proxy.SearchLag = time.Hour
	sp, err := stripe.New(stripe.Config{SecretKey: "sk_test_surgepay", BaseURL: proxy.URL, SearchLag: time.Hour, Name: "eu"})
	if err != nil {
		t.Fatal(err)
	}
	r := route.New(nil)
	if err := r.Set([]route.Processor{{Name: route.DefaultName, Provider: sim.New(sim.DefaultConfig())},
		{Name: "eu", Provider: sp}}, fixed("eu")); err != nil {
		t.Fatal(err)
	}
	req := authReq("k3ds")
	req.Card, req.ReturnURL, req.Capture = card("4000002500003155"), "https://shop.example/back", true
	res, err := r.Authorize(t.Context(), req)
	if err != nil || !res.RequiresAction || !strings.HasPrefix(res.Reference, "eu:pi_") {
		t.Fatalf("authorize with Stripe's 3-D Secure card: %+v, %v; want RequiresAction with eu:pi_…", res, err)
	}
	q := surgepay.LookupQuery{Key: "k3ds", Operation: surgepay.TxAuthorization, MerchantID: "mer_1", Processor: "eu",
		Amount: req.Amount, Currency: req.Currency, Attempted: time.Now()}
	for _, tc := range []struct {
		ref   string
		found bool
	}{{res.Reference, true}, {"", false}, {"other:" + strings.TrimPrefix(res.Reference, "eu:"), false}} {
		q.Reference = tc.ref
		got, err := r.LookupOperation(t.Context(), &q)
		switch {
		case tc.found && (err != nil || !got.RequiresAction || got.Reference != res.Reference):
			t.Errorf("lookup by %q: %+v, %v; want RequiresAction at %s", tc.ref, got, err, res.Reference)
		case !tc.found && !surgepay.IsUnknown(err):
			t.Errorf("lookup by %q: %+v, %v; want unknown (search has not caught up)", tc.ref, got, err)
		}
	}
}
