package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/surgepay/surgepay"
)

// Webhooks (surgepay.WebhookStore): endpoints in webhook_endpoints, the
// outbox in webhook_deliveries (migrations/0003_webhooks.sql). Endpoints
// and the outbox rows of a payment change are parts of Writes, committed
// by the group committers; a dispatcher's claims and results are
// statements of their own on the pool. Several nodes may dispatch at once:
// a claim skips the rows another claim holds locked, and moves the rows it
// takes out of reach until its lease ends.
//
// A merchant's endpoint count is checked by the INSERT that adds one,
// after a transaction-scoped advisory lock keyed by the merchant (see
// sqlWebhookEndpointLock): creates for one merchant, from any node or
// committer, are serialised until their transactions end, so the bound
// holds.

var _ surgepay.WebhookStore = (*DB)(nil)

// Bounds of one call, whatever the caller asks.
const (
	// WebhookClaimMax bounds one ClaimWebhookDeliveries: its payloads are
	// held in memory at once (a payment renders to about 1.5 KB).
	WebhookClaimMax = 1000
	// WebhookResultsMax bounds one RecordWebhookResults.
	WebhookResultsMax = 1000
	// webhookPurgeMax bounds one DeleteFailedWebhooksBefore.
	webhookPurgeMax = 10_000
	// WebhookClaimScanMax bounds the due deliveries one claim locks and
	// considers: four times what it may return, so that endpoints at their
	// bound among the oldest seldom cut it short, without locking rows by
	// the thousand to claim a few.
	WebhookClaimScanMax = 4 * WebhookClaimMax
)

// lockWebhookEndpoint orders endpoint guards after the payment guards.
const lockWebhookEndpoint = "4/"

// lockWebhookDelivery orders resend guards after the endpoint guards.
const lockWebhookDelivery = "5/"

const (
	webhookEndpointCols     = "merchant_id, id, url, description, sealed_secret, created"
	webhookEndpointReadCols = webhookEndpointCols + `, previous_sealed_secret, previous_secret_expires,
		failures_in_a_row, last_success, last_failure, last_error`
	webhookDeliveryInfoCols = `event_id, endpoint_id, merchant_id, payment_id, type, status, attempts, leased,
		next_attempt, last_attempt, last_status, last_error, resends, created`
)

