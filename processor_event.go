package surgepay

import (
	"context"
	"net/http"
	"time"
)

// ProcessorEvent is what a processor's webhook tells about one of its
// objects, read and verified by the processor's EventParser.
type ProcessorEvent struct {
	ID   string // the processor's event id: each is applied once
	Kind string // a ProcessorEvent* kind; "" for an event surgepay ignores
	// PaymentRef is the authorization the event is about, as surgepay
	// stores it (a router names the processor: "stripe_eu:pi_…").
	PaymentRef string
	// Status is the object's status at the processor: a PaymentIntent's
	// (succeeded, canceled, …) or a dispute's (needs_response, won, lost …).
	Status string
	// AmountRefunded, for ProcessorEventRefunded: the total refunded at
	// the processor, whoever made the refunds.
	AmountRefunded int64
	// DisputeID, Amount and Reason, for disputes.
	DisputeID string
	Amount    int64
	Reason    string
	// DueBy, for disputes, is the deadline of the merchant's response
	// (Stripe: evidence_details.due_by); the zero time when the processor
	// gives none (a dispute the card's bank allows no response to, or one
	// closed).
	DueBy time.Time
	// MerchantID and PaymentID, when the processor knows surgepay's own
	// payment (the simulator): the payment is found by them, and its
	// reference must still be PaymentRef.
	MerchantID string
	PaymentID  string
}

// Processor event kinds.
const (
	// ProcessorEventPayment: a PaymentIntent changed (succeeded, failed,
	// canceled): an outcome surgepay may not know yet.
	ProcessorEventPayment = "payment"
	// ProcessorEventRefunded: the charge was refunded, perhaps from the
	// processor's own dashboard.
	ProcessorEventRefunded = "refunded"
	// ProcessorEventDisputeCreated, Updated, Closed: a chargeback.
	ProcessorEventDisputeCreated = "dispute.created"
	ProcessorEventDisputeUpdated = "dispute.updated"
	ProcessorEventDisputeClosed  = "dispute.closed"
)

// EventParser is a Provider that verifies and reads its processor's
// webhooks: processor names it in a router. A payload whose signature
// does not verify is an EINVALID error; one for a processor it does not
// know, ENOTFOUND.
type EventParser interface {
	ParseEvent(processor string, payload []byte, header http.Header) (*ProcessorEvent, error)
}

// EventProcessors is a Provider that can tell, before reading a webhook,
// whether it takes webhooks for a processor of that name (a router: the
// configured processors that parse events). The API refuses the others
// 404 before reading a body or taking a slot.
type EventProcessors interface {
	AcceptsEvents(processor string) bool
}

// AcceptsEvents reports whether p takes webhooks for processor: through
// EventProcessors when p can tell, else whether it parses events at all.
func AcceptsEvents(p Provider, processor string) bool {
	if ep, ok := p.(EventProcessors); ok {
		return ep.AcceptsEvents(processor)
	}
	_, ok := p.(EventParser)
	return ok
}

// OutsideRefunder is a Provider that can tell how much of an
// authorization's captured amount was refunded outside surgepay (the
// processor's dashboard): refunds surgepay made carry its key and are not
// counted. A processor's refund webhook is applied through it, so that a
// refund surgepay is still recording is never counted twice.
type OutsideRefunder interface {
	RefundedOutside(ctx context.Context, authorizationRef string) (int64, error)
}

// TxDispute is the type of a payment's dispute (chargeback) transaction:
// one for each change of a dispute, so that a payment keeps every dispute
// its processor opens on it and each one's history. Its Status is the
// dispute's at the processor (one of DisputeStatuses), ProviderRef the
// dispute's id, Message its reason, DueBy the deadline of the response.
const TxDispute = "dispute"

// Dispute is one of a payment's disputes, as its dispute transactions
// tell it (Payment.Disputes), and as the stores' disputes table keeps it
// for the operators (DisputeLister).
type Dispute struct {
	MerchantID string
	ID         string // the processor's dispute id, qualified as the payment's reference is ("stripe_eu:dp_…")
	PaymentID  string
	Status     string // the latest the processor told
	Reason     string // the latest non-empty reason the processor gave
	Amount     int64
	Currency   string // the payment's
	// DueBy is the deadline of the merchant's response, the latest the
	// processor gave; the zero time when it gave none (disputes recorded
	// before surgepay kept deadlines have none).
	DueBy   time.Time
	Created time.Time // when surgepay learned of it
	Updated time.Time // when surgepay learned of its latest change
}

// Disputes returns the payment's disputes, in the order they were opened:
// the dispute transactions grouped by the dispute's id. A payment written
// before each change had a transaction of its own holds one transaction
// per dispute, changed in place: its dispute reads with Updated equal to
// Created.
func (p *Payment) Disputes() []Dispute {
	var out []Dispute
	for i := range p.Transactions {
		t := &p.Transactions[i]
		if t.Type != TxDispute {
			continue
		}
		d := findDispute(out, t.ProviderRef)
		if d == nil {
			out = append(out, Dispute{MerchantID: p.MerchantID, ID: t.ProviderRef, PaymentID: p.ID,
				Currency: p.Currency, Created: t.Created})
			d = &out[len(out)-1]
		}
		d.Status, d.Amount, d.Updated = t.Status, t.Amount, t.Created
		if t.Message != "" {
			d.Reason = t.Message
		}
		if !t.DueBy.IsZero() {
			d.DueBy = t.DueBy
		}
	}
	return out
}

// Dispute returns the payment's dispute of that id, or nil.
func (p *Payment) Dispute(id string) *Dispute {
	return findDispute(p.Disputes(), id)
}

func findDispute(ds []Dispute, id string) *Dispute {
	for i := range ds {
		if ds[i].ID == id {
			return &ds[i]
		}
	}
	return nil
}

// PaymentByRefFinder is a Store that finds a payment by its processor
// reference (a router-qualified authorization reference, "stripe_eu:pi_…"),
// for the processor's webhooks, which know only their own ids. ENOTFOUND
// if none.
type PaymentByRefFinder interface {
	FindPaymentByRef(ctx context.Context, ref string) (*Payment, error)
}
