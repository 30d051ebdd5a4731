package stripe

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/surgepay/surgepay"
)

// signedEventAt is a Stripe event about a dispute, signed with secret at
// the time at, as Stripe signs its webhooks (the SDK's test signer).
func signedEventAt(t *testing.T, secret string, at time.Time) ([]byte, http.Header) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"id": "evt_1", "object": "event", "type": "charge.dispute.created",
		"created": at.Unix(), "data": map[string]any{"object": map[string]any{"id": "dp_1", "object": "dispute",
			"amount": 1000, "status": "needs_response", "reason": "fraudulent", "payment_intent": "pi_1"}}})
	if err != nil {
		t.Fatal(err)
	}
	sp := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: at})
	return body, http.Header{"Stripe-Signature": {sp.Header}}
}

// TestParseEventTimestampTolerance: a signed timestamp more than
// EventTolerance from now is refused either way; a future one was
// applied (the SDK checks only the age), so a captured webhook signed
// ahead of the clock could be replayed until then.
func TestParseEventTimestampTolerance(t *testing.T) {
	const secret = "whsec_test"
	p, err := New(Config{Name: "stripe_test", SecretKey: "sk_test_x", WebhookSecret: secret})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		offset time.Duration
		ok     bool
	}{
		{"OK", 0, true},
		{"OKPast", -EventTolerance + time.Minute, true},
		{"OKFuture", EventTolerance - time.Minute, true},
		{"ErrPast", -EventTolerance - 100*time.Second, false},
		{"ErrFuture", EventTolerance + 100*time.Second, false},
		{"ErrFarFuture", 24 * time.Hour, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, header := signedEventAt(t, secret, time.Now().Add(tc.offset))
			ev, err := p.ParseEvent("stripe_test", body, header)
			if tc.ok {
				if err != nil || ev.Kind != surgepay.ProcessorEventDisputeCreated || ev.DisputeID != "dp_1" {
					t.Fatalf("signed %s from now: got %+v, %v; want the dispute", tc.offset, ev, err)
				}
				return
			}
			if surgepay.ErrorCode(err) != surgepay.EINVALID || surgepay.ErrorReason(err) != "invalid_signature" {
				t.Fatalf("signed %s from now: got %+v, %v; want EINVALID invalid_signature", tc.offset, ev, err)
			}
		})
	}
}
