package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/surgepay/surgepay"
)

// Payments by customer (migration 0010): the table payments_by_customer
// holds (merchant_id, customer_id, id) of every payment up to
// deferred_indexes.indexed_upto; the writer merges the payments after it
// in chunks of Config.CustomerMergeRows, sorted, so that a merge writes each
// customer's leaf once for all of the chunk's payments of that customer,
// where an index on payments wrote one leaf per sale. A list by customer
// reads the table and the tail (ListPayments). Nothing of it is in memory
// for long: the tail is a rowid range of payments, whoever wrote it.
//
// A chunk is merged in steps, one per group commit, so that no commit
// carries a whole chunk (a chunk in one commit took 15-60 ms of the
// writer, once every 2,048 sales, and the commit behind it waited: at
// 2,700 sales/s on 2 cores it was three in four of the commits over 40
// ms; bench/RESULTS.md, issue 14 session 11). The steps first read the
// chunk's keys in rowid order, then insert them in key order, each step
// at most max(customerMergeStep, 2 x the batch's writes) rows; the last
// step moves indexed_upto. Until then the table holds part of the chunk
// and the tail all of it: a list reads both and drops the repeats
// (UNION). A chunk's progress lives in the writer's memory, a step in its
// commit's transaction: a rolled-back commit takes its step back, and a
// crash or a second writer starts the chunk again (INSERT OR IGNORE).

// CustomerMergeRowsDefault is the default Config.CustomerMergeRows: how
// many payments one merge indexes, and so about the most a list by
// customer reads beyond the index (plus a chunk in progress and a batch).
// A merge writes each customer's leaf, and the siblings a leaf split
// rewrites, once for all of the chunk's payments of that customer: with
// 200 customers, 2,048 took 2.0 KB written a sale (the largest share, 31
// % of a sale's WAL and checkpoint writes at 5,000 sales/s), 8,192 about
// 0.6 KB (bench/RESULTS.md, issue 14 session 19), for a list's scan of up
// to ~12,000 rows of the tail (~5 ms, BenchmarkListPaymentsOfCustomerFullTail).
const CustomerMergeRowsDefault = 8192

// customerMergeStep is the fewest rows a step of a chunk's merge reads or
// inserts: a chunk of the default size takes at most 2 x 8,192 / 256 = 64
// commits, a few milliseconds each. A step takes twice the batch's writes
// when that is more, so that merging keeps up with any rate: a chunk is
// done within the commits of a chunk's sales.
const customerMergeStep = 256

// custKey is a key of payments_by_customer.
type custKey struct{ merchantID, customerID, id string }

func (a custKey) compare(b custKey) int {
	if c := strings.Compare(a.merchantID, b.merchantID); c != 0 {
		return c
	}
	if c := strings.Compare(a.customerID, b.customerID); c != 0 {
		return c
	}
	return strings.Compare(a.id, b.id)
}

// custInsertRows is the rows of one multi-row INSERT of a step.
const custInsertRows = 64

// custStmts are the writer's statements of payments_by_customer.
type custStmts struct {
	last, read, insertMany, insertOne, state *sql.Stmt
}

