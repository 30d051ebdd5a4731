package stripe_test

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/provider/stripe"
	"github.com/surgepay/surgepay/provider/stripe/stripedouble"
)

// revokedKey answers every request as Stripe answers a revoked key.
func revokedKey(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Request-Id", "req_revoked")
		w.WriteHeader(http.StatusUnauthorized)
		w.Write([]byte(`{"error":{"type":"invalid_request_error","code":"api_key_expired","message":"Expired API Key provided"}}`))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// closedPort returns an address nothing listens on.
func closedPort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

// TestProviderErrorKeepsStripeStatusAndCode: a 401 used to reach the
// operator only as text inside a 503; the ProviderError now carries
// Stripe's status, code and message as a *stripe.CallError, without the key.
func TestProviderErrorKeepsStripeStatusAndCode(t *testing.T) {
	p := newConnector(t, revokedKey(t), nil)
	_, err := p.Authorize(t.Context(), &surgepay.AuthorizeRequest{PaymentID: "pay_1", IdempotencyKey: "k1",
		Amount: 1000, Currency: "usd", Card: surgepay.ProviderCard{Number: "4242424242424242", ExpMonth: 12, ExpYear: 2034}})
	if !surgepay.IsNotPerformed(err) {
		t.Fatalf("got %v, want not performed", err)
	}
	var ce *stripe.CallError
	if !errors.As(err, &ce) {
		t.Fatalf("got %T %v, want a *stripe.CallError inside", err, err)
	}
	if ce.Status != 401 || ce.Code != "api_key_expired" || ce.Message != "Expired API Key provided" || ce.RequestID != "req_revoked" {
		t.Errorf("got %+v, want 401 api_key_expired with its message and request id", *ce)
	}
	if strings.Contains(err.Error(), "sk_test_surgepay") {
		t.Errorf("got %q, want no key in the error", err)
	}
}

// TestCheck: the harmless read says ok for a working key and what is
// wrong otherwise.
func TestCheck(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		p := newConnector(t, stripedouble.StartStripeMock(t), nil)
		if err := p.Check(t.Context()); err != nil {
			t.Fatalf("got %v, want nil", err)
		}
		if got := p.Mode(); got != "test" {
			t.Errorf("got mode %q, want test", got)
		}
	})
	t.Run("Revoked", func(t *testing.T) {
		err := newConnector(t, revokedKey(t), nil).Check(t.Context())
		if got := stripe.CheckProblem(err); !strings.Contains(got, "authentication failed (401") || !strings.Contains(got, "api_key_expired") {
			t.Errorf("got %q, want authentication failed (401 … api_key_expired", got)
		}
	})
	t.Run("Refused", func(t *testing.T) {
		err := newConnector(t, closedPort(t), nil).Check(t.Context())
		if got := stripe.CheckProblem(err); !strings.HasPrefix(got, "unreachable: connection refused") {
			t.Errorf("got %q, want unreachable: connection refused", got)
		}
	})
}
