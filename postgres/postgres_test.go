package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/postgres"
	"github.com/surgepay/surgepay/storetest"
)

// testDSN returns SURGEPAY_TEST_POSTGRES_URL. Without it the test is
// skipped, except in CI, where a missing database is a failure.
func testDSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv("SURGEPAY_TEST_POSTGRES_URL")
	if dsn == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("SURGEPAY_TEST_POSTGRES_URL is not set, and CI is: PostgreSQL tests must run in CI")
		}
		t.Skip("SURGEPAY_TEST_POSTGRES_URL is not set")
	}
	return dsn
}

// newSchema returns a fresh schema name, t_<random>, dropped in t.Cleanup
// after every store on it has closed (cleanups run last-in first-out).
func newSchema(t testing.TB) string {
	t.Helper()
	dsn := testDSN(t)
	b := make([]byte, 8)
	rand.Read(b)
	schema := "t_" + hex.EncodeToString(b)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return schema
}

// openTest opens a store on a fresh schema; cfg's DSN and Schema are set
// here. The store closes in t.Cleanup.
func openTest(t testing.TB, cfg postgres.Config) *postgres.DB {
	t.Helper()
	cfg.DSN = testDSN(t)
	cfg.Schema = newSchema(t)
	return openAt(t, cfg)
}

// openAt opens a store with cfg as is.
func openAt(t testing.TB, cfg postgres.Config) *postgres.DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := postgres.Open(ctx, cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) surgepay.Store {
		return openTest(t, postgres.Config{})
	})
}

func TestStoreWithLinger(t *testing.T) {
	// A flush interval makes batches of several Writes the common case, so
	// the suite exercises the batch paths, not only batches of one.
	storetest.Run(t, func(t *testing.T) surgepay.Store {
		return openTest(t, postgres.Config{FlushInterval: 2 * time.Millisecond, Writers: 2})
	})
}
