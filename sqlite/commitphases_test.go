package sqlite

import (
	"bytes"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
)

// TestCommitTimerLog: a commit over the threshold is logged with its
// phases; the next slow ones within slowCommitLogEvery are only counted,
// and the count goes out with the next line; fast ones are neither.
// Every slow one, logged or not, calls OnSlowCommit.
func TestCommitTimerLog(t *testing.T) {
	var buf bytes.Buffer
	slow := 0
	tm := &commitTimer{log: slog.New(slog.NewTextHandler(&buf, nil)), slow: 100 * time.Millisecond, onSlow: func() { slow++ }}
	phases := func(commit time.Duration) [commitPhases]time.Duration {
		return [commitPhases]time.Duration{time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond, commit}
	}
	cpu := [commitPhases]time.Duration{0, time.Millisecond, time.Millisecond, 5 * time.Millisecond}
	tm.observe(phases(50*time.Millisecond), cpu, commitInfo{items: 10})
	if buf.Len() != 0 {
		t.Fatalf("a 56 ms commit was logged: %s", buf.String())
	}
	tm.observe(phases(300*time.Millisecond), cpu, commitInfo{items: 200, idemMerged: 400, custMerged: true})
	line := buf.String()
	for _, want := range []string{"slow group commit", "seconds=0.306", "commit_seconds=0.3", "apply_seconds=0.002",
		"apply_cpu_seconds=0.001", "commit_cpu_seconds=0.005", "writes=200", "idempotency_entries_merged=400", "customer_merge_step=true", "slow_commits_not_logged=0"} {
		if !strings.Contains(line, want) {
			t.Errorf("log line lacks %q: %s", want, line)
		}
	}
	buf.Reset()
	tm.observe(phases(200*time.Millisecond), cpu, commitInfo{})
	tm.observe(phases(200*time.Millisecond), cpu, commitInfo{})
	if buf.Len() != 0 {
		t.Fatalf("slow commits within %v of the last line were logged: %s", slowCommitLogEvery, buf.String())
	}
	tm.lastLog = tm.lastLog.Add(-slowCommitLogEvery)
	moved := cpu
	moved[phaseMerge] = -1 // the writer changed thread in it: not measured
	tm.observe(phases(200*time.Millisecond), moved, commitInfo{})
	if !strings.Contains(buf.String(), "slow_commits_not_logged=2") {
		t.Errorf("the next line does not count the 2 not logged: %s", buf.String())
	}
	if !strings.Contains(buf.String(), "merge_cpu_seconds=unknown") {
		t.Errorf("a phase not measured is not logged as unknown: %s", buf.String())
	}
	if slow != 4 {
		t.Errorf("OnSlowCommit called %d times, want 4 (the slow commits, logged or not)", slow)
	}
	if got := time.Duration(tm.total[phaseCommit].Load()); got != 950*time.Millisecond {
		t.Errorf("commit phase total %v, want 950ms", got)
	}
	if got := time.Duration(tm.cpu[phaseMerge].Load()); got != 4*time.Millisecond {
		t.Errorf("merge phase CPU %v, want 4ms (the phase not measured adds nothing)", got)
	}
	if got := time.Duration(tm.cpu[phaseCommit].Load()); got != 25*time.Millisecond {
		t.Errorf("commit phase CPU %v, want 25ms", got)
	}
}

// TestCommitPhaseSeconds: a real commit adds to every phase's wall time,
// and commits' statements to the writer's CPU time (measured in a phase
// the writer ran on one thread throughout: of 20 commits, some).
func TestCommitPhaseSeconds(t *testing.T) {
	db, err := Open(t.Context(), Config{Path: filepath.Join(t.TempDir(), "surgepay.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	before, beforeCPU := db.CommitPhaseSeconds()
	for range 20 {
		m := &surgepay.Merchant{ID: surgepay.NewID("mer"), Name: "m", Created: time.Now().UTC()}
		if err := db.Apply(t.Context(), &surgepay.Write{Merchant: m}); err != nil {
			t.Fatal(err)
		}
	}
	after, afterCPU := db.CommitPhaseSeconds()
	for _, phase := range commitPhaseNames {
		if after[phase] <= before[phase] {
			t.Errorf("phase %s: %v then %v after a commit", phase, before[phase], after[phase])
		}
	}
	if _, cpu := threadCPU(); cpu >= 0 && afterCPU["apply"] <= beforeCPU["apply"] {
		t.Errorf("apply CPU: %v then %v after a commit", beforeCPU["apply"], afterCPU["apply"])
	}
}
