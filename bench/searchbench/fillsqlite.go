package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"
	"time"

	_ "modernc.org/sqlite"
)

// sqliteStore fills the embedded store's file, with `surgepay serve`
// stopped. What the store derives, kept consistent here:
//   - payments_by_customer holds every payment, and
//     deferred_indexes.indexed_upto of it is the last payment's rowid
//     (migration 0010: the rows after it would be the writer's to merge);
//   - the idempotency records are appended after the last one, in
//     created order, and left after deferred_indexes.indexed_upto of
//     'idempotency': the next Open indexes them (indexRecent, the path of
//     a restart), so no hash is computed here;
//   - processor_ref is the reference of a routed payment (migration
//     0012), which every generated payment is;
//   - the indexes of the filled tables are dropped for the load and made
//     again from their own SQL (the lead's new ones included).
//
// No ANALYZE: the store runs none, so the planner sees what it sees in
// production.
type sqliteStore struct {
	path    string
	db      *sql.DB
	conn    *sql.Conn
	indexes []string // CREATE INDEX statements to run again
}

// sqliteVarsMax is SQLite's bound on a statement's parameters.
const sqliteVarsMax = 32766

func openSQLite(ctx context.Context, path string) (*sqliteStore, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		return nil, err
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		db.Close() //nolint:errcheck // the error of Conn is the one to report
		return nil, err
	}
	// A bulk load: no fsync per transaction (the fill ends with a
	// checkpoint; a crash means filling again), 1 GiB of page cache.
	for _, q := range []string{"PRAGMA synchronous = OFF", "PRAGMA cache_size = -1048576", "PRAGMA temp_store = FILE"} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			conn.Close() //nolint:errcheck // the error of the pragma is the one to report
			db.Close()   //nolint:errcheck // as above
			return nil, fmt.Errorf("%s: %w", q, err)
		}
	}
	return &sqliteStore{path: path, db: db, conn: conn}, nil
}

// close closes the file: every transaction's commit was checked, and
// finish checkpointed the WAL, so a failed close loses nothing.
func (s *sqliteStore) close() {
	s.conn.Close() //nolint:errcheck // see above
	s.db.Close()   //nolint:errcheck // see above
}

func (s *sqliteStore) ts(t time.Time) any { return t.UnixNano() }

func (s *sqliteStore) timeOf(v any) time.Time {
	n, _ := v.(int64)
	return time.Unix(0, n).UTC()
}

func (s *sqliteStore) template(ctx context.Context, table, merchant, status string) (*row, error) {
	q, args := "SELECT * FROM "+table+" WHERE merchant_id = ?", []any{merchant}
	if status != "" {
		q += " AND status = ?"
		args = append(args, status)
	}
	rows, err := s.conn.QueryContext(ctx, q+" ORDER BY id DESC LIMIT 1", args...)
	if err != nil {
		return nil, fmt.Errorf("template of %s: %w", table, err)
	}
	defer rows.Close() //nolint:errcheck // a read; rows.Err is checked
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	if !rows.Next() {
		return nil, fmt.Errorf("template of %s %s: no row", table, status)
	}
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return nil, err
	}
	return &row{cols: cols, vals: vals}, rows.Err()
}

// transactions replaces, in the template's transactions as stored
// (txJSON: short names; the authorization's reference derived, "="), the
// template's payment ID, transaction IDs, reference and amount by p's.
// Times are stored relative to the payment's created and stay.
func (s *sqliteStore) transactions(t *row, p *pay, newTxID func() string) (any, error) {
	v := t.vals[t.index("transactions")]
	if v == nil {
		return nil, nil
	}
	text, _ := v.(string)
	amount := fmt.Sprint(t.int("amount"))
	pairs := []string{t.str("id"), p.id, `"a":` + amount + ",", fmt.Sprintf(`"a":%d,`, p.amount),
		`"a":` + amount + "}", fmt.Sprintf(`"a":%d}`, p.amount)}
	if ref := t.str("authorization_ref"); ref != "" {
		pairs = append(pairs, ref, p.ref)
	}
	if m := t.str("failure_message"); m != "" {
		pairs = append(pairs, m, declinedMessage)
	}
	for _, id := range txIDs(text) {
		pairs = append(pairs, id, newTxID())
	}
	return strings.NewReplacer(pairs...).Replace(text), nil
}

