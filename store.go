package surgepay

import (
	"context"
	"time"
)

// Store is the durable state of surgepay. Implementations: package sqlite
// (embedded default) and package postgres; package storetest is the
// conformance suite both run.
//
// Every read of a merchant-owned object takes the merchant ID and answers
// ENOTFOUND for another merchant's object. Every method counts its SQL
// statements on the request's StatementCounter (see CountStatement).
// Implementations are safe for concurrent use.
type Store interface {
	FindMerchant(ctx context.Context, id string) (*Merchant, error)
	ListMerchants(ctx context.Context) ([]*Merchant, error)
	// FindAPIKeyByHash returns the key with this HMAC hash, ENOTFOUND if none.
	FindAPIKeyByHash(ctx context.Context, hash []byte) (*APIKey, error)
	ListAPIKeys(ctx context.Context) ([]*APIKey, error)
	// ListAuditEvents returns a page of the merchant and API-key audit
	// trail that passes f, newest first, and whether more follow.
	ListAuditEvents(ctx context.Context, f AuditFilter) ([]*AuditEvent, bool, error)

	FindCustomer(ctx context.Context, merchantID, id string) (*Customer, error)
	ListCustomers(ctx context.Context, merchantID string, page Page) ([]*Customer, bool, error)

	FindPaymentMethod(ctx context.Context, merchantID, id string) (*PaymentMethod, error)
	// ListPaymentMethods lists a customer's cards, newest first.
	ListPaymentMethods(ctx context.Context, merchantID, customerID string, page Page) ([]*PaymentMethod, bool, error)
	// ListRecentPaymentMethods returns up to limit (at most
	// RecentPaymentMethodsPageMax) of a merchant's cards, newest first,
	// with IDs less than beforeID ("" for the newest): one range of the
	// primary key (merchant_id, id), never a scan of the table. The cache
	// preheat pages through it.
	ListRecentPaymentMethods(ctx context.Context, merchantID, beforeID string, limit int) ([]*PaymentMethod, error)

	FindPayment(ctx context.Context, merchantID, id string) (*Payment, error)
	ListPayments(ctx context.Context, merchantID string, f PaymentFilter) ([]*Payment, bool, error)
	// ListProcessing returns, for reconciliation, up to limit payments of
	// any merchant in StatusProcessing, oldest first, then up to
	// RequiresActionListed(limit) in StatusRequiresAction (a browser's
	// authentication, which the reconciler looks up once it is old) with
	// IDs greater than actionsAfter ("" for all), oldest first: the
	// reconciler goes through them a page a pass, so that more of them
	// than a page are all looked up in turn.
	ListProcessing(ctx context.Context, limit int, actionsAfter string) ([]*Payment, error)
	// ListEvents returns a payment's audit trail, oldest first.
	ListEvents(ctx context.Context, merchantID, paymentID string) ([]*Event, error)

	// FindIdempotency returns the stored record, ENOTFOUND if none.
	FindIdempotency(ctx context.Context, merchantID, key string) (*IdempotencyRecord, error)
	// DeleteIdempotencyBefore deletes up to limit records created before t
	// and returns how many it deleted.
	DeleteIdempotencyBefore(ctx context.Context, t time.Time, limit int) (int, error)

	// ListAnalytics returns a merchant's counters for q's days (q is
	// valid, see AnalyticsQuery.Validate), one AnalyticsDay per day and
	// currency that saw a change, by date then currency. One statement.
	ListAnalytics(ctx context.Context, merchantID string, q AnalyticsQuery) ([]*AnalyticsDay, error)

	// Apply stores w atomically and returns once it is durable. Writes from
	// concurrent callers are group-committed: collected by a writer and
	// committed in one transaction, each caller answered after its batch is
	// durable. If a guard in w fails, nothing of w is stored, Apply returns
	// the guard's *Error, and other writes in the batch are unaffected:
	//   - w.Idempotency's (merchant, key) exists: ECONFLICT "idempotency_key_exists"
	//     (errors.Is(err, ErrIdempotencyKeyExists));
	//   - the row of CustomerUpdate, CustomerDelete or PaymentUpdate is gone:
	//     ENOTFOUND; or its stored Version is not Version-1 (updates) /
	//     Version (deletes): ECONFLICT "concurrent_update" (ErrConcurrentUpdate).
	// A Write that Validate refuses is refused whole, before any of it runs.
	// PaymentMethodDelete and StagedAck are not guards: deleting a payment
	// method, or acknowledging a staged record, that is already gone is not
	// an error.
	// When the writer's queue is full Apply returns EUNAVAILABLE with
	// RetryAfter set, at once: backpressure, not unbounded memory.
	//
	// w.Analytics are not a guard and cost no statement of their own: the
	// writer sums the deltas of every Write of a batch whose guards held by
	// (merchant, date, currency) and applies them with ONE upsert
	// (INSERT ... ON CONFLICT DO UPDATE SET n = n + excluded.n) before the
	// batch commits; none if no Write has deltas. That statement is counted
	// once on the StatementCounter of each Write that contributed to it: it
	// ran on their behalf, and a request's count stays the same whatever
	// batch it lands in (one statement per batch on the database, one more
	// per request in Surgepay-Sql).
	Apply(ctx context.Context, w *Write) error

	Close() error
}

