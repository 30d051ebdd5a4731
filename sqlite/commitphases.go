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
//
// Each phase is also timed in the CPU of the writer's thread, when the
// writer ran on one thread throughout the phase (threadCPU): a phase whose
// wall time is much longer than its CPU time waited, on the disk (commit:
// the WAL's sync) or for a core, behind the goroutines of the requests
// (apply and merge read few pages that are not in the writer's cache). A
// phase in which the goroutine moved to another thread (it lost its
// processor in a system call, or blocked) has no CPU time: the log line
// says "unknown", the counters add nothing.
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
	total [commitPhases]atomic.Int64 // wall nanoseconds
	cpu   [commitPhases]atomic.Int64 // the writer thread's CPU nanoseconds

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

// observe adds one commit's phase durations, wall (d[phase]) and CPU
// (cpu[phase], negative if unknown).
func (t *commitTimer) observe(d, cpu [commitPhases]time.Duration, info commitInfo) {
	var sum time.Duration
	for i, v := range d {
		t.total[i].Add(int64(v))
		t.cpu[i].Add(int64(max(cpu[i], 0)))
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
		"apply_cpu_seconds", cpuSeconds(cpu[phaseApply]), "merge_cpu_seconds", cpuSeconds(cpu[phaseMerge]),
		"commit_cpu_seconds", cpuSeconds(cpu[phaseCommit]),
		"writes", info.items, "writes_left_for_next_batch", info.later, "idempotency_entries_merged", info.idemMerged, "customer_merge_step", info.custMerged,
		"slow_commits_not_logged", t.suppressed)
	t.lastLog, t.suppressed = now, 0
}

// cpuSeconds is a phase's CPU time for the log: seconds, or "unknown".
func cpuSeconds(d time.Duration) any {
	if d < 0 {
		return "unknown"
	}
	return d.Seconds()
}

// CommitPhaseSeconds returns the writer's time in each phase of its group
// commits since Open (lock, apply, merge, commit), in seconds, wall and
// CPU (of the writer's thread; 0 where unknown).
func (db *DB) CommitPhaseSeconds() (wall, cpu map[string]float64) {
	wall, cpu = make(map[string]float64, commitPhases), make(map[string]float64, commitPhases)
	for i, name := range commitPhaseNames {
		wall[name] = time.Duration(db.writer.times.total[i].Load()).Seconds()
		cpu[name] = time.Duration(db.writer.times.cpu[i].Load()).Seconds()
	}
	return wall, cpu
}
