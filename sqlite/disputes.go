package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/surgepay/surgepay"
)

// The table of disputes (migration 0018): one row a dispute, written by
// the processor event that changes it, in the transaction of its
// payment's change (Write.Disputes), and listed for the operators'
// console by deadline. Disputes are rare: no sale writes here.

var _ surgepay.DisputeLister = (*DB)(nil)

const disputeCols = "merchant_id, id, payment_id, status, amount, currency, reason, due_by, created, updated"

// sqlDisputeUpsert stores a dispute as its payment tells it; the row's
// created stays the first one's. Not prepared: it runs once per dispute
// event, never on a sale's path.
const sqlDisputeUpsert = "INSERT INTO disputes (" + disputeCols + ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) " +
	"ON CONFLICT (merchant_id, id) DO UPDATE SET payment_id = excluded.payment_id, status = excluded.status, " +
	"amount = excluded.amount, currency = excluded.currency, reason = excluded.reason, due_by = excluded.due_by, " +
	"updated = excluded.updated"

// dueKeyUnknown is disputes.due_key for an unknown deadline: it sorts
// after every known one.
const dueKeyUnknown int64 = 1<<63 - 1

// applyDisputes stores wr.Disputes, one statement each, after the
// payment's guard held (applyWrite runs it after applyPayment).
func (w *writer) applyDisputes(ctx context.Context, wr *surgepay.Write) error {
	for _, d := range wr.Disputes {
		surgepay.CountStatement(ctx, surgepay.StmtInsert)
		if _, err := w.conn.ExecContext(context.Background(), sqlDisputeUpsert, d.MerchantID, d.ID, d.PaymentID,
			d.Status, d.Amount, d.Currency, d.Reason, timeArg(d.DueBy), d.Created.UnixNano(), d.Updated.UnixNano()); err != nil {
			return fmt.Errorf("store dispute %s of payment %s: %w", d.ID, d.PaymentID, err)
		}
	}
	return nil
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
	query, args := disputesQuery(q, after)
	ds, err := func() ([]*surgepay.Dispute, error) {
		defer counted(ctx)()
		rows, err := db.read.QueryContext(ctx, query, args...)
		return scanAll(rows, err, scanDispute)
	}()
	if err != nil {
		return nil, fmt.Errorf("list disputes: %w", err)
	}
	page := &surgepay.DisputePage{Disputes: ds}
	if len(ds) > q.Limit {
		page.Disputes = ds[:q.Limit]
		page.Next = surgepay.CursorOf(ds[q.Limit-1]).String()
	}
	return page, nil
}

// disputesQuery returns ListDisputes' statement for q from the cursor
// after (nil: the start), and its arguments.
func disputesQuery(q surgepay.DisputeQuery, after *surgepay.DisputeCursor) (string, []any) {
	statuses := q.Statuses
	if len(statuses) == 0 {
		statuses = []string{""}
	}
	var s strings.Builder
	var args []any
	for i, status := range statuses {
		if i > 0 {
			s.WriteString(" UNION ALL ")
		}
		s.WriteString("SELECT * FROM (SELECT due_key, " + disputeCols + " FROM disputes WHERE 1 = 1")
		if q.MerchantID != "" {
			s.WriteString(" AND merchant_id = ?")
			args = append(args, q.MerchantID)
		}
		if status != "" {
			s.WriteString(" AND status = ?")
			args = append(args, status)
		}
		args = disputesAfter(&s, args, q.MerchantID != "", after)
		s.WriteString(" ORDER BY due_key, id, merchant_id LIMIT ?)")
		args = append(args, q.Limit+1)
	}
	s.WriteString(" ORDER BY due_key, id, merchant_id LIMIT ?")
	return s.String(), append(args, q.Limit+1)
}

// disputesAfter adds the range after the cursor c (none if nil): the
// row value (due_key, id, merchant_id) past c's, an index range; with
// one merchant, (due_key, id).
func disputesAfter(s *strings.Builder, args []any, oneMerchant bool, c *surgepay.DisputeCursor) []any {
	if c == nil {
		return args
	}
	due := dueKeyUnknown
	if !c.DueBy.IsZero() {
		due = c.DueBy.UnixNano()
	}
	if oneMerchant {
		s.WriteString(" AND (due_key, id) > (?, ?)")
		return append(args, due, c.ID)
	}
	s.WriteString(" AND (due_key, id, merchant_id) > (?, ?, ?)")
	return append(args, due, c.ID, c.MerchantID)
}

func scanDispute(r scanner) (*surgepay.Dispute, error) {
	var d surgepay.Dispute
	var key int64
	var due sql.NullInt64
	var created, updated int64
	if err := r.Scan(&key, &d.MerchantID, &d.ID, &d.PaymentID, &d.Status, &d.Amount, &d.Currency, &d.Reason,
		&due, &created, &updated); err != nil {
		return nil, err
	}
	d.DueBy = timeOf(due)
	d.Created, d.Updated = timeOf(sql.NullInt64{Int64: created, Valid: true}), timeOf(sql.NullInt64{Int64: updated, Valid: true})
	return &d, nil
}
