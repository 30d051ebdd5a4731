package postgres

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/groupcommit"
)

// The embedded stage: staged capture records (surgepay.StagedStore) live
// in the table staged_captures, written in the Write of their sale (one
// statement with the payment, see isSale) and deleted by the Write that
// records their settlement (Write.StagedAck).

// Limits of the stage.
const (
	// StagedFetchMax bounds one FetchStaged: a page of settlement work
	// (about 4 MiB of sealed records). It is settle.BatchSizeMaxLimit, so
	// that a settlement batch is one page.
	StagedFetchMax = 10_000
	// StagedAckMax bounds Write.StagedAck, so that settlement can
	// acknowledge a whole fetch in one Write.
	StagedAckMax = StagedFetchMax
)

var (
	_ surgepay.StagedStore      = (*DB)(nil)
	_ surgepay.PaymentsFinder   = (*DB)(nil)
	_ surgepay.SettlementWriter = (*DB)(nil)
)

// PaymentsFindMax bounds the keys of one FindPayments, and
// SettlementsApplyMax the Writes of one ApplySettlements: a settlement
// batch.
const (
	PaymentsFindMax     = StagedFetchMax
	SettlementsApplyMax = StagedFetchMax
)

const stagedCols = "id, merchant_id, payment_id, sealed, created"

// The statements of a sale (see isSale) and of the stage. A sale is one
// statement: its parts are data-modifying CTEs, which PostgreSQL runs
// exactly once and atomically with the statement. With an idempotency
// record, the payment and staged INSERTs take their one row from a SELECT
// that yields it only if the idempotency INSERT did (ON CONFLICT DO NOTHING
// yields none when the key exists, after waiting for a transaction that
// holds it): the statement stores all its rows or none, returns one row or
// none, and never fails on a taken key. Without an idempotency record or a
// staged record, a sale is sqlPaymentInsert alone. Parameters are typed by
// their target columns.
const (
	sqlSaleIdemStaged = `WITH i AS (
		INSERT INTO idempotency (merchant_id, key, request_hash, status_code, body, created)
		VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING RETURNING 1
	), p AS (
		INSERT INTO payments (` + paymentCols + `)
		SELECT $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24,
			$25, $26, $27, $28, $29, $30
		WHERE EXISTS (SELECT FROM i)
	), s AS (
		INSERT INTO staged_captures (` + stagedCols + `)
		SELECT $31, $32, $33, $34, $35 WHERE EXISTS (SELECT FROM i)
	)
	SELECT 1 FROM i`
	sqlSaleIdem = `WITH i AS (
		INSERT INTO idempotency (merchant_id, key, request_hash, status_code, body, created)
		VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING RETURNING 1
	), p AS (
		INSERT INTO payments (` + paymentCols + `)
		SELECT $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24,
			$25, $26, $27, $28, $29, $30
		WHERE EXISTS (SELECT FROM i)
	)
	SELECT 1 FROM i`
	sqlSaleStaged = `WITH p AS (
		INSERT INTO payments (` + paymentCols + `) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11,
			$12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24)
	)
	INSERT INTO staged_captures (` + stagedCols + `) VALUES ($25, $26, $27, $28, $29)`
	sqlStagedInsert = `INSERT INTO staged_captures (` + stagedCols + `) VALUES ($1, $2, $3, $4, $5)`
	// One statement for any number of IDs; an ID that is gone matches nothing.
	sqlStagedAckDelete = `DELETE FROM staged_captures WHERE id = ANY($1::text[])`
	sqlStagedFetch     = `SELECT ` + stagedCols + ` FROM staged_captures WHERE id > $1 ORDER BY id LIMIT $2`
	// The oldest is the first in ID order: one probe of the primary key.
	sqlStagedBacklog = `SELECT count(*), (SELECT created FROM staged_captures ORDER BY id LIMIT 1) FROM staged_captures`
	// One statement for a settlement batch: a probe of the primary key per key.
	sqlPaymentsFind = `SELECT ` + paymentCols + ` FROM payments
		WHERE (merchant_id, id) IN (SELECT * FROM unnest($1::text[], $2::text[]))`
	// One statement for a batch of settlement results (ApplySettlements):
	// sqlPaymentUpdate for every payment, from column arrays, guarded by
	// version; the events, staged acknowledgements and webhook fan-outs
	// (sqlWebhookFanOut) of the payments it updated; their keys.
	sqlSettlementsApply = `WITH u AS (
		UPDATE payments AS p SET customer_id = u.customer_id, payment_method_id = u.payment_method_id,
			amount = u.amount, amount_tax = u.amount_tax, currency = u.currency, capture_method = u.capture_method,
			status = u.status, amount_authorized = u.amount_authorized, amount_captured = u.amount_captured,
			amount_refunded = u.amount_refunded, description = u.description, metadata = u.metadata, tax = u.tax,
			decline_code = u.decline_code, failure_message = u.failure_message,
			authorization_ref = u.authorization_ref, transactions = u.transactions, pending = u.pending,
			path = u.path, version = u.version, updated = u.updated
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::bigint[], $7::text[],
			$8::text[], $9::text[], $10::bigint[], $11::bigint[], $12::bigint[], $13::text[], $14::jsonb[],
			$15::jsonb[], $16::text[], $17::text[], $18::text[], $19::jsonb[], $20::jsonb[], $21::text[],
			$22::bigint[], $23::timestamptz[])
			AS u(merchant_id, id, customer_id, payment_method_id, amount, amount_tax, currency, capture_method,
			status, amount_authorized, amount_captured, amount_refunded, description, metadata, tax,
			decline_code, failure_message, authorization_ref, transactions, pending, path, version, updated)
		WHERE p.merchant_id = u.merchant_id AND p.id = u.id AND p.version = u.version - 1
		RETURNING p.merchant_id, p.id
	), e AS (
		INSERT INTO payment_events (` + eventCols + `)
		SELECT ev.* FROM unnest($24::text[], $25::text[], $26::text[], $27::text[], $28::text[], $29::text[],
			$30::bigint[], $31::text[], $32::text[], $33::timestamptz[])
			AS ev(id, payment_id, merchant_id, type, from_status, to_status, amount, actor_key_id, request_id, created)
		WHERE (ev.merchant_id, ev.payment_id) IN (SELECT merchant_id, id FROM u)
	), s AS (
		DELETE FROM staged_captures WHERE id IN (
			SELECT a.id FROM unnest($34::text[], $35::text[], $36::text[]) AS a(id, merchant_id, payment_id)
			WHERE (a.merchant_id, a.payment_id) IN (SELECT merchant_id, id FROM u))
	), h AS (
		INSERT INTO webhook_deliveries (event_id, endpoint_id, merchant_id, payment_id, type, payload,
			status, attempts, next_attempt, last_status, last_error, created, updated)
		SELECT wh.event_id, ep.id, ep.merchant_id, wh.payment_id, wh.type, wh.payload, 'pending', 0, wh.created,
			0, '', wh.created, wh.created
		FROM unnest($37::text[], $38::text[], $39::text[], $40::text[], $41::bytea[], $42::timestamptz[])
			AS wh(event_id, merchant_id, payment_id, type, payload, created)
		JOIN webhook_endpoints ep ON ep.merchant_id = wh.merchant_id
		WHERE (wh.merchant_id, wh.payment_id) IN (SELECT merchant_id, id FROM u)
	)
	SELECT merchant_id, id FROM u`
)

