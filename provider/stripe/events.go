package stripe

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	stripego "github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/surgepay/surgepay"
)

// EventTolerance is how far a webhook's signed timestamp may be from now,
// either way: older is refused as a replay (Stripe's own default), and so
// is later, since a timestamp ahead of the clock would let a captured
// webhook be replayed for as long as it is ahead.
const EventTolerance = webhook.DefaultTolerance

var _ surgepay.EventParser = (*Provider)(nil)

// ParseEvent verifies a Stripe webhook (the Stripe-Signature header, with
// Config.WebhookSecret, through the SDK's webhook package; at most
// EventTolerance from now, before or after) and reads what surgepay
// applies:
//
//	payment_intent.succeeded, .payment_failed, .canceled   ProcessorEventPayment
//	charge.refunded                                       ProcessorEventRefunded
//	charge.dispute.created, .updated, .closed             ProcessorEventDispute*
//
// A dispute's deadline is its evidence_details.due_by (DueBy).
//
// Any other type verifies and is ignored (Kind ""). A bad signature, a
// stale or future one or no secret configured is EINVALID on
// Stripe-Signature.
func (p *Provider) ParseEvent(_ string, payload []byte, header http.Header) (*surgepay.ProcessorEvent, error) {
	if p.cfg.WebhookSecret == "" {
		return nil, surgepay.Invalid("Stripe-Signature", "invalid_value",
			"no webhook_secret is configured for processor %s", p.cfg.Name)
	}
	ev, err := webhook.ConstructEventWithOptions(payload, header.Get("Stripe-Signature"), p.cfg.WebhookSecret,
		webhook.ConstructEventOptions{Tolerance: EventTolerance, IgnoreAPIVersionMismatch: true})
	if err != nil {
		return nil, surgepay.Invalid("Stripe-Signature", "invalid_signature", "the webhook's signature does not verify: %v", err)
	}
	// The SDK refuses only old timestamps (time.Since(t) > tolerance): a
	// future one is refused here, once the signature says it is the
	// processor's.
	if ahead := time.Until(signedAt(header.Get("Stripe-Signature"))); ahead > EventTolerance {
		return nil, surgepay.Invalid("Stripe-Signature", "invalid_signature",
			"the webhook's timestamp is %s in the future, beyond the tolerance of %s", ahead.Round(time.Second), EventTolerance)
	}
	out := &surgepay.ProcessorEvent{ID: ev.ID}
	raw := ev.Data.Raw
	switch ev.Type {
	case "payment_intent.succeeded", "payment_intent.payment_failed", "payment_intent.canceled":
		var pi stripego.PaymentIntent
		if err := json.Unmarshal(raw, &pi); err != nil {
			return nil, invalidObject(err)
		}
		out.Kind, out.PaymentRef, out.Status = surgepay.ProcessorEventPayment, pi.ID, string(pi.Status)
	case "charge.refunded":
		var ch stripego.Charge
		if err := json.Unmarshal(raw, &ch); err != nil {
			return nil, invalidObject(err)
		}
		if ch.PaymentIntent != nil {
			out.Kind, out.PaymentRef, out.AmountRefunded = surgepay.ProcessorEventRefunded, ch.PaymentIntent.ID, ch.AmountRefunded
		}
	case "charge.dispute.created", "charge.dispute.updated", "charge.dispute.closed":
		var d stripego.Dispute
		if err := json.Unmarshal(raw, &d); err != nil {
			return nil, invalidObject(err)
		}
		if d.PaymentIntent != nil {
			out.Kind = map[stripego.EventType]string{"charge.dispute.created": surgepay.ProcessorEventDisputeCreated,
				"charge.dispute.updated": surgepay.ProcessorEventDisputeUpdated,
				"charge.dispute.closed":  surgepay.ProcessorEventDisputeClosed}[ev.Type]
			out.PaymentRef, out.DisputeID, out.Amount = d.PaymentIntent.ID, d.ID, d.Amount
			out.Status, out.Reason = string(d.Status), string(d.Reason)
			// due_by: Unix seconds; 0 (or no evidence_details) when the
			// card's bank allows no response.
			if ed := d.EvidenceDetails; ed != nil && ed.DueBy > 0 {
				out.DueBy = time.Unix(ed.DueBy, 0).UTC()
			}
		}
	}
	return out, nil
}

// signedAt is the timestamp (t=) of a Stripe-Signature header that the
// SDK has verified, or the zero time.
func signedAt(header string) time.Time {
	for pair := range strings.SplitSeq(header, ",") {
		if v, ok := strings.CutPrefix(pair, "t="); ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				return time.Unix(n, 0)
			}
		}
	}
	return time.Time{}
}

func invalidObject(err error) error {
	return surgepay.Invalid("body", "invalid_json", "the event's object is not what its type says: %v", err)
}
