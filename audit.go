package surgepay

import (
	"fmt"
	"time"
)

// AuditEvent is one change to a merchant or an API key, or one action of
// an operator on a payment (the console), in the audit trail:
// append-only (the stores refuse UPDATE and DELETE of its rows), written
// in the same Write as the change it records. It never holds a
// secret: an API key is named by its ID and prefix.
type AuditEvent struct {
	ID         string // "aud_…", sorts by creation time
	Created    time.Time
	Actor      string // who: "cli:USER", "admin_api:CREDENTIAL", "serve"
	Action     string // one of the Audit* actions
	MerchantID string // the merchant concerned
	ObjectID   string // "mer_…", "key_…" or "pay_…"
	Detail     string // what changed, for people: "scopes=… expires=…"; no secret
}

// Audit actions.
//
//nolint:gosec // G101: audit actions' names (api_key.rolled), not credentials
const (
	AuditMerchantCreated  = "merchant.created"
	AuditMerchantDisabled = "merchant.disabled"
	AuditMerchantEnabled  = "merchant.enabled"
	AuditAPIKeyCreated    = "api_key.created"
	AuditAPIKeyRolled     = "api_key.rolled" // on the old key; Detail names the new one and the grace
	AuditAPIKeyRevoked    = "api_key.revoked"
	// AuditAPIKeyExpirySet is an expiry set on (or brought forward for) an
	// existing key; a roll records the old key's grace in its own row.
	AuditAPIKeyExpirySet = "api_key.expiry_set"
	// An operator's capture, void or refund of a payment, or resend of a
	// webhook delivery, through the console: ObjectID is the payment,
	// Detail the amount and outcome. Written in the Write of the change.
	AuditPaymentCaptured = "payment.captured"
	AuditPaymentVoided   = "payment.voided"
	AuditPaymentRefunded = "payment.refunded"
	AuditWebhookResent   = "webhook_delivery.resent"
)

// Bounds of the audit trail.
const (
	// AuditEventsPerWriteMax bounds the audit rows of one Write (a roll
	// writes three).
	AuditEventsPerWriteMax = 8
	// AuditTextBytesMax bounds an audit row's Actor and Detail.
	AuditTextBytesMax = 1000
	// APIKeysUsedPerWriteMax bounds the last-used times one Write flushes.
	APIKeysUsedPerWriteMax = 1000
)

// AuditFilter selects audit events, newest first. Zero fields do not
// filter.
type AuditFilter struct {
	Page
	MerchantID string
	ObjectID   string
}

// CheckLifecycle reports a Write whose audit rows or last-used times
// exceed their bounds, or whose audit rows are incomplete (an error
// wrapping ErrWriteInvalid). Write.Validate calls it.
func CheckLifecycle(w *Write) error {
	if len(w.Audit) > AuditEventsPerWriteMax {
		return fmt.Errorf("%w: %d audit events in one Write, at most %d", ErrWriteInvalid, len(w.Audit), AuditEventsPerWriteMax)
	}
	if len(w.APIKeysUsed) > APIKeysUsedPerWriteMax {
		return fmt.Errorf("%w: %d API key uses in one Write, at most %d", ErrWriteInvalid, len(w.APIKeysUsed), APIKeysUsedPerWriteMax)
	}
	for _, e := range w.Audit {
		if e.ID == "" || e.Action == "" || e.Created.IsZero() {
			return fmt.Errorf("%w: an audit event without an ID, action or time", ErrWriteInvalid)
		}
		if len(e.Actor) > AuditTextBytesMax || len(e.Detail) > AuditTextBytesMax {
			return fmt.Errorf("%w: audit event %s: actor or detail over %d bytes", ErrWriteInvalid, e.ID, AuditTextBytesMax)
		}
	}
	return nil
}
