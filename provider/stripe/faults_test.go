package stripe_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	stripego "github.com/stripe/stripe-go/v82"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/provider/stripe"
	"github.com/surgepay/surgepay/provider/stripe/stripedouble"
)

// TestClassify pins the mapping of Stripe's answers onto surgepay's three
// outcomes (docs/processors.md has the same table).
func TestClassify(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		want   string // approved, declined:<code>, not_performed, key_reused, unknown
	}{
		{"OK", 200, "", "approved"},
		{"CardDeclineCode", 402, `{"error":{"type":"card_error","code":"card_declined","decline_code":"insufficient_funds","message":"Your card has insufficient funds."}}`, "declined:insufficient_funds"},
		{"CardGenericDecline", 402, `{"error":{"type":"card_error","code":"card_declined","decline_code":"generic_decline","message":"Your card was declined."}}`, "declined:generic_decline"},
		{"CardExpired", 402, `{"error":{"type":"card_error","code":"expired_card","message":"Your card has expired."}}`, "declined:expired_card"},
		{"CardIncorrectCVC", 402, `{"error":{"type":"card_error","code":"incorrect_cvc","message":"Your card's security code is incorrect."}}`, "declined:incorrect_cvc"},
		{"CardProcessingError", 402, `{"error":{"type":"card_error","code":"processing_error","message":"An error occurred while processing your card."}}`, "declined:processing_error"},
		{"DeclineWithoutCardError", 402, `{"error":{"type":"invalid_request_error","code":"card_declined","message":"Your card was declined."}}`, "declined:generic_decline"},
		{"InvalidRequest", 400, `{"error":{"type":"invalid_request_error","code":"payment_intent_unexpected_state","message":"This PaymentIntent could not be captured."}}`, "declined:invalid_request"},
		{"NotFound", 404, `{"error":{"type":"invalid_request_error","code":"resource_missing","message":"No such payment_intent"}}`, "declined:invalid_request"},
		{"IdempotencyReused", 400, `{"error":{"type":"idempotency_error","message":"Keys for idempotent requests can only be used with the same parameters."}}`, "key_reused"},
		{"IdempotencyInUse", 409, `{"error":{"type":"idempotency_error","code":"idempotency_key_in_use","message":"There is currently another in-progress request."}}`, "unknown"},
		{"LockTimeout", 409, `{"error":{"type":"invalid_request_error","code":"lock_timeout","message":"lock"}}`, "unknown"},
		{"RateLimit", 429, `{"error":{"type":"invalid_request_error","code":"rate_limit","message":"Too many requests."}}`, "not_performed"},
		{"Authentication", 401, `{"error":{"type":"invalid_request_error","message":"Invalid API Key provided"}}`, "not_performed"},
		{"Permission", 403, `{"error":{"type":"invalid_request_error","message":"The provided key does not have access"}}`, "not_performed"},
		{"APIError", 500, `{"error":{"type":"api_error","message":"An unknown error occurred"}}`, "unknown"},
		{"BadGateway", 502, `<html>bad gateway</html>`, "unknown"},
		{"Unavailable", 503, `{"error":{"type":"api_error","message":"unavailable"}}`, "unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tt.status)
				if tt.status == 200 {
					_ = json.NewEncoder(w).Encode(map[string]any{"id": "pi_1", "object": "payment_intent", "status": "succeeded",
						"amount": 100, "amount_received": 100})
					return
				}
				_, _ = io.WriteString(w, tt.body)
			})}
			base := serve(t, srv)
			p := newConnector(t, base, func(c *stripe.Config) { c.RetriesMax = -1 })
			res, err := p.Capture(t.Context(), &surgepay.CaptureRequest{IdempotencyKey: "k", AuthorizationRef: "pi_1", Amount: 100, Currency: "usd"})
			if got := outcomeOf(res, err); got != tt.want {
				t.Fatalf("got %s (%v), want %s", got, err, tt.want)
			}
		})
	}
	t.Run("ConnectionRefused", func(t *testing.T) {
		p := newConnector(t, "http://127.0.0.1:1", nil)
		_, err := p.Capture(t.Context(), &surgepay.CaptureRequest{IdempotencyKey: "k", AuthorizationRef: "pi_1", Amount: 100, Currency: "usd"})
		if got := outcomeOf(nil, err); got != "not_performed" {
			t.Fatalf("got %s (%v), want not_performed", got, err)
		}
	})
	t.Run("TimeoutThenRefused", func(t *testing.T) {
		// The first attempt times out (it may have happened), the retry
		// finds the port closed: still unknown, never "not performed".
		var calls atomic.Int64
		srv := &http.Server{}
		srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			go srv.Close()
			time.Sleep(2 * time.Second)
		})
		base := serve(t, srv)
		p := newConnector(t, base, func(c *stripe.Config) { c.CallTimeout = 300 * time.Millisecond; c.RetriesMax = 2 })
		_, err := p.Capture(t.Context(), &surgepay.CaptureRequest{IdempotencyKey: "k", AuthorizationRef: "pi_1", Amount: 100, Currency: "usd"})
		if got := outcomeOf(nil, err); got != "unknown" || calls.Load() != 1 {
			t.Fatalf("got %s after %d calls (%v), want unknown after 1", got, calls.Load(), err)
		}
	})
}

