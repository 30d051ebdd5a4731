package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/surgepay/surgepay"
)

// Payments by customer (migration 0010): the table payments_by_customer
// holds (merchant_id, customer_id, id) of every payment up to
// deferred_indexes.indexed_upto; the writer merges the payments after it,
// customerMergeRows at a time, sorted, inside a group commit. A merge
// writes each customer's leaf once for all of the chunk's payments of that
// customer, where an index on payments wrote one leaf per sale. A list
// by customer reads the table and the tail (ListPayments). Nothing of it
// is in memory: the tail is a rowid range of payments, whoever wrote it.

// customerMergeRows is how many payments one merge indexes: the most a
// list by customer reads beyond the index (about as many rows, plus one
// batch), and one commit's extra work (a few milliseconds). With 200
// customers a merge writes about 200 leaves for 2,048 sales: a tenth of a
// page per sale, against one.
const customerMergeRows = 2048

// custStmts are the writer's statements of payments_by_customer.
type custStmts struct {
	last, merge, state *sql.Stmt
}

func (s *custStmts) prepare(ctx context.Context, conn *sql.Conn) error {
	for _, p := range []struct {
		dst   **sql.Stmt
		query string
	}{
		{&s.last, "SELECT coalesce(max(rowid), 0) FROM payments"},
		{&s.merge, "INSERT OR IGNORE INTO payments_by_customer (merchant_id, customer_id, id) " +
			"SELECT merchant_id, customer_id, id FROM payments WHERE rowid > ? AND rowid <= ? ORDER BY merchant_id, customer_id, id"},
		{&s.state, "UPDATE deferred_indexes SET indexed_upto = max(indexed_upto, ?) WHERE name = 'payments_by_customer'"},
	} {
		st, err := conn.PrepareContext(ctx, p.query)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", p.query, err)
		}
		*p.dst = st
	}
	return nil
}

func (s *custStmts) close() error {
	var errs []error
	for _, st := range []*sql.Stmt{s.last, s.merge, s.state} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	return errors.Join(errs...)
}

// custMerge is the writer's view of payments_by_customer. Only the writer
// goroutine uses it.
type custMerge struct {
	upto int64 // indexed_upto, as this writer last set or read it
	tail int64 // payments after upto, as far as this writer knows
	tx   int64 // payments inserted in the open transaction

	txUpto, txLast int64 // the open transaction's merge (txUpto 0: none)
}

// openCustMerge reads the state at Open.
func (db *DB) openCustMerge(ctx context.Context) error {
	c := &db.writer.cust
	if err := db.wconn.QueryRowContext(ctx,
		"SELECT indexed_upto, (SELECT coalesce(max(rowid), 0) FROM payments) FROM deferred_indexes WHERE name = 'payments_by_customer'").
		Scan(&c.upto, &c.tail); err != nil {
		return fmt.Errorf("read payments_by_customer state: %w", err)
	}
	c.tail -= c.upto
	return nil
}

// mergeCustomers merges one chunk of the tail into payments_by_customer in
// the open transaction, once the tail holds a chunk.
func (w *writer) mergeCustomers() error {
	c := &w.cust
	if c.tail+c.tx < customerMergeRows {
		return nil
	}
	var last int64
	if err := w.custSt.last.QueryRowContext(context.Background()).Scan(&last); err != nil {
		return fmt.Errorf("merge payments by customer: %w", err)
	}
	to := min(last, c.upto+customerMergeRows)
	if _, err := w.custSt.merge.ExecContext(context.Background(), c.upto, to); err != nil {
		return fmt.Errorf("merge payments by customer: %w", err)
	}
	if _, err := w.custSt.state.ExecContext(context.Background(), to); err != nil {
		return fmt.Errorf("merge payments by customer: state: %w", err)
	}
	c.txUpto, c.txLast = to, last
	return nil
}

func (c *custMerge) committed() {
	c.tail += c.tx
	if c.txUpto > 0 {
		c.upto, c.tail = c.txUpto, c.txLast-c.txUpto
	}
	c.tx, c.txUpto, c.txLast = 0, 0, 0
}

func (c *custMerge) rolledBack() { c.tx, c.txUpto, c.txLast = 0, 0, 0 }

// listPaymentsOfCustomer lists a customer's payments that pass f, newest
// first: the page from payments_by_customer and the page from the tail,
// merged, in one statement (one snapshot).
func (db *DB) listPaymentsOfCustomer(ctx context.Context, merchantID string, f surgepay.PaymentFilter) ([]*surgepay.Payment, bool, error) {
	limit := pageLimit(f.Page.Limit)
	var conds []string
	var condArgs []any
	add := func(cond string, arg any) { conds, condArgs = append(conds, cond), append(condArgs, arg) }
	if f.Status != "" {
		add("status = ?", string(f.Status))
	}
	if !f.CreatedGTE.IsZero() {
		add("created >= ?", f.CreatedGTE.UnixNano())
	}
	if !f.CreatedBefore.IsZero() {
		add("created < ?", f.CreatedBefore.UnixNano())
	}
	filter := func(table string) string {
		var b strings.Builder
		for _, c := range conds {
			b.WriteString(" AND " + table + c)
		}
		return b.String()
	}
	// The page's cursor: on the index's own key in the first arm, so that
	// a deep page seeks instead of scanning the newer entries.
	cursor := func(table string) string {
		if f.Page.StartingAfter == "" {
			return ""
		}
		return " AND " + table + "id < ?"
	}
	var after []any
	if f.Page.StartingAfter != "" {
		after = []any{f.Page.StartingAfter}
	}
	var q strings.Builder
	var args []any
	q.WriteString("SELECT * FROM (SELECT " + qualified("p", paymentCols) +
		" FROM payments_by_customer c JOIN payments p ON p.merchant_id = c.merchant_id AND p.id = c.id" +
		" WHERE c.merchant_id = ? AND c.customer_id = ?" + cursor("c.") + " AND p.customer_id = c.customer_id" + filter("p.") +
		" ORDER BY c.id DESC LIMIT ?)")
	args = append(append(append(append(args, merchantID, f.CustomerID), after...), condArgs...), limit+1)
	q.WriteString(" UNION ALL SELECT * FROM (SELECT " + paymentCols + " FROM payments" +
		" WHERE rowid > (SELECT indexed_upto FROM deferred_indexes WHERE name = 'payments_by_customer')" +
		" AND merchant_id = ? AND customer_id = ?" + cursor("") + filter("") + " ORDER BY id DESC LIMIT ?)")
	args = append(append(append(append(args, merchantID, f.CustomerID), after...), condArgs...), limit+1)
	q.WriteString(" ORDER BY id DESC LIMIT ?")
	args = append(args, limit+1)
	defer counted(ctx)()
	rows, err := db.read.QueryContext(ctx, q.String(), args...)
	out, err := scanAll(rows, err, scanPayment)
	if err != nil {
		return nil, false, fmt.Errorf("list payments of customer %s: %w", f.CustomerID, err)
	}
	if len(out) > limit {
		return out[:limit], true, nil
	}
	return out, false, nil
}
