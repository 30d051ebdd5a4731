package surgepay

import (
	"context"
	"net/url"
	"strings"
	"time"
)

// WebhookEndpoint is a merchant's URL that receives payment events, signed
// with a secret the merchant got once, at creation. Only the secret's
// sealed form is stored (Vault.Encrypt bound to WebhookSecretAAD).
type WebhookEndpoint struct {
	ID           string
	MerchantID   string
	URL          string
	Description  string
	SealedSecret []byte
	Created      time.Time
}

// WebhookSecretAAD is the additional data an endpoint's secret is sealed
// to, so that a sealed secret copied to another endpoint does not open.
func WebhookSecretAAD(merchantID, endpointID string) []byte {
	return []byte("webhook_endpoint/" + merchantID + "/" + endpointID)
}

// ValidateWebhookURL checks an endpoint URL: absolute http or https with a
// host, no credentials (they would be stored and shown in the clear), no
// fragment, at most WebhookURLBytesMax bytes. Which addresses the URL may
// reach is the dispatcher's decision, when it connects.
func ValidateWebhookURL(param, raw string) error {
	if raw == "" {
		return Invalid(param, "missing", "%s is required", param)
	}
	if len(raw) > WebhookURLBytesMax {
		return Invalid(param, "too_long", "%s must be at most %d bytes", param, WebhookURLBytesMax)
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil || !u.IsAbs() || u.Opaque != "":
		return Invalid(param, "invalid_url", "%s must be an absolute http or https URL", param)
	case u.Scheme != "https" && u.Scheme != "http":
		return Invalid(param, "invalid_url", "%s must use https or http", param)
	case u.Hostname() == "":
		return Invalid(param, "invalid_url", "%s must name a host", param)
	case u.User != nil:
		return Invalid(param, "invalid_url", "%s must not hold a user name or password", param)
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return Invalid(param, "invalid_url", "%s must not have a fragment", param)
	case strings.ContainsAny(raw, " \t\r\n"):
		return Invalid(param, "invalid_url", "%s must not contain white space", param)
	}
	return nil
}

// WebhookEvent is the webhook of one Write: the payment change its audit
// events record, rendered once as the JSON body every endpoint receives.
// Its ID is the ID of the Write's last audit event: receivers de-duplicate
// on it.
type WebhookEvent struct {
	ID         string
	MerchantID string
	PaymentID  string
	Type       string // WebhookPaymentSucceeded, ...
	Payload    []byte // the JSON body, the same on every attempt
	Created    time.Time
}

// Webhook event types: what a Write did to a payment.
const (
	WebhookPaymentAuthorized  = "payment.authorized"      // now requires_capture
	WebhookPaymentProcessing  = "payment.processing"      // provider outcome unknown
	WebhookPaymentSucceeded   = "payment.succeeded"       // a sale, or a capture
	WebhookPaymentCaptured    = "payment.captured"        // settlement captured a streamlined sale
	WebhookPaymentFailed      = "payment.failed"          // declined, or settlement's capture declined
	WebhookPaymentCanceled    = "payment.canceled"        // voided
	WebhookPaymentRefunded    = "payment.refunded"        // a refund, partial or full
	WebhookPaymentCaptureFail = "payment.capture_failed"  // the network declined a capture
	WebhookPaymentVoidFail    = "payment.void_failed"     // the network declined a void
	WebhookPaymentRefundFail  = "payment.refund_failed"   // the network declined a refund
	WebhookPaymentUpdated     = "payment.updated"         // any other change
	WebhookPaymentDisputed    = "payment.disputed"        // the cardholder disputed it (chargeback)
	WebhookPaymentDispute     = "payment.dispute_updated" // its dispute changed or closed (won, lost)
)

// WebhookEventType names the change that a Write's audit events (oldest
// first, at least one) made to payment p, as the Write stores it. A move
// to another status is named by that status; an operation that left the
// status as it was is named by its outcome.
func WebhookEventType(events []*Event, p *Payment) string {
	from, op := events[0].FromStatus, events[len(events)-1].Type
	switch op {
	case ProcessorEventDisputeCreated:
		return WebhookPaymentDisputed
	case ProcessorEventDisputeUpdated, ProcessorEventDisputeClosed:
		return WebhookPaymentDispute
	}
	if from != p.Status {
		switch p.Status {
		case StatusRequiresCapture:
			return WebhookPaymentAuthorized
		case StatusProcessing:
			return WebhookPaymentProcessing
		case StatusSucceeded:
			return WebhookPaymentSucceeded
		case StatusFailed:
			return WebhookPaymentFailed
		case StatusCanceled:
			return WebhookPaymentCanceled
		case StatusPartiallyRefunded, StatusRefunded:
			return WebhookPaymentRefunded
		}
		return WebhookPaymentUpdated
	}
	var tx *Transaction
	for i := range p.Transactions {
		if p.Transactions[i].Type == op {
			tx = &p.Transactions[i]
		}
	}
	switch {
	case tx == nil:
		return WebhookPaymentUpdated
	case tx.Status == TxSucceeded && op == TxRefund:
		return WebhookPaymentRefunded // a further partial refund
	case tx.Status == TxSucceeded && op == TxCapture:
		return WebhookPaymentCaptured
	case tx.Status == TxFailed && op == TxCapture:
		return WebhookPaymentCaptureFail
	case tx.Status == TxFailed && op == TxVoid:
		return WebhookPaymentVoidFail
	case tx.Status == TxFailed && op == TxRefund:
		return WebhookPaymentRefundFail
	}
	return WebhookPaymentUpdated
}

