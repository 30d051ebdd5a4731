package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/engine"
	"github.com/surgepay/surgepay/provider/route"
	"github.com/surgepay/surgepay/provider/sim"
	"github.com/surgepay/surgepay/provider/stripe"
	"github.com/surgepay/surgepay/provider/stripe/stripedouble"
)

// threeDSCardStripe is Stripe's test card whose issuer always asks for
// 3-D Secure.
const threeDSCardStripe = "4000002500003155"

// TestCheckoutThreeDSecureAbandonedAtStripe: Stripe keeps the
// PaymentIntent of a shopper who never authenticates in requires_action
// for as long as nobody cancels it. The reconciler looks it up from
// ActionReconcileAfter and cancels it at Stripe after ActionAbandonAfter;
// a shopper who authenticated but never came back is found succeeded.
// Then surgepay's books and Stripe's agree, payment by payment, and no
// reconcile pass has anything left to do.
func TestCheckoutThreeDSecureAbandonedAtStripe(t *testing.T) {
	c, proxy, advance := stripeCheckout(t, nil)
	ctx := context.Background()
	gone, _, goneIntent := c.challenged(t, proxy)
	back, page, backIntent := c.challenged(t, proxy)
	// The second shopper authenticates at Stripe's page and closes the
	// tab before the return reaches surgepay.
	answerStripePage(t, noRedirects(c.env), page, "authenticate")

	if n, err := c.eng.ReconcileOnce(ctx); err != nil || n != 0 {
		t.Fatalf("reconciled authentications under way: %d %v", n, err)
	}
	advance(engine.ActionReconcileAfter + time.Second)
	if n, err := c.eng.ReconcileOnce(ctx); err != nil || n != 1 {
		t.Fatalf("after %s: reconciled %d, %v; want the authenticated one alone", engine.ActionReconcileAfter, n, err)
	}
	if got := c.must(200, c.keyA, "GET", "/v1/payments/"+back, ""); got.str("status") != "succeeded" {
		t.Fatalf("authenticated without coming back: %s", got.Raw)
	}
	if got := c.must(200, c.keyA, "GET", "/v1/payments/"+gone, ""); got.str("status") != "requires_action" {
		t.Fatalf("abandoned before %s: %s; want it left in requires_action", engine.ActionAbandonAfter, got.Raw)
	}
	if s := intentStatus(t, proxy.URL, goneIntent); s != "requires_action" {
		t.Fatalf("before %s the PaymentIntent is %s, want requires_action", engine.ActionAbandonAfter, s)
	}

	advance(engine.ActionAbandonAfter - engine.ActionReconcileAfter)
	if n, err := c.eng.ReconcileOnce(ctx); err != nil || n != 1 {
		t.Fatalf("after %s: reconciled %d, %v; want the abandoned one", engine.ActionAbandonAfter, n, err)
	}
	got := c.must(200, c.keyA, "GET", "/v1/payments/"+gone, "")
	if got.str("status") != "requires_payment_method" || got.str("decline_code") != surgepay.DeclineAuthenticationFailed ||
		!strings.Contains(got.str("failure_message"), "cancelled at the processor") {
		t.Fatalf("abandoned: %s; want requires_payment_method, authentication_failed", got.Raw)
	}
	if n, err := c.eng.ReconcileOnce(ctx); err != nil || n != 0 {
		t.Fatalf("a pass after both ended reconciled %d, %v", n, err)
	}

	// The books agree with Stripe's.
	for _, tc := range []struct{ id, intent, status, want string }{
		{gone, goneIntent, "requires_payment_method", "canceled"},
		{back, backIntent, "succeeded", "succeeded"},
	} {
		if s := intentStatus(t, proxy.URL, tc.intent); s != tc.want {
			t.Errorf("payment %s is %s at surgepay, its PaymentIntent %s at Stripe; want %s", tc.id, tc.status, s, tc.want)
		}
	}
	// A shopper coming back late finds the payment as it is, and may pay
	// again with another card, under the fresh client secret the
	// merchant's server reads (the first one has expired).
	fresh := c.must(200, c.keyA, "GET", "/v1/payments/"+gone, "").str("client_secret")
	if r := c.confirm(gone, fresh, c.card(t, "4242424242424242")); r.Status != 200 || r.str("status") != "succeeded" {
		t.Fatalf("paying again after the abandoned authentication: %d %s", r.Status, r.Raw)
	}
}