func outcomeOf(res *surgepay.ProviderResult, err error) string {
	switch {
	case err != nil && surgepay.IsNotPerformed(err):
		if errorsIsKeyReused(err) {
			return "key_reused"
		}
		return "not_performed"
	case err != nil:
		return "unknown"
	case res.Approved:
		return "approved"
	}
	return "declined:" + res.DeclineCode
}

func errorsIsKeyReused(err error) bool {
	for e := err; e != nil; {
		if e == surgepay.ErrKeyReused {
			return true
		}
		u, ok := e.(interface{ Unwrap() error })
		if !ok {
			return false
		}
		e = u.Unwrap()
	}
	return false
}

// TestThreeDSecureCancelled: a card whose issuer asks for 3-D Secure is
// declined authentication_required and its PaymentIntent cancelled, so
// nothing stays authorized.
func TestThreeDSecureCancelled(t *testing.T) {
	ls := stripedouble.StartLocalstripe(t)
	p := newConnector(t, stripedouble.NewProxy(t, ls).URL, nil)
	res, err := p.Authorize(t.Context(), &surgepay.AuthorizeRequest{IdempotencyKey: "3ds/1", MerchantID: "mer_1", Amount: 1000,
		Currency: "usd", Card: surgepay.ProviderCard{Number: "4000002500003155", ExpMonth: 12, ExpYear: 2034, CVC: "123"}})
	if err != nil || res.Approved || res.DeclineCode != surgepay.DeclineAuthenticationRequired {
		t.Fatalf("got %+v, %v; want declined authentication_required", res, err)
	}
	if status := piStatus(t, ls, res.Reference); status != "canceled" {
		t.Fatalf("payment intent %s is %s, want canceled", res.Reference, status)
	}
}

