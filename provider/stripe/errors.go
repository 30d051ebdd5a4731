package stripe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	stripego "github.com/stripe/stripe-go/v82"

	"github.com/surgepay/surgepay"
)

// outcome is how one attempt of a call ended.
type outcome int

const (
	answered     outcome = iota // a result: approved, or declined (final)
	notPerformed                // nothing happened at Stripe
	unknown                     // it may have happened
	inProgress                  // Stripe is still processing this key (409): unknown, worth waiting for
)

// classification is one attempt's outcome with what the caller gets.
type classification struct {
	outcome    outcome
	result     *surgepay.ProviderResult // for answered
	err        error                    // the cause, for the others
	keyReused  bool                     // Stripe's idempotency_error: the key was used with other parameters
	retryAfter time.Duration            // for a 429
}

// classify maps one attempt's error from the SDK (nil: success) onto
// surgepay's outcomes. docs/processors.md has this as a table, and
// TestClassify pins it.
//
//	card_error (402)                      declined: decline_code, else code
//	402 without card_error (card_declined) declined generic_decline
//	409 (lock, idempotency key in use)    unknown; retried under the same key
//	idempotency_error (400)               not performed, ErrKeyReused
//	invalid_request_error (400, 404)      declined invalid_request (the money rules)
//	authentication / permission (401, 403) not performed
//	rate_limit (429)                      not performed, with Retry-After
//	api_error and any 5xx                 unknown; retried under the same key
//	connection refused, DNS, dial timeout not performed (nothing was sent)
//	timeout, reset, unreadable answer     unknown; retried under the same key
func classify(err error) classification {
	if err == nil {
		return classification{outcome: answered}
	}
	var se *stripego.Error
	if !errors.As(err, &se) {
		if sentNothing(err) {
			return classification{outcome: notPerformed, err: err}
		}
		return classification{outcome: unknown, err: err}
	}
	status := se.HTTPStatusCode
	switch {
	case se.Type == stripego.ErrorTypeCard || status == http.StatusPaymentRequired:
		res := &surgepay.ProviderResult{DeclineCode: declineCode(string(se.Code), string(se.DeclineCode)), Message: se.Msg}
		if se.PaymentIntent != nil {
			res.Reference = se.PaymentIntent.ID
		}
		if res.Message == "" {
			res.Message = "the card was declined"
		}
		return classification{outcome: answered, result: res}
	case status == http.StatusConflict: // before the idempotency type: Stripe's "key in use" is a 409
		return classification{outcome: inProgress, err: stripeErr(se)}
	case se.Type == stripego.ErrorTypeIdempotency:
		return classification{outcome: notPerformed, keyReused: true, err: stripeErr(se)}
	case status == http.StatusTooManyRequests:
		return classification{outcome: notPerformed, err: stripeErr(se), retryAfter: time.Second}
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return classification{outcome: notPerformed, err: stripeErr(se)}
	case status >= 500 || se.Type == stripego.ErrorTypeAPI:
		return classification{outcome: unknown, err: stripeErr(se)}
	case se.Type == stripego.ErrorTypeInvalidRequest || status == http.StatusBadRequest || status == http.StatusNotFound:
		msg := se.Msg
		if msg == "" {
			msg = "the processor refused the request"
		}
		return classification{outcome: answered, result: &surgepay.ProviderResult{DeclineCode: DeclineInvalidRequest, Message: msg}}
	}
	return classification{outcome: unknown, err: stripeErr(se)}
}

// DeclineInvalidRequest is the decline code of a request Stripe refused
// as invalid: capture more than authorized or twice, void a captured
// payment, refund more than captured, an unknown PaymentIntent.
const DeclineInvalidRequest = "invalid_request"

// declineCode is Stripe's decline_code, else its error code (expired_card,
// incorrect_cvc, processing_error stand there), with card_declined as
// surgepay's generic_decline.
func declineCode(code, decline string) string {
	switch {
	case code == "payment_intent_authentication_failure":
		return surgepay.DeclineAuthenticationFailed // the shopper failed or left 3-D Secure
	case decline != "" && decline != "generic_decline":
		return decline
	case code == "" || code == "card_declined":
		return surgepay.DeclineGeneric
	}
	return code
}

// sentNothing reports whether err proves the request never left: the
// connection was never made.
func sentNothing(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns)
}

// CallError is Stripe's answer to a failed call as surgepay keeps it: the
// HTTP status, Stripe's error type and code, its message and the request
// id. It never holds the secret key or the whole error object, which can
// carry the PaymentMethod. A *surgepay.ProviderError from this package
// wraps it (errors.As), so that an operator reads which processor said
// what: a 401 (the key is wrong or revoked) apart from a refused
// connection, which has no CallError.
type CallError struct {
	Status    int
	Type      string
	Code      string
	Message   string
	RequestID string
}

func (e *CallError) Error() string {
	return fmt.Sprintf("stripe %d %s %s: %s (request %s)", e.Status, e.Type, e.Code, e.Message, e.RequestID)
}

// ProcessorStatus and ProcessorCode let packages that do not import this
// one (telemetry) read the status and code through an interface.
func (e *CallError) ProcessorStatus() int     { return e.Status }
func (e *CallError) ProcessorCode() string    { return e.Code }
func (e *CallError) ProcessorMessage() string { return e.Message }

// stripeErr is a Stripe error as surgepay reports it: a *CallError.
func stripeErr(se *stripego.Error) error {
	return &CallError{Status: se.HTTPStatusCode, Type: string(se.Type), Code: string(se.Code), Message: se.Msg, RequestID: se.RequestID}
}

// redact keeps only what stripeErr keeps of a Stripe error.
func redact(err error) error {
	var se *stripego.Error
	if errors.As(err, &se) {
		return stripeErr(se)
	}
	return err
}

// call runs one Stripe call, sending it again under the same key (fn sets
// it) while it got no answer, at most RetriesMax times. It returns a
// result for an answer that is a decline (nil, nil for success: fn kept
// the object), or a *surgepay.ProviderError. Once any attempt may have
// reached Stripe, the call can no longer be "not performed": a later
// connection refused proves nothing about the earlier attempt.
func (p *Provider) call(ctx context.Context, op string, fn func(context.Context) error) (*surgepay.ProviderResult, error) {
	mayHaveHappened := false
	var last classification
	for attempt := 0; ; attempt++ {
		last = classify(fn(ctx))
		switch last.outcome {
		case answered:
			return last.result, nil
		case notPerformed:
			if !mayHaveHappened {
				pe := &surgepay.ProviderError{Outcome: surgepay.NotPerformed, Op: op, Processor: p.cfg.Name,
					Err: redact(last.err), RetryAfter: last.retryAfter}
				if last.keyReused {
					pe.Err = fmt.Errorf("%w: %v", surgepay.ErrKeyReused, pe.Err)
				}
				return nil, pe
			}
			if last.keyReused { // an earlier attempt did happen, with these very parameters: impossible; stop
				return nil, &surgepay.ProviderError{Outcome: surgepay.Unknown, Op: op, Processor: p.cfg.Name, Err: redact(last.err)}
			}
		case unknown, inProgress:
			mayHaveHappened = true
		}
		if attempt >= p.cfg.RetriesMax || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(retryBackoff << attempt):
		}
	}
	return nil, &surgepay.ProviderError{Outcome: surgepay.Unknown, Op: op, Processor: p.cfg.Name,
		Err: fmt.Errorf("no answer after %s: %w", strconv.Itoa(p.cfg.RetriesMax+1)+" attempts", redact(last.err))}
}
