// Package surgepay holds the domain of the surgepay payment engine: money,
// customers, cards, payments and their state machine, idempotency records,
// limits, error codes, and the interfaces that storage and card-network
// providers implement. It imports only the standard library.
package surgepay

import (
	"errors"
	"fmt"
)

// Error codes. Only package api maps them to HTTP statuses.
const (
	EINVALID     = "invalid"      // The request is malformed or a value is out of range.
	EUNAUTH      = "unauthorized" // Missing or unknown API key.
	EFORBIDDEN   = "forbidden"    // A valid key that may not do this (scope, disabled merchant).
	ENOTFOUND    = "not_found"    // The object does not exist for this merchant.
	ECONFLICT    = "conflict"     // The object is in a state that forbids the operation.
	EUNPROCESS   = "unprocessable"
	EDECLINED    = "declined"     // The card network declined; final, never retried.
	ERATELIMIT   = "rate_limited" // Too many requests.
	EUNAVAILABLE = "unavailable"  // Overloaded or a dependency is down; safe to retry.
	EINTERNAL    = "internal"
)

// Error is a domain error: a code, a message safe to show a client, and the
// request field it concerns. Detail codes (Reason) refine Code, for example
// Code=conflict Reason="idempotency_key_in_use". Messages never contain card
// data: callers build them from field names and validated, non-secret values.
type Error struct {
	Code        string
	Reason      string // machine-readable sub-code, e.g. "amount_too_large", "illegal_transition".
	Message     string
	Param       string // offending request field, e.g. "card.number".
	DeclineCode string // for EDECLINED: e.g. "insufficient_funds".
	PaymentID   string // for EDECLINED: the failed payment, which is stored.
	RetryAfter  int    // seconds, for EUNAVAILABLE and ERATELIMIT; 0 = unset.
}

func (e *Error) Error() string {
	if e.Param != "" {
		return fmt.Sprintf("surgepay: %s: %s (%s)", e.Code, e.Message, e.Param)
	}
	return fmt.Sprintf("surgepay: %s: %s", e.Code, e.Message)
}

// Reasons of the guard errors of Store.Apply.
const (
	// ReasonIdempotencyKeyExists: the Write's idempotency key is stored.
	ReasonIdempotencyKeyExists = "idempotency_key_exists"
	// ReasonConcurrentUpdate: a versioned row is at another version.
	ReasonConcurrentUpdate = "concurrent_update"
)

// Sentinels of the guard errors of Store.Apply, for errors.Is: each
// matches every *Error of its Code and Reason, whichever layer made it and
// whatever its message (see Error.Is). They are not errors to return.
var (
	ErrIdempotencyKeyExists error = &Error{Code: ECONFLICT, Reason: ReasonIdempotencyKeyExists,
		Message: "a request with this idempotency key has already been stored"}
	ErrConcurrentUpdate error = &Error{Code: ECONFLICT, Reason: ReasonConcurrentUpdate,
		Message: "the object was changed by another request at the same time"}
)

// Is reports whether target is an *Error with e's Code and the same,
// non-empty, Reason: errors.Is(err, ErrIdempotencyKeyExists) holds for a
// store's error of that kind, whatever its message.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Reason != "" && t.Code == e.Code && t.Reason == e.Reason
}

// Errorf returns an *Error with the code and a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Invalid returns an EINVALID error about one request field.
func Invalid(param, reason, format string, args ...any) *Error {
	return &Error{Code: EINVALID, Reason: reason, Param: param, Message: fmt.Sprintf(format, args...)}
}

// Conflict returns an ECONFLICT error with a reason code.
func Conflict(reason, format string, args ...any) *Error {
	return &Error{Code: ECONFLICT, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// NotFound returns an ENOTFOUND error naming the kind of object and the param.
func NotFound(param, object string) *Error {
	return &Error{Code: ENOTFOUND, Reason: "resource_missing", Param: param, Message: fmt.Sprintf("no such %s", object)}
}

// ErrorCode returns the code of the first *Error in err's chain, EINTERNAL for
// any other non-nil error, and "" for nil.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return EINTERNAL
}

// ErrorReason returns the Reason of the first *Error in err's chain, or "".
func ErrorReason(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}