// txIDs returns the transaction IDs (txn_…) in a template's text.
func txIDs(text string) []string {
	var ids []string
	for rest := text; ; {
		i := strings.Index(rest, `"txn_`)
		if i < 0 {
			return ids
		}
		rest = rest[i+1:]
		j := strings.IndexByte(rest, '"')
		if j < 0 {
			return ids
		}
		ids = append(ids, rest[:j])
		rest = rest[j:]
	}
}

// dropIndexes drops the indexes of the tables the fill writes (their
// SQL kept for finish).
func (s *sqliteStore) dropIndexes(ctx context.Context) error {
	rows, err := s.conn.QueryContext(ctx, "SELECT name, sql FROM sqlite_schema WHERE type = 'index' AND sql IS NOT NULL"+
		" AND tbl_name IN ('payments', 'customers', 'payment_methods', 'idempotency', 'payments_by_customer')")
	if err != nil {
		return err
	}
	var names []string
	for rows.Next() {
		var name, q string
		if err := rows.Scan(&name, &q); err != nil {
			rows.Close() //nolint:errcheck // the error of Scan is the one to report
			return err
		}
		names, s.indexes = append(names, name), append(s.indexes, q)
	}
	if err := rows.Close(); err != nil {
		return err
	}
	for _, n := range names {
		if _, err := s.conn.ExecContext(ctx, `DROP INDEX "`+n+`"`); err != nil {
			return fmt.Errorf("drop index %s: %w", n, err)
		}
	}
	fmt.Fprintf(os.Stderr, "fill: dropped %d indexes for the load: %s\n", len(names), strings.Join(names, ", "))
	return nil
}

// write inserts rows in one transaction, many rows a statement.
func (s *sqliteStore) write(ctx context.Context, table string, cols []string, rows [][]any) error {
	if len(rows) == 0 {
		return nil
	}
	per := min(500, sqliteVarsMax/len(cols))
	one := "(" + strings.TrimSuffix(strings.Repeat("?,", len(cols)), ",") + ")"
	stmt := func(n int) string {
		return `INSERT INTO "` + table + `" ("` + strings.Join(cols, `", "`) + `") VALUES ` +
			strings.TrimSuffix(strings.Repeat(one+",", n), ",")
	}
	tx, err := s.conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it does nothing
	full, err := tx.PrepareContext(ctx, stmt(per))
	if err != nil {
		return fmt.Errorf("insert into %s: %w", table, err)
	}
	defer full.Close() //nolint:errcheck // a statement; the transaction's Commit is checked
	args := make([]any, 0, per*len(cols))
	for len(rows) > 0 {
		k := min(per, len(rows))
		args = args[:0]
		for _, r := range rows[:k] {
			args = append(args, r...)
		}
		if k == per {
			_, err = full.ExecContext(ctx, args...)
		} else {
			_, err = tx.ExecContext(ctx, stmt(k), args...)
		}
		if err != nil {
			return fmt.Errorf("insert into %s: %w", table, err)
		}
		rows = rows[k:]
	}
	return tx.Commit()
}

func (s *sqliteStore) finish(ctx context.Context) error {
	steps := append([]string(nil), s.indexes...)
	steps = append(steps,
		"INSERT OR IGNORE INTO payments_by_customer (merchant_id, customer_id, id)"+
			" SELECT merchant_id, customer_id, id FROM payments ORDER BY merchant_id, customer_id, id",
		"UPDATE deferred_indexes SET indexed_upto = (SELECT coalesce(max(rowid), 0) FROM payments) WHERE name = 'payments_by_customer'",
		"PRAGMA wal_checkpoint(TRUNCATE)")
	for _, q := range steps {
		began := time.Now()
		if _, err := s.conn.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
		fmt.Fprintf(os.Stderr, "fill: %.1f s: %.90s\n", time.Since(began).Seconds(), q)
	}
	return nil
}

func (s *sqliteStore) size(ctx context.Context) (int64, error) {
	var total int64
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if fi, err := os.Stat(s.path + suffix); err == nil {
			total += fi.Size()
		}
	}
	return total, nil
}

func (s *sqliteStore) count(ctx context.Context, merchant string) (int, error) {
	var n int
	err := s.conn.QueryRowContext(ctx, "SELECT count(*) FROM payments WHERE merchant_id = ?", merchant).Scan(&n)
	return n, err
}

// databaseName names the PostgreSQL database of o (host and name, no
// credentials), "" for SQLite.
func databaseName(o *options) string {
	if o.store != "postgres" {
		return ""
	}
	return pgName(o.pgURL)
}
