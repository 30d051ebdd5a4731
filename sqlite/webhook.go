package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/surgepay/surgepay"
)

// Webhooks (surgepay.WebhookStore): endpoints in webhook_endpoints, the
// outbox in webhook_deliveries (migrations/0005_webhooks.sql). Every
// change goes through the one writer: endpoints and the outbox rows of a
// payment change in the Write's own transaction, a dispatcher's claims and
// results as writer operations of their own.
//
// A merchant's endpoint count is checked by the INSERT that adds one, on
// the one writer connection: creates are serialised, and each counts the
// endpoints of every create before it, committed or in the same batch, so
// the bound holds however many are applied at once (storetest
// WebhookEndpointLimitConcurrent).

var _ surgepay.WebhookStore = (*DB)(nil)

// Bounds of one call, whatever the caller asks.
const (
	// WebhookClaimMax bounds one ClaimWebhookDeliveries: its payloads are
	// held in memory at once (a payment renders to about 1.5 KB).
	WebhookClaimMax = 1000
	// WebhookResultsMax bounds one RecordWebhookResults: one writer
	// operation, one statement per result.
	WebhookResultsMax = 1000
	// WebhookClaimScanMax bounds the due deliveries one claim considers
	// (four times what it may return, so that endpoints at their bound
	// among the oldest seldom cut it short): the claim runs on the writer.
	WebhookClaimScanMax = 4 * WebhookClaimMax
)

const (
	webhookEndpointCols     = "merchant_id, id, url, description, sealed_secret, created"
	webhookEndpointReadCols = webhookEndpointCols + `, previous_sealed_secret, previous_secret_expires,
		failures_in_a_row, last_success, last_failure, last_error`
	webhookDeliveryInfoCols = `event_id, endpoint_id, merchant_id, payment_id, type, status, attempts, leased,
		next_attempt, last_attempt, last_status, last_error, resends, created`
)

