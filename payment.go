package surgepay

import (
	"fmt"
	"time"
)

// Status is the state of a payment. See docs/state-machine.md.
type Status string

const (
	// StatusRequiresPaymentMethod: made by the merchant's server for a
	// browser to pay (docs/checkout.md): no card yet, nothing authorized.
	// A confirm with a card moves it on; a declined confirm leaves it here,
	// so that the shopper may try again.
	StatusRequiresPaymentMethod Status = "requires_payment_method"
	// StatusRequiresAction: a browser's confirm the issuer answered with
	// a 3-D Secure challenge: the shopper must authenticate at the
	// processor's page (the payment's next action); nothing authorized
	// yet. The authentication's end moves it on.
	StatusRequiresAction Status = "requires_action"
	// StatusRequiresCapture: authorized, not yet captured (capture_method=manual).
	StatusRequiresCapture Status = "requires_capture"
	// StatusProcessing: a provider operation's outcome is not known yet
	// (the answer was lost); the engine reconciles it by idempotency key.
	StatusProcessing Status = "processing"
	// StatusSucceeded: captured (fully or partially), nothing refunded.
	StatusSucceeded Status = "succeeded"
	// StatusCanceled: the authorization was voided. Terminal.
	StatusCanceled Status = "canceled"
	// StatusFailed: the authorization was declined or failed. Terminal.
	StatusFailed Status = "failed"
	// StatusPartiallyRefunded: some, not all, of the captured amount refunded.
	StatusPartiallyRefunded Status = "partially_refunded"
	// StatusRefunded: all of the captured amount refunded. Terminal.
	StatusRefunded Status = "refunded"
)

// Statuses lists every status, for validation and tests.
var Statuses = []Status{StatusRequiresPaymentMethod, StatusRequiresAction, StatusRequiresCapture, StatusProcessing, StatusSucceeded,
	StatusCanceled, StatusFailed, StatusPartiallyRefunded, StatusRefunded}

// Valid reports whether s is a known status.
func (s Status) Valid() bool {
	for _, v := range Statuses {
		if s == v {
			return true
		}
	}
	return false
}

// Terminal reports whether no operation can change a payment in s.
func (s Status) Terminal() bool {
	return s == StatusCanceled || s == StatusFailed || s == StatusRefunded
}

// transitions is the state machine: the statuses each status may move to.
// "" is a payment not yet stored.
var transitions = map[Status][]Status{
	"": {StatusRequiresPaymentMethod, StatusRequiresCapture, StatusSucceeded, StatusFailed, StatusProcessing},
	// requires_payment_method → requires_payment_method: a declined
	// confirm, recorded, the shopper may try another card.
	StatusRequiresPaymentMethod: {StatusRequiresPaymentMethod, StatusRequiresCapture, StatusSucceeded,
		StatusProcessing, StatusCanceled},
	// requires_action: authenticated and authorized, or not (back to
	// requires_payment_method: the shopper may try again).
	StatusRequiresAction:  {StatusRequiresPaymentMethod, StatusRequiresCapture, StatusSucceeded},
	StatusRequiresCapture: {StatusSucceeded, StatusCanceled, StatusProcessing},
	// succeeded → failed only when settlement's staged capture of a
	// streamlined sale is declined (FailStagedCapture).
	StatusSucceeded:         {StatusPartiallyRefunded, StatusRefunded, StatusProcessing, StatusFailed},
	StatusPartiallyRefunded: {StatusPartiallyRefunded, StatusRefunded, StatusProcessing},
	StatusProcessing: {StatusRequiresCapture, StatusSucceeded, StatusFailed, StatusCanceled,
		StatusPartiallyRefunded, StatusRefunded, StatusRequiresPaymentMethod, StatusRequiresAction},
}

