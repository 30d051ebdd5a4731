package api_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/engine"
	"github.com/surgepay/surgepay/internal/testenv"
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
