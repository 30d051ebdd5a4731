package sqlite

import (
	"context"
	"log/slog"
	"runtime/pprof"
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
//
// The writer's goroutine carries pprof labels (phaseLabels): the phase
// it is in, or "between" after the COMMIT (the memory tables' bookkeeping,
// committed) and outside commitTx (groupcommit filling the next batch,
// waiting for one), so that a CPU profile of the server splits the
// writer's CPU by phase (`go tool pprof -tagfocus surgepay_writer_phase=apply`)
// and a goroutine dump shows where a stalled writer is. Its CPU time is
// not read from its thread's clock: the goroutine is not locked to a
// thread (bench/RESULTS.md, session 15), and a thread that ran other
// goroutines while the writer waited for a core counts their CPU too
// (session 16: 8 ms for 0.4 ms of the writer's own work, a phase that
// seemed to spend 0.1 s of CPU on 8 Writes).
const (
	phaseLock = iota
	phaseApply
	phaseMerge
	phaseCommit
	commitPhases
)

var commitPhaseNames = [commitPhases]string{"lock", "apply", "merge", "commit"}

// writerPhaseLabel is the pprof label of the writer's phase.
const writerPhaseLabel = "surgepay_writer_phase"

// phaseLabels are the label sets of the phases, and betweenLabels the
// writer's outside commitTx: made once, set with pprof.SetGoroutineLabels
// (a pointer stored in the goroutine).
var phaseLabels, betweenLabels = func() (ls [commitPhases]context.Context, between context.Context) {
	for i, name := range commitPhaseNames {
		ls[i] = pprof.WithLabels(context.Background(), pprof.Labels(writerPhaseLabel, name))
	}
	return ls, pprof.WithLabels(context.Background(), pprof.Labels(writerPhaseLabel, "between"))
}()

// SlowCommitDefault is the default Config.SlowCommit.
const SlowCommitDefault = 250 * time.Millisecond

// slowCommitLogEvery spaces the slow-commit log lines.
const slowCommitLogEvery = 10 * time.Second

// commitTimer sums the phases of the writer's commits and logs slow ones.
type commitTimer struct {
	total [commitPhases]atomic.Int64 // wall nanoseconds

	log        *slog.Logger // nil: no log
	slow       time.Duration
	onSlow     func()    // nil: none (Config.OnSlowCommit)
	lastLog    time.Time // writer goroutine only
	suppressed int       // slow commits not logged since lastLog
}

// commitInfo is what one commit did, for the slow-commit log.
type commitInfo struct {
	// later: the Writes of its batch the commit left to the next one, its
	// apply budget spent (Config.ApplyBudget).
	items, later, idemMerged int
	custMerged               bool
}

// observe adds one commit's phase durations.
func (t *commitTimer) observe(d [commitPhases]time.Duration, info commitInfo) {
	var sum time.Duration
	for i, v := range d {
		t.total[i].Add(int64(v))
		sum += v
	}
	if sum < t.slow || t.slow <= 0 {
		return
	}
	if t.onSlow != nil {
		t.onSlow()
	}
	if t.log == nil {
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
		"writes", info.items, "writes_left_for_next_batch", info.later, "idempotency_entries_merged", info.idemMerged, "customer_merge_step", info.custMerged,
		"slow_commits_not_logged", t.suppressed)
	t.lastLog, t.suppressed = now, 0
}

// CommitPhaseSeconds returns the writer's wall time in each phase of its
// group commits since Open (lock, apply, merge, commit), in seconds.
func (db *DB) CommitPhaseSeconds() map[string]float64 {
	wall := make(map[string]float64, commitPhases)
	for i, name := range commitPhaseNames {
		wall[name] = time.Duration(db.writer.times.total[i].Load()).Seconds()
	}
	return wall
}