// Write is one atomic unit of change. Guards are checked in the order of
// the fields; inserts of fresh IDs cannot conflict.
type Write struct {
	// ProviderActed marks a Write that records what the card network has
	// already done (an authorization, a capture, a refund): a store with a
	// full write queue waits for room (bounded) rather than refuse it, so
	// that an operation performed at the network is not left unrecorded by
	// mere backpressure. Other Writes are refused at once (EUNAVAILABLE
	// write_queue_full) when the queue is full.
	ProviderActed bool

	Idempotency *IdempotencyRecord

	Merchant *Merchant // inserted
	APIKey   *APIKey   // inserted
	// APIKeyRevoke marks the key with this ID revoked, for good; a key
	// already revoked, or none, is no error.
	APIKeyRevoke string
	// MerchantStatus sets a merchant's Disabled flag; a merchant that is
	// gone is no error (the engine reads it first). Not a guard.
	MerchantStatus *MerchantStatus
	// APIKeyExpire brings a key's expiry forward (never later). Not a guard.
	APIKeyExpire *APIKeyExpiry
	// A Write with APIKeyRevoke, MerchantStatus or APIKeyExpire also
	// raises the credentials generation in the same transaction (see
	// CredentialsGenerationReader): one more statement.
	// APIKeysUsed raises keys' last-used times (never lowers them): the
	// engine's background flush, at most APIKeysUsedPerWriteMax. Not a
	// guard; keys that are gone are skipped.
	APIKeysUsed []APIKeyUse
	// Audit rows, inserted (at most AuditEventsPerWriteMax); never
	// updated or deleted.
	Audit []*AuditEvent

	CustomerInsert *Customer
	CustomerUpdate *Customer // stored if the stored Version is CustomerUpdate.Version-1
	CustomerDelete *Customer // deleted with its payment methods if the stored Version matches

	PaymentMethodInsert *PaymentMethod
	PaymentMethodDelete *PaymentMethod // deleted if it exists

	PaymentInsert *Payment
	PaymentUpdate *Payment // stored if the stored Version is PaymentUpdate.Version-1

	Events []*Event // audit rows, inserted; never updated or deleted

	// Disputes are the disputes of PaymentUpdate that it changes (a
	// processor's dispute event), each as PaymentUpdate.Disputes() tells
	// it: stored (inserted, or replacing the row of its merchant and ID)
	// in the table of disputes of a store with the DisputeLister
	// capability, in the same transaction, after the payment's guard
	// held. At most DisputesPerWriteMax; one statement each. Not a guard.
	Disputes []*Dispute

	// Staged is stored in the same transaction as the rest of the Write: the
	// embedded stage of a streamlined sale. Stores with the StagedStore
	// capability support it.
	Staged *StagedRecord
	// StagedAck removes staged records by ID (settlement acknowledging them).
	StagedAck []string

	// ProviderAttempt, if set, records where an authorization is about to
	// be sent (see ProviderAttempt); it replaces an earlier attempt under
	// the same key. Not a guard. Stores with the AttemptStore capability
	// support it; one statement.
	ProviderAttempt *ProviderAttempt

	// Webhook, if set, is queued for every webhook endpoint its merchant
	// has when the Write commits: one outbox row per endpoint, in the same
	// transaction (see WebhookOutbox). Stores with the WebhookStore
	// capability support it; one statement, none when nil.
	Webhook *WebhookEvent
	// WebhookEndpointInsert is guarded: if the merchant already has
	// WebhookEndpointsPerMerchantMax endpoints, nothing of the Write is
	// stored and Apply returns EUNPROCESS "too_many_webhook_endpoints".
	// WebhookEndpointDelete deletes the endpoint if it exists; its pending
	// deliveries are dropped by the dispatcher. Either goes in a Write with
	// at most an Idempotency record besides.
	WebhookEndpointInsert *WebhookEndpoint
	WebhookEndpointDelete *WebhookEndpoint
	// WebhookEndpointRoll replaces an endpoint's signing secret and
	// WebhookResend queues a delivery again; both are guarded (see their
	// types) and, like an endpoint change, go in a Write with at most an
	// Idempotency record besides.
	WebhookEndpointRoll *WebhookEndpointRoll
	WebhookResend       *WebhookResend

	// Analytics are added to their merchants' daily counters in the same
	// transaction as the rest of the Write, or not at all (a failed guard
	// stores none): see Apply for how a batch applies them.
	Analytics []AnalyticsDelta
}

