package sqlite

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
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
	// The writer waits for the write lock in beginWrite, polling, never in
	// SQLite's busy handler; the other connections keep BusyTimeout.
	var wBusy, rBusy int64
	if err := db.wconn.QueryRowContext(t.Context(), "PRAGMA busy_timeout").Scan(&wBusy); err != nil {
		t.Fatal(err)
	}
	if err := db.read.QueryRowContext(t.Context(), "PRAGMA busy_timeout").Scan(&rBusy); err != nil {
		t.Fatal(err)
	}
	if wBusy != 0 || rBusy != BusyTimeoutDefault.Milliseconds() {
		t.Errorf("busy_timeout: writer %d ms, reader %d ms; want 0, %d", wBusy, rBusy, BusyTimeoutDefault.Milliseconds())
	}
	if db.writer.lockWait != BusyTimeoutDefault || db.writer.lockRetryMax != WriteLockRetryMaxDefault {
		t.Errorf("writer waits %v for the lock, retrying at most %v apart; want %v, %v",
			db.writer.lockWait, db.writer.lockRetryMax, BusyTimeoutDefault, WriteLockRetryMaxDefault)
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

// TestMmapSize checks that every connection reads through the memory map
// Config.MmapSize asks for: the default (SQLite's ceiling), a smaller size,
// and none.
func TestMmapSize(t *testing.T) {
	for _, tc := range []struct {
		size, want int64
	}{{0, MmapSizeDefault}, {1 << 60, MmapSizeDefault}, {64 << 20, 64 << 20}, {-1, 0}} {
		t.Run(strconv.FormatInt(tc.size, 10), func(t *testing.T) {
			db, err := Open(t.Context(), Config{Path: filepath.Join(t.TempDir(), "surgepay.db"), MmapSize: tc.size})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var w, r, c int64
			if err := db.wconn.QueryRowContext(t.Context(), "PRAGMA mmap_size").Scan(&w); err != nil {
				t.Fatal(err)
			}
			if err := db.read.QueryRowContext(t.Context(), "PRAGMA mmap_size").Scan(&r); err != nil {
				t.Fatal(err)
			}
			if err := db.ckpt.QueryRowContext(t.Context(), "PRAGMA mmap_size").Scan(&c); err != nil {
				t.Fatal(err)
			}
			if w != tc.want || r != tc.want || c != tc.want {
				t.Errorf("mmap_size: writer %d, reader %d, checkpointer %d; want %d", w, r, c, tc.want)
			}
		})
	}
}

// TestPageSize: a file Open creates gets Config.PageSize (default
// PageSizeDefault); a file that exists keeps its own, whatever the
// Config, and its sales are stored and found across the reopen. A size
// SQLite cannot take is refused before any file is made.
func TestPageSize(t *testing.T) {
	pageSize := func(db *DB) int {
		t.Helper()
		var n int
		if err := db.read.QueryRowContext(t.Context(), "PRAGMA page_size").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	dir := t.TempDir()
	db, err := Open(t.Context(), Config{Path: filepath.Join(dir, "default.db")})
	if err != nil {
		t.Fatal(err)
	}
	if got := pageSize(db); got != PageSizeDefault {
		t.Errorf("a new file with the default: page_size %d, want %d", got, PageSizeDefault)
	}
	db.Close()

	path := filepath.Join(dir, "small.db")
	db, err = Open(t.Context(), Config{Path: path, PageSize: 1024})
	if err != nil {
		t.Fatal(err)
	}
	if got := pageSize(db); got != 1024 {
		t.Errorf("a new file with PageSize 1024: page_size %d", got)
	}
	m := &surgepay.Merchant{ID: surgepay.NewID("mch"), Name: "pages", Created: time.Now().UTC()}
	if err := db.Apply(t.Context(), &surgepay.Write{Merchant: m}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db, err = Open(t.Context(), Config{Path: path, PageSize: 8192})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if got := pageSize(db); got != 1024 {
		t.Errorf("an existing file of 1024-byte pages opened with PageSize 8192: page_size %d, want 1024", got)
	}
	if _, err := db.FindMerchant(t.Context(), m.ID); err != nil {
		t.Errorf("FindMerchant after the reopen: %v", err)
	}

	for _, n := range []int{-1, 256, 3000, 131072} {
		bad := filepath.Join(dir, "bad.db")
		if db, err := Open(t.Context(), Config{Path: bad, PageSize: n}); err == nil {
			db.Close()
			t.Errorf("Open with PageSize %d: nil error, want a refusal", n)
		}
		if _, err := os.Stat(bad); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Open with PageSize %d made the file (%v)", n, err)
		}
	}
}