const (
	// sqlWebhookFanOut stores one row per endpoint the merchant has at
	// commit, none if it has none. Parameters are typed by their columns.
	sqlWebhookFanOut = `INSERT INTO webhook_deliveries (event_id, endpoint_id, merchant_id, payment_id, type, payload,
		status, attempts, next_attempt, last_status, last_error, created, updated)
		SELECT $1, id, merchant_id, $3, $4, $5, 'pending', 0, $6, 0, '', $6, $6
		FROM webhook_endpoints WHERE merchant_id = $2`
	// sqlWebhookEndpointLock serialises the creates of one merchant's
	// endpoints until the transaction ends. It is a statement of its own,
	// before the INSERT: under READ COMMITTED a statement reads the rows
	// committed when it starts, so a count taken by the statement that
	// waited for the lock would miss the endpoint its holder just
	// committed. The key is a hash of the schema and the merchant; two
	// merchants that share one only wait for each other.
	sqlWebhookEndpointLock = `SELECT pg_advisory_xact_lock(
		hashtextextended('surgepay.webhook_endpoints/' || current_schema() || '/' || $1::text, 0))`
	sqlWebhookEndpointInsert = `INSERT INTO webhook_endpoints (` + webhookEndpointCols + `)
		SELECT $1, $2, $3, $4, $5, $6
		WHERE (SELECT count(*) FROM webhook_endpoints WHERE merchant_id = $1) < $7`
	sqlWebhookEndpointDelete = `DELETE FROM webhook_endpoints WHERE merchant_id = $1 AND id = $2`
	sqlWebhookEndpointFind   = `SELECT ` + webhookEndpointReadCols + ` FROM webhook_endpoints WHERE merchant_id = $1 AND id = $2`
	sqlWebhookEndpointList   = `SELECT ` + webhookEndpointReadCols + ` FROM webhook_endpoints WHERE merchant_id = $1
		ORDER BY id DESC LIMIT $2`
	sqlWebhookMerchants = `SELECT DISTINCT merchant_id FROM webhook_endpoints`
	// sqlWebhookClaim claims up to $3 due deliveries, oldest due first, at
	// most $6 of one endpoint or, for an endpoint in the arrays $4 and $5,
	// its room. It locks the $7 oldest due deliveries of endpoints with
	// room, skipping those another claim holds (an endpoint without room is
	// skipped in the index scan, so its backlog does not hide the
	// others'), and claims the ones within their endpoints' room.
	sqlWebhookClaim = `WITH room AS (
		SELECT * FROM unnest($4::text[], $5::int[]) AS r(endpoint_id, n)
	), due AS (
		SELECT event_id, endpoint_id, next_attempt FROM webhook_deliveries
		WHERE status = 'pending' AND next_attempt <= $1
			AND endpoint_id NOT IN (SELECT endpoint_id FROM room WHERE n <= 0)
		ORDER BY next_attempt LIMIT $7
		FOR UPDATE SKIP LOCKED
	), ranked AS (
		SELECT event_id, endpoint_id, next_attempt,
			row_number() OVER (PARTITION BY endpoint_id ORDER BY next_attempt, event_id) AS rn
		FROM due
	), picked AS (
		SELECT k.event_id, k.endpoint_id FROM ranked k LEFT JOIN room r ON r.endpoint_id = k.endpoint_id
		WHERE k.rn <= coalesce(r.n, $6)
		ORDER BY k.next_attempt LIMIT $3
	), claimed AS (
		UPDATE webhook_deliveries d SET next_attempt = $2, attempts = d.attempts + 1, updated = $1, leased = true
		FROM picked WHERE d.event_id = picked.event_id AND d.endpoint_id = picked.endpoint_id
		RETURNING d.event_id, d.endpoint_id, d.merchant_id, d.payment_id, d.type, d.payload, d.attempts, d.created
	)
	SELECT c.event_id, c.endpoint_id, c.merchant_id, c.payment_id, c.type, c.payload, c.attempts, c.created,
		coalesce(e.url, ''), coalesce(e.sealed_secret, ''::bytea), e.previous_sealed_secret, e.previous_secret_expires
	FROM claimed c LEFT JOIN webhook_endpoints e ON e.merchant_id = c.merchant_id AND e.id = c.endpoint_id`
	sqlWebhookDelete = `DELETE FROM webhook_deliveries d
		USING unnest($1::text[], $2::text[], $3::int[]) AS r(event_id, endpoint_id, attempts)
		WHERE d.event_id = r.event_id AND d.endpoint_id = r.endpoint_id AND d.attempts = r.attempts`
	sqlWebhookUpdate = `UPDATE webhook_deliveries d SET status = r.status, next_attempt = r.next_attempt,
			last_status = r.last_status, last_error = r.last_error, updated = r.updated, last_attempt = r.updated,
			leased = false
		FROM unnest($1::text[], $2::text[], $3::int[], $4::text[], $5::timestamptz[], $6::int[], $7::text[],
			$8::timestamptz[]) AS r(event_id, endpoint_id, attempts, status, next_attempt, last_status, last_error, updated)
		WHERE d.event_id = r.event_id AND d.endpoint_id = r.endpoint_id AND d.attempts = r.attempts
			AND d.status = 'pending'`
	// sqlWebhookBacklog counts through the partial indexes of pending and
	// failed rows: one aggregate over the table would read every
	// succeeded delivery kept for webhooks.delivered_retention.
	sqlWebhookBacklog = `SELECT (SELECT count(*) FROM webhook_deliveries WHERE status = 'pending'),
		(SELECT count(*) FROM webhook_deliveries WHERE status = 'failed'),
		(SELECT min(created) FROM webhook_deliveries WHERE status = 'pending')`
	sqlWebhookPurge = `DELETE FROM webhook_deliveries WHERE (event_id, endpoint_id) IN (
		SELECT event_id, endpoint_id FROM webhook_deliveries WHERE status = 'failed' AND updated < $1 LIMIT $2)`
	sqlWebhookPurgeSucceeded = `DELETE FROM webhook_deliveries WHERE (event_id, endpoint_id) IN (
		SELECT event_id, endpoint_id FROM webhook_deliveries WHERE status = 'succeeded' AND updated < $1 LIMIT $2)`
	// sqlWebhookHealth applies a batch's WebhookHealth, one row per
	// endpoint.
	sqlWebhookHealth = `UPDATE webhook_endpoints e SET
			failures_in_a_row = CASE WHEN h.reset THEN h.failures ELSE e.failures_in_a_row + h.failures END,
			last_success = CASE WHEN h.last_success IS NULL THEN e.last_success
				ELSE greatest(e.last_success, h.last_success) END,
			last_failure = CASE WHEN h.last_failure IS NULL THEN e.last_failure
				ELSE greatest(e.last_failure, h.last_failure) END,
			last_error = CASE WHEN h.last_failure IS NOT NULL
				AND (e.last_failure IS NULL OR h.last_failure > e.last_failure) THEN h.last_error ELSE e.last_error END
		FROM unnest($1::text[], $2::text[], $3::bool[], $4::int[], $5::timestamptz[], $6::timestamptz[], $7::text[])
			AS h(merchant_id, id, reset, failures, last_success, last_failure, last_error)
		WHERE e.merchant_id = h.merchant_id AND e.id = h.id`
	// sqlWebhookResend is the guard of a WebhookResend: the delivery
	// becomes pending, due $4, its attempts counted afresh, unless a claim
	// holds it or it was resent WebhookResendsMax times.
	sqlWebhookResend = `UPDATE webhook_deliveries SET status = 'pending', attempts = 0, next_attempt = $4,
		leased = false, resends = resends + 1, updated = $4
		WHERE event_id = $2 AND endpoint_id = $3 AND merchant_id = $1 AND resends < $5
			AND NOT (status = 'pending' AND leased AND next_attempt > $4)`
	sqlWebhookDeliveryExists = `SELECT EXISTS (SELECT 1 FROM webhook_deliveries
		WHERE event_id = $2 AND endpoint_id = $3 AND merchant_id = $1)`
	// sqlWebhookResendCopy is the guard of a WebhookResend with Copy: a
	// delivery of the event to the endpoint, copied from the event's
	// delivery to another endpoint of the merchant.
	sqlWebhookResendCopy = `INSERT INTO webhook_deliveries (event_id, endpoint_id, merchant_id, payment_id, type,
		payload, status, attempts, next_attempt, last_status, last_error, created, updated, resends)
		SELECT event_id, $3, merchant_id, payment_id, type, payload, 'pending', 0, $4, 0, '', created, $4, 1
		FROM webhook_deliveries WHERE event_id = $2 AND merchant_id = $1 AND endpoint_id <> $3 LIMIT 1
		ON CONFLICT DO NOTHING`
	sqlWebhookEventKept = `SELECT EXISTS (SELECT 1 FROM webhook_deliveries WHERE event_id = $2 AND merchant_id = $1
		AND endpoint_id <> $3)`
	// sqlWebhookRoll is the guard of a WebhookEndpointRoll: it holds if
	// the secret is still the one the roll read.
	sqlWebhookRoll = `UPDATE webhook_endpoints SET sealed_secret = $3, previous_sealed_secret = $4,
		previous_secret_expires = $5 WHERE merchant_id = $1 AND id = $2 AND sealed_secret = $4`
	sqlWebhookEndpointExists = `SELECT EXISTS (SELECT 1 FROM webhook_endpoints WHERE merchant_id = $1 AND id = $2)`
)

