package surgepay

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Provider is a card network or processor connection. Every call carries a
// deterministic IdempotencyKey: the provider performs an operation at most
// once per key and answers a repeated key with the first result.
//
// A call has three kinds of outcome, and callers must keep them apart:
//   - a Result, approved or declined: final (a decline is never retried);
//   - a *ProviderError with NotPerformed: nothing happened, safe to retry;
//   - a *ProviderError with Unknown: it may have happened; resolve it with
//     Lookup by the same key, never by a blind retry under a new key.
type Provider interface {
	Authorize(ctx context.Context, req *AuthorizeRequest) (*ProviderResult, error)
	Capture(ctx context.Context, req *CaptureRequest) (*ProviderResult, error)
	Void(ctx context.Context, req *VoidRequest) (*ProviderResult, error)
	Refund(ctx context.Context, req *RefundRequest) (*ProviderResult, error)
	// Lookup returns the result of the operation performed under key, or a
	// *ProviderError with NotPerformed if the provider has no such operation.
	Lookup(ctx context.Context, key string) (*ProviderResult, error)
}

// AuthorizeRequest asks to authorize (and, with Capture, capture at once:
// a sale) an amount on a card.
type AuthorizeRequest struct {
	IdempotencyKey string
	MerchantID     string
	PaymentID      string
	Amount         int64
	Currency       string
	Card           ProviderCard
	// Token, if set, is the processor's own payment method (Stripe: a pm_…
	// collected by Stripe.js on the merchant's page) used instead of Card.
	Token string
	// TokenCustomer is the processor's customer Token is attached to, if
	// any (PaymentMethod.ProcessorCustomer).
	TokenCustomer string
	// Processor, if set, pins the authorization to that processor (a
	// token is valid at its own processor only); a router then never
	// fails over.
	Processor string
	Capture   bool
	// ReturnURL, for a browser's payment (docs/checkout.md), is where the
	// processor's authentication page (3-D Secure) sends the shopper back
	// once done. Empty for a server's payment, which cannot authenticate
	// the cardholder: a card whose issuer demands it is declined
	// DeclineAuthenticationRequired, nothing charged.
	ReturnURL string
}

// ProviderCard is card data for one provider call. The CVC is present only
// in the request that received it from the client.
type ProviderCard struct {
	Number   PAN
	ExpMonth int
	ExpYear  int
	CVC      CVC
}

// CaptureRequest captures Amount of an authorization.
type CaptureRequest struct {
	IdempotencyKey   string
	AuthorizationRef string
	Amount           int64
	Currency         string
}

// VoidRequest releases an uncaptured authorization.
type VoidRequest struct {
	IdempotencyKey   string
	AuthorizationRef string
}

// RefundRequest returns Amount of a captured authorization.
type RefundRequest struct {
	IdempotencyKey   string
	AuthorizationRef string
	Amount           int64
	Currency         string
}

// ProviderResult is a final answer from the provider.
type ProviderResult struct {
	Approved    bool
	Reference   string // the provider's reference for the operation.
	DeclineCode string // when declined: e.g. "insufficient_funds".
	Message     string
	Amount      int64
	Operation   string // for Lookup: TxAuthorization, TxCapture, TxVoid or TxRefund.
	Captured    bool   // for an authorization: it was a sale.
	// PaymentID is, for an authorization, the payment ID the provider
	// recorded with the FIRST request under this idempotency key: a replay
	// (a retry after a crash, which made a new payment ID) answers with the
	// original's, so the engine stores the payment under the ID the network
	// knows. Empty if the provider does not echo it.
	PaymentID string
	// RequiresAction, for an authorization sent with a ReturnURL: the
	// issuer asks the cardholder to authenticate (3-D Secure) first, at
	// ActionURL; nothing is authorized yet. Lookup by the same key answers
	// RequiresAction until the cardholder has finished, then the
	// authorization's outcome (approved, or declined with
	// DeclineAuthenticationFailed).
	RequiresAction bool
	ActionURL      string
}

// Provider error outcomes.
const (
	NotPerformed = "not_performed" // nothing happened; safe to retry.
	Unknown      = "unknown"       // may have happened; reconcile by key.
)

// ProviderError is a provider call that gave no final answer.
type ProviderError struct {
	Outcome string // NotPerformed or Unknown.
	Op      string
	Err     error
	// Processor names the processor the call went to, when a router chose
	// it: an unknown outcome must be looked up there and nowhere else.
	Processor string
	// RetryAfter, for NotPerformed, is how long the caller should wait
	// before trying again (a processor's call budget is spent); 0: soon.
	RetryAfter time.Duration
}

func (e *ProviderError) Error() string {
	return fmt.Sprintf("provider %s: %s: %v", e.Op, e.Outcome, e.Err)
}

func (e *ProviderError) Unwrap() error { return e.Err }