// The statements of the writer. The fan-out INSERT stores one row per
// endpoint the merchant has at commit, none if it has none.
const (
	sqlWebhookFanOut = `INSERT INTO webhook_deliveries (event_id, endpoint_id, merchant_id, payment_id, type, payload,
		status, attempts, next_attempt, last_status, last_error, created, updated)
		SELECT ?1, id, merchant_id, ?3, ?4, ?5, 'pending', 0, ?6, 0, '', ?6, ?6
		FROM webhook_endpoints WHERE merchant_id = ?2`
	sqlWebhookEndpointInsert = `INSERT INTO webhook_endpoints (` + webhookEndpointCols + `)
		SELECT ?1, ?2, ?3, ?4, ?5, ?6 WHERE (SELECT count(*) FROM webhook_endpoints WHERE merchant_id = ?1) < ?7`
	sqlWebhookEndpointDelete = `DELETE FROM webhook_endpoints WHERE merchant_id = ? AND id = ?`
	// sqlWebhookClaim claims up to ?3 due deliveries, oldest due first, at
	// most ?5 of one endpoint or, for an endpoint in the JSON object ?4
	// ({"we_...": n}), n. It considers the ?6 oldest due deliveries of the
	// endpoints with room (an endpoint with none is skipped in the index
	// scan, so its backlog does not hide the others').
	sqlWebhookClaim = `UPDATE webhook_deliveries SET next_attempt = ?2, attempts = attempts + 1, updated = ?1, leased = 1
		WHERE rowid IN (
			SELECT c.rid FROM (
				SELECT rid, endpoint_id, next_attempt,
					row_number() OVER (PARTITION BY endpoint_id ORDER BY next_attempt, rid) AS rn
				FROM (SELECT rowid AS rid, endpoint_id, next_attempt FROM webhook_deliveries
					WHERE status = 'pending' AND next_attempt <= ?1
						AND endpoint_id NOT IN (SELECT key FROM json_each(?4) WHERE value <= 0)
					ORDER BY next_attempt LIMIT ?6)
			) c LEFT JOIN json_each(?4) r ON r.key = c.endpoint_id
			WHERE c.rn <= coalesce(r.value, ?5)
			ORDER BY c.next_attempt LIMIT ?3)
		RETURNING event_id, endpoint_id, merchant_id, payment_id, type, payload, attempts, created,
			(SELECT url FROM webhook_endpoints e
				WHERE e.merchant_id = webhook_deliveries.merchant_id AND e.id = webhook_deliveries.endpoint_id),
			(SELECT sealed_secret FROM webhook_endpoints e
				WHERE e.merchant_id = webhook_deliveries.merchant_id AND e.id = webhook_deliveries.endpoint_id),
			(SELECT previous_sealed_secret FROM webhook_endpoints e
				WHERE e.merchant_id = webhook_deliveries.merchant_id AND e.id = webhook_deliveries.endpoint_id),
			(SELECT previous_secret_expires FROM webhook_endpoints e
				WHERE e.merchant_id = webhook_deliveries.merchant_id AND e.id = webhook_deliveries.endpoint_id)`
	sqlWebhookDelete = `DELETE FROM webhook_deliveries WHERE event_id = ? AND endpoint_id = ? AND attempts = ?`
	// sqlWebhookUpdate records an attempt's result (?1 status: pending to
	// retry, succeeded or failed) if the delivery is still at that attempt.
	sqlWebhookUpdate = `UPDATE webhook_deliveries SET status = ?1, next_attempt = ?2, last_status = ?3,
		last_error = ?4, updated = ?5, last_attempt = ?5, leased = 0
		WHERE event_id = ?6 AND endpoint_id = ?7 AND attempts = ?8 AND status = 'pending'`
	// sqlWebhookHealth applies a batch's WebhookHealth of one endpoint.
	sqlWebhookHealth = `UPDATE webhook_endpoints SET
		failures_in_a_row = CASE WHEN ?3 THEN ?4 ELSE failures_in_a_row + ?4 END,
		last_success = max(last_success, ?5), last_failure = max(last_failure, ?6),
		last_error = CASE WHEN ?6 > last_failure THEN ?7 ELSE last_error END
		WHERE merchant_id = ?1 AND id = ?2`
	sqlWebhookPurge = `DELETE FROM webhook_deliveries WHERE rowid IN (SELECT rowid FROM webhook_deliveries
		WHERE status = 'failed' AND updated < ? LIMIT ?)`
	sqlWebhookPurgeSucceeded = `DELETE FROM webhook_deliveries WHERE rowid IN (SELECT rowid FROM webhook_deliveries
		WHERE status = 'succeeded' AND updated < ? LIMIT ?)`
	// sqlWebhookResend is the guard of a WebhookResend: the delivery
	// becomes pending, due ?4, its attempts counted afresh, unless a claim
	// holds it or it was resent WebhookResendsMax times.
	sqlWebhookResend = `UPDATE webhook_deliveries SET status = 'pending', attempts = 0, next_attempt = ?4,
		leased = 0, resends = resends + 1, updated = ?4
		WHERE event_id = ?2 AND endpoint_id = ?3 AND merchant_id = ?1 AND resends < ?5
			AND NOT (status = 'pending' AND leased = 1 AND next_attempt > ?4)`
	sqlWebhookDeliveryExists = `SELECT EXISTS (SELECT 1 FROM webhook_deliveries
		WHERE event_id = ?2 AND endpoint_id = ?3 AND merchant_id = ?1)`
	// sqlWebhookResendCopy is the guard of a WebhookResend with Copy: a
	// delivery of the event to the endpoint, copied from the event's
	// delivery to another endpoint of the merchant.
	sqlWebhookResendCopy = `INSERT INTO webhook_deliveries (event_id, endpoint_id, merchant_id, payment_id, type,
		payload, status, attempts, next_attempt, last_status, last_error, created, updated, resends)
		SELECT event_id, ?3, merchant_id, payment_id, type, payload, 'pending', 0, ?4, 0, '', created, ?4, 1
		FROM webhook_deliveries WHERE event_id = ?2 AND merchant_id = ?1 AND endpoint_id <> ?3 LIMIT 1
		ON CONFLICT DO NOTHING`
	sqlWebhookEventKept = `SELECT EXISTS (SELECT 1 FROM webhook_deliveries WHERE event_id = ?2 AND merchant_id = ?1
		AND endpoint_id <> ?3)`
	// sqlWebhookRoll is the guard of a WebhookEndpointRoll: it holds if
	// the secret is still the one the roll read.
	sqlWebhookRoll = `UPDATE webhook_endpoints SET sealed_secret = ?3, previous_sealed_secret = ?4,
		previous_secret_expires = ?5 WHERE merchant_id = ?1 AND id = ?2 AND sealed_secret = ?4`
	sqlWebhookEndpointExists = `SELECT EXISTS (SELECT 1 FROM webhook_endpoints WHERE merchant_id = ?1 AND id = ?2)`
)