func stagedArgs(r *surgepay.StagedRecord) []any {
	return []any{r.ID, r.MerchantID, r.PaymentID, r.Sealed, dbTime(r.Created)}
}

// isSale reports whether w is a sale, which one statement stores: a
// PaymentInsert, perhaps an Idempotency record, a Staged record and Events
// (a statement of their own), nothing else. Any other Write takes the
// general path, one statement per part.
func isSale(w *surgepay.Write) bool {
	return w.PaymentInsert != nil &&
		w.Merchant == nil && w.APIKey == nil && w.APIKeyRevoke == "" &&
		w.CustomerInsert == nil && w.CustomerUpdate == nil && w.CustomerDelete == nil &&
		w.PaymentMethodInsert == nil && w.PaymentMethodDelete == nil &&
		w.PaymentUpdate == nil && len(w.StagedAck) == 0 &&
		w.MerchantStatus == nil && w.APIKeyExpire == nil && len(w.APIKeysUsed) == 0 && len(w.Audit) == 0
}

// checkStaged reports a Write that acknowledges more staged records than
// one statement takes (Write.Validate checks the rest).
func checkStaged(w *surgepay.Write) error {
	if len(w.StagedAck) > StagedAckMax {
		return fmt.Errorf("postgres: %d staged records acknowledged in one Write, at most %d",
			len(w.StagedAck), StagedAckMax)
	}
	return nil
}

