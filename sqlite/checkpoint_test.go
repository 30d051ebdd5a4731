package sqlite_test

import (
	"database/sql"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/surgepay/surgepay/sqlite"
	"github.com/surgepay/surgepay/telemetry/telemetrytest"
)

// TestCheckpointStats: a checkpoint with no reader copies the whole WAL
// (complete, nothing behind); while a reader holds an old snapshot the
// WAL grows, checkpoints leave the frames it needs (partial, behind > 0),
// and past three quarters of WALPagesMax a warning names the WAL's length; once the
// reader ends the next checkpoint is complete again, and the writer
// restarts the WAL it copied.
func TestCheckpointStats(t *testing.T) {
	path := filepath.Join(t.TempDir(), "surgepay.db")
	var logs telemetrytest.SyncBuffer
	db := open(t, sqlite.Config{Path: path, WALPagesMax: 64, CheckpointInterval: time.Hour,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	// The first filter of idempotency keys is built in the background
	// and reads the file: a reader, which would make the first
	// checkpoint partial.
	waitFilter(t, db)
	m := newMerchant(t, db)
	sell := func(n int) {
		t.Helper()
		for range n {
			w, _ := purchase(m.ID)
			if err := db.Apply(t.Context(), w); err != nil {
				t.Fatal(err)
			}
		}
	}
	sell(3)
	db.Checkpoint()
	s := db.CheckpointStats()
	if s.Outcomes["complete"] != 1 || s.WALFrames <= 0 || s.Behind != 0 {
		t.Fatalf("without a reader: %+v; want one complete checkpoint of a non-empty WAL, nothing behind", s)
	}

	reader, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	tx, err := reader.BeginTx(t.Context(), &sql.TxOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := tx.QueryRowContext(t.Context(), "SELECT count(*) FROM payments").Scan(&n); err != nil {
		t.Fatal(err)
	}
	sell(40) // the reader's snapshot keeps the WAL from restarting
	db.Checkpoint()
	s = db.CheckpointStats()
	if s.Outcomes["partial"] != 1 || s.Behind <= 0 || s.WALFrames <= 48 || s.WALFramesMax < s.WALFrames {
		t.Fatalf("with a reader's snapshot held: %+v; want a partial checkpoint, frames behind, a WAL over 48 frames", s)
	}
	if !strings.Contains(logs.String(), `"msg":"WAL near wal_pages_max"`) {
		t.Errorf("no warning of a WAL over three quarters of WALPagesMax; log:\n%s", logs.String())
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	db.Checkpoint()
	s = db.CheckpointStats()
	if s.Outcomes["complete"] != 2 || s.Behind != 0 || s.Seconds <= 0 {
		t.Fatalf("after the reader ended: %+v; want a second complete checkpoint, nothing behind", s)
	}

	// That checkpoint copied a WAL longer than a quarter of WALPagesMax:
	// the writer restarts it before its next transaction, so the WAL
	// then holds that transaction's frames only. (Here, with no commit
	// between the checkpoint and the transaction, SQLite would restart it
	// too; under load it does not, bench/RESULTS.md. The count is the
	// writer's.)
	long, restarts := s.WALFrames, s.Restarts
	sell(1)
	db.Checkpoint()
	s = db.CheckpointStats()
	if s.Restarts != restarts+1 || s.WALFrames >= long {
		t.Fatalf("after a complete checkpoint of %d frames and a sale: %+v; want one more restart and a shorter WAL", long, s)
	}
}
