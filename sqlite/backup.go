package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// backupBusyTimeout bounds the wait for the read lock VACUUM INTO takes
// (a WAL recovery by another process).
const backupBusyTimeout = 5 * time.Second

// BackupResult describes a finished backup.
type BackupResult struct {
	Path     string        // the backup file
	Bytes    int64         // its size
	Payments int64         // payments it holds, read back from it
	Took     time.Duration // from start to the backup in place
}

// Backup writes a consistent copy of the database at path to dst while
// servers keep reading and writing it, then checks the copy.
//
// The copy is SQLite's VACUUM INTO, run in one read transaction on a
// connection of its own: in WAL mode it blocks no writer (a serving
// process keeps committing), it holds the snapshot the transaction began
// with, and it writes the live pages compacted, without the WAL. While it
// runs, checkpoints cannot move past its snapshot, so the WAL grows for
// the backup's duration, and it reads the whole file once (disk and CPU
// a server shares).
//
// dst must not exist. The copy is written 0600 under a temporary name in
// dst's folder, synced, checked (PRAGMA quick_check, and its payments
// counted), and only then linked to dst (never over a file there) and the
// folder synced: a crash or a failed check leaves no file at dst.
func Backup(ctx context.Context, path, dst string) (*BackupResult, error) {
	start := time.Now()
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("sqlite: backup: %w", err)
	}
	if _, err := os.Lstat(dst); err == nil {
		return nil, fmt.Errorf("sqlite: backup: %s exists; choose a new file", dst)
	}
	dir := filepath.Dir(dst)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(dst)+".tmp-*") // mode 0600
	if err != nil {
		return nil, fmt.Errorf("sqlite: backup: %w", err)
	}
	tmpPath := tmp.Name()
	_ = tmp.Close() // nothing written: VACUUM INTO writes the file by its name
	ok := false
	defer func() {
		if !ok {
			_ = os.Remove(tmpPath) // the backup's error is the one to report
		}
	}()
	// VACUUM INTO takes an empty file as a new one: the file keeps the
	// 0600 it was created with.
	// Not query_only: SQLite counts VACUUM INTO as a write, though it
	// writes only the new file.
	src, err := sql.Open("sqlite", dsn(path, backupBusyTimeout))
	if err != nil {
		return nil, fmt.Errorf("sqlite: backup: %w", err)
	}
	defer src.Close() //nolint:errcheck // the copy is written and synced by its own path; closing the source loses nothing
	if _, err := src.ExecContext(ctx, "VACUUM INTO ?", tmpPath); err != nil {
		return nil, fmt.Errorf("sqlite: backup %s: %w", path, err)
	}
	if err := syncFile(tmpPath); err != nil {
		return nil, fmt.Errorf("sqlite: backup: %w", err)
	}
	res := &BackupResult{Path: dst}
	if res.Payments, err = checkBackup(ctx, tmpPath); err != nil {
		return nil, fmt.Errorf("sqlite: backup %s failed its check: %w", tmpPath, err)
	}
	// A link, not a rename: it fails if dst appeared since the check
	// above, where a rename would replace it.
	if err := os.Link(tmpPath, dst); err != nil {
		return nil, fmt.Errorf("sqlite: backup: %w", err)
	}
	_ = os.Remove(tmpPath) // dst names the copy now: a leftover temporary name loses nothing
	ok = true
	if err := syncFile(dir); err != nil {
		return nil, fmt.Errorf("sqlite: backup: sync %s: %w", dir, err)
	}
	fi, err := os.Stat(dst)
	if err != nil {
		return nil, fmt.Errorf("sqlite: backup: %w", err)
	}
	res.Bytes, res.Took = fi.Size(), time.Since(start)
	return res, nil
}

// checkBackup runs PRAGMA quick_check on the copy and counts its payments.
func checkBackup(ctx context.Context, path string) (int64, error) {
	db, err := sql.Open("sqlite", dsn(path, time.Second, "query_only(1)"))
	if err != nil {
		return 0, err
	}
	defer db.Close() //nolint:errcheck // read-only: closing loses nothing
	var verdict string
	if err := db.QueryRowContext(ctx, "PRAGMA quick_check").Scan(&verdict); err != nil {
		return 0, err
	}
	if verdict != "ok" {
		return 0, errors.New("quick_check: " + verdict)
	}
	var n int64
	err = db.QueryRowContext(ctx, "SELECT count(*) FROM payments").Scan(&n)
	return n, err
}

func syncFile(path string) error {
	f, err := os.Open(path) //nolint:gosec // G304: the operator names the file (the backup's destination)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