// TestCheckoutThreeDSecureAbandonedTwice: a shopper abandons 3-D Secure,
// comes back after the reconciler cancelled it, pays again with a card
// that asks for 3-D Secure too, and abandons that one as well. Each
// cancel is its own request to Stripe: a key shared by both would be
// refused as reused for another PaymentIntent (Stripe's idempotency
// layer, which the proxy keeps), and the second would stay pending for
// good.
func TestCheckoutThreeDSecureAbandonedTwice(t *testing.T) {
	c, proxy, advance := stripeCheckout(t, nil)
	ctx := context.Background()
	id, _, first := c.challenged(t, proxy)
	advance(engine.ActionAbandonAfter + time.Second)
	if n, err := c.eng.ReconcileOnce(ctx); err != nil || n != 1 {
		t.Fatalf("first abandon: reconciled %d, %v", n, err)
	}
	secret := c.must(200, c.keyA, "GET", "/v1/payments/"+id, "").str("client_secret")
	r := c.confirm3DS(t, id, secret, threeDSCardStripe)
	page := ""
	if na, ok := r.JSON["next_action"].(map[string]any); ok {
		rt, _ := na["redirect_to_url"].(map[string]any)
		page, _ = rt["url"].(string)
	}
	if r.str("status") != "requires_action" || !strings.HasPrefix(page, proxy.URL+"/_3ds/pi_") {
		t.Fatalf("paying again with a 3-D Secure card: %d %s", r.Status, r.Raw)
	}
	second := page[strings.LastIndexByte(page, '/')+1:]
	if second == first {
		t.Fatalf("the second attempt reused PaymentIntent %s", first)
	}
	advance(engine.ActionAbandonAfter + time.Second)
	if n, err := c.eng.ReconcileOnce(ctx); err != nil || n != 1 {
		t.Fatalf("second abandon: reconciled %d, %v; want the payment", n, err)
	}
	got := c.must(200, c.keyA, "GET", "/v1/payments/"+id, "")
	if got.str("status") != "requires_payment_method" || got.str("decline_code") != surgepay.DeclineAuthenticationFailed {
		t.Fatalf("abandoned twice: %s; want requires_payment_method, authentication_failed", got.Raw)
	}
	for _, pi := range []string{first, second} {
		if s := intentStatus(t, proxy.URL, pi); s != "canceled" {
			t.Errorf("PaymentIntent %s is %s at Stripe, want canceled", pi, s)
		}
	}
	if n, err := c.eng.ReconcileOnce(ctx); err != nil || n != 0 {
		t.Fatalf("a pass after both ended reconciled %d, %v", n, err)
	}
}

// TestCheckoutThreeDSecureBackBeforeSearch: Stripe's search lags its
// writes (under a minute, normally), and a shopper is back from 3-D
// Secure sooner. The return, the page's read and the reconciler look the
// PaymentIntent up by the reference Stripe answered with requires_action,
// not by search, and find the outcome at once: a search would find
// nothing yet, and the shopper who paid would be told "processing".
func TestCheckoutThreeDSecureBackBeforeSearch(t *testing.T) {
	c, proxy, advance := stripeCheckoutLagged(t, nil, time.Hour)
	hc := noRedirects(c.env)
	back := func(page, outcome string) *url.URL {
		t.Helper()
		ret, err := hc.Get(answerStripePage(t, hc, page, outcome))
		if err != nil {
			t.Fatal(err)
		}
		ret.Body.Close()
		land, err := url.Parse(ret.Header.Get("Location"))
		if ret.StatusCode != http.StatusSeeOther || err != nil || land.Host != "shop.example" {
			t.Fatalf("return from Stripe's page: %d to %q", ret.StatusCode, ret.Header.Get("Location"))
		}
		return land
	}
	paid, page, _ := c.challenged(t, proxy)
	if got := back(page, "authenticate").Query().Get("redirect_status"); got != "succeeded" {
		t.Errorf("authenticated and back: redirect_status %q, want succeeded", got)
	}
	if got := c.must(200, c.keyA, "GET", "/v1/payments/"+paid, ""); got.str("status") != "succeeded" {
		t.Errorf("authenticated and back: %s; want succeeded", got.Raw)
	}
	failed, page, _ := c.challenged(t, proxy)
	if got := back(page, "fail").Query().Get("redirect_status"); got != "failed" {
		t.Errorf("failed and back: redirect_status %q, want failed", got)
	}
	if got := c.must(200, c.keyA, "GET", "/v1/payments/"+failed, ""); got.str("status") != "requires_payment_method" ||
		got.str("decline_code") != surgepay.DeclineAuthenticationFailed {
		t.Errorf("failed and back: %s; want requires_payment_method, authentication_failed", got.Raw)
	}
	// A shopper who authenticates and closes the tab: the reconciler finds
	// it by reference too.
	closed, page, _ := c.challenged(t, proxy)
	answerStripePage(t, hc, page, "authenticate")
	advance(engine.ActionReconcileAfter + time.Second)
	if n, err := c.eng.ReconcileOnce(context.Background()); err != nil || n != 1 {
		t.Fatalf("reconciled %d, %v; want the payment authenticated without a return", n, err)
	}
	if got := c.must(200, c.keyA, "GET", "/v1/payments/"+closed, ""); got.str("status") != "succeeded" {
		t.Errorf("authenticated without a return: %s; want succeeded", got.Raw)
	}
}

