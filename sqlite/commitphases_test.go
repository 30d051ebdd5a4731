package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"log/slog"
	"path/filepath"
	"runtime/pprof"
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
	tm.observe(phases(50*time.Millisecond), commitInfo{items: 10})
	if buf.Len() != 0 {
		t.Fatalf("a 56 ms commit was logged: %s", buf.String())
	}
	tm.observe(phases(300*time.Millisecond), commitInfo{items: 200, idemMerged: 400, custMerged: true})
	line := buf.String()
	for _, want := range []string{"slow group commit", "seconds=0.306", "commit_seconds=0.3", "apply_seconds=0.002",
		"writes=200", "idempotency_entries_merged=400", "customer_merge_step=true", "slow_commits_not_logged=0"} {
		if !strings.Contains(line, want) {
			t.Errorf("log line lacks %q: %s", want, line)
		}
	}
	buf.Reset()
	tm.observe(phases(200*time.Millisecond), commitInfo{})
	tm.observe(phases(200*time.Millisecond), commitInfo{})
	if buf.Len() != 0 {
		t.Fatalf("slow commits within %v of the last line were logged: %s", slowCommitLogEvery, buf.String())
	}
	tm.lastLog = tm.lastLog.Add(-slowCommitLogEvery)
	tm.observe(phases(200*time.Millisecond), commitInfo{})
	if !strings.Contains(buf.String(), "slow_commits_not_logged=2") {
		t.Errorf("the next line does not count the 2 not logged: %s", buf.String())
	}
	if slow != 4 {
		t.Errorf("OnSlowCommit called %d times, want 4 (the slow commits, logged or not)", slow)
	}
	if got := time.Duration(tm.total[phaseCommit].Load()); got != 950*time.Millisecond {
		t.Errorf("commit phase total %v, want 950ms", got)
	}
}

// TestCommitPhaseSeconds: a real commit adds to every phase's wall time.
func TestCommitPhaseSeconds(t *testing.T) {
	db, err := Open(t.Context(), Config{Path: filepath.Join(t.TempDir(), "surgepay.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	before := db.CommitPhaseSeconds()
	m := &surgepay.Merchant{ID: surgepay.NewID("mer"), Name: "m", Created: time.Now().UTC()}
	if err := db.Apply(t.Context(), &surgepay.Write{Merchant: m}); err != nil {
		t.Fatal(err)
	}
	after := db.CommitPhaseSeconds()
	for _, phase := range commitPhaseNames {
		if after[phase] <= before[phase] {
			t.Errorf("phase %s: %v then %v after a commit", phase, before[phase], after[phase])
		}
	}
}

// TestWriterPhaseLabels: the writer's goroutine carries its phase as a
// profile label: "lock" while another connection holds the write lock
// (as surgepay settle would), "between" once its commit is done.
func TestWriterPhaseLabels(t *testing.T) {
	path := filepath.Join(t.TempDir(), "surgepay.db")
	db, err := Open(t.Context(), Config{Path: path, BusyTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	other, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	conn, err := other.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(t.Context(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	applied := make(chan error, 1)
	go func() {
		m := &surgepay.Merchant{ID: surgepay.NewID("mer"), Name: "m", Created: time.Now().UTC()}
		applied <- db.Apply(context.Background(), &surgepay.Write{Merchant: m})
	}()
	waitWriterLabel(t, "lock", "beginWrite")
	if _, err := conn.ExecContext(t.Context(), "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if err := <-applied; err != nil {
		t.Fatal(err)
	}
	waitWriterLabel(t, "between", "groupcommit")
	if n := strings.Count(goroutines(t), `"`+writerPhaseLabel+`":"lock"`); n != 0 {
		t.Errorf("%d goroutine groups still labelled lock after the commit", n)
	}
}

// goroutines is the goroutine profile, grouped by stack, with labels.
func goroutines(t *testing.T) string {
	t.Helper()
	var buf bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&buf, 1); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// waitWriterLabel waits until a goroutine labelled phase has frame in its
// stack.
func waitWriterLabel(t *testing.T, phase, frame string) {
	t.Helper()
	label := `"` + writerPhaseLabel + `":"` + phase + `"`
	var dump string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		dump = goroutines(t)
		for _, g := range strings.Split(dump, "\n\n") {
			if strings.Contains(g, label) && strings.Contains(g, frame) {
				return
			}
		}
	}
	t.Fatalf("no goroutine labelled %s in %s:\n%s", label, frame, dump)
}
