package surgepay

import (
	"context"
	"errors"
	"fmt"
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
	Capture        bool
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

// Decline codes used by the simulator and mapped by connectors.
const (
	DeclineGeneric           = "generic_decline"
	DeclineInsufficientFunds = "insufficient_funds"
	DeclineExpiredCard       = "expired_card"
	DeclineIncorrectCVC      = "incorrect_cvc"
	DeclineProcessingError   = "processing_error"
)

// ErrKeyReused is wrapped by a provider's NotPerformed error when an
// idempotency key is repeated with different parameters.
var ErrKeyReused = errors.New("idempotency key reused with different parameters")
