package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// pgStore fills the PostgreSQL store with COPY, with `surgepay serve`
// stopped. Its indexes (every one of the filled tables that is not a
// constraint's, the lead's new ones included) are dropped for the load
// and created again after it; then VACUUM ANALYZE, as autovacuum would
// leave the tables after a day of traffic (statistics for the planner,
// the visibility map for index-only scans).
type pgStore struct {
	conn    *pgx.Conn
	indexes []string
	parsed  map[*row][]map[string]any // templates' transactions, decoded once
}

var pgFilled = []string{"payments", "customers", "payment_methods", "idempotency"}

func openPostgres(ctx context.Context, dsn string) (*pgStore, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	for _, q := range []string{"SET maintenance_work_mem = '1GB'", "SET synchronous_commit = off"} {
		if _, err := conn.Exec(ctx, q); err != nil {
			conn.Close(ctx) //nolint:errcheck // the error of the SET is the one to report
			return nil, fmt.Errorf("%s: %w", q, err)
		}
	}
	return &pgStore{conn: conn, parsed: map[*row][]map[string]any{}}, nil
}

// pgName is the database's host and name, without credentials.
func pgName(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "?"
	}
	return u.Host + u.Path
}

// recreateDatabase drops the database of dsn and creates it again,
// through the server's "postgres" database. It refuses a database whose
// name does not contain "searchbench": it drops nothing else.
func recreateDatabase(ctx context.Context, dsn string) error {
	u, err := url.Parse(dsn)
	if err != nil {
		return fmt.Errorf("-pg-url: %w", err)
	}
	name := strings.TrimPrefix(u.Path, "/")
	if !strings.Contains(name, "searchbench") || strings.ContainsAny(name, `"/`) {
		return fmt.Errorf("-pg-url: the database %q: its name must contain \"searchbench\" (the fill drops and creates it)", name)
	}
	admin := *u
	admin.Path = "/postgres"
	conn, err := pgx.Connect(ctx, admin.String())
	if err != nil {
		return fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	defer conn.Close(ctx) //nolint:errcheck // the statements' errors are checked; nothing is left to write
	for _, q := range []string{`DROP DATABASE IF EXISTS "` + name + `" WITH (FORCE)`, `CREATE DATABASE "` + name + `"`} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

// close ends the connection: every write was a COPY or statement
// whose own error was checked, so a failed close loses nothing.
func (s *pgStore) close() { s.conn.Close(context.Background()) } //nolint:errcheck // see above

func (s *pgStore) ts(t time.Time) any { return t }

func (s *pgStore) timeOf(v any) time.Time {
	t, _ := v.(time.Time)
	return t
}

// template reads a row with its jsonb columns as JSON text (a NULL
// read back as nil would be a NULL in COPY, where the store writes
// JSON null).
func (s *pgStore) template(ctx context.Context, table, merchant, status string) (*row, error) {
	q, args := "SELECT * FROM "+table+" WHERE merchant_id = $1", []any{merchant}
	if status != "" {
		q += " AND status = $2"
		args = append(args, status)
	}
	rows, err := s.conn.Query(ctx, q+" ORDER BY id DESC LIMIT 1", args...)
	if err != nil {
		return nil, fmt.Errorf("template of %s: %w", table, err)
	}
	defer rows.Close()
	if !rows.Next() {
		return nil, fmt.Errorf("template of %s %s: no row", table, status)
	}
	vals, err := rows.Values()
	if err != nil {
		return nil, err
	}
	r := &row{vals: vals}
	for i, f := range rows.FieldDescriptions() {
		r.cols = append(r.cols, f.Name)
		if f.DataTypeOID == pgtype.JSONBOID || f.DataTypeOID == pgtype.JSONOID {
			b, err := json.Marshal(vals[i])
			if err != nil {
				return nil, err
			}
			r.vals[i] = string(b)
		}
	}
	return r, rows.Err()
}

// transactions rewrites the template's (txJSON with explicit names and
// times) for p: IDs, amounts, references and times.
func (s *pgStore) transactions(t *row, p *pay, newTxID func() string) (any, error) {
	text, _ := t.vals[t.index("transactions")].(string)
	parsed, ok := s.parsed[t]
	if !ok {
		if err := json.Unmarshal([]byte(text), &parsed); err != nil {
			return nil, err
		}
		s.parsed[t] = parsed
	}
	if parsed == nil {
		return text, nil
	}
	txs := make([]map[string]any, len(parsed))
	for i, tx := range parsed {
		txs[i] = maps.Clone(tx)
	}
	tplID, tplRef, tplCreated := t.str("id"), t.str("authorization_ref"), s.timeOf(t.vals[t.index("created")])
	for _, tx := range txs {
		tx["id"] = newTxID()
		tx["amount"] = p.amount
		if r, _ := tx["provider_ref"].(string); r != "" && r == tplRef {
			tx["provider_ref"] = p.ref
		}
		if k, _ := tx["idempotency_key"].(string); strings.HasPrefix(k, tplID) {
			tx["idempotency_key"] = p.id + strings.TrimPrefix(k, tplID)
		}
		if m, _ := tx["message"].(string); m != "" && m == t.str("failure_message") {
			tx["message"] = declinedMessage
		}
		if c, _ := tx["created"].(string); c != "" {
			if ct, err := time.Parse(time.RFC3339Nano, c); err == nil {
				tx["created"] = p.created.Add(ct.Sub(tplCreated)).UTC().Format(time.RFC3339Nano)
			}
		}
	}
	b, err := json.Marshal(txs)
	return string(b), err
}

func (s *pgStore) dropIndexes(ctx context.Context) error {
	rows, err := s.conn.Query(ctx, `SELECT indexname, indexdef FROM pg_indexes
		WHERE schemaname = current_schema() AND tablename = ANY($1)
		AND indexname NOT IN (SELECT conname FROM pg_constraint)`, pgFilled)
	if err != nil {
		return err
	}
	var names []string
	for rows.Next() {
		var name, def string
		if err := rows.Scan(&name, &def); err != nil {
			rows.Close()
			return err
		}
		names, s.indexes = append(names, name), append(s.indexes, def)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, n := range names {
		if _, err := s.conn.Exec(ctx, `DROP INDEX "`+n+`"`); err != nil {
			return fmt.Errorf("drop index %s: %w", n, err)
		}
	}
	fmt.Fprintf(os.Stderr, "fill: dropped %d indexes for the load: %s\n", len(names), strings.Join(names, ", "))
	return nil
}

func (s *pgStore) write(ctx context.Context, table string, cols []string, rows [][]any) error {
	if len(rows) == 0 {
		return nil
	}
	n, err := s.conn.CopyFrom(ctx, pgx.Identifier{table}, cols, pgx.CopyFromRows(rows))
	if err != nil {
		return fmt.Errorf("copy into %s: %w", table, err)
	}
	if int(n) != len(rows) {
		return fmt.Errorf("copy into %s: %d rows of %d", table, n, len(rows))
	}
	return nil
}

func (s *pgStore) finish(ctx context.Context) error {
	steps := append([]string(nil), s.indexes...)
	steps = append(steps, "VACUUM (ANALYZE) "+strings.Join(pgFilled, ", "))
	for _, q := range steps {
		began := time.Now()
		if _, err := s.conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
		fmt.Fprintf(os.Stderr, "fill: %.1f s: %.90s\n", time.Since(began).Seconds(), q)
	}
	return nil
}

func (s *pgStore) size(ctx context.Context) (int64, error) {
	var n int64
	err := s.conn.QueryRow(ctx, "SELECT pg_database_size(current_database())").Scan(&n)
	return n, err
}

func (s *pgStore) count(ctx context.Context, merchant string) (int, error) {
	var n int
	err := s.conn.QueryRow(ctx, "SELECT count(*) FROM payments WHERE merchant_id = $1", merchant).Scan(&n)
	return n, err
}
