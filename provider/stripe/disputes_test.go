package stripe

import (
	"bytes"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/surgepay/surgepay"
)

// TestParseEventDisputeDeadline: a charge.dispute.created event as Stripe
// sends it (testdata: a dispute object with evidence_details) gives the
// dispute's deadline, evidence_details.due_by, with the rest; a dispute
// Stripe gives no deadline for (due_by 0: the bank allows no response)
// has none.
func TestParseEventDisputeDeadline(t *testing.T) {
	const secret = "whsec_test"
	p, err := New(Config{Name: "stripe_test", SecretKey: "sk_test_x", WebhookSecret: secret})
	if err != nil {
		t.Fatal(err)
	}
	fixture, err := os.ReadFile("testdata/charge.dispute.created.json")
	if err != nil {
		t.Fatal(err)
	}
	parse := func(t *testing.T, body []byte) *surgepay.ProcessorEvent {
		t.Helper()
		sp := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: time.Now()})
		ev, err := p.ParseEvent("stripe_test", body, http.Header{"Stripe-Signature": {sp.Header}})
		if err != nil {
			t.Fatalf("ParseEvent: %v", err)
		}
		return ev
	}
	t.Run("OK", func(t *testing.T) {
		ev := parse(t, fixture)
		want := surgepay.ProcessorEvent{ID: "evt_1QdisputeFixture0001", Kind: surgepay.ProcessorEventDisputeCreated,
			PaymentRef: "pi_3QdisputeFixture0001", Status: surgepay.DisputeNeedsResponse, DisputeID: "dp_1QdisputeFixture0001",
			Amount: 9105, Reason: "fraudulent", DueBy: time.Date(2025, 12, 6, 23, 59, 59, 0, time.UTC)}
		if *ev != want {
			t.Fatalf("got %+v\nwant %+v", *ev, want)
		}
	})
	t.Run("NoDeadline", func(t *testing.T) {
		body := bytes.Replace(fixture, []byte(`"due_by": 1765065599`), []byte(`"due_by": 0`), 1)
		if bytes.Equal(body, fixture) {
			t.Fatal("the fixture has no due_by to replace")
		}
		if ev := parse(t, body); !ev.DueBy.IsZero() || ev.DisputeID != "dp_1QdisputeFixture0001" {
			t.Fatalf("due_by 0: got %+v, want the dispute without a deadline", *ev)
		}
	})
}