// TestCheckoutThreeDSecurePayAgain: a shopper who came back from Stripe's
// authentication page without finishing it pays again, with another card,
// as Stripe lets a PaymentIntent in requires_action be confirmed again.
// The pending authentication is cancelled at Stripe first, so it can never
// be completed as well, and the new attempt pays. A shopper who finished
// the first at that very moment is recorded paid, and the new confirm
// charges nothing.
func TestCheckoutThreeDSecurePayAgain(t *testing.T) {
	var page string
	var client *http.Client
	finishFirst := false
	c, proxy, _ := stripeCheckout(t, func(sp *stripe.Provider) surgepay.Provider {
		return authenticatesBeforeVoid{sp, func() {
			if finishFirst {
				answerStripePage(t, client, page, "authenticate")
			}
		}}
	})
	client = noRedirects(c.env)
	id, _, first := c.challenged(t, proxy)
	secret := c.must(200, c.keyA, "GET", "/v1/payments/"+id, "").str("client_secret")
	r := c.confirm(id, secret, c.card(t, "4242424242424242"))
	if r.Status != 200 || r.str("status") != "succeeded" {
		t.Fatalf("paying again while 3-D Secure is pending: %d %s; want succeeded", r.Status, r.Raw)
	}
	if s := intentStatus(t, proxy.URL, first); s != "canceled" {
		t.Errorf("the abandoned attempt's PaymentIntent is %s at Stripe, want canceled", s)
	}
	p := c.must(200, c.keyA, "GET", "/v1/payments/"+id, "")
	txs, _ := p.JSON["transactions"].([]any)
	var auths []string
	for _, tx := range txs {
		m, _ := tx.(map[string]any)
		if m["type"] == "authorization" {
			auths = append(auths, fmt.Sprint(m["status"]))
		}
	}
	if p.num("amount_captured") != 3600 || !slices.Equal(auths, []string{"failed", "succeeded"}) {
		t.Errorf("paid again: %s; want captured 3600, the first authorization failed and the second succeeded", p.Raw)
	}

	// The shopper finishes the first authentication just as the new
	// confirm cancels it: Stripe refuses the cancel, the payment is
	// recorded paid, and the new confirm charges nothing.
	finishFirst = true
	id, page, first = c.challenged(t, proxy)
	secret = c.must(200, c.keyA, "GET", "/v1/payments/"+id, "").str("client_secret")
	if r := c.confirm(id, secret, c.card(t, "4242424242424242")); r.Status != 409 || r.errField("code") != "payment_unexpected_state" {
		t.Fatalf("paying again as the first authentication completes: %d %s; want 409 payment_unexpected_state", r.Status, r.Raw)
	}
	p = c.must(200, c.keyA, "GET", "/v1/payments/"+id, "")
	txs, _ = p.JSON["transactions"].([]any)
	if p.str("status") != "succeeded" || p.num("amount_captured") != 3600 || len(txs) != 1 {
		t.Errorf("finished as paid again: %s; want succeeded by the first authorization alone", p.Raw)
	}
	if s := intentStatus(t, proxy.URL, first); s != "succeeded" {
		t.Errorf("the first PaymentIntent is %s at Stripe, want succeeded", s)
	}
}

