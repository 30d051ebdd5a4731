package surgepay

import (
	"context"
	"net/url"
	"slices"
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

	// PreviousSealedSecret is the secret a roll replaced, sealed like
	// SealedSecret; deliveries are signed with it too until
	// PreviousSecretExpires (see WebhookEndpointRoll). Nil if none.
	PreviousSealedSecret  []byte
	PreviousSecretExpires time.Time

	// Health, kept by the dispatchers' results (RecordWebhookResults):
	// failed attempts since the last success, when the last attempt
	// succeeded and failed (zero if never), and the last failure's reason
	// (short, never a URL, secret or answer body).
	FailuresInARow int
	LastSuccess    time.Time
	LastFailure    time.Time
	LastError      string
}

// PreviousSecretActive reports whether deliveries at t are signed with the
// previous secret as well as the current one.
func (e *WebhookEndpoint) PreviousSecretActive(t time.Time) bool {
	return len(e.PreviousSealedSecret) > 0 && t.Before(e.PreviousSecretExpires)
}

// WebhookSecretAAD is the additional data an endpoint's secret is sealed
// to, so that a sealed secret copied to another endpoint does not open.
func WebhookSecretAAD(merchantID, endpointID string) []byte {
	return []byte("webhook_endpoint/" + merchantID + "/" + endpointID)
}

// ValidateWebhookURL checks an endpoint URL: absolute http or https with a
// host, no credentials (they would be stored and shown in the clear), no
// fragment, no card number in its path or query (URLHasCardNumber), at
// most WebhookURLBytesMax bytes. Which addresses the URL may
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
	case URLHasCardNumber(raw):
		// The URL is stored, returned and requested on every delivery.
		return CardNumberInText(param)
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
	WebhookPaymentAuthorized  = "payment.authorized"     // now requires_capture
	WebhookPaymentProcessing  = "payment.processing"     // provider outcome unknown
	WebhookPaymentSucceeded   = "payment.succeeded"      // a sale, or a capture
	WebhookPaymentCaptured    = "payment.captured"       // settlement captured a streamlined sale
	WebhookPaymentFailed      = "payment.failed"         // declined, or settlement's capture declined
	WebhookPaymentCanceled    = "payment.canceled"       // voided
	WebhookPaymentRefunded    = "payment.refunded"       // a refund, partial or full
	WebhookPaymentCaptureFail = "payment.capture_failed" // the network declined a capture
	WebhookPaymentVoidFail    = "payment.void_failed"    // the network declined a void
	WebhookPaymentRefundFail  = "payment.refund_failed"  // the network declined a refund
	WebhookPaymentUpdated     = "payment.updated"        // any other change
	// WebhookPaymentRequiresAction: a browser's confirm awaits the
	// shopper's 3-D Secure authentication (docs/checkout.md).
	WebhookPaymentRequiresAction = "payment.requires_action"
	WebhookPaymentDisputed       = "payment.disputed"        // the cardholder disputed it (chargeback)
	WebhookPaymentDispute        = "payment.dispute_updated" // its dispute changed or closed (won, lost)
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
		case StatusRequiresAction:
			return WebhookPaymentRequiresAction
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
	// PreviousSealedSecret and PreviousSecretExpires are the endpoint's
	// secret before its last roll, which signs the delivery too until it
	// expires (WebhookEndpoint.PreviousSealedSecret).
	PreviousSealedSecret  []byte
	PreviousSecretExpires time.Time
}

// Outcomes of a delivery attempt, in WebhookResult.Outcome.
const (
	WebhookDelivered = "delivered" // a 2xx answer: kept with status succeeded for the retention
	WebhookRetry     = "retry"     // another attempt at NextAttempt
	WebhookFailed    = "failed"    // no more attempts: kept with status failed
	WebhookDropped   = "dropped"   // the endpoint is gone: the delivery is removed
)