// WebhookDelivery is one event on its way to one endpoint, as claimed by
// a dispatcher.
type WebhookDelivery struct {
	EventID    string
	EndpointID string
	MerchantID string
	PaymentID  string
	Type       string
	Payload    []byte
	// Attempt counts the claims of this delivery, this one included: 1 on
	// the first. A claim whose dispatcher died counts.
	Attempt int
	Created time.Time
	// URL and SealedSecret are the endpoint's; URL is "" if the endpoint
	// was deleted since the event.
	URL          string
	SealedSecret []byte
}

// Outcomes of a delivery attempt, in WebhookResult.Outcome.
const (
	WebhookDelivered = "delivered" // a 2xx answer: the delivery is removed
	WebhookRetry     = "retry"     // another attempt at NextAttempt
	WebhookFailed    = "failed"    // no more attempts: kept with status failed
	WebhookDropped   = "dropped"   // the endpoint is gone: the delivery is removed
)

// WebhookResult records one attempt. It applies only if the delivery is
// still at Attempt (no other dispatcher claimed it since).
type WebhookResult struct {
	EventID     string
	EndpointID  string
	Attempt     int
	Outcome     string    // WebhookDelivered, ...
	NextAttempt time.Time // for WebhookRetry
	StatusCode  int       // the HTTP status, 0 if none
	Error       string    // why it failed, short; never a secret or a response body
	At          time.Time
}

// WebhookBacklog describes the deliveries a store holds.
type WebhookBacklog struct {
	Pending       int       // waiting for an attempt, or being attempted
	Failed        int       // out of attempts, kept
	OldestPending time.Time // creation of the oldest pending delivery; zero if none
}

// WebhookStore is the optional capability of a store that holds webhook
// endpoints and the outbox of deliveries. Endpoints are written by
// Write.WebhookEndpointInsert and WebhookEndpointDelete; deliveries by
// Write.Webhook, in the transaction of the payment change (one statement
// for every endpoint of the merchant at commit, none if Webhook is nil).
// Reads of merchant-owned objects answer ENOTFOUND for another merchant's.
type WebhookStore interface {
	FindWebhookEndpoint(ctx context.Context, merchantID, id string) (*WebhookEndpoint, error)
	// ListWebhookEndpoints returns a merchant's endpoints, newest first
	// (at most WebhookEndpointsPerMerchantMax).
	ListWebhookEndpoints(ctx context.Context, merchantID string) ([]*WebhookEndpoint, error)
	// ListWebhookMerchants returns the IDs of the merchants that have at
	// least one endpoint.
	ListWebhookMerchants(ctx context.Context) ([]string, error)
	// ClaimWebhookDeliveries returns up to max pending deliveries due at
	// now (oldest due first), each with its Attempt counted, and makes
	// them due again only at leaseUntil, so that no other dispatcher takes
	// them meanwhile; a dispatcher that dies leaves them to be claimed
	// again then.
	ClaimWebhookDeliveries(ctx context.Context, now, leaseUntil time.Time, max int) ([]*WebhookDelivery, error)
	// RecordWebhookResults applies the results of attempts; a result whose
	// delivery is gone or was claimed again since is ignored.
	RecordWebhookResults(ctx context.Context, results []*WebhookResult) error
	// WebhookBacklog counts the deliveries, a scan of the outbox: call it
	// for metrics, not per request.
	WebhookBacklog(ctx context.Context) (WebhookBacklog, error)
	// DeleteFailedWebhooksBefore deletes up to limit failed deliveries
	// whose last attempt was before t and returns how many it deleted.
	DeleteFailedWebhooksBefore(ctx context.Context, t time.Time, limit int) (int, error)
}

// WebhookOutbox turns payment changes into webhook events (package
// webhook). The engine calls Prepare for each Write that has audit events
// of a merchant whose webhooks setting is on, before Apply, and Committed
// once such a Write is durable. Safe for concurrent use.
type WebhookOutbox interface {
	// Prepare sets w.Webhook if w changes a payment and its merchant has at
	// least one endpoint. It issues no SQL: with no endpoint (the default)
	// the Write costs what it did without webhooks.
	Prepare(w *Write)
	// Committed tells the outbox that w, prepared, is durable.
	Committed(w *Write)
	// EndpointsChanged tells the outbox whether a merchant has endpoints
	// after this node created or deleted one.
	EndpointsChanged(merchantID string, has bool)
}