// IsNotPerformed reports whether err says the operation did not happen.
func IsNotPerformed(err error) bool {
	var pe *ProviderError
	return errors.As(err, &pe) && pe.Outcome == NotPerformed
}

// IsUnknown reports whether err leaves the outcome unknown. Any error that is
// not a *ProviderError (a cancelled context, a broken connection) is unknown:
// the request may have reached the provider.
func IsUnknown(err error) bool {
	if err == nil {
		return false
	}
	var pe *ProviderError
	if errors.As(err, &pe) {
		return pe.Outcome == Unknown
	}
	return true
}

// LookupQuery describes an operation whose outcome is unknown, for
// processors that cannot find an operation by its key alone (Stripe keeps
// no index by idempotency key: its objects are found by id, or by the
// metadata surgepay sets on them).
type LookupQuery struct {
	Key              string
	Operation        string // TxAuthorization, TxCapture, TxVoid or TxRefund.
	Processor        string // the processor it was sent to; "" the default.
	MerchantID       string
	AuthorizationRef string // for a capture, void or refund.
	// Reference is the operation's own reference, when the processor gave
	// one before its outcome (an authorization awaiting 3-D Secure): the
	// processor looks it up by it rather than by Key.
	Reference string
	Amount    int64
	Currency  string
	// Attempted is when the operation's last attempt ended (the call
	// returned, or the pending operation was stored): an attempt may go
	// on executing at the processor after its caller gave up, so a lookup
	// that finds nothing within the processor's lag of Attempted proves
	// nothing.
	Attempted time.Time
}

// OperationLookuper is a Provider that resolves an unknown outcome better
// from a LookupQuery than from the key alone. LookupOperation answers as
// Lookup does: a result, NotPerformed, or still unknown.
type OperationLookuper interface {
	LookupOperation(ctx context.Context, q *LookupQuery) (*ProviderResult, error)
}

// LookupOperation looks q up at p, through OperationLookuper if p has it.
func LookupOperation(ctx context.Context, p Provider, q *LookupQuery) (*ProviderResult, error) {
	if l, ok := p.(OperationLookuper); ok {
		return l.LookupOperation(ctx, q)
	}
	return p.Lookup(ctx, q.Key)
}

// ProcessorOf returns the processor named in an unknown or not-performed
// provider error, or "".
func ProcessorOf(err error) string {
	var pe *ProviderError
	if errors.As(err, &pe) {
		return pe.Processor
	}
	return ""
}

// Decline codes used by the simulator and mapped by connectors.
const (
	DeclineGeneric           = "generic_decline"
	DeclineInsufficientFunds = "insufficient_funds"
	DeclineExpiredCard       = "expired_card"
	DeclineIncorrectCVC      = "incorrect_cvc"
	DeclineProcessingError   = "processing_error"
	// DeclineAuthenticationRequired: the issuer asked for 3-D Secure on a
	// payment that cannot authenticate the cardholder (a server's, without
	// a ReturnURL); the processor's attempt was cancelled and nothing was
	// charged.
	DeclineAuthenticationRequired = "authentication_required"
	// DeclineAuthenticationFailed: the cardholder did not authenticate
	// (failed or abandoned the 3-D Secure challenge); nothing charged.
	DeclineAuthenticationFailed = "authentication_failed"
	// DeclineAuthenticationUnavailable: the issuer's authentication
	// service could not be reached; nothing charged, the shopper may try
	// again or another card.
	DeclineAuthenticationUnavailable = "authentication_unavailable"
)

// PageServer is a processor that serves pages to shoppers from surgepay's
// own API listener, under PagesPrefix: the simulator's 3-D Secure
// challenge, standing in for an issuer's page.
type PageServer interface {
	Pages() http.Handler
}

// PageServerOf returns p's PageServer, looking through decorators
// (telemetry's) that wrap a provider without serving its pages; nil if
// none.
func PageServerOf(p Provider) PageServer {
	for p != nil {
		if ps, ok := p.(PageServer); ok {
			return ps
		}
		u, ok := p.(interface{ Unwrap() Provider })
		if !ok {
			return nil
		}
		p = u.Unwrap()
	}
	return nil
}

// Moder is a Provider that knows whether it moves real money: Mode is
// "live" (a Stripe live key), "test", or "" when it cannot tell.
type Moder interface {
	Mode() string
}

// ModeOf returns p's mode (Moder), looking through decorators; "" if
// nothing says.
func ModeOf(p Provider) string {
	for p != nil {
		if m, ok := p.(Moder); ok {
			return m.Mode()
		}
		u, ok := p.(interface{ Unwrap() Provider })
		if !ok {
			return ""
		}
		p = u.Unwrap()
	}
	return ""
}

// PagesPrefix is where a PageServer's pages are served on the API listener.
const PagesPrefix = "/simulator/v1/"

// ErrKeyReused is wrapped by a provider's NotPerformed error when an
// idempotency key is repeated with different parameters.
var ErrKeyReused = errors.New("idempotency key reused with different parameters")
