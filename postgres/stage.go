package postgres

import (
	"context"
	"errors"
	"fmt"
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

var _ surgepay.StagedStore = (*DB)(nil)

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
		w.Merchant == nil && w.APIKey == nil &&
		w.CustomerInsert == nil && w.CustomerUpdate == nil && w.CustomerDelete == nil &&
		w.PaymentMethodInsert == nil && w.PaymentMethodDelete == nil &&
		w.PaymentUpdate == nil && len(w.StagedAck) == 0
}

// checkStaged reports a Write whose stage parts the store cannot take.
func checkStaged(w *surgepay.Write) error {
	if len(w.StagedAck) > StagedAckMax {
		return fmt.Errorf("postgres: %d staged records acknowledged in one Write, at most %d",
			len(w.StagedAck), StagedAckMax)
	}
	if r := w.Staged; r != nil && (r.ID == "" || len(r.Sealed) == 0) {
		return errors.New("postgres: staged record without an ID or sealed bytes")
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

// FetchStaged returns up to max (at most StagedFetchMax) staged records
// with IDs greater than afterID, oldest first; none for max <= 0. A record
// committed after a fetch may sort before the fetch's last ID (IDs are
// random within a millisecond, and several nodes commit at once), so
// settlement should start each pass from "" and page with afterID within
// it: acknowledged records are gone, so a pass from "" repeats nothing
// acknowledged.
func (db *DB) FetchStaged(ctx context.Context, afterID string, max int) ([]*surgepay.StagedRecord, error) {
	if max <= 0 {
		return nil, nil
	}
	defer count(ctx, surgepay.StmtSelect)()
	rows, _ := db.pool.Query(ctx, sqlStagedFetch, afterID, min(max, StagedFetchMax))
	recs, err := collect(rows, scanStaged)
	if err != nil {
		return nil, fmt.Errorf("fetch staged records: %w", err)
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
		return 0, time.Time{}, fmt.Errorf("count staged records: %w", err)
	}
	if oldest == nil {
		return n, time.Time{}, nil
	}
	return n, oldest.UTC(), nil
}

func scanStaged(row pgx.Row) (*surgepay.StagedRecord, error) {
	var r surgepay.StagedRecord
	if err := row.Scan(&r.ID, &r.MerchantID, &r.PaymentID, &r.Sealed, &r.Created); err != nil {
		return nil, err
	}
	r.Created = r.Created.UTC()
	return &r, nil
}