// newSaleOp returns the op of a sale (see isSale). With an idempotency
// record its one statement is the Write's guard; if the Write has no
// events, nothing follows the guard and its failure stores nothing, so it
// runs in the batch's last round (op.last) and a batch of such sales is
// one round trip, COMMIT included.
func newSaleOp(it *groupcommit.Item[*surgepay.Write]) (*op, error) {
	w := it.Value
	o := &op{item: it}
	args, err := paymentArgs(w.PaymentInsert)
	if err != nil {
		return nil, err
	}
	if r := w.Staged; r != nil {
		args = append(args, stagedArgs(r)...)
	}
	switch r := w.Idempotency; {
	case r != nil:
		g := idempotencyGuard(r)
		g.sql = sqlSaleIdem
		if w.Staged != nil {
			g.sql = sqlSaleIdemStaged
		}
		g.args = append(g.args, args...)
		o.idem, o.last = true, len(w.Events) == 0
		o.guards = append(o.guards, g)
	case w.Staged != nil:
		o.insert(surgepay.StmtInsert, sqlSaleStaged, args...)
	default:
		o.insert(surgepay.StmtInsert, sqlPaymentInsert, args...)
	}
	if len(w.Events) > 0 {
		o.insert(surgepay.StmtInsert, sqlEventsInsert, eventArgs(w.Events)...)
	}
	return o, nil
}

// FetchStaged returns up to limit (at most StagedFetchMax) staged records
// with IDs greater than afterID, oldest first; none for limit <= 0. A record
// committed after a fetch may sort before the fetch's last ID (IDs are
// random within a millisecond, and several nodes commit at once), so
// settlement should start each pass from "" and page with afterID within
// it: acknowledged records are gone, so a pass from "" repeats nothing
// acknowledged.
func (db *DB) FetchStaged(ctx context.Context, afterID string, limit int) ([]*surgepay.StagedRecord, error) {
	if limit <= 0 {
		return nil, nil
	}
	defer count(ctx, surgepay.StmtSelect)()
	rows, _ := db.pool.Query(ctx, sqlStagedFetch, afterID, min(limit, StagedFetchMax))
	recs, err := collect(rows, scanStaged)
	if err != nil {
		return nil, readErr(fmt.Errorf("fetch staged records: %w", err))
	}
	return recs, nil
}

// StagedBacklog returns the number of staged records and the creation time
// of the oldest (the record FetchStaged returns first); the zero time if
// there is none. It counts the whole table, a scan of the backlog: call it
// for metrics, not per request.
func (db *DB) StagedBacklog(ctx context.Context) (int, time.Time, error) {
	defer count(ctx, surgepay.StmtSelect)()
	var n int
	var oldest *time.Time
	if err := db.pool.QueryRow(ctx, sqlStagedBacklog).Scan(&n, &oldest); err != nil {
		return 0, time.Time{}, readErr(fmt.Errorf("count staged records: %w", err))
	}
	if oldest == nil {
		return n, time.Time{}, nil
	}
	return n, oldest.UTC(), nil
}

// FindPayments returns the payments named by keys (at most
// PaymentsFindMax) that exist, in any order, in one statement.
func (db *DB) FindPayments(ctx context.Context, keys []surgepay.PaymentKey) ([]*surgepay.Payment, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	if len(keys) > PaymentsFindMax {
		return nil, fmt.Errorf("postgres: find %d payments at once, at most %d", len(keys), PaymentsFindMax)
	}
	merchants, ids := make([]string, len(keys)), make([]string, len(keys))
	for i, k := range keys {
		merchants[i], ids[i] = k.MerchantID, k.ID
	}
	defer count(ctx, surgepay.StmtSelect)()
	rows, _ := db.pool.Query(ctx, sqlPaymentsFind, merchants, ids)
	ps, err := collect(rows, scanPayment)
	if err != nil {
		return nil, readErr(fmt.Errorf("find %d payments: %w", len(keys), err))
	}
	return ps, nil
}

// ApplySettlements stores, in one statement, each Write of ws (at most
// SettlementsApplyMax) whose payment's stored Version is
// PaymentUpdate.Version-1, with its Events, StagedAck and Webhook; see
// surgepay.SettlementWriter. A Write with any other part is refused.
func (db *DB) ApplySettlements(ctx context.Context, ws []*surgepay.Write) ([]bool, error) {
	if len(ws) > SettlementsApplyMax {
		return nil, fmt.Errorf("postgres: %d settlements at once, at most %d", len(ws), SettlementsApplyMax)
	}
	args, err := settlementArgs(ws)
	if err != nil || len(ws) == 0 {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, commitTimeout)
	defer cancel()
	defer count(ctx, surgepay.StmtUpdate)()
	rows, _ := db.pool.Query(ctx, sqlSettlementsApply, args...)
	keys, err := collect(rows, func(row pgx.Row) (surgepay.PaymentKey, error) {
		var k surgepay.PaymentKey
		return k, row.Scan(&k.MerchantID, &k.ID)
	})
	if err != nil {
		return nil, fmt.Errorf("apply %d settlements: %w", len(ws), err)
	}
	held := make(map[surgepay.PaymentKey]bool, len(keys))
	for _, k := range keys {
		held[k] = true
	}
	stored := make([]bool, len(ws))
	for i, w := range ws {
		stored[i] = held[surgepay.PaymentKey{MerchantID: w.PaymentUpdate.MerchantID, ID: w.PaymentUpdate.ID}]
	}
	return stored, nil
}