// TestCheckoutThreeDSecureRouted: the same at a named processor behind
// the router (references "eu:pi_…"), with Stripe's search lagging: the
// shopper's return finds the outcome by the qualified reference, paying
// again cancels the pending authentication at that processor, and so
// does the reconciler once one is abandoned.
func TestCheckoutThreeDSecureRouted(t *testing.T) {
	c, proxy, advance := stripeCheckoutLagged(t, func(sp *stripe.Provider) surgepay.Provider {
		r := route.New(nil)
		if err := r.Set([]route.Processor{{Name: route.DefaultName, Provider: sim.New(sim.DefaultConfig())},
			{Name: "eu", Provider: sp}}, func(string) route.Route { return route.Route{Processors: []string{"eu"}} }); err != nil {
			t.Fatal(err)
		}
		return r
	}, time.Hour)
	hc := noRedirects(c.env)
	// Back from authenticating, sooner than Stripe's search shows it.
	paid, page, _ := c.challenged(t, proxy)
	ret, err := hc.Get(answerStripePage(t, hc, page, "authenticate"))
	if err != nil {
		t.Fatal(err)
	}
	ret.Body.Close()
	if land, err := url.Parse(ret.Header.Get("Location")); err != nil || land.Query().Get("redirect_status") != "succeeded" {
		t.Errorf("back from authenticating: to %q, want redirect_status=succeeded", ret.Header.Get("Location"))
	}
	if got := c.must(200, c.keyA, "GET", "/v1/payments/"+paid, ""); got.str("status") != "succeeded" {
		t.Errorf("back from authenticating: %s; want succeeded", got.Raw)
	}
	// Paying again while pending.
	again, _, first := c.challenged(t, proxy)
	secret := c.must(200, c.keyA, "GET", "/v1/payments/"+again, "").str("client_secret")
	if r := c.confirm(again, secret, c.card(t, "4242424242424242")); r.Status != 200 || r.str("status") != "succeeded" {
		t.Errorf("paying again while pending: %d %s; want succeeded", r.Status, r.Raw)
	}
	// Abandoned.
	gone, _, goneIntent := c.challenged(t, proxy)
	advance(engine.ActionAbandonAfter + time.Second)
	if n, err := c.eng.ReconcileOnce(context.Background()); err != nil || n != 1 {
		t.Fatalf("reconciled %d, %v; want the abandoned payment", n, err)
	}
	if got := c.must(200, c.keyA, "GET", "/v1/payments/"+gone, ""); got.str("status") != "requires_payment_method" ||
		got.str("decline_code") != surgepay.DeclineAuthenticationFailed {
		t.Errorf("abandoned: %s; want requires_payment_method, authentication_failed", got.Raw)
	}
	for _, pi := range []string{first, goneIntent} {
		if s := intentStatus(t, proxy.URL, pi); s != "canceled" {
			t.Errorf("PaymentIntent %s is %s at Stripe, want canceled", pi, s)
		}
	}
}

// TestCheckoutThreeDSecureFinishedAsAbandoned: the shopper authenticates
// at the very moment the reconciler cancels the authentication as
// abandoned. Stripe refuses to cancel a PaymentIntent that has succeeded,
// and the payment is recorded as Stripe has it: succeeded.
func TestCheckoutThreeDSecureFinishedAsAbandoned(t *testing.T) {
	var page string
	var client *http.Client
	c, proxy, advance := stripeCheckout(t, func(sp *stripe.Provider) surgepay.Provider {
		return authenticatesBeforeVoid{sp, func() { answerStripePage(t, client, page, "authenticate") }}
	})
	client = noRedirects(c.env)
	id, p, intent := c.challenged(t, proxy)
	page = p
	advance(engine.ActionAbandonAfter + time.Second)
	if n, err := c.eng.ReconcileOnce(context.Background()); err != nil || n != 1 {
		t.Fatalf("reconciled %d, %v; want the payment", n, err)
	}
	if got := c.must(200, c.keyA, "GET", "/v1/payments/"+id, ""); got.str("status") != "succeeded" {
		t.Fatalf("authenticated as it was cancelled: %s; want succeeded, as at Stripe", got.Raw)
	}
	if s := intentStatus(t, proxy.URL, intent); s != "succeeded" {
		t.Fatalf("the PaymentIntent is %s, want succeeded", s)
	}
}