// WebhookResult records one attempt. It applies only if the delivery is
// still at Attempt (no other dispatcher claimed it since).
type WebhookResult struct {
	EventID    string
	EndpointID string
	MerchantID string // the endpoint's merchant, for its health
	Attempt    int
	// Sent is true if the attempt tried to reach the endpoint (or to open
	// its secret): only such results count in its health.
	Sent        bool
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
	// ClaimWebhookDeliveries returns up to limit pending deliveries due at
	// now (oldest due first), each with its Attempt counted, and makes
	// them due again only at leaseUntil, so that no other dispatcher takes
	// them meanwhile; a dispatcher that dies leaves them to be claimed
	// again then.
	ClaimWebhookDeliveries(ctx context.Context, now, leaseUntil time.Time, limit int) ([]*WebhookDelivery, error)
	// RecordWebhookResults applies the results of attempts; a result whose
	// delivery is gone or was claimed again since is ignored.
	RecordWebhookResults(ctx context.Context, results []*WebhookResult) error
	// WebhookBacklog counts the deliveries, a scan of the outbox: call it
	// for metrics, not per request.
	WebhookBacklog(ctx context.Context) (WebhookBacklog, error)
	// DeleteFailedWebhooksBefore deletes up to limit failed deliveries
	// whose last attempt was before t and returns how many it deleted.
	DeleteFailedWebhooksBefore(ctx context.Context, t time.Time, limit int) (int, error)
	// DeleteSucceededWebhooksBefore deletes up to limit succeeded
	// deliveries whose success was before t and returns how many it
	// deleted.
	DeleteSucceededWebhooksBefore(ctx context.Context, t time.Time, limit int) (int, error)

	// ListWebhookDeliveries returns a page of a merchant's deliveries
	// that f selects (f is valid, see WebhookDeliveryFilter.Validate),
	// newest event first, and whether more follow. One statement.
	ListWebhookDeliveries(ctx context.Context, merchantID string, f WebhookDeliveryFilter) ([]*WebhookDeliveryInfo, bool, error)
	// FindWebhookDelivery returns the delivery of an event to an endpoint,
	// ENOTFOUND if the merchant has none (never had it, or it is past its
	// retention).
	FindWebhookDelivery(ctx context.Context, merchantID, eventID, endpointID string) (*WebhookDeliveryInfo, error)
}

// Statuses of a delivery, as stored and listed.
const (
	WebhookStatusPending   = "pending"   // waiting for an attempt, or being attempted
	WebhookStatusSucceeded = "succeeded" // a 2xx answer; kept for the delivered retention
	WebhookStatusFailed    = "failed"    // out of attempts; kept for the failed retention
)

// WebhookDeliveryInfo is a delivery as an operator sees it: where it
// stands, without its payload.
type WebhookDeliveryInfo struct {
	EventID    string
	EndpointID string
	MerchantID string
	PaymentID  string
	Type       string
	Status     string // WebhookStatusPending, ...
	// Attempts counts the attempts since the event (or its last resend),
	// one being made included.
	Attempts int
	// InFlight is true while a dispatcher holds the delivery: an attempt
	// is being made (until its lease ends at NextAttempt).
	InFlight bool
	// NextAttempt is when a pending delivery is due (or its lease ends);
	// zero for a finished one.
	NextAttempt time.Time
	// LastAttempt is when the last attempt ended; zero if none yet.
	LastAttempt time.Time
	LastStatus  int    // the last answer's HTTP status, 0 if none
	LastError   string // why the last attempt failed, "" if it did not
	Resends     int    // times resent (at most WebhookResendsMax)
	Created     time.Time
}

// WebhookDeliveryFilter selects deliveries: those of EndpointID, of
// EventID, or of both; at least one is required, so that a list is one
// range of an index. Status "" is any status.
type WebhookDeliveryFilter struct {
	EndpointID string
	EventID    string
	Status     string
	Limit      int // 1..ListLimitMax
	// StartingAfterEvent and StartingAfterEndpoint, if set, return the
	// deliveries after that one in the list's order (event ID, then
	// endpoint ID, both descending).
	StartingAfterEvent, StartingAfterEndpoint string
}

// Validate checks f: the caller's errors name the API's parameters.
func (f WebhookDeliveryFilter) Validate() error {
	switch {
	case f.EndpointID == "" && f.EventID == "":
		// invalid_value, not missing: neither is required alone, which the
		// OpenAPI document cannot state (the spec fuzz holds "missing" to
		// what the document says is required).
		return Invalid("endpoint", "invalid_value", "endpoint or event is required")
	case f.Status != "" && f.Status != WebhookStatusPending && f.Status != WebhookStatusSucceeded &&
		f.Status != WebhookStatusFailed:
		return Invalid("status", "invalid_value", "status must be pending, succeeded or failed")
	case f.Limit < 1 || f.Limit > ListLimitMax:
		return Invalid("limit", "invalid_value", "limit must be an integer from 1 to %d", ListLimitMax)
	case (f.StartingAfterEvent == "") != (f.StartingAfterEndpoint == ""):
		return Invalid("starting_after", "invalid_value", "starting_after must be a webhook delivery ID")
	}
	return nil
}

// WebhookDeliveryID is the API's ID of the delivery of an event to an
// endpoint: "whd_", then the 26 characters of each ID (see NewID), so
// that delivery IDs sort by event, then endpoint. It returns "" for IDs
// not of NewID's form.
func WebhookDeliveryID(eventID, endpointID string) string {
	ev, ok1 := strings.CutPrefix(eventID, "evt_")
	ep, ok2 := strings.CutPrefix(endpointID, "we_")
	if !ok1 || !ok2 || len(ev) != 26 || len(ep) != 26 {
		return ""
	}
	return "whd_" + ev + ep
}

