package sqlite

import (
	"path/filepath"
	"testing"
)

// TestWriterPragmas checks the durability settings of the writer
// connection and that the read pool cannot write.
func TestWriterPragmas(t *testing.T) {
	db, err := Open(t.Context(), Config{Path: filepath.Join(t.TempDir(), "surgepay.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var mode string
	var sync int
	if err := db.wconn.QueryRowContext(t.Context(), "PRAGMA journal_mode").Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if err := db.wconn.QueryRowContext(t.Context(), "PRAGMA synchronous").Scan(&sync); err != nil {
		t.Fatal(err)
	}
	if mode != "wal" || sync != 2 {
		t.Errorf("writer: journal_mode %q, synchronous %d; want wal, 2 (FULL)", mode, sync)
	}
	var migrations int
	if err := db.read.QueryRowContext(t.Context(), "SELECT count(*) FROM schema_migrations").Scan(&migrations); err != nil {
		t.Fatal(err)
	}
	if want, _ := listMigrations(); migrations != len(want) {
		t.Errorf("schema_migrations has %d rows, want %d", migrations, len(want))
	}
	if _, err := db.read.ExecContext(t.Context(), "DELETE FROM merchants"); err == nil {
		t.Error("a write through the read pool succeeded, want query_only to refuse it")
	}
}
