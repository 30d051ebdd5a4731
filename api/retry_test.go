package api_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/engine"
	"github.com/surgepay/surgepay/internal/testenv"
	"github.com/surgepay/surgepay/provider/sim"
)

// lossyStore loses the next payment insert (lose) or update (loseUpdate)
// as a crash between the provider's answer and the commit would: Apply
// fails and nothing is stored.
type lossyStore struct {
	surgepay.Store
	lose, loseUpdate atomic.Bool
}

func (s *lossyStore) Apply(ctx context.Context, w *surgepay.Write) error {
	if w.PaymentInsert != nil && s.lose.CompareAndSwap(true, false) ||
		w.PaymentUpdate != nil && s.loseUpdate.CompareAndSwap(true, false) {
		return &surgepay.Error{Code: surgepay.EUNAVAILABLE, Reason: "test_commit_lost", Message: "commit lost"}
	}
	return s.Store.Apply(ctx, w)
}

// TestRetryAfterLostCommitKeepsNetworkPaymentID: a sale authorized and
// captured at the network whose commit is lost, then retried with the same
// Idempotency-Key, is stored under the payment ID the network recorded
// first, and the network did it once.
func TestRetryAfterLostCommitKeepsNetworkPaymentID(t *testing.T) {
	for _, b := range testenv.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			store := &lossyStore{Store: b.Open(t)}
			e := newEnvWith(t, store, func(*engine.Config) {})
			cus, pm := e.customerWithCard(e.keyA, "4242424242424242")
			body := paymentBody(cus, pm, 2500, "automatic")

			store.lose.Store(true)
			if r := e.do(e.keyA, "POST", "/v1/payments", body, "retry-1"); r.Status != 503 {
				t.Fatalf("lost commit: got %d %s, want 503", r.Status, r.Raw)
			}
			if got := e.sim.TotalEffects(); got.Authorizations != 1 || got.Captures != 1 {
				t.Fatalf("the network did %+v; want the first attempt's authorization and capture", got)
			}
			if r := e.must(200, e.keyA, "GET", "/v1/payments", ""); len(r.JSON["data"].([]any)) != 0 {
				t.Fatalf("a payment was stored by the lost attempt: %s", r.Raw)
			}

			r := e.do(e.keyA, "POST", "/v1/payments", body, "retry-1")
			if r.Status != 200 || r.str("status") != "succeeded" {
				t.Fatalf("retry: got %d %s", r.Status, r.Raw)
			}
			id := r.str("id")
			fx := e.sim.Effects(id)
			if fx.Authorizations != 1 || fx.Captures != 1 || fx.AmountCaptured != 2500 {
				t.Fatalf("the network's record of %s: %+v; want the one authorization and capture under this ID", id, fx)
			}
			if got := e.sim.TotalEffects(); got.Authorizations != 1 || got.Captures != 1 {
				t.Fatalf("after the retry the network did %+v; want nothing more", got)
			}
			// The idempotent replay answers the same payment.
			if again := e.must(200, e.keyA, "GET", "/v1/payments/"+id, ""); again.num("amount_captured") != 2500 {
				t.Fatalf("stored payment: %s", again.Raw)
			}
			if replay := e.do(e.keyA, "POST", "/v1/payments", body, "retry-1"); replay.str("id") != id {
				t.Fatalf("replay answered %s, want %s", replay.Raw, id)
			}
		})
	}
}

// TestLostCommitIsNeverAcknowledged: when the commit of a capture fails, the
// client gets the error, not the answer rendered for the write that was
// lost; the retry records the network's one capture.
func TestLostCommitIsNeverAcknowledged(t *testing.T) {
	for _, b := range testenv.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			store := &lossyStore{Store: b.Open(t)}
			e := newEnvWith(t, store, func(*engine.Config) {})
			cus, pm := e.customerWithCard(e.keyA, "4242424242424242")
			id := e.must(200, e.keyA, "POST", "/v1/payments", paymentBody(cus, pm, 1800, "manual")).str("id")

			store.loseUpdate.Store(true)
			for _, idem := range []string{"", "cap-1"} {
				if idem != "" {
					store.loseUpdate.Store(true)
				}
				r := e.do(e.keyA, "POST", "/v1/payments/"+id+"/capture", `{}`, idem)
				if r.Status != 503 || r.errField("code") == "" {
					t.Fatalf("capture (key %q) whose commit was lost: got %d %s, want a 503 error", idem, r.Status, r.Raw)
				}
				if got := e.must(200, e.keyA, "GET", "/v1/payments/"+id, ""); got.str("status") != "requires_capture" {
					t.Fatalf("after the lost capture: %s", got.Raw)
				}
			}
			r := e.do(e.keyA, "POST", "/v1/payments/"+id+"/capture", `{}`, "cap-1")
			if r.Status != 200 || r.num("amount_captured") != 1800 {
				t.Fatalf("retried capture: got %d %s", r.Status, r.Raw)
			}
			if fx := e.sim.Effects(id); fx.Captures != 1 || fx.AmountCaptured != 1800 {
				t.Fatalf("the network captured %+v; want once", fx)
			}
		})
	}
}