// TestThreeDSecureRedirect: a browser's payment (a ReturnURL) whose
// issuer asks for 3-D Secure is RequiresAction with Stripe's page, not
// cancelled; once the shopper authenticates there, a lookup finds the
// authorization, and a failed authentication is declined
// authentication_failed. localstripe's own 3-D Secure is Stripe.js's;
// the proxy gives it Stripe's redirect (stripedouble/threeds.go).
func TestThreeDSecureRedirect(t *testing.T) {
	ls := stripedouble.StartLocalstripe(t)
	proxy := stripedouble.NewProxy(t, ls)
	p := newConnector(t, proxy.URL, nil)
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, tc := range []struct {
		outcome, want string
	}{{"authenticate", "approved"}, {"fail", "declined:" + surgepay.DeclineAuthenticationFailed}} {
		key := "3ds-redirect/" + tc.outcome
		req := &surgepay.AuthorizeRequest{IdempotencyKey: key, MerchantID: "mer_1", Amount: 1000, Currency: "usd",
			Capture: true, ReturnURL: "https://pay.example/checkout/v1/return/tok",
			Card: surgepay.ProviderCard{Number: "4000002500003155", ExpMonth: 12, ExpYear: 2034, CVC: "123"}}
		res, err := p.Authorize(t.Context(), req)
		if err != nil || !res.RequiresAction || !strings.HasPrefix(res.ActionURL, proxy.URL) || res.Approved {
			t.Fatalf("%s: got %+v, %v; want RequiresAction with the authentication page", tc.outcome, res, err)
		}
		if status := piStatus(t, ls, res.Reference); status != "requires_action" {
			t.Fatalf("payment intent %s is %s, want requires_action (not cancelled)", res.Reference, status)
		}
		q := &surgepay.LookupQuery{Key: key, Operation: surgepay.TxAuthorization, MerchantID: "mer_1", Amount: 1000,
			Currency: "usd", Attempted: time.Now().Add(-time.Minute)}
		if res, err := p.LookupOperation(t.Context(), q); err != nil || !res.RequiresAction {
			t.Fatalf("%s: lookup before authenticating: %+v, %v", tc.outcome, res, err)
		}
		resp, err := noFollow.PostForm(res.ActionURL, url.Values{"outcome": {tc.outcome}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != req.ReturnURL {
			t.Fatalf("%s: authentication page answered %d to %q", tc.outcome, resp.StatusCode, resp.Header.Get("Location"))
		}
		got, err := p.LookupOperation(t.Context(), q)
		if outcomeOf(got, err) != tc.want {
			t.Fatalf("%s: lookup after authenticating: %+v, %v; want %s", tc.outcome, got, err, tc.want)
		}
	}
}

func piStatus(t *testing.T, base, id string) string {
	t.Helper()
	resp, err := stripedouble.Get(base, "/v1/payment_intents/"+id)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var pi stripego.PaymentIntent
	if err := json.NewDecoder(resp.Body).Decode(&pi); err != nil {
		t.Fatal(err)
	}
	return string(pi.Status)
}

// TestFaultsNeverChargeTwice sends authorizations through a proxy that
// injects a fault into about half of the requests (connection dropped
// before or after the request reached Stripe, 500 before or after, a
// timeout after), resolves each unknown outcome through LookupOperation,
// and then reads localstripe's own state: every key has at most one live
// PaymentIntent, and exactly one where the connector answered approved.
// SURGEPAY_STRIPE_FAULTS sets how many faults to inject (default 1,000;
// bench/RESULTS.md records a 10,000-fault run).
func TestFaultsNeverChargeTwice(t *testing.T) {
	want := 1000
	if s := os.Getenv("SURGEPAY_STRIPE_FAULTS"); s != "" {
		want, _ = strconv.Atoi(s)
	}
	ls := stripedouble.StartLocalstripe(t)
	proxy := stripedouble.NewProxy(t, ls)
	proxy.Slow = 400 * time.Millisecond
	var injected atomic.Int64
	faults := []stripedouble.Fault{stripedouble.DropBefore, stripedouble.DropAfter, stripedouble.Error500Before,
		stripedouble.Error500After, stripedouble.SlowAfter}
	proxy.Faults = func(r *http.Request) stripedouble.Fault {
		if r.Method != "POST" || rand.IntN(2) == 0 {
			return stripedouble.Pass
		}
		injected.Add(1)
		return faults[rand.IntN(len(faults))]
	}
	p := newConnector(t, proxy.URL, func(c *stripe.Config) { c.CallTimeout = 200 * time.Millisecond; c.RetriesMax = 1 })
	type answer struct {
		approved bool
		ref      string
	}
	var mu sync.Mutex
	answers := map[string]answer{}
	var wg sync.WaitGroup
	work := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range work {
				key := fmt.Sprintf("faults/%d", i)
				a, ok := authorizeResolved(t, p, key)
				if !ok {
					continue
				}
				mu.Lock()
				answers[key] = a
				mu.Unlock()
			}
		})
	}
	for i := 0; injected.Load() < int64(want); i++ {
		work <- i
	}
	close(work)
	wg.Wait()

	live := livePaymentIntents(t, ls)
	for key, a := range answers {
		ids := live[key]
		switch {
		case len(ids) > 1:
			t.Errorf("key %s: %d live payment intents %v: charged twice", key, len(ids), ids)
		case a.approved && (len(ids) != 1 || ids[0] != a.ref):
			t.Errorf("key %s: answered approved %s, live %v", key, a.ref, ids)
		case !a.approved && len(ids) != 0:
			t.Errorf("key %s: answered not approved, yet live %v", key, ids)
		}
	}
	for key, ids := range live {
		if _, ok := answers[key]; !ok && len(ids) > 0 {
			t.Errorf("key %s: live %v but the connector never resolved it", key, ids)
		}
	}
	t.Logf("%d faults injected over %d authorizations, %d requests reached localstripe", injected.Load(), len(answers), proxy.Forwarded.Load())
}