// ChangesCredentials reports whether w changes the standing of API keys,
// and so raises the credentials generation (CredentialsGenerationReader).
func (w *Write) ChangesCredentials() bool {
	return w.APIKeyRevoke != "" || w.APIKeyExpire != nil || w.MerchantStatus != nil
}

// StagedStore is the optional capability of a store that holds the
// embedded stage. A Write holding only PaymentInsert, perhaps Idempotency
// and Staged, costs ONE SQL statement (the budget of a sale, streamlined
// or standard); with Events, two (the events are one multi-row statement).
// FetchStaged
// returns at most the store's limit; StagedBacklog's time is the Created of
// the record FetchStaged returns first, the zero time if there is none.
type StagedStore interface {
	// FetchStaged returns up to limit staged records, oldest first, whose
	// IDs are greater than afterID ("" for the start).
	FetchStaged(ctx context.Context, afterID string, limit int) ([]*StagedRecord, error)
	// StagedBacklog returns the count of staged records and the creation
	// time of the oldest.
	StagedBacklog(ctx context.Context) (int, time.Time, error)
}

// CredentialsGenerationReader is the optional capability of a store that
// counts the changes to the standing of API keys: a Write that revokes or
// expires a key, or disables or enables a merchant (APIKeyRevoke,
// APIKeyExpire, MerchantStatus), raises the generation by at least one
// when it commits, in its own transaction, so that a reader that sees the
// new generation and then reads the keys sees the change. Every process
// sharing the database polls it (engine.RunCredentialsWatch) to drop the
// API keys it caches in memory that another process changed, whichever
// process (a server, the CLI) made the change. One statement.
type CredentialsGenerationReader interface {
	CredentialsGeneration(ctx context.Context) (int64, error)
}

// Leaser is the optional capability of a store that several nodes share:
// a lease names the one node that does a piece of background work (the
// reconciler, the purges) for a while, so that N nodes do not each do it,
// and another node takes it over when its holder stops renewing (it died,
// froze, or lost the database). Times are the database's, so that the
// nodes' clocks do not matter. A store one node owns (SQLite) has none:
// its node does everything.
//
// A lease is not a fence: a holder that froze past its lease and resumes
// may still finish the pass it was in while another node starts one. The
// work leased is safe to do twice (version-guarded writes, the
// processor's idempotency keys); the lease only keeps it from being done
// N times over.
type Leaser interface {
	// Lease takes the lease name for holder, or renews it, until ttl from
	// now, and reports whether holder has it: it does if no one had it,
	// holder had it, or its holder's had ended. One statement.
	Lease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error)
	// ReleaseLease ends holder's lease name, if holder has it, so that
	// another node takes it at its next try. One statement.
	ReleaseLease(ctx context.Context, name, holder string) error
}

// Page selects a page of a list, newest first. IDs sort by creation time
// (see NewID), so StartingAfter is an ID.
type Page struct {
	Limit         int    // 1..ListLimitMax
	StartingAfter string // return objects older than this ID
}

// PaymentFilter selects payments. Zero fields do not filter.
type PaymentFilter struct {
	Page
	Status        Status
	CustomerID    string
	CreatedGTE    time.Time
	CreatedBefore time.Time
}
