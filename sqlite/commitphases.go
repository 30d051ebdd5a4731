package sqlite

import (
	"log/slog"
	"sync/atomic"
	"time"
)

// The phases of a group commit, timed by commitTx: where a writer stall
// goes. A commit that outlasts Config.SlowCommit is logged with its
// phases, at most once per slowCommitLogEvery (the others are counted in
// the next line).
//
//   - lock: BEGIN IMMEDIATE, with its waits while another process (surgepay
//     settle) holds the write lock;
//   - apply: the batch's statements (and the records other processes
//     appended, absorb);
//   - merge: the chunks of the deferred indexes (idemindex.go,
//     custindex.go);
//   - commit: COMMIT: the WAL frames written and synced, and the
//     checkpoint the writer runs itself once the WAL holds
//     Config.WALPagesMax pages.
const (
	phaseLock = iota
	phaseApply
	phaseMerge
	phaseCommit
	commitPhases
)

var commitPhaseNames = [commitPhases]string{"lock", "apply", "merge", "commit"}

// SlowCommitDefault is the default Config.SlowCommit.
const SlowCommitDefault = 250 * time.Millisecond

// slowCommitLogEvery spaces the slow-commit log lines.
const slowCommitLogEvery = 10 * time.Second

// commitTimer sums the phases of the writer's commits and logs slow ones.
type commitTimer struct {
	total [commitPhases]atomic.Int64 // nanoseconds

	log        *slog.Logger // nil: no log
	slow       time.Duration
	lastLog    time.Time // writer goroutine only
	suppressed int       // slow commits not logged since lastLog
}

// commitInfo is what one commit did, for the slow-commit log.
type commitInfo struct {
	items, idemMerged int
	custMerged        bool
}

// observe adds one commit's phase durations (d[phase]).
func (t *commitTimer) observe(d [commitPhases]time.Duration, info commitInfo) {
	var sum time.Duration
	for i, v := range d {
		t.total[i].Add(int64(v))
		sum += v
	}
	if t.log == nil || sum < t.slow {
		return
	}
	now := time.Now()
	if now.Sub(t.lastLog) < slowCommitLogEvery {
		t.suppressed++
		return
	}
	t.log.Warn("slow group commit", "seconds", sum.Seconds(),
		"lock_seconds", d[phaseLock].Seconds(), "apply_seconds", d[phaseApply].Seconds(),
		"merge_seconds", d[phaseMerge].Seconds(), "commit_seconds", d[phaseCommit].Seconds(),
		"writes", info.items, "idempotency_entries_merged", info.idemMerged, "customer_chunk_merged", info.custMerged,
		"slow_commits_not_logged", t.suppressed)
	t.lastLog, t.suppressed = now, 0
}

// CommitPhaseSeconds returns the writer's time in each phase of its group
// commits since Open (lock, apply, merge, commit), in seconds.
func (db *DB) CommitPhaseSeconds() map[string]float64 {
	out := make(map[string]float64, commitPhases)
	for i, name := range commitPhaseNames {
		out[name] = time.Duration(db.writer.times.total[i].Load()).Seconds()
	}
	return out
}
