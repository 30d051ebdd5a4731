package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/surgepay/surgepay"
)

// The table of disputes (migration 0013): one row a dispute, written by
// the processor event that changes it, in the transaction of its
// payment's change (Write.Disputes), and listed for the operators'
// console by deadline. Disputes are rare: no sale writes here.

var _ surgepay.DisputeLister = (*DB)(nil)

const disputeCols = "merchant_id, id, payment_id, status, amount, currency, reason, due_by, created, updated"

// sqlDisputeUpsert stores a dispute as its payment tells it; the row's
// created stays the first one's.
const sqlDisputeUpsert = "INSERT INTO disputes (" + disputeCols + ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) " +
	"ON CONFLICT (merchant_id, id) DO UPDATE SET payment_id = excluded.payment_id, status = excluded.status, " +
	"amount = excluded.amount, currency = excluded.currency, reason = excluded.reason, due_by = excluded.due_by, " +
	"updated = excluded.updated"

// addDisputes adds w.Disputes, one statement each, run once the
// payment's guard held (newOp adds it after the payment's update).
func (o *op) addDisputes(w *surgepay.Write) {
	for _, d := range w.Disputes {
		o.insert(surgepay.StmtInsert, sqlDisputeUpsert, d.MerchantID, d.ID, d.PaymentID, d.Status, d.Amount,
			d.Currency, d.Reason, nullTime(d.DueBy), dbTime(d.Created), dbTime(d.Updated))
	}
}

// ListDisputes returns a page of the disputes q selects (see
// surgepay.DisputeLister), in one statement: for each status asked, a
// range of disputes_status_due (all merchants) or
// disputes_merchant_status_due (one), from the cursor, at most
// q.Limit+1 rows; without a status, one range of disputes_due or
// disputes_merchant_due. The ranges are merged by the statement's own
// ORDER BY, over at most (statuses × (q.Limit+1)) rows.
func (db *DB) ListDisputes(ctx context.Context, q surgepay.DisputeQuery) (*surgepay.DisputePage, error) {
	var after *surgepay.DisputeCursor
	if q.After != "" {
		c, err := surgepay.ParseDisputeCursor(q.After)
		if err != nil {
			return nil, err
		}
		after = &c
	}
	s := disputesQuery(q, after)
	ds, err := func() ([]*surgepay.Dispute, error) {
		defer count(ctx, surgepay.StmtSelect)()
		rows, _ := db.pool.Query(ctx, s.sql.String(), s.args...)
		return collect(rows, scanDispute)
	}()
	if err != nil {
		return nil, readErr(fmt.Errorf("list disputes: %w", err))
	}
	page := &surgepay.DisputePage{Disputes: ds}
	if len(ds) > q.Limit {
		page.Disputes = ds[:q.Limit]
		page.Next = surgepay.CursorOf(ds[q.Limit-1]).String()
	}
	return page, nil
}

// disputesQuery returns ListDisputes' statement for q from the cursor
// after (nil: the start).
func disputesQuery(q surgepay.DisputeQuery, after *surgepay.DisputeCursor) *searchQuery {
	statuses := q.Statuses
	if len(statuses) == 0 {
		statuses = []string{""}
	}
	s := &searchQuery{}
	s.sql.WriteString("SELECT * FROM (")
	for i, status := range statuses {
		if i > 0 {
			s.sql.WriteString(" UNION ALL ")
		}
		s.sql.WriteString("(SELECT due_key, " + disputeCols + " FROM disputes WHERE true")
		if q.MerchantID != "" {
			s.add(" AND merchant_id = $%d", q.MerchantID)
		}
		if status != "" {
			s.add(" AND status = $%d", status)
		}
		disputesAfter(s, q.MerchantID != "", after)
		s.add(" ORDER BY due_key, id, merchant_id LIMIT $%d)", q.Limit+1)
	}
	s.add(") d ORDER BY due_key, id, merchant_id LIMIT $%d", q.Limit+1)
	return s
}

// disputesAfter adds the range after the cursor c (none if nil): the
// row value (due_key, id, merchant_id) past c's, an index range; with
// one merchant, (due_key, id).
func disputesAfter(s *searchQuery, oneMerchant bool, c *surgepay.DisputeCursor) {
	if c == nil {
		return
	}
	due := pgtype.Timestamptz{InfinityModifier: pgtype.Infinity, Valid: true}
	if !c.DueBy.IsZero() {
		due = pgtype.Timestamptz{Time: dbTime(c.DueBy), Valid: true}
	}
	if oneMerchant {
		s.add(" AND (due_key, id) > ($%d, $%d)", due, c.ID)
		return
	}
	s.add(" AND (due_key, id, merchant_id) > ($%d, $%d, $%d)", due, c.ID, c.MerchantID)
}

func scanDispute(row pgx.Row) (*surgepay.Dispute, error) {
	var d surgepay.Dispute
	var key pgtype.Timestamptz
	var due *time.Time
	if err := row.Scan(&key, &d.MerchantID, &d.ID, &d.PaymentID, &d.Status, &d.Amount, &d.Currency, &d.Reason,
		&due, &d.Created, &d.Updated); err != nil {
		return nil, err
	}
	if due != nil {
		d.DueBy = due.UTC()
	}
	d.Created, d.Updated = d.Created.UTC(), d.Updated.UTC()
	return &d, nil
}