// authorizeResolved authorizes under key and resolves an unknown outcome
// by lookup, as the engine and its reconciler do. A not-performed answer
// is retried under the same key, as a client would.
func authorizeResolved(t *testing.T, p *stripe.Provider, key string) (a struct {
	approved bool
	ref      string
}, ok bool) {
	req := &surgepay.AuthorizeRequest{IdempotencyKey: key, MerchantID: "mer_faults", Amount: 1000, Currency: "usd",
		Card: surgepay.ProviderCard{Number: "4242424242424242", ExpMonth: 12, ExpYear: 2034, CVC: "123"}}
	for try := 0; try < 50; try++ {
		sent := time.Now()
		res, err := p.Authorize(t.Context(), req)
		for look := 0; surgepay.IsUnknown(err) && look < 100; look++ {
			if look > 0 { // a search lags the call's timeout at least
				time.Sleep(20 * time.Millisecond)
			}
			res, err = p.LookupOperation(t.Context(), &surgepay.LookupQuery{Key: key, Operation: surgepay.TxAuthorization, Attempted: sent})
		}
		if err == nil {
			a.approved, a.ref = res.Approved, res.Reference
			return a, true
		}
		if surgepay.IsUnknown(err) {
			t.Errorf("key %s: still unknown after lookups: %v", key, err)
			return a, false
		}
	}
	t.Errorf("key %s: never performed", key)
	return a, false
}

// livePaymentIntents lists localstripe's PaymentIntents that hold money
// (authorized or captured), by their surgepay_key.
func livePaymentIntents(t *testing.T, base string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	after := ""
	for {
		path := "/v1/payment_intents?limit=100"
		if after != "" {
			path += "&starting_after=" + after
		}
		resp, err := stripedouble.Get(base, path)
		if err != nil {
			t.Fatal(err)
		}
		var list struct {
			Data    []stripego.PaymentIntent `json:"data"`
			HasMore bool                     `json:"has_more"`
		}
		err = json.NewDecoder(resp.Body).Decode(&list)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, pi := range list.Data {
			after = pi.ID
			if pi.Status == stripego.PaymentIntentStatusRequiresCapture || pi.Status == stripego.PaymentIntentStatusSucceeded {
				k := pi.Metadata[stripe.MetadataKey]
				out[k] = append(out[k], pi.ID)
			}
		}
		if !list.HasMore || len(list.Data) == 0 {
			return out
		}
	}
}

// TestTokenUnavailableSaysWhy: a token Stripe answers about with an
// error is EUNAVAILABLE to the client, whose answer says only that, and
// the error the server logs carries Stripe's own message.
func TestTokenUnavailableSaysWhy(t *testing.T) {
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, `{"error":{"type":"api_error","message":"the customers shard is down"}}`)
	})}
	p := newConnector(t, serve(t, srv), func(c *stripe.Config) { c.RetriesMax = -1 })
	_, derr := p.DescribeToken(t.Context(), "mer_1", "pm_1")
	_, aerr := p.AttachToken(t.Context(), "mer_1", "pm_1", "mer_1", "cus_1")
	for name, err := range map[string]error{"describe": derr, "attach": aerr} {
		var se *surgepay.Error
		if !errors.As(err, &se) || se.Code != surgepay.EUNAVAILABLE || strings.Contains(se.Message, "shard") {
			t.Errorf("%s: %v; want EUNAVAILABLE whose message names no cause", name, err)
		}
		if err == nil || !strings.Contains(err.Error(), "the customers shard is down") {
			t.Errorf("%s: %v; want Stripe's message in the error for the log", name, err)
		}
	}
}