// settlementArgs returns the column arrays of sqlSettlementsApply, or an
// error for a Write with a part sqlSettlementsApply does not store, or a
// payment named twice.
func settlementArgs(ws []*surgepay.Write) ([]any, error) {
	n := len(ws)
	var (
		merchants, ids, customers, methods, currencies   = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		captureMethods, statuses, descriptions, declines = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		failures, authRefs, paths                        = make([]string, n), make([]string, n), make([]string, n)
		amounts, taxes, authorized, captured, refunded   = make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
		versions                                         = make([]int64, n)
		metadata, taxJSON, txs, pending                  = make([][]byte, n), make([][]byte, n), make([][]byte, n), make([][]byte, n)
		updated                                          = make([]time.Time, n)
		events                                           []*surgepay.Event
		ackIDs, ackMerchants, ackPayments                []string
		hookIDs, hookMerchants, hookPayments, hookTypes  []string
		hookPayloads                                     [][]byte
		hookCreated                                      []time.Time
	)
	seen := make(map[surgepay.PaymentKey]bool, n)
	for i, w := range ws {
		p := w.PaymentUpdate
		// Whatever else a Write may hold, now or once Write grows, is not
		// stored here: refused, not dropped.
		rest := *w
		rest.ProviderActed, rest.PaymentUpdate, rest.Events, rest.StagedAck, rest.Webhook = false, nil, nil, nil, nil
		if p == nil || !reflect.ValueOf(rest).IsZero() {
			return nil, fmt.Errorf("postgres: settlement %d is not a payment update with events, staged acknowledgements and a webhook", i)
		}
		k := surgepay.PaymentKey{MerchantID: p.MerchantID, ID: p.ID}
		if seen[k] {
			return nil, fmt.Errorf("postgres: payment %s in two settlements of one batch", p.ID)
		}
		seen[k] = true
		var err error
		if txs[i], err = encodeTransactions(p.Transactions); err != nil {
			return nil, fmt.Errorf("postgres: payment %s: %w", p.ID, err)
		}
		merchants[i], ids[i], customers[i], methods[i], currencies[i] = p.MerchantID, p.ID, p.CustomerID, p.PaymentMethodID, p.Currency
		captureMethods[i], statuses[i], descriptions[i], declines[i] = p.CaptureMethod, string(p.Status), p.Description, p.DeclineCode
		failures[i], authRefs[i], paths[i] = p.FailureMessage, p.AuthorizationRef, p.Path
		amounts[i], taxes[i], authorized[i], captured[i], refunded[i] = p.Amount, p.AmountTax, p.AmountAuthorized, p.AmountCaptured, p.AmountRefunded
		versions[i], updated[i] = p.Version, dbTime(p.Updated)
		metadata[i], taxJSON[i], pending[i] = encodeMetadata(p.Metadata), encodeTax(p.Tax), encodePending(p.Pending)
		events = append(events, w.Events...)
		for _, id := range w.StagedAck {
			ackIDs, ackMerchants, ackPayments = append(ackIDs, id), append(ackMerchants, p.MerchantID), append(ackPayments, p.ID)
		}
		if h := w.Webhook; h != nil {
			if h.MerchantID != p.MerchantID || h.PaymentID != p.ID {
				return nil, fmt.Errorf("postgres: settlement %d: webhook of payment %s on payment %s", i, h.PaymentID, p.ID)
			}
			hookIDs, hookMerchants, hookPayments = append(hookIDs, h.ID), append(hookMerchants, h.MerchantID), append(hookPayments, h.PaymentID)
			hookTypes, hookPayloads, hookCreated = append(hookTypes, h.Type), append(hookPayloads, h.Payload), append(hookCreated, dbTime(h.Created))
		}
	}
	args := []any{merchants, ids, customers, methods, amounts, taxes, currencies, captureMethods, statuses,
		authorized, captured, refunded, descriptions, metadata, taxJSON, declines, failures, authRefs, txs, pending,
		paths, versions, updated}
	args = append(args, eventArgs(events)...)
	return append(args, ackIDs, ackMerchants, ackPayments, hookIDs, hookMerchants, hookPayments, hookTypes,
		hookPayloads, hookCreated), nil
}

func scanStaged(row pgx.Row) (*surgepay.StagedRecord, error) {
	var r surgepay.StagedRecord
	if err := row.Scan(&r.ID, &r.MerchantID, &r.PaymentID, &r.Sealed, &r.Created); err != nil {
		return nil, err
	}
	r.Created = r.Created.UTC()
	return &r, nil
}