// answerStripePage answers Stripe's authentication page as a shopper
// would (outcome authenticate or fail), without following where it sends
// them, which it returns (the return URL). It may run on a server's
// goroutine (in a processor call of the test's), so it reports failures
// with t.Error.
func answerStripePage(t *testing.T, client *http.Client, page, outcome string) string {
	t.Helper()
	done, err := client.PostForm(page, url.Values{"outcome": {outcome}})
	if err != nil {
		t.Error(err)
		return ""
	}
	done.Body.Close()
	if done.StatusCode != http.StatusSeeOther {
		t.Errorf("authenticating at Stripe's page: %d, want 303 to the return URL", done.StatusCode)
	}
	return done.Header.Get("Location")
}

// authenticatesBeforeVoid is Stripe with a shopper who finishes
// authenticating just before each cancel reaches it.
type authenticatesBeforeVoid struct {
	*stripe.Provider
	before func()
}

func (p authenticatesBeforeVoid) Void(ctx context.Context, req *surgepay.VoidRequest) (*surgepay.ProviderResult, error) {
	p.before()
	return p.Provider.Void(ctx, req)
}

// stripeCheckout is a checkoutEnv whose processor is Stripe (localstripe
// behind the proxy that gives it Stripe's 3-D Secure redirect), wrapped
// by wrap if set, on a clock the test moves with advance.
func stripeCheckout(t *testing.T, wrap func(*stripe.Provider) surgepay.Provider) (*checkoutEnv, *stripedouble.Proxy, func(time.Duration)) {
	t.Helper()
	return stripeCheckoutLagged(t, wrap, 0)
}

// stripeCheckoutLagged is stripeCheckout with Stripe's search lagging its
// writes by lag (the proxy's SearchLag), which the connector knows
// (its SearchLag, a nanosecond for none).
func stripeCheckoutLagged(t *testing.T, wrap func(*stripe.Provider) surgepay.Provider, lag time.Duration) (*checkoutEnv, *stripedouble.Proxy, func(time.Duration)) {
	t.Helper()
	proxy := stripedouble.NewProxy(t, stripedouble.StartLocalstripe(t))
	proxy.SearchLag = lag
	sp, err := stripe.New(stripe.Config{SecretKey: "sk_test_surgepay", BaseURL: proxy.URL, CallTimeout: 10 * time.Second,
		SearchLag: max(lag, time.Nanosecond), Name: "stripe"})
	if err != nil {
		t.Fatal(err)
	}
	var p surgepay.Provider = sp
	if wrap != nil {
		p = wrap(sp)
	}
	now := time.Now().UTC()
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	e := newEnvWith(t, openSQLite(t), func(c *engine.Config) { c.Provider, c.Now = p, clock })
	return newCheckoutEnv(t, e), proxy, advance
}

// challenged confirms a new payment with Stripe's 3-D Secure card and
// returns its ID, its authentication page and its PaymentIntent (the
// proxy's page is /_3ds/ + the PaymentIntent's ID).
func (c *checkoutEnv) challenged(t *testing.T, proxy *stripedouble.Proxy) (id, page, pi string) {
	t.Helper()
	id, secret := c.awaiting(t, `{"amount":3600,"currency":"usd"}`)
	r := c.confirm3DS(t, id, secret, threeDSCardStripe)
	na, _ := r.JSON["next_action"].(map[string]any)
	rt, _ := na["redirect_to_url"].(map[string]any)
	page, _ = rt["url"].(string)
	if r.str("status") != "requires_action" || !strings.HasPrefix(page, proxy.URL+"/_3ds/pi_") {
		t.Fatalf("confirm with Stripe's 3-D Secure card: %d %s", r.Status, r.Raw)
	}
	return id, page, page[strings.LastIndexByte(page, '/')+1:]
}

// intentStatus reads a PaymentIntent's status at the Stripe double.
func intentStatus(t *testing.T, base, id string) string {
	t.Helper()
	var pi struct {
		Status string `json:"status"`
	}
	resp, err := stripedouble.Get(base, "/v1/payment_intents/"+id)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&pi); err != nil {
		t.Fatal(err)
	}
	return pi.Status
}
