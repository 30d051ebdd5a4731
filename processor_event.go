package surgepay

import (
	"context"
	"net/http"
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
// its Status is the dispute's at the processor (needs_response,
// under_review, won, lost, warning_*), ProviderRef the dispute's id.
const TxDispute = "dispute"

// Dispute returns the payment's latest dispute transaction, or nil.
func (p *Payment) Dispute() *Transaction {
	for i := len(p.Transactions) - 1; i >= 0; i-- {
		if p.Transactions[i].Type == TxDispute {
			return &p.Transactions[i]
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