// addWebhook adds the webhook parts of w to o: the endpoint insert (the
// merchant's lock, then the guarded INSERT) or delete, and the fan-out of
// its event, one statement each.
//
// The lock is a guard that always holds (it returns one row), so that it
// runs before the INSERT, in the same round: with two guards or more the
// Write runs under a savepoint of its own, its guards in order.
func (o *op) addWebhook(w *surgepay.Write) {
	if e := w.WebhookEndpointInsert; e != nil {
		o.guards = append(o.guards, guard{
			stmt:    stmt{sql: sqlWebhookEndpointLock, kind: surgepay.StmtSelect, args: []any{e.MerchantID}},
			lockKey: lockWebhookEndpoint + e.MerchantID,
			fail:    errors.New("postgres: the webhook endpoint lock returned no row"),
			object:  "webhook endpoint",
		}, guard{
			stmt: stmt{sql: sqlWebhookEndpointInsert, kind: surgepay.StmtInsert, args: []any{e.MerchantID, e.ID,
				e.URL, e.Description, e.SealedSecret, dbTime(e.Created), surgepay.WebhookEndpointsPerMerchantMax}},
			lockKey: lockWebhookEndpoint + e.MerchantID,
			fail: &surgepay.Error{Code: surgepay.EUNPROCESS, Reason: "too_many_webhook_endpoints",
				Message: fmt.Sprintf("a merchant may have at most %d webhook endpoints; delete one first",
					surgepay.WebhookEndpointsPerMerchantMax)},
			object: "webhook endpoint",
		})
	}
	if e := w.WebhookEndpointDelete; e != nil {
		o.insert(surgepay.StmtDelete, sqlWebhookEndpointDelete, e.MerchantID, e.ID)
	}
	if r := w.WebhookEndpointRoll; r != nil {
		g := rowGuard(surgepay.StmtUpdate, "webhook endpoint", lockWebhookEndpoint, sqlWebhookEndpointExists,
			r.MerchantID, r.EndpointID, sqlWebhookRoll, r.MerchantID, r.EndpointID, r.SealedSecret,
			r.PreviousSealedSecret, dbTime(r.PreviousSecretExpires))
		o.guards = append(o.guards, g)
	}
	if r := w.WebhookResend; r != nil && r.Copy {
		o.guards = append(o.guards, guard{
			stmt: stmt{sql: sqlWebhookResendCopy, kind: surgepay.StmtInsert,
				args: []any{r.MerchantID, r.EventID, r.EndpointID, dbTime(r.At)}},
			lockKey: lockWebhookDelivery + r.MerchantID + "/" + r.EventID + "/" + r.EndpointID,
			fail: surgepay.Conflict(surgepay.ReasonConcurrentUpdate,
				"the webhook delivery was changed by another request; fetch it and retry"),
			exists: stmt{sql: sqlWebhookEventKept, kind: surgepay.StmtSelect, args: []any{r.MerchantID, r.EventID, r.EndpointID}},
			object: "webhook delivery",
		})
	} else if r != nil {
		g := rowGuard(surgepay.StmtUpdate, "webhook delivery", lockWebhookDelivery, sqlWebhookDeliveryExists,
			r.MerchantID, r.EventID, sqlWebhookResend, r.MerchantID, r.EventID, r.EndpointID, dbTime(r.At),
			surgepay.WebhookResendsMax)
		g.exists.args = []any{r.MerchantID, r.EventID, r.EndpointID}
		g.lockKey += "/" + r.EndpointID
		o.guards = append(o.guards, g)
	}
	if ev := w.Webhook; ev != nil {
		o.insert(surgepay.StmtInsert, sqlWebhookFanOut, ev.ID, ev.MerchantID, ev.PaymentID, ev.Type, ev.Payload,
			dbTime(ev.Created))
	}
}