// The reads, on the read pool.
const (
	sqlWebhookEndpointFind = `SELECT ` + webhookEndpointReadCols + ` FROM webhook_endpoints WHERE merchant_id = ? AND id = ?`
	sqlWebhookEndpointList = `SELECT ` + webhookEndpointReadCols + ` FROM webhook_endpoints WHERE merchant_id = ?
		ORDER BY id DESC LIMIT ?`
	sqlWebhookMerchants = `SELECT DISTINCT merchant_id FROM webhook_endpoints`
	sqlWebhookDue       = `SELECT EXISTS (SELECT 1 FROM webhook_deliveries WHERE status = 'pending' AND next_attempt <= ?1
		AND endpoint_id NOT IN (SELECT key FROM json_each(?2) WHERE value <= 0))`
	sqlWebhookBacklog = `SELECT (SELECT count(*) FROM webhook_deliveries WHERE status = 'pending'),
		(SELECT count(*) FROM webhook_deliveries WHERE status = 'failed'),
		(SELECT min(created) FROM webhook_deliveries WHERE status = 'pending')`
)

// webhookStmts are the webhook statements prepared on the writer
// connection.
type webhookStmts struct {
	fanOut, endpointInsert, endpointDelete, claim, delete, update, purge *sql.Stmt
	health, purgeSucceeded, resend, deliveryExists, roll, endpointExists *sql.Stmt
	resendCopy, eventKept                                                *sql.Stmt
}

func (s *webhookStmts) prepare(ctx context.Context, conn *sql.Conn) error {
	for _, p := range []struct {
		dst   **sql.Stmt
		query string
	}{
		{&s.fanOut, sqlWebhookFanOut}, {&s.endpointInsert, sqlWebhookEndpointInsert},
		{&s.endpointDelete, sqlWebhookEndpointDelete}, {&s.claim, sqlWebhookClaim},
		{&s.delete, sqlWebhookDelete}, {&s.update, sqlWebhookUpdate}, {&s.purge, sqlWebhookPurge},
		{&s.health, sqlWebhookHealth}, {&s.purgeSucceeded, sqlWebhookPurgeSucceeded}, {&s.resend, sqlWebhookResend},
		{&s.deliveryExists, sqlWebhookDeliveryExists}, {&s.roll, sqlWebhookRoll},
		{&s.endpointExists, sqlWebhookEndpointExists}, {&s.resendCopy, sqlWebhookResendCopy},
		{&s.eventKept, sqlWebhookEventKept},
	} {
		st, err := conn.PrepareContext(ctx, p.query)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", p.query, err)
		}
		*p.dst = st
	}
	return nil
}

func (s *webhookStmts) close() error {
	var errs []error
	for _, st := range []*sql.Stmt{s.fanOut, s.endpointInsert, s.endpointDelete, s.claim, s.delete, s.update, s.purge,
		s.health, s.purgeSucceeded, s.resend, s.deliveryExists, s.roll, s.endpointExists, s.resendCopy, s.eventKept} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	return errors.Join(errs...)
}

// errTooManyEndpoints is the guard error of WebhookEndpointInsert.
func errTooManyEndpoints() error {
	return &surgepay.Error{Code: surgepay.EUNPROCESS, Reason: "too_many_webhook_endpoints",
		Message: fmt.Sprintf("a merchant may have at most %d webhook endpoints; delete one first",
			surgepay.WebhookEndpointsPerMerchantMax)}
}