// CanTransition reports whether the state machine allows from → to.
func CanTransition(from, to Status) bool {
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// Capture methods.
const (
	CaptureAutomatic = "automatic" // a sale: authorize and capture at once.
	CaptureManual    = "manual"    // authorize only; capture later.
)

// Transaction types and statuses.
const (
	TxAuthorization = "authorization"
	TxCapture       = "capture"
	TxVoid          = "void"
	TxRefund        = "refund"

	TxSucceeded = "succeeded"
	TxFailed    = "failed"
	TxPending   = "pending" // outcome unknown; being reconciled.
)

// Transaction is one provider operation on a payment.
type Transaction struct {
	ID             string
	Type           string
	Status         string
	Amount         int64
	ProviderRef    string
	IdempotencyKey string // the deterministic key sent to the provider.
	DeclineCode    string
	Message        string
	Created        time.Time
	// DueBy, on a dispute transaction (TxDispute), is the deadline of the
	// merchant's response (Stripe's evidence_details.due_by); the zero
	// time when the processor gave none. Other transactions leave it zero.
	DueBy time.Time
}

// Pending records an operation whose provider outcome is unknown, so that
// reconciliation knows what to look up and where to return.
type Pending struct {
	Type           string // TxAuthorization, TxCapture, TxVoid or TxRefund.
	Amount         int64
	IdempotencyKey string
	Capture        bool // for TxAuthorization: a sale.
	// CaptureLater, for a TxAuthorization sent as authorize-only by the
	// streamlined path: once approved, reconciliation captures it.
	CaptureLater bool
	From         Status // the status before the operation.
	TxID         string // the pending transaction.
	// Processor is where the operation was sent, when a router chose it:
	// reconciliation looks it up there. "" for the default provider.
	Processor string
	// ActionURL, while the payment is requires_action, is the processor's
	// authentication page the shopper must visit (3-D Secure).
	ActionURL string
	// ReturnURL is where the merchant asked the shopper to be sent once
	// the authentication is over (a browser's confirm's return_url).
	ReturnURL string
	// Reference, while the payment is requires_action, is the processor's
	// reference of the authorization awaiting authentication (Stripe's
	// PaymentIntent), if it gave one: looked up by it, not by its key
	// (which Stripe finds only through its lagging search), and cancelled
	// by it when abandoned.
	Reference string
}

// Tax is the tax request and result of a payment.
type Tax struct {
	Country    string
	Region     string
	PostalCode string
	Category   string
	RateBPS    int
}

// Payment is a card payment and its history.
type Payment struct {
	ID              string
	MerchantID      string
	CustomerID      string
	PaymentMethodID string
	Amount          int64 // requested amount before tax, minor units.
	AmountTax       int64
	Currency        string
	CaptureMethod   string
	Status          Status
	// AmountAuthorized is what the provider approved (Amount+AmountTax).
	AmountAuthorized int64
	AmountCaptured   int64
	AmountRefunded   int64
	Description      string
	Metadata         map[string]string
	Tax              *Tax
	DeclineCode      string
	FailureMessage   string
	AuthorizationRef string
	Transactions     []Transaction
	Pending          *Pending
	Path             string // "standard" or "streamlined".
	Version          int64  // incremented on every stored change; guards updates.
	// ClientSecret is the browser's token for this payment (docs/checkout.md)
	// while it awaits one (requires_payment_method): made when the payment
	// is answered to the merchant's server, never stored with it.
	ClientSecret string
	Created      time.Time
	Updated      time.Time
}

// AmountTotal is the amount to authorize: Amount plus AmountTax.
func (p *Payment) AmountTotal() int64 { return p.Amount + p.AmountTax }

// AmountCapturable is what a capture may still take.
func (p *Payment) AmountCapturable() int64 {
	if p.Status != StatusRequiresCapture {
		return 0
	}
	return p.AmountAuthorized
}

// AmountRefundable is what refunds may still return.
func (p *Payment) AmountRefundable() int64 {
	if p.Status != StatusSucceeded && p.Status != StatusPartiallyRefunded {
		return 0
	}
	return p.AmountCaptured - p.AmountRefunded
}

// RefundCount returns the number of refund transactions, pending included.
func (p *Payment) RefundCount() int {
	n := 0
	for i := range p.Transactions {
		if p.Transactions[i].Type == TxRefund {
			n++
		}
	}
	return n
}

// ProviderKey returns the deterministic idempotency key sent to the provider
// for an operation on this payment. A retry of the same operation sends the
// same key, so the provider performs it at most once. Refunds are numbered.
func (p *Payment) ProviderKey(op string) string {
	if op == TxRefund {
		return fmt.Sprintf("%s/refund/%d", p.ID, p.RefundCount()+1)
	}
	return p.ID + "/" + op
}

func illegal(p *Payment, op string) error {
	return &Error{Code: ECONFLICT, Reason: "illegal_transition", Param: "",
		Message: fmt.Sprintf("cannot %s a payment in status %s", op, p.Status)}
}

// CheckCapture validates a capture of amount (0 means the full authorized
// amount) and returns the amount to capture. A payment is captured once: a
// partial capture releases the rest of the authorization.
func (p *Payment) CheckCapture(amount int64) (int64, error) {
	if p.Status != StatusRequiresCapture {
		return 0, illegal(p, "capture")
	}
	if amount == 0 {
		return p.AmountAuthorized, nil
	}
	if err := ValidateAmount("amount", amount); err != nil {
		return 0, err
	}
	if amount > p.AmountAuthorized {
		return 0, &Error{Code: EUNPROCESS, Reason: "amount_exceeds_authorized", Param: "amount",
			Message: fmt.Sprintf("amount %d exceeds the authorized amount %d", amount, p.AmountAuthorized)}
	}
	return amount, nil
}

// CheckVoid validates a void of the authorization.
func (p *Payment) CheckVoid() error {
	if p.Status != StatusRequiresCapture {
		return illegal(p, "void")
	}
	return nil
}

// CheckRefund validates a refund of amount (0 means all that remains) and
// returns the amount to refund.
func (p *Payment) CheckRefund(amount int64) (int64, error) {
	if p.Status != StatusSucceeded && p.Status != StatusPartiallyRefunded {
		return 0, illegal(p, "refund")
	}
	if p.StagedCapture() != nil {
		return 0, &Error{Code: ECONFLICT, Reason: "capture_pending",
			Message: "the capture of this payment is staged for settlement; refund it once settled"}
	}
	if p.RefundCount() >= RefundsPerPaymentMax {
		return 0, &Error{Code: EUNPROCESS, Reason: "too_many_refunds",
			Message: fmt.Sprintf("a payment may have at most %d refunds", RefundsPerPaymentMax)}
	}
	left := p.AmountRefundable()
	if amount == 0 {
		return left, nil
	}
	if err := ValidateAmount("amount", amount); err != nil {
		return 0, err
	}
	if amount > left {
		return 0, &Error{Code: EUNPROCESS, Reason: "amount_exceeds_refundable", Param: "amount",
			Message: fmt.Sprintf("amount %d exceeds the refundable amount %d", amount, left)}
	}
	return amount, nil
}

// SetStatus moves p to status to, checking the state machine. An illegal
// move is a programmer error in the engine: it panics, because a payment in
// a state the machine does not allow must never be stored.
func (p *Payment) SetStatus(to Status) {
	if !CanTransition(p.Status, to) {
		panic(fmt.Sprintf("surgepay: illegal transition %q -> %q for %s", p.Status, to, p.ID))
	}
	p.Status = to
}

// StatusAfterRefund returns the status once AmountRefunded is updated.
func (p *Payment) StatusAfterRefund() Status {
	if p.AmountRefunded >= p.AmountCaptured {
		return StatusRefunded
	}
	if p.AmountRefunded > 0 {
		return StatusPartiallyRefunded
	}
	return StatusSucceeded
}

// Clone returns a deep copy, so a cached payment is never changed in place.
func (p *Payment) Clone() *Payment {
	c := *p
	c.Transactions = append([]Transaction(nil), p.Transactions...)
	if p.Metadata != nil {
		c.Metadata = make(map[string]string, len(p.Metadata))
		for k, v := range p.Metadata {
			c.Metadata[k] = v
		}
	}
	if p.Tax != nil {
		t := *p.Tax
		c.Tax = &t
	}
	if p.Pending != nil {
		q := *p.Pending
		c.Pending = &q
	}
	return &c
}

// Event is one immutable row of a payment's audit trail: a state change.
type Event struct {
	ID         string
	PaymentID  string
	MerchantID string
	Type       string // a transaction type, or "reconcile".
	FromStatus Status
	ToStatus   Status
	Amount     int64
	ActorKeyID string // the API key that caused it; "system" for background work.
	RequestID  string
	Created    time.Time
}

// StagedCapture returns the pending capture transaction of a streamlined
// sale, or nil. A streamlined sale is stored succeeded with its capture
// transaction pending until settlement captures it.
func (p *Payment) StagedCapture() *Transaction {
	for i := range p.Transactions {
		t := &p.Transactions[i]
		if t.Type == TxCapture && t.Status == TxPending && p.Pending == nil {
			return t
		}
	}
	return nil
}

// SettleCapture records that settlement captured the staged capture with
// the provider reference ref. It returns false if there is no staged
// capture (already settled, or not a streamlined sale).
func (p *Payment) SettleCapture(ref string, now time.Time) bool {
	t := p.StagedCapture()
	if t == nil {
		return false
	}
	t.Status, t.ProviderRef = TxSucceeded, ref
	p.Version++
	p.Updated = now
	return true
}

// FailStagedCapture records that the network declined the staged capture
// at settlement: the payment, which the client saw succeed, moves to
// failed with the decline, and nothing is captured. It returns false if
// there is no staged capture.
func (p *Payment) FailStagedCapture(declineCode, message string, now time.Time) bool {
	t := p.StagedCapture()
	if t == nil {
		return false
	}
	t.Status, t.DeclineCode, t.Message = TxFailed, declineCode, message
	p.AmountCaptured = 0
	p.DeclineCode, p.FailureMessage = declineCode, message
	p.SetStatus(StatusFailed)
	p.Version++
	p.Updated = now
	return true
}