// countingProvider counts the calls that reach a provider.
type countingProvider struct {
	surgepay.Provider
	calls atomic.Int64
}

func (c *countingProvider) Authorize(ctx context.Context, r *surgepay.AuthorizeRequest) (*surgepay.ProviderResult, error) {
	c.calls.Add(1)
	return c.Provider.Authorize(ctx, r)
}

func (c *countingProvider) Capture(ctx context.Context, r *surgepay.CaptureRequest) (*surgepay.ProviderResult, error) {
	c.calls.Add(1)
	return c.Provider.Capture(ctx, r)
}

func (c *countingProvider) Void(ctx context.Context, r *surgepay.VoidRequest) (*surgepay.ProviderResult, error) {
	c.calls.Add(1)
	return c.Provider.Void(ctx, r)
}

func (c *countingProvider) Refund(ctx context.Context, r *surgepay.RefundRequest) (*surgepay.ProviderResult, error) {
	c.calls.Add(1)
	return c.Provider.Refund(ctx, r)
}

func (c *countingProvider) Lookup(ctx context.Context, key string) (*surgepay.ProviderResult, error) {
	c.calls.Add(1)
	return c.Provider.Lookup(ctx, key)
}

// TestCompletedRequestNeverReachesProviderAgain retries completed requests
// after a restart (nothing in memory) against a provider that has
// forgotten every key (a new simulator: as Stripe after 24 hours). Each is
// replayed from the store, byte for byte, with no provider call. Before
// the store was read first, each retry reached the provider: a processor
// that had forgotten the key would have charged again.
func TestCompletedRequestNeverReachesProviderAgain(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		cus, pm := e.customerWithCard(e.keyA, "4242424242424242")
		dcus, dpm := e.customerWithCard(e.keyA, "4000000000009995")
		sale := e.do(e.keyA, "POST", "/v1/payments", paymentBody(cus, pm, 1500, "automatic"), "sale-1")
		auth := e.do(e.keyA, "POST", "/v1/payments", paymentBody(cus, pm, 3000, "manual"), "auth-1")
		decl := e.do(e.keyA, "POST", "/v1/payments", paymentBody(dcus, dpm, 500, "automatic"), "decl-1")
		id := auth.str("id")
		capt := e.do(e.keyA, "POST", "/v1/payments/"+id+"/capture", `{"amount":2000}`, "cap-1")
		refd := e.do(e.keyA, "POST", "/v1/payments/"+id+"/refunds", `{"amount":700}`, "ref-1")
		if sale.Status != 200 || auth.Status != 200 || decl.Status != 402 || capt.Status != 200 || refd.Status != 200 {
			t.Fatalf("first requests: %d %d %d %d %d", sale.Status, auth.Status, decl.Status, capt.Status, refd.Status)
		}

		forgetful := &countingProvider{Provider: sim.New(sim.DefaultConfig())}
		e2 := e.restart(t, forgetful)
		for _, rq := range []struct {
			path, body, key string
			first           *response
		}{
			{"/v1/payments", paymentBody(cus, pm, 1500, "automatic"), "sale-1", sale},
			{"/v1/payments", paymentBody(cus, pm, 3000, "manual"), "auth-1", auth},
			{"/v1/payments", paymentBody(dcus, dpm, 500, "automatic"), "decl-1", decl},
			{"/v1/payments/" + id + "/capture", `{"amount":2000}`, "cap-1", capt},
			{"/v1/payments/" + id + "/refunds", `{"amount":700}`, "ref-1", refd},
		} {
			r := e2.do(e2.keyA, "POST", rq.path, rq.body, rq.key)
			if r.Status != rq.first.Status || string(r.Raw) != string(rq.first.Raw) {
				t.Errorf("%s after restart: got %d %s, want the stored %d %s", rq.key, r.Status, r.Raw, rq.first.Status, rq.first.Raw)
			}
			if r.Header.Get("Idempotent-Replayed") != "true" {
				t.Errorf("%s after restart: no Idempotent-Replayed header", rq.key)
			}
		}
		if n := forgetful.calls.Load(); n != 0 {
			t.Fatalf("provider calls after restart: got %d, want 0", n)
		}
		// A new key after the restart does reach the provider: the counter works.
		if r := e2.do(e2.keyA, "POST", "/v1/payments", paymentBody(cus, pm, 1500, "automatic"), "sale-2"); r.Status != 200 {
			t.Fatalf("new sale after restart: %d %s", r.Status, r.Raw)
		}
		if n := forgetful.calls.Load(); n != 1 {
			t.Fatalf("provider calls for a new key: got %d, want 1", n)
		}
	})
}
