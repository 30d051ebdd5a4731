// Package testenv opens real stores for tests: SQLite always, PostgreSQL
// when SURGEPAY_TEST_POSTGRES_URL is set (and, under CI, it must be).
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/postgres"
	"github.com/surgepay/surgepay/sqlite"
)

// Backend opens a fresh, empty store for one test.
type Backend struct {
	Name string
	Open func(t testing.TB) surgepay.Store
}

// PostgresURL returns SURGEPAY_TEST_POSTGRES_URL; under CI an unset URL
// fails the test rather than skipping the PostgreSQL suites.
func PostgresURL(t testing.TB) string {
	u := os.Getenv("SURGEPAY_TEST_POSTGRES_URL")
	if u == "" && os.Getenv("CI") != "" {
		t.Fatal("CI is set but SURGEPAY_TEST_POSTGRES_URL is not: the PostgreSQL suites must run in CI")
	}
	return u
}

// Backends returns SQLite, and PostgreSQL when configured.
func Backends(t testing.TB) []Backend {
	bs := []Backend{{Name: "sqlite", Open: OpenSQLite}}
	if PostgresURL(t) != "" {
		bs = append(bs, Backend{Name: "postgres", Open: OpenPostgres})
	}
	return bs
}

// OpenSQLite opens a store in a temporary folder, closed at cleanup, once
// its first filter of stored idempotency keys is built (Open builds it in
// the background; until then every key lookup is a SELECT, which tests
// counting a request's statements would see).
func OpenSQLite(t testing.TB) surgepay.Store {
	t.Helper()
	db, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "surgepay.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for deadline := time.Now().Add(time.Minute); db.IdempotencyFilterStats().Builds == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) { // a hang guard, not a measurement
			t.Fatal("the first filter of idempotency keys was not built within a minute of Open")
		}
	}
	return db
}

// OpenPostgres opens a store in a fresh schema, dropped at cleanup.
func OpenPostgres(t testing.TB) surgepay.Store {
	t.Helper()
	db, _ := OpenPostgresSchema(t)
	return db
}

// DumpPostgres returns the text of every row of every table in schema.
func DumpPostgres(t testing.TB, schema string) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SELECT table_name FROM information_schema.tables WHERE table_schema = $1", schema)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for _, table := range tables {
		rows, err := conn.Query(ctx, "SELECT t::text FROM "+pgx.Identifier{schema, table}.Sanitize()+" t")
		if err != nil {
			t.Fatal(err)
		}
		texts, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range texts {
			out = append(out, s...)
			out = append(out, '\n')
		}
	}
	return string(out)
}

// OpenPostgresSchema is OpenPostgres that also returns the schema's name.
func OpenPostgresSchema(t testing.TB) (surgepay.Store, string) {
	t.Helper()
	url := PostgresURL(t)
	if url == "" {
		t.Skip("SURGEPAY_TEST_POSTGRES_URL not set")
	}
	var b [6]byte
	rand.Read(b[:])
	schema := "t_" + hex.EncodeToString(b[:])
	db, err := postgres.Open(context.Background(), postgres.Config{DSN: url, Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		db.Close()
		conn, err := pgx.Connect(context.Background(), url)
		if err != nil {
			return
		}
		defer conn.Close(context.Background())
		conn.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
	})
	return db, schema
}

// OpenPostgresProxied opens a store in a fresh schema that reaches
// PostgreSQL through a Proxy, so that a test can take the database away
// (Proxy.Cut) and give it back (Proxy.Restore).
func OpenPostgresProxied(t testing.TB) (surgepay.Store, *Proxy) {
	t.Helper()
	return OpenPostgresProxiedWith(t, postgres.Config{})
}

// OpenPostgresProxiedWith is OpenPostgresProxied with cfg (its DSN and
// Schema are set here).
func OpenPostgresProxiedWith(t testing.TB, cfg postgres.Config) (surgepay.Store, *Proxy) {
	t.Helper()
	raw := PostgresURL(t)
	if raw == "" {
		t.Skip("SURGEPAY_TEST_POSTGRES_URL not set")
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "5432")
	}
	p := NewProxy(t, host)
	u.Host = p.Addr()
	var b [6]byte
	rand.Read(b[:])
	schema := "t_" + hex.EncodeToString(b[:])
	cfg.DSN, cfg.Schema = u.String(), schema
	db, err := postgres.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		db.Close()
		conn, err := pgx.Connect(context.Background(), raw)
		if err != nil {
			return
		}
		defer conn.Close(context.Background())
		conn.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
	})
	return db, p
}

// Chromium returns the path of a headless-capable Chromium
// ($SURGEPAY_CHROMIUM, /usr/bin/chromium, chromium or chromium-browser on
// the PATH). Without one the test is skipped, unless CI is set: CI
// installs Chromium, so its absence fails the test named by what.
func Chromium(t testing.TB, what string) string {
	t.Helper()
	for _, p := range []string{os.Getenv("SURGEPAY_CHROMIUM"), "/usr/bin/chromium", "chromium", "chromium-browser"} {
		if p == "" {
			continue
		}
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("CI is set but Chromium is not installed: %s must run in CI", what)
	}
	t.Skip("chromium not installed")
	return ""
}
