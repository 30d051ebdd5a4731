package sqlite

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"
)

// The background checkpoints (checkpointLoop): every CheckpointInterval a
// PASSIVE checkpoint copies into the database file the WAL's frames that no
// reader's snapshot still needs. What each answered is kept for /metrics
// (CheckpointStats): while they keep up the WAL restarts from its start and
// stays small; when they fall behind (a reader holds an old snapshot,
// another checkpoint holds the lock, or the checkpointer waits for a core)
// the WAL grows, and at Config.WALPagesMax frames the writer checkpoints it
// itself inside a COMMIT, which stalls every sale behind it.
//
// Even checkpoints that keep up do not restart the WAL: SQLite starts it
// again from its beginning only when a write transaction begins on a WAL
// wholly copied, and a writer that commits every few milliseconds always
// has frames the last checkpoint did not see. At 3,000 sales/s the WAL
// reached WALPagesMax every ~3 s and the writer checkpointed inside a
// COMMIT each time. So a complete background checkpoint of a WAL longer
// than restartAt asks the writer (walRestart) to run a RESTART checkpoint
// before its next transaction: it copies the frames committed since, and
// restarts the WAL unless a reader is reading it (the writer's connection
// waits for none: then the WAL grows on until the next request).

// Checkpoint outcomes, as counted.
const (
	ckptComplete = iota // every frame of the WAL is in the database file
	ckptPartial         // some frames stayed: a reader's snapshot needs them
	ckptBusy            // another checkpoint held the lock (the writer's own, at WALPagesMax)
	ckptError
	ckptOutcomes
)

var ckptOutcomeNames = [ckptOutcomes]string{"complete", "partial", "busy", "error"}

// walLongLogEvery spaces the warnings that the WAL is over three quarters
// of WALPagesMax, where the writer soon checkpoints it inside a COMMIT. One
// restart a reader prevented takes the WAL from walRestartFrames to about
// twice that (a second of writes at 3,000 sales/s): not worth a warning.
const walLongLogEvery = 10 * time.Second

// CheckpointStats is what the background checkpoints did since Open.
type CheckpointStats struct {
	// Outcomes counts checkpoints by outcome: "complete", "partial",
	// "busy", "error".
	Outcomes map[string]uint64
	// Seconds is the time spent in checkpoints.
	Seconds float64
	// WALFrames is the WAL's length in frames (pages) at the last
	// checkpoint that ran; WALFramesMax the longest seen; Behind the frames
	// the last one left in the WAL only.
	WALFrames, WALFramesMax, Behind int64
	// Restarts counts the writer's WAL restarts; RestartsBusy those a
	// reader of the WAL prevented (the WAL then grows on, to the next).
	Restarts, RestartsBusy uint64
}

// ckptStats is updated by checkpointLoop and read by CheckpointStats.
type ckptStats struct {
	outcomes                  [ckptOutcomes]atomic.Uint64
	restarts, restartsBusy    atomic.Uint64 // the writer's WAL restarts, and those a reader prevented
	nanos                     atomic.Int64
	frames, framesMax, behind atomic.Int64

	log      *slog.Logger // nil: no log
	pagesMax int64        // Config.WALPagesMax; a WAL past three quarters of it is logged
	lastWarn time.Time    // checkpointLoop only
}

// record counts one checkpoint that took d and answered (busy, log, done),
// the columns of PRAGMA wal_checkpoint, or failed with err.
func (s *ckptStats) record(d time.Duration, busy, log, done int64, err error) {
	s.nanos.Add(int64(d))
	outcome := ckptComplete
	switch {
	case err != nil:
		outcome = ckptError
	case busy != 0:
		outcome = ckptBusy
	case done < log:
		outcome = ckptPartial
	}
	s.outcomes[outcome].Add(1)
	if outcome == ckptError || outcome == ckptBusy || log < 0 {
		return
	}
	s.frames.Store(log)
	s.behind.Store(log - done)
	if log > s.framesMax.Load() {
		s.framesMax.Store(log)
	}
	if s.log != nil && log > s.pagesMax*3/4 && time.Since(s.lastWarn) >= walLongLogEvery {
		s.log.Warn("WAL near wal_pages_max", "wal_frames", log, "frames_left", log-done,
			"wal_pages_max", s.pagesMax, "checkpoint_seconds", d.Seconds())
		s.lastWarn = time.Now()
	}
}

// walRestartFrames is the WAL's length (8 MiB of 2 KiB pages) from which a complete
// background checkpoint asks the writer to restart it.
const walRestartFrames = 4096

// restarted counts one of the writer's WAL restarts.
func (s *ckptStats) restarted(busy int64, err error) {
	if err == nil && busy == 0 {
		s.restarts.Add(1)
	} else {
		s.restartsBusy.Add(1)
	}
}

// checkpoint runs one background checkpoint and records it.
func (db *DB) checkpoint() {
	start := time.Now()
	busy, log, done := int64(0), int64(-1), int64(-1)
	err := db.ckpt.QueryRow("PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &log, &done)
	db.ckptStats.record(time.Since(start), busy, log, done, err)
	if err == nil && busy == 0 && log >= db.restartAt && done == log {
		db.walRestart.Store(true)
	}
}

// restartWAL runs on the writer between transactions: a RESTART
// checkpoint copies the frames committed since the background one and,
// unless a reader still reads the WAL (the writer's connection waits for
// none), starts the WAL again from its beginning.
func (db *DB) restartWAL() {
	busy, log, done := int64(0), int64(-1), int64(-1)
	err := db.wconn.QueryRowContext(context.Background(), "PRAGMA wal_checkpoint(RESTART)").Scan(&busy, &log, &done)
	db.ckptStats.restarted(busy, err)
}

// CheckpointStats reports the background checkpoints since Open.
func (db *DB) CheckpointStats() CheckpointStats {
	s := &db.ckptStats
	out := CheckpointStats{Outcomes: make(map[string]uint64, ckptOutcomes),
		Seconds: time.Duration(s.nanos.Load()).Seconds(), WALFrames: s.frames.Load(),
		WALFramesMax: s.framesMax.Load(), Behind: s.behind.Load(),
		Restarts: s.restarts.Load(), RestartsBusy: s.restartsBusy.Load()}
	for i, name := range ckptOutcomeNames {
		out.Outcomes[name] = s.outcomes[i].Load()
	}
	return out
}