// applyWebhook runs the webhook parts of a Write: the endpoint insert (a
// guard) or delete, and the fan-out of its event to the merchant's
// endpoints, one statement each.
func (w *writer) applyWebhook(ctx context.Context, wr *surgepay.Write) error {
	if e := wr.WebhookEndpointInsert; e != nil {
		n, err := exec(ctx, surgepay.StmtInsert, w.webhook.endpointInsert, e.MerchantID, e.ID, e.URL,
			e.Description, e.SealedSecret, e.Created.UnixNano(), surgepay.WebhookEndpointsPerMerchantMax)
		if err != nil {
			return fmt.Errorf("insert webhook endpoint %s: %w", e.ID, err)
		}
		if n == 0 {
			return errTooManyEndpoints()
		}
	}
	if e := wr.WebhookEndpointDelete; e != nil {
		if _, err := exec(ctx, surgepay.StmtDelete, w.webhook.endpointDelete, e.MerchantID, e.ID); err != nil {
			return fmt.Errorf("delete webhook endpoint %s: %w", e.ID, err)
		}
	}
	if r := wr.WebhookEndpointRoll; r != nil {
		n, err := exec(ctx, surgepay.StmtUpdate, w.webhook.roll, r.MerchantID, r.EndpointID, r.SealedSecret,
			r.PreviousSealedSecret, timeArg(r.PreviousSecretExpires))
		if err != nil {
			return fmt.Errorf("roll the secret of webhook endpoint %s: %w", r.EndpointID, err)
		}
		if n == 0 {
			return w.guardFailed(ctx, w.webhook.endpointExists, "webhook endpoint", r.MerchantID, r.EndpointID)
		}
	}
	if r := wr.WebhookResend; r != nil && r.Copy {
		n, err := exec(ctx, surgepay.StmtInsert, w.webhook.resendCopy, r.MerchantID, r.EventID, r.EndpointID,
			r.At.UnixNano())
		if err != nil {
			return fmt.Errorf("queue webhook %s for %s: %w", r.EventID, r.EndpointID, err)
		}
		if n == 0 {
			return w.guardFailed(ctx, w.webhook.eventKept, "webhook delivery", r.MerchantID, r.EventID, r.EndpointID)
		}
	} else if r != nil {
		n, err := exec(ctx, surgepay.StmtUpdate, w.webhook.resend, r.MerchantID, r.EventID, r.EndpointID,
			r.At.UnixNano(), surgepay.WebhookResendsMax)
		if err != nil {
			return fmt.Errorf("resend webhook %s to %s: %w", r.EventID, r.EndpointID, err)
		}
		if n == 0 {
			return w.guardFailed(ctx, w.webhook.deliveryExists, "webhook delivery", r.MerchantID, r.EventID, r.EndpointID)
		}
	}
	return w.insertWebhook(ctx, wr.Webhook)
}

// guardFailed returns the error of a webhook guard that changed no row:
// ENOTFOUND if the row is gone (exists, a SELECT EXISTS of args), else
// ECONFLICT "concurrent_update".
func (w *writer) guardFailed(ctx context.Context, exists *sql.Stmt, object string, args ...any) error {
	surgepay.CountStatement(ctx, surgepay.StmtSelect)
	var ok bool
	if err := exists.QueryRowContext(context.Background(), args...).Scan(&ok); err != nil {
		return fmt.Errorf("look for the %s: %w", object, err)
	}
	if !ok {
		return surgepay.NotFound("id", object)
	}
	return surgepay.Conflict("concurrent_update", "the %s was changed by another request; fetch it and retry", object)
}

// insertWebhook queues ev for every endpoint of its merchant: one
// statement, none if ev is nil.
func (w *writer) insertWebhook(ctx context.Context, ev *surgepay.WebhookEvent) error {
	if ev == nil {
		return nil
	}
	if _, err := exec(ctx, surgepay.StmtInsert, w.webhook.fanOut, ev.ID, ev.MerchantID, ev.PaymentID, ev.Type,
		ev.Payload, ev.Created.UnixNano()); err != nil {
		return fmt.Errorf("queue webhook event %s: %w", ev.ID, err)
	}
	return nil
}

// runOnWriter runs fn on the writer, in its own savepoint of a group
// commit, and returns once that commit is durable.
func (db *DB) runOnWriter(ctx context.Context, fn func(ctx context.Context, w *writer) error) error {
	return db.submit(ctx, &op{run: fn})
}

// runOnWriterWait is runOnWriter for the record of something that already
// happened (delivery results): a full write queue is waited out (bounded),
// not refused, or a delivered webhook would be sent again.
func (db *DB) runOnWriterWait(ctx context.Context, fn func(ctx context.Context, w *writer) error) error {
	return db.submit(ctx, &op{run: fn, wait: true})
}

func scanWebhookEndpoint(r scanner) (*surgepay.WebhookEndpoint, error) {
	var e surgepay.WebhookEndpoint
	var created, prevExpires, lastSuccess, lastFailure int64
	if err := r.Scan(&e.MerchantID, &e.ID, &e.URL, &e.Description, &e.SealedSecret, &created,
		&e.PreviousSealedSecret, &prevExpires, &e.FailuresInARow, &lastSuccess, &lastFailure, &e.LastError); err != nil {
		return nil, err
	}
	e.Created = time.Unix(0, created).UTC()
	e.PreviousSecretExpires, e.LastSuccess, e.LastFailure = nanoTime(prevExpires), nanoTime(lastSuccess), nanoTime(lastFailure)
	if len(e.PreviousSealedSecret) == 0 {
		e.PreviousSealedSecret = nil
	}
	return &e, nil
}

