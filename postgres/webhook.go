package postgres

import (
	"context"
	"errors"
	"fmt"
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

const webhookEndpointCols = "merchant_id, id, url, description, sealed_secret, created"

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
	sqlWebhookEndpointFind   = `SELECT ` + webhookEndpointCols + ` FROM webhook_endpoints WHERE merchant_id = $1 AND id = $2`
	sqlWebhookEndpointList   = `SELECT ` + webhookEndpointCols + ` FROM webhook_endpoints WHERE merchant_id = $1
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
		UPDATE webhook_deliveries d SET next_attempt = $2, attempts = d.attempts + 1, updated = $1
		FROM picked WHERE d.event_id = picked.event_id AND d.endpoint_id = picked.endpoint_id
		RETURNING d.event_id, d.endpoint_id, d.merchant_id, d.payment_id, d.type, d.payload, d.attempts, d.created
	)
	SELECT c.event_id, c.endpoint_id, c.merchant_id, c.payment_id, c.type, c.payload, c.attempts, c.created,
		coalesce(e.url, ''), coalesce(e.sealed_secret, ''::bytea)
	FROM claimed c LEFT JOIN webhook_endpoints e ON e.merchant_id = c.merchant_id AND e.id = c.endpoint_id`
	sqlWebhookDelete = `DELETE FROM webhook_deliveries d
		USING unnest($1::text[], $2::text[], $3::int[]) AS r(event_id, endpoint_id, attempts)
		WHERE d.event_id = r.event_id AND d.endpoint_id = r.endpoint_id AND d.attempts = r.attempts`
	sqlWebhookUpdate = `UPDATE webhook_deliveries d SET status = r.status, next_attempt = r.next_attempt,
			last_status = r.last_status, last_error = r.last_error, updated = r.updated
		FROM unnest($1::text[], $2::text[], $3::int[], $4::text[], $5::timestamptz[], $6::int[], $7::text[],
			$8::timestamptz[]) AS r(event_id, endpoint_id, attempts, status, next_attempt, last_status, last_error, updated)
		WHERE d.event_id = r.event_id AND d.endpoint_id = r.endpoint_id AND d.attempts = r.attempts
			AND d.status = 'pending'`
	sqlWebhookBacklog = `SELECT count(*) FILTER (WHERE status = 'pending'), count(*) FILTER (WHERE status = 'failed'),
		min(created) FILTER (WHERE status = 'pending') FROM webhook_deliveries`
	sqlWebhookPurge = `DELETE FROM webhook_deliveries WHERE (event_id, endpoint_id) IN (
		SELECT event_id, endpoint_id FROM webhook_deliveries WHERE status = 'failed' AND updated < $1 LIMIT $2)`
)

// checkWebhook reports a Write whose webhook parts the store cannot take:
// an endpoint change goes with nothing but an idempotency record.
func checkWebhook(w *surgepay.Write) error {
	if w.WebhookEndpointInsert == nil && w.WebhookEndpointDelete == nil {
		return nil
	}
	rest := *w
	rest.Idempotency, rest.WebhookEndpointInsert, rest.WebhookEndpointDelete = nil, nil, nil
	if (w.WebhookEndpointInsert != nil && w.WebhookEndpointDelete != nil) || rest.Merchant != nil ||
		rest.APIKey != nil || rest.CustomerInsert != nil || rest.CustomerUpdate != nil || rest.CustomerDelete != nil ||
		rest.PaymentMethodInsert != nil || rest.PaymentMethodDelete != nil || rest.PaymentInsert != nil ||
		rest.PaymentUpdate != nil || len(rest.Events) > 0 || rest.Staged != nil || len(rest.StagedAck) > 0 ||
		rest.Webhook != nil {
		return errors.New("postgres: a webhook endpoint change must be alone in its Write, but for an idempotency record")
	}
	return nil
}

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
	if ev := w.Webhook; ev != nil {
		o.insert(surgepay.StmtInsert, sqlWebhookFanOut, ev.ID, ev.MerchantID, ev.PaymentID, ev.Type, ev.Payload,
			dbTime(ev.Created))
	}
}

func scanWebhookEndpoint(row pgx.Row) (*surgepay.WebhookEndpoint, error) {
	var e surgepay.WebhookEndpoint
	if err := row.Scan(&e.MerchantID, &e.ID, &e.URL, &e.Description, &e.SealedSecret, &e.Created); err != nil {
		return nil, err
	}
	e.Created = e.Created.UTC()
	return &e, nil
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

// ClaimWebhookDeliveries claims up to max (at most WebhookClaimMax) due
// deliveries: ClaimWebhookDeliveriesBounded without a bound per endpoint.
func (db *DB) ClaimWebhookDeliveries(ctx context.Context, now, leaseUntil time.Time, max int) ([]*surgepay.WebhookDelivery, error) {
	return db.ClaimWebhookDeliveriesBounded(ctx, now, leaseUntil, max, max, nil)
}

// ClaimWebhookDeliveriesBounded claims up to max (at most WebhookClaimMax)
// due deliveries, at most endpointMax of one endpoint, or room[id] of
// endpoint id (webhook.BoundedClaimer), with one statement.
func (db *DB) ClaimWebhookDeliveriesBounded(ctx context.Context, now, leaseUntil time.Time, max, endpointMax int,
	room map[string]int) ([]*surgepay.WebhookDelivery, error) {
	max = min(max, WebhookClaimMax)
	if max <= 0 || endpointMax <= 0 {
		return nil, nil
	}
	ids, ns := make([]string, 0, len(room)), make([]int32, 0, len(room))
	for id, n := range room {
		ids, ns = append(ids, id), append(ns, int32(min(n, endpointMax)))
	}
	defer count(ctx, surgepay.StmtUpdate)()
	rows, _ := db.pool.Query(ctx, sqlWebhookClaim, dbTime(now), dbTime(leaseUntil), max, ids, ns, endpointMax,
		min(4*max, WebhookClaimScanMax))
	ds, err := collect(rows, func(row pgx.Row) (*surgepay.WebhookDelivery, error) {
		var d surgepay.WebhookDelivery
		if err := row.Scan(&d.EventID, &d.EndpointID, &d.MerchantID, &d.PaymentID, &d.Type, &d.Payload,
			&d.Attempt, &d.Created, &d.URL, &d.SealedSecret); err != nil {
			return nil, err
		}
		d.Created = d.Created.UTC()
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
		case surgepay.WebhookDelivered, surgepay.WebhookDropped:
			del.events, del.endpoints = append(del.events, r.EventID), append(del.endpoints, r.EndpointID)
			del.attempts = append(del.attempts, int32(r.Attempt))
		case surgepay.WebhookRetry, surgepay.WebhookFailed:
			status, next := "pending", r.NextAttempt
			if r.Outcome == surgepay.WebhookFailed {
				status, next = "failed", r.At
			}
			upd.events, upd.endpoints = append(upd.events, r.EventID), append(upd.endpoints, r.EndpointID)
			upd.attempts, upd.statuses = append(upd.attempts, int32(r.Attempt)), append(upd.statuses, status)
			upd.next, upd.codes = append(upd.next, dbTime(next)), append(upd.codes, int32(r.StatusCode))
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