func scanWebhookEndpoint(row pgx.Row) (*surgepay.WebhookEndpoint, error) {
	var e surgepay.WebhookEndpoint
	var prevExpires, lastSuccess, lastFailure *time.Time
	if err := row.Scan(&e.MerchantID, &e.ID, &e.URL, &e.Description, &e.SealedSecret, &e.Created,
		&e.PreviousSealedSecret, &prevExpires, &e.FailuresInARow, &lastSuccess, &lastFailure, &e.LastError); err != nil {
		return nil, err
	}
	e.Created = e.Created.UTC()
	e.PreviousSecretExpires, e.LastSuccess, e.LastFailure = utcOrZero(prevExpires), utcOrZero(lastSuccess), utcOrZero(lastFailure)
	if len(e.PreviousSealedSecret) == 0 {
		e.PreviousSealedSecret = nil
	}
	return &e, nil
}

// utcOrZero is a nullable time column: NULL is the zero time.
func utcOrZero(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

// nullTimePtr is an element of a timestamptz[] argument: nil (NULL) for
// the zero time.
func nullTimePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := dbTime(t)
	return &u
}

// FindWebhookEndpoint returns ENOTFOUND if the merchant has no endpoint id.
func (db *DB) FindWebhookEndpoint(ctx context.Context, merchantID, id string) (*surgepay.WebhookEndpoint, error) {
	defer count(ctx, surgepay.StmtSelect)()
	e, err := scanWebhookEndpoint(db.pool.QueryRow(ctx, sqlWebhookEndpointFind, merchantID, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, surgepay.NotFound("id", "webhook endpoint")
	}
	if err != nil {
		return nil, readErr(fmt.Errorf("find webhook endpoint %s: %w", id, err))
	}
	return e, nil
}

// ListWebhookEndpoints returns the merchant's endpoints, newest first.
func (db *DB) ListWebhookEndpoints(ctx context.Context, merchantID string) ([]*surgepay.WebhookEndpoint, error) {
	defer count(ctx, surgepay.StmtSelect)()
	rows, _ := db.pool.Query(ctx, sqlWebhookEndpointList, merchantID, surgepay.WebhookEndpointsPerMerchantMax)
	es, err := collect(rows, scanWebhookEndpoint)
	if err != nil {
		return nil, readErr(fmt.Errorf("list webhook endpoints: %w", err))
	}
	return es, nil
}

// ListWebhookMerchants returns the merchants with at least one endpoint.
func (db *DB) ListWebhookMerchants(ctx context.Context) ([]string, error) {
	defer count(ctx, surgepay.StmtSelect)()
	rows, _ := db.pool.Query(ctx, sqlWebhookMerchants)
	ids, err := collect(rows, func(row pgx.Row) (string, error) {
		var id string
		err := row.Scan(&id)
		return id, err
	})
	if err != nil {
		return nil, readErr(fmt.Errorf("list webhook merchants: %w", err))
	}
	return ids, nil
}

// ClaimWebhookDeliveries claims up to limit (at most WebhookClaimMax) due
// deliveries: ClaimWebhookDeliveriesBounded without a bound per endpoint.
func (db *DB) ClaimWebhookDeliveries(ctx context.Context, now, leaseUntil time.Time, limit int) ([]*surgepay.WebhookDelivery, error) {
	return db.ClaimWebhookDeliveriesBounded(ctx, now, leaseUntil, limit, limit, nil)
}

// ClaimWebhookDeliveriesBounded claims up to limit (at most WebhookClaimMax)
// due deliveries, at most endpointMax of one endpoint, or room[id] of
// endpoint id (webhook.BoundedClaimer), with one statement.
func (db *DB) ClaimWebhookDeliveriesBounded(ctx context.Context, now, leaseUntil time.Time, limit, endpointMax int,
	room map[string]int) ([]*surgepay.WebhookDelivery, error) {
	limit = min(limit, WebhookClaimMax)
	if limit <= 0 || endpointMax <= 0 {
		return nil, nil
	}
	ids, ns := make([]string, 0, len(room)), make([]int32, 0, len(room))
	for id, n := range room {
		ids, ns = append(ids, id), append(ns, int32(min(max(n, 0), endpointMax, limit))) //nolint:gosec // G115: 0 to limit, at most WebhookClaimMax
	}
	defer count(ctx, surgepay.StmtUpdate)()
	rows, _ := db.pool.Query(ctx, sqlWebhookClaim, dbTime(now), dbTime(leaseUntil), limit, ids, ns, endpointMax,
		min(4*limit, WebhookClaimScanMax))
	ds, err := collect(rows, func(row pgx.Row) (*surgepay.WebhookDelivery, error) {
		var d surgepay.WebhookDelivery
		var prevExpires *time.Time
		if err := row.Scan(&d.EventID, &d.EndpointID, &d.MerchantID, &d.PaymentID, &d.Type, &d.Payload,
			&d.Attempt, &d.Created, &d.URL, &d.SealedSecret, &d.PreviousSealedSecret, &prevExpires); err != nil {
			return nil, err
		}
		d.Created, d.PreviousSecretExpires = d.Created.UTC(), utcOrZero(prevExpires)
		if len(d.PreviousSealedSecret) == 0 {
			d.PreviousSealedSecret = nil
		}
		return &d, nil
	})
	if err != nil {
		return nil, readErr(fmt.Errorf("claim webhooks: %w", err))
	}
	return ds, nil
}

// RecordWebhookResults applies up to WebhookResultsMax results: one
// DELETE of the delivered and dropped, one UPDATE of the rest, pipelined
// in one round trip.
func (db *DB) RecordWebhookResults(ctx context.Context, results []*surgepay.WebhookResult) error {
	if len(results) > WebhookResultsMax {
		return fmt.Errorf("record webhook results: %d results, at most %d", len(results), WebhookResultsMax)
	}
	var del, upd struct {
		events, endpoints, statuses, errs []string
		attempts, codes                   []int32
		next, at                          []time.Time
	}
	for _, r := range results {
		switch r.Outcome {
		case surgepay.WebhookDropped:
			del.events, del.endpoints = append(del.events, r.EventID), append(del.endpoints, r.EndpointID)
			del.attempts = append(del.attempts, int32(r.Attempt)) //nolint:gosec // G115: Attempt was read from the int4 attempt column
		case surgepay.WebhookDelivered, surgepay.WebhookRetry, surgepay.WebhookFailed:
			status, next := surgepay.WebhookStatusPending, r.NextAttempt
			switch r.Outcome {
			case surgepay.WebhookFailed:
				status, next = surgepay.WebhookStatusFailed, r.At
			case surgepay.WebhookDelivered:
				status, next = surgepay.WebhookStatusSucceeded, r.At
			}
			upd.events, upd.endpoints = append(upd.events, r.EventID), append(upd.endpoints, r.EndpointID)
			upd.attempts, upd.statuses = append(upd.attempts, int32(r.Attempt)), append(upd.statuses, status) //nolint:gosec // G115: Attempt was read from the int4 attempt column
			upd.next, upd.codes = append(upd.next, dbTime(next)), append(upd.codes, int32(r.StatusCode))      //nolint:gosec // G115: an HTTP status, three digits
			upd.errs, upd.at = append(upd.errs, r.Error), append(upd.at, dbTime(r.At))
		default:
			return fmt.Errorf("record webhook results: unknown outcome %q", r.Outcome)
		}
	}
	b := &pgx.Batch{}
	if len(del.events) > 0 {
		surgepay.CountStatement(ctx, surgepay.StmtDelete)
		b.Queue(sqlWebhookDelete, del.events, del.endpoints, del.attempts)
	}
	if len(upd.events) > 0 {
		surgepay.CountStatement(ctx, surgepay.StmtUpdate)
		b.Queue(sqlWebhookUpdate, upd.events, upd.endpoints, upd.attempts, upd.statuses, upd.next, upd.codes,
			upd.errs, upd.at)
	}
	if hs := surgepay.WebhookHealthOf(results); len(hs) > 0 {
		var h struct {
			merchants, ids, errs []string
			resets               []bool
			failures             []int32
			success, failure     []*time.Time
		}
		for _, x := range hs {
			h.merchants, h.ids, h.errs = append(h.merchants, x.MerchantID), append(h.ids, x.EndpointID), append(h.errs, x.LastError)
			h.resets, h.failures = append(h.resets, x.Reset), append(h.failures, int32(x.Failures)) //nolint:gosec // G115: failures within one batch, at most WebhookResultsMax
			h.success, h.failure = append(h.success, nullTimePtr(x.LastSuccess)), append(h.failure, nullTimePtr(x.LastFailure))
		}
		surgepay.CountStatement(ctx, surgepay.StmtUpdate)
		b.Queue(sqlWebhookHealth, h.merchants, h.ids, h.resets, h.failures, h.success, h.failure, h.errs)
	}
	if b.Len() == 0 {
		return nil
	}
	start := time.Now()
	err := db.pool.SendBatch(ctx, b).Close()
	surgepay.CountStoreTime(ctx, time.Since(start))
	if err != nil {
		return fmt.Errorf("record webhook results: %w", err)
	}
	return nil
}

// WebhookBacklog counts pending and failed deliveries: a scan of the
// outbox.
func (db *DB) WebhookBacklog(ctx context.Context) (surgepay.WebhookBacklog, error) {
	defer count(ctx, surgepay.StmtSelect)()
	var b surgepay.WebhookBacklog
	var oldest *time.Time
	if err := db.pool.QueryRow(ctx, sqlWebhookBacklog).Scan(&b.Pending, &b.Failed, &oldest); err != nil {
		return b, readErr(fmt.Errorf("count webhook deliveries: %w", err))
	}
	if oldest != nil {
		b.OldestPending = oldest.UTC()
	}
	return b, nil
}

// DeleteFailedWebhooksBefore deletes up to limit failed deliveries last
// attempted before t.
func (db *DB) DeleteFailedWebhooksBefore(ctx context.Context, t time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	defer count(ctx, surgepay.StmtDelete)()
	tag, err := db.pool.Exec(ctx, sqlWebhookPurge, dbTime(t), min(limit, webhookPurgeMax))
	if err != nil {
		return 0, readErr(fmt.Errorf("delete failed webhooks before %v: %w", t, err))
	}
	return int(tag.RowsAffected()), nil
}

// DeleteSucceededWebhooksBefore deletes up to limit succeeded deliveries
// whose success was before t.
func (db *DB) DeleteSucceededWebhooksBefore(ctx context.Context, t time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	defer count(ctx, surgepay.StmtDelete)()
	tag, err := db.pool.Exec(ctx, sqlWebhookPurgeSucceeded, dbTime(t), min(limit, webhookPurgeMax))
	if err != nil {
		return 0, readErr(fmt.Errorf("delete succeeded webhooks before %v: %w", t, err))
	}
	return int(tag.RowsAffected()), nil
}

// webhookDeliveriesQuery returns the SELECT of a delivery list and its
// arguments: one range of the endpoint index (endpoint_id, event_id), or
// of the primary key (event_id, endpoint_id) for an event.
func webhookDeliveriesQuery(merchantID string, f surgepay.WebhookDeliveryFilter) (string, []any) {
	var b strings.Builder
	args := []any{merchantID}
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	b.WriteString(`SELECT ` + webhookDeliveryInfoCols + ` FROM webhook_deliveries WHERE merchant_id = $1`)
	if f.EndpointID != "" {
		b.WriteString(` AND endpoint_id = ` + arg(f.EndpointID))
	}
	if f.EventID != "" {
		b.WriteString(` AND event_id = ` + arg(f.EventID))
	}
	if f.Status != "" {
		b.WriteString(` AND status = ` + arg(f.Status))
	}
	evOp, ev, epOp, ep, none := surgepay.WebhookDeliveryCursor(f)
	switch {
	case none:
		b.WriteString(` AND 1 = 0`)
	case evOp != "":
		b.WriteString(` AND event_id ` + evOp + ` ` + arg(ev))
	case epOp != "":
		b.WriteString(` AND endpoint_id ` + epOp + ` ` + arg(ep))
	}
	b.WriteString(` ORDER BY event_id DESC, endpoint_id DESC LIMIT ` + arg(f.Limit+1))
	return b.String(), args
}

func scanWebhookDeliveryInfo(row pgx.Row) (*surgepay.WebhookDeliveryInfo, error) {
	var d surgepay.WebhookDeliveryInfo
	var last *time.Time
	var leased bool
	if err := row.Scan(&d.EventID, &d.EndpointID, &d.MerchantID, &d.PaymentID, &d.Type, &d.Status, &d.Attempts,
		&leased, &d.NextAttempt, &last, &d.LastStatus, &d.LastError, &d.Resends, &d.Created); err != nil {
		return nil, err
	}
	d.LastAttempt, d.Created = utcOrZero(last), d.Created.UTC()
	if d.Status == surgepay.WebhookStatusPending {
		d.NextAttempt, d.InFlight = d.NextAttempt.UTC(), leased
	} else {
		d.NextAttempt = time.Time{}
	}
	return &d, nil
}

// ListWebhookDeliveries returns a page of the deliveries f selects, newest
// event first: one statement.
func (db *DB) ListWebhookDeliveries(ctx context.Context, merchantID string, f surgepay.WebhookDeliveryFilter) ([]*surgepay.WebhookDeliveryInfo, bool, error) {
	if err := f.Validate(); err != nil {
		return nil, false, err
	}
	defer count(ctx, surgepay.StmtSelect)()
	q, args := webhookDeliveriesQuery(merchantID, f)
	rows, _ := db.pool.Query(ctx, q, args...)
	ds, err := collect(rows, scanWebhookDeliveryInfo)
	if err != nil {
		return nil, false, readErr(fmt.Errorf("list webhook deliveries: %w", err))
	}
	if len(ds) > f.Limit {
		return ds[:f.Limit], true, nil
	}
	return ds, false, nil
}

// FindWebhookDelivery returns ENOTFOUND if the merchant has no delivery of
// the event to the endpoint.
func (db *DB) FindWebhookDelivery(ctx context.Context, merchantID, eventID, endpointID string) (*surgepay.WebhookDeliveryInfo, error) {
	defer count(ctx, surgepay.StmtSelect)()
	d, err := scanWebhookDeliveryInfo(db.pool.QueryRow(ctx, `SELECT `+webhookDeliveryInfoCols+`
		FROM webhook_deliveries WHERE event_id = $1 AND endpoint_id = $2 AND merchant_id = $3`, eventID, endpointID, merchantID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, surgepay.NotFound("id", "webhook delivery")
	}
	if err != nil {
		return nil, readErr(fmt.Errorf("find webhook delivery of %s to %s: %w", eventID, endpointID, err))
	}
	return d, nil
}