// nanoTime is a NOT NULL time column, 0 for none.
func nanoTime(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// FindWebhookEndpoint returns ENOTFOUND if the merchant has no endpoint id.
func (db *DB) FindWebhookEndpoint(ctx context.Context, merchantID, id string) (*surgepay.WebhookEndpoint, error) {
	defer counted(ctx)()
	e, err := scanWebhookEndpoint(db.read.QueryRowContext(ctx, sqlWebhookEndpointFind, merchantID, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, surgepay.NotFound("id", "webhook endpoint")
	}
	if err != nil {
		return nil, fmt.Errorf("find webhook endpoint %s: %w", id, err)
	}
	return e, nil
}

// ListWebhookEndpoints returns the merchant's endpoints, newest first.
func (db *DB) ListWebhookEndpoints(ctx context.Context, merchantID string) ([]*surgepay.WebhookEndpoint, error) {
	defer counted(ctx)()
	rows, err := db.read.QueryContext(ctx, sqlWebhookEndpointList, merchantID, surgepay.WebhookEndpointsPerMerchantMax)
	es, err := scanAll(rows, err, scanWebhookEndpoint)
	if err != nil {
		return nil, fmt.Errorf("list webhook endpoints: %w", err)
	}
	return es, nil
}

// ListWebhookMerchants returns the merchants with at least one endpoint.
func (db *DB) ListWebhookMerchants(ctx context.Context) ([]string, error) {
	defer counted(ctx)()
	rows, err := db.read.QueryContext(ctx, sqlWebhookMerchants)
	if err != nil {
		return nil, fmt.Errorf("list webhook merchants: %w", err)
	}
	defer rows.Close() //nolint:errcheck // read-only: closing loses nothing
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("list webhook merchants: %w", err)
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

// ClaimWebhookDeliveries claims up to limit (at most WebhookClaimMax) due
// deliveries: ClaimWebhookDeliveriesBounded without a bound per endpoint.
func (db *DB) ClaimWebhookDeliveries(ctx context.Context, now, leaseUntil time.Time, limit int) ([]*surgepay.WebhookDelivery, error) {
	return db.ClaimWebhookDeliveriesBounded(ctx, now, leaseUntil, limit, limit, nil)
}

// ClaimWebhookDeliveriesBounded claims up to limit (at most WebhookClaimMax)
// due deliveries, at most endpointMax of one endpoint, or room[id] of
// endpoint id (webhook.BoundedClaimer). A read answers first whether any
// is due for an endpoint with room, so an idle poll, or one that finds
// only endpoints at their bound, costs no writer operation; the claim
// itself is one UPDATE on the writer.
func (db *DB) ClaimWebhookDeliveriesBounded(ctx context.Context, now, leaseUntil time.Time, limit, endpointMax int,
	room map[string]int) ([]*surgepay.WebhookDelivery, error) {
	limit = min(limit, WebhookClaimMax)
	if limit <= 0 || endpointMax <= 0 {
		return nil, nil
	}
	// room as a JSON object for json_each: text, not a BLOB, which SQLite
	// would read as JSONB.
	roomJSON := "{}"
	if len(room) > 0 {
		b, err := json.Marshal(room)
		if err != nil {
			return nil, fmt.Errorf("claim webhooks: %w", err)
		}
		roomJSON = string(b)
	}
	var due bool
	if err := db.read.QueryRowContext(ctx, sqlWebhookDue, now.UnixNano(), roomJSON).Scan(&due); err != nil {
		return nil, fmt.Errorf("look for due webhooks: %w", err)
	}
	if !due {
		return nil, nil
	}
	var out []*surgepay.WebhookDelivery
	err := db.runOnWriter(ctx, func(ctx context.Context, w *writer) error {
		surgepay.CountStatement(ctx, surgepay.StmtUpdate)
		rows, err := w.webhook.claim.QueryContext(context.Background(), now.UnixNano(), leaseUntil.UnixNano(),
			limit, roomJSON, endpointMax, min(4*limit, WebhookClaimScanMax))
		out, err = scanAll(rows, err, scanWebhookDelivery)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("claim webhooks: %w", err)
	}
	return out, nil
}

func scanWebhookDelivery(r scanner) (*surgepay.WebhookDelivery, error) {
	var d surgepay.WebhookDelivery
	var created int64
	var url sql.NullString
	var prevExpires sql.NullInt64
	if err := r.Scan(&d.EventID, &d.EndpointID, &d.MerchantID, &d.PaymentID, &d.Type, &d.Payload, &d.Attempt,
		&created, &url, &d.SealedSecret, &d.PreviousSealedSecret, &prevExpires); err != nil {
		return nil, err
	}
	d.Created, d.URL = time.Unix(0, created).UTC(), url.String
	d.PreviousSecretExpires = nanoTime(prevExpires.Int64)
	if len(d.PreviousSealedSecret) == 0 {
		d.PreviousSealedSecret = nil
	}
	return &d, nil
}

// RecordWebhookResults applies up to WebhookResultsMax results in one
// writer operation.
func (db *DB) RecordWebhookResults(ctx context.Context, results []*surgepay.WebhookResult) error {
	if len(results) > WebhookResultsMax {
		return fmt.Errorf("record webhook results: %d results, at most %d", len(results), WebhookResultsMax)
	}
	if len(results) == 0 {
		return nil
	}
	err := db.runOnWriterWait(ctx, func(ctx context.Context, w *writer) error {
		for _, r := range results {
			var err error
			switch r.Outcome {
			case surgepay.WebhookDropped:
				_, err = exec(ctx, surgepay.StmtDelete, w.webhook.delete, r.EventID, r.EndpointID, r.Attempt)
			case surgepay.WebhookDelivered, surgepay.WebhookRetry, surgepay.WebhookFailed:
				status, next := surgepay.WebhookStatusPending, r.NextAttempt
				switch r.Outcome {
				case surgepay.WebhookFailed:
					status, next = surgepay.WebhookStatusFailed, r.At
				case surgepay.WebhookDelivered:
					status, next = surgepay.WebhookStatusSucceeded, r.At
				}
				_, err = exec(ctx, surgepay.StmtUpdate, w.webhook.update, status, next.UnixNano(), r.StatusCode,
					r.Error, r.At.UnixNano(), r.EventID, r.EndpointID, r.Attempt)
			default:
				err = fmt.Errorf("unknown outcome %q", r.Outcome)
			}
			if err != nil {
				return fmt.Errorf("delivery of %s to %s: %w", r.EventID, r.EndpointID, err)
			}
		}
		for _, h := range surgepay.WebhookHealthOf(results) {
			if _, err := exec(ctx, surgepay.StmtUpdate, w.webhook.health, h.MerchantID, h.EndpointID, h.Reset,
				h.Failures, nanoArg(h.LastSuccess), nanoArg(h.LastFailure), h.LastError); err != nil {
				return fmt.Errorf("health of webhook endpoint %s: %w", h.EndpointID, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("record webhook results: %w", err)
	}
	return nil
}

// WebhookBacklog counts pending and failed deliveries: a scan of the
// outbox's partial indexes.
func (db *DB) WebhookBacklog(ctx context.Context) (surgepay.WebhookBacklog, error) {
	defer counted(ctx)()
	var b surgepay.WebhookBacklog
	var oldest sql.NullInt64
	if err := db.read.QueryRowContext(ctx, sqlWebhookBacklog).Scan(&b.Pending, &b.Failed, &oldest); err != nil {
		return b, fmt.Errorf("count webhook deliveries: %w", err)
	}
	b.OldestPending = timeOf(oldest)
	return b, nil
}

// DeleteFailedWebhooksBefore deletes up to limit (at most PurgeLimitMax)
// failed deliveries last attempted before t, through the writer.
func (db *DB) DeleteFailedWebhooksBefore(ctx context.Context, t time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	var n int64
	err := db.runOnWriter(ctx, func(ctx context.Context, w *writer) error {
		var err error
		n, err = exec(ctx, surgepay.StmtDelete, w.webhook.purge, t.UnixNano(), min(limit, PurgeLimitMax))
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("delete failed webhooks before %v: %w", t, err)
	}
	return int(n), nil
}

// nanoArg is the value of a NOT NULL time column: 0 for the zero time.
func nanoArg(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// DeleteSucceededWebhooksBefore deletes up to limit (at most
// PurgeLimitMax) succeeded deliveries whose success was before t, through
// the writer.
func (db *DB) DeleteSucceededWebhooksBefore(ctx context.Context, t time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	var n int64
	err := db.runOnWriter(ctx, func(ctx context.Context, w *writer) error {
		var err error
		n, err = exec(ctx, surgepay.StmtDelete, w.webhook.purgeSucceeded, t.UnixNano(), min(limit, PurgeLimitMax))
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("delete succeeded webhooks before %v: %w", t, err)
	}
	return int(n), nil
}

// webhookDeliveriesQuery returns the SELECT of a delivery list and its
// arguments: one range of the endpoint index (endpoint_id, event_id), or
// of the primary key (event_id, endpoint_id) for an event.
func webhookDeliveriesQuery(merchantID string, f surgepay.WebhookDeliveryFilter) (string, []any) {
	var b strings.Builder
	b.WriteString(`SELECT ` + webhookDeliveryInfoCols + ` FROM webhook_deliveries WHERE merchant_id = ?`)
	args := []any{merchantID}
	if f.EndpointID != "" {
		b.WriteString(` AND endpoint_id = ?`)
		args = append(args, f.EndpointID)
	}
	if f.EventID != "" {
		b.WriteString(` AND event_id = ?`)
		args = append(args, f.EventID)
	}
	if f.Status != "" {
		b.WriteString(` AND status = ?`)
		args = append(args, f.Status)
	}
	evOp, ev, epOp, ep, none := surgepay.WebhookDeliveryCursor(f)
	switch {
	case none:
		b.WriteString(` AND 1 = 0`)
	case evOp != "":
		b.WriteString(` AND event_id ` + evOp + ` ?`)
		args = append(args, ev)
	case epOp != "":
		b.WriteString(` AND endpoint_id ` + epOp + ` ?`)
		args = append(args, ep)
	}
	b.WriteString(` ORDER BY event_id DESC, endpoint_id DESC LIMIT ?`)
	return b.String(), append(args, f.Limit+1)
}

func scanWebhookDeliveryInfo(r scanner) (*surgepay.WebhookDeliveryInfo, error) {
	var d surgepay.WebhookDeliveryInfo
	var next, last, created int64
	var leased bool
	if err := r.Scan(&d.EventID, &d.EndpointID, &d.MerchantID, &d.PaymentID, &d.Type, &d.Status, &d.Attempts,
		&leased, &next, &last, &d.LastStatus, &d.LastError, &d.Resends, &created); err != nil {
		return nil, err
	}
	d.LastAttempt, d.Created = nanoTime(last), time.Unix(0, created).UTC()
	if d.Status == surgepay.WebhookStatusPending {
		d.NextAttempt, d.InFlight = nanoTime(next), leased
	}
	return &d, nil
}

// ListWebhookDeliveries returns a page of the deliveries f selects, newest
// event first: one statement on the read pool.
func (db *DB) ListWebhookDeliveries(ctx context.Context, merchantID string, f surgepay.WebhookDeliveryFilter) ([]*surgepay.WebhookDeliveryInfo, bool, error) {
	if err := f.Validate(); err != nil {
		return nil, false, err
	}
	defer counted(ctx)()
	q, args := webhookDeliveriesQuery(merchantID, f)
	rows, err := db.read.QueryContext(ctx, q, args...)
	ds, err := scanAll(rows, err, scanWebhookDeliveryInfo)
	if err != nil {
		return nil, false, fmt.Errorf("list webhook deliveries: %w", err)
	}
	if len(ds) > f.Limit {
		return ds[:f.Limit], true, nil
	}
	return ds, false, nil
}

// FindWebhookDelivery returns ENOTFOUND if the merchant has no delivery of
// the event to the endpoint.
func (db *DB) FindWebhookDelivery(ctx context.Context, merchantID, eventID, endpointID string) (*surgepay.WebhookDeliveryInfo, error) {
	defer counted(ctx)()
	d, err := scanWebhookDeliveryInfo(db.read.QueryRowContext(ctx, `SELECT `+webhookDeliveryInfoCols+`
		FROM webhook_deliveries WHERE event_id = ? AND endpoint_id = ? AND merchant_id = ?`, eventID, endpointID, merchantID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, surgepay.NotFound("id", "webhook delivery")
	}
	if err != nil {
		return nil, fmt.Errorf("find webhook delivery of %s to %s: %w", eventID, endpointID, err)
	}
	return d, nil
}