// ParseWebhookDeliveryID returns the event and endpoint IDs of a delivery
// ID; ok is false if id is not one.
func ParseWebhookDeliveryID(id string) (eventID, endpointID string, ok bool) {
	rest, ok := strings.CutPrefix(id, "whd_")
	if !ok || len(rest) != 52 {
		return "", "", false
	}
	for i := 0; i < len(rest); i++ {
		if !strings.ContainsRune(crockford, rune(rest[i])) {
			return "", "", false
		}
	}
	return "evt_" + rest[:26], "we_" + rest[26:], true
}

// WebhookResend queues a delivery again (Write.WebhookResend): it becomes
// pending, due At, with its attempts counted afresh. It is guarded: the
// delivery must exist, not be in flight at At, and have been resent fewer
// than WebhookResendsMax times; else nothing of the Write is stored and
// Apply returns ECONFLICT "concurrent_update" (ENOTFOUND if it is gone).
// The engine checks the state first to answer precise errors; the guard
// settles races.
//
// With Copy, the endpoint has no delivery of the event (it was created
// after the event): one is queued, a copy of the event's delivery to
// another endpoint of the merchant (the same body), pending, due At, its
// first resend. It is guarded too: ENOTFOUND if the merchant keeps no
// delivery of the event, ECONFLICT "concurrent_update" if the endpoint
// got one meanwhile.
type WebhookResend struct {
	MerchantID string
	EventID    string
	EndpointID string
	At         time.Time
	Copy       bool
}

// WebhookEndpointRoll replaces an endpoint's secret (Write.WebhookEndpointRoll):
// SealedSecret becomes the current one, the one it replaces
// (PreviousSealedSecret, as read) signs deliveries too until
// PreviousSecretExpires. It is guarded: the stored secret must still be
// PreviousSealedSecret, so that of two rolls at once one fails (ECONFLICT
// "concurrent_update"; ENOTFOUND if the endpoint is gone).
type WebhookEndpointRoll struct {
	MerchantID            string
	EndpointID            string
	SealedSecret          []byte
	PreviousSealedSecret  []byte
	PreviousSecretExpires time.Time
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

// WebhookHealth is what a batch of results changes of one endpoint's
// health: if Reset (an attempt succeeded), its failures in a row become
// Failures (those after the last success), else they grow by Failures.
type WebhookHealth struct {
	MerchantID, EndpointID string
	Reset                  bool
	Failures               int
	LastSuccess            time.Time // zero: unchanged
	LastFailure            time.Time // zero: unchanged
	LastError              string    // with LastFailure
}

// WebhookHealthOf sums results by endpoint, in the order of their At:
// the stores apply one update per endpoint. Results not Sent are left
// out: they did not try the endpoint.
func WebhookHealthOf(results []*WebhookResult) []*WebhookHealth {
	var out []*WebhookHealth
	by := map[string]*WebhookHealth{}
	rs := make([]*WebhookResult, 0, len(results))
	for _, r := range results {
		if r.Sent && (r.Outcome == WebhookDelivered || r.Outcome == WebhookRetry || r.Outcome == WebhookFailed) {
			rs = append(rs, r)
		}
	}
	slices.SortStableFunc(rs, func(a, b *WebhookResult) int { return a.At.Compare(b.At) })
	for _, r := range rs {
		h := by[r.EndpointID]
		if h == nil {
			h = &WebhookHealth{MerchantID: r.MerchantID, EndpointID: r.EndpointID}
			by[r.EndpointID] = h
			out = append(out, h)
		}
		if r.Outcome == WebhookDelivered {
			h.Reset, h.Failures, h.LastSuccess = true, 0, r.At
			continue
		}
		h.Failures++
		h.LastFailure, h.LastError = r.At, r.Error
	}
	// One order on every node: concurrent batches that update the same
	// endpoints lock their rows alike.
	slices.SortFunc(out, func(a, b *WebhookHealth) int {
		return strings.Compare(a.MerchantID+"/"+a.EndpointID, b.MerchantID+"/"+b.EndpointID)
	})
	return out
}

// WebhookDeliveryCursor returns the condition that f's cursor puts on a
// list of f's deliveries, in terms an index range can use: the list
// order is (event ID, endpoint ID) descending, but with the endpoint (or
// the event) fixed by f one column suffices. It returns the comparison
// ("<" or "<=") and value for the event ID, or "<" and a value for the
// endpoint ID (op "" where none), and none false if no delivery can
// follow the cursor. With no cursor, everything is "".
func WebhookDeliveryCursor(f WebhookDeliveryFilter) (eventOp, eventAfter, endpointOp, endpointAfter string, none bool) {
	after, afterEP := f.StartingAfterEvent, f.StartingAfterEndpoint
	switch {
	case after == "":
		return "", "", "", "", false
	case f.EndpointID != "":
		// (event_id, E) < (after, afterEP): event_id < after, or equal
		// when E < afterEP.
		if f.EndpointID < afterEP {
			return "<=", after, "", "", false
		}
		return "<", after, "", "", false
	case f.EventID > after:
		return "", "", "", "", true
	case f.EventID == after:
		return "", "", "<", afterEP, false
	}
	return "", "", "", "", false // every delivery of an older event follows
}