func (s *custStmts) prepare(ctx context.Context, conn *sql.Conn) error {
	const insert = "INSERT OR IGNORE INTO payments_by_customer (merchant_id, customer_id, id) VALUES "
	for _, p := range []struct {
		dst   **sql.Stmt
		query string
	}{
		{&s.last, "SELECT coalesce(max(rowid), 0) FROM payments"},
		{&s.read, "SELECT merchant_id, customer_id, id FROM payments WHERE rowid > ? AND rowid <= ? ORDER BY rowid"},
		{&s.insertMany, insert + strings.Repeat("(?, ?, ?), ", custInsertRows-1) + "(?, ?, ?)"},
		{&s.insertOne, insert + "(?, ?, ?)"},
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
	for _, st := range []*sql.Stmt{s.last, s.read, s.insertMany, s.insertOne, s.state} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	return errors.Join(errs...)
}

// custChunk is a chunk's merge in progress: the payments (from, to], of
// which keys holds those up to read (in rowid order until sorted), and
// keys[:inserted] are in payments_by_customer.
type custChunk struct {
	from, to, read int64
	keys           []custKey
	sorted         bool
	inserted       int
}

// custMerge is the writer's view of payments_by_customer. Only the writer
// goroutine uses it.
type custMerge struct {
	rows int64 // payments a chunk indexes: Config.CustomerMergeRows

	upto int64 // indexed_upto, as this writer last set or read it
	tail int64 // payments after upto, as far as this writer knows
	tx   int64 // payments inserted in the open transaction

	// chunk is the merge in progress as committed (to 0: none); txChunk
	// is it with the open transaction's step, and txStep whether there
	// is one. txDone: the step ended the chunk, leaving txTail payments
	// after it.
	chunk, txChunk custChunk
	txStep, txDone bool
	txTail         int64
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

// mergeCustomers takes one step of the chunk in progress, or starts one
// once the tail holds a chunk, in the open transaction of a batch of
// writes.
func (w *writer) mergeCustomers(writes int) error {
	c := &w.cust
	ch := c.chunk
	if ch.to == 0 {
		if c.tail+c.tx < c.rows {
			return nil
		}
		var last int64
		if err := w.custSt.last.QueryRowContext(context.Background()).Scan(&last); err != nil {
			return fmt.Errorf("merge payments by customer: %w", err)
		}
		ch = custChunk{from: c.upto, to: min(last, c.upto+c.rows), read: c.upto}
		ch.keys = make([]custKey, 0, ch.to-ch.from)
	}
	n := max(customerMergeStep, 2*writes)
	if !ch.sorted {
		if err := w.readCustomerKeys(&ch, n); err != nil {
			return fmt.Errorf("merge payments by customer: %w", err)
		}
	} else {
		if err := w.insertCustomerKeys(&ch, n); err != nil {
			return fmt.Errorf("merge payments by customer: %w", err)
		}
		if ch.inserted == len(ch.keys) {
			if _, err := w.custSt.state.ExecContext(context.Background(), ch.to); err != nil {
				return fmt.Errorf("merge payments by customer: state: %w", err)
			}
			var last int64
			if err := w.custSt.last.QueryRowContext(context.Background()).Scan(&last); err != nil {
				return fmt.Errorf("merge payments by customer: %w", err)
			}
			c.txDone, c.txTail = true, last-ch.to
		}
	}
	c.txChunk, c.txStep = ch, true
	return nil
}

// readCustomerKeys reads the keys of up to n more of ch's payments, and
// sorts them once all are read. The sort is of a copy: the committed
// chunk shares keys' array up to its own length, and must stay as it is
// should this transaction roll back.
func (w *writer) readCustomerKeys(ch *custChunk, n int) error {
	to := min(ch.to, ch.read+int64(n))
	rows, err := w.custSt.read.QueryContext(context.Background(), ch.read, to)
	if err != nil {
		return err
	}
	defer rows.Close() //nolint:errcheck // read-only: closing loses nothing
	// Appending may write past the committed chunk's length in the array
	// they share, where the committed chunk never reads.
	keys := ch.keys
	for rows.Next() {
		var k custKey
		if err := rows.Scan(&k.merchantID, &k.customerID, &k.id); err != nil {
			return err
		}
		keys = append(keys, k)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	ch.keys, ch.read = keys, to
	if ch.read == ch.to {
		ch.keys = slices.Clone(ch.keys)
		slices.SortFunc(ch.keys, custKey.compare)
		ch.sorted = true
	}
	return nil
}

// insertCustomerKeys inserts up to n more of ch's sorted keys.
func (w *writer) insertCustomerKeys(ch *custChunk, n int) error {
	end := min(len(ch.keys), ch.inserted+n)
	args := make([]any, 0, 3*custInsertRows)
	for i := ch.inserted; i < end; i++ {
		k := ch.keys[i]
		args = append(args, k.merchantID, k.customerID, k.id)
		if len(args) == cap(args) {
			if _, err := w.custSt.insertMany.ExecContext(context.Background(), args...); err != nil {
				return err
			}
			args = args[:0]
		}
	}
	for i := 0; i < len(args); i += 3 {
		if _, err := w.custSt.insertOne.ExecContext(context.Background(), args[i:i+3]...); err != nil {
			return err
		}
	}
	ch.inserted = end
	return nil
}

func (c *custMerge) committed() {
	c.tail += c.tx
	switch {
	case c.txDone:
		c.upto, c.tail = c.txChunk.to, c.txTail
		c.chunk = custChunk{}
	case c.txStep:
		c.chunk = c.txChunk
	}
	c.tx, c.txChunk, c.txStep, c.txDone, c.txTail = 0, custChunk{}, false, false, 0
}

func (c *custMerge) rolledBack() {
	c.tx, c.txChunk, c.txStep, c.txDone, c.txTail = 0, custChunk{}, false, false, 0
}

// listPaymentsOfCustomer lists a customer's payments that pass f, newest
// first: the page from payments_by_customer and the page from the tail,
// merged, in one statement (one snapshot).
func (db *DB) listPaymentsOfCustomer(ctx context.Context, merchantID string, f surgepay.PaymentFilter) ([]*surgepay.Payment, bool, error) {
	limit := pageLimit(f.Limit)
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
		if f.StartingAfter == "" {
			return ""
		}
		return " AND " + table + "id < ?"
	}
	var after []any
	if f.StartingAfter != "" {
		after = []any{f.StartingAfter}
	}
	var q strings.Builder
	var args []any
	q.WriteString("SELECT * FROM (SELECT " + qualified("p", paymentCols) +
		" FROM payments_by_customer c JOIN payments p ON p.merchant_id = c.merchant_id AND p.id = c.id" +
		" WHERE c.merchant_id = ? AND c.customer_id = ?" + cursor("c.") + " AND p.customer_id = c.customer_id" + filter("p.") +
		" ORDER BY c.id DESC LIMIT ?)")
	args = append(append(append(append(args, merchantID, f.CustomerID), after...), condArgs...), limit+1)
	// UNION, not UNION ALL: a chunk being merged is in both arms. The
	// tail is the rowid range: "+merchant_id" keeps SQLite from reading
	// the merchant's range of the primary key instead, every payment of
	// the merchant (bench/search.sh: 453 ms for 200,000 payments, 5 ms
	// as a rowid range).
	q.WriteString(" UNION SELECT * FROM (SELECT " + paymentCols + " FROM payments" +
		" WHERE rowid > (SELECT indexed_upto FROM deferred_indexes WHERE name = 'payments_by_customer')" +
		" AND +merchant_id = ? AND customer_id = ?" + cursor("") + filter("") + " ORDER BY id DESC LIMIT ?)")
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
