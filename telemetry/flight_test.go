package telemetry

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestFlightRecorder: a trigger writes the window to a file that is an
// execution trace; a second trigger within Every writes none; a trigger
// after Every writes another; beyond FilesMax the oldest go; a
// backpressure refusal triggers one and a merchant's share does not;
// after Stop nothing is written. One test: the runtime allows one
// flight recorder at a time.
func TestFlightRecorder(t *testing.T) {
	dir := t.TempDir()
	r, err := StartFlightRecorder(FlightConfig{Dir: dir, Every: time.Hour, FilesMax: 2, After: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	var mu sync.Mutex
	now := time.Date(2026, 11, 27, 16, 0, 0, 0, time.UTC)
	r.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	waitFiles := func(n int) []string {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for r.Written() < n && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		r.wg.Wait() // the pruning after the last file
		if r.Written() != n {
			t.Fatalf("%d files written, want %d", r.Written(), n)
		}
		ents, _ := os.ReadDir(dir)
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		slices.Sort(names)
		return names
	}

	r.Trigger(FlightSlowCommit)
	r.Trigger(FlightSlowCommit) // within Every: none
	names := waitFiles(1)
	if len(names) != 1 || names[0] != "surgepay-flight-20261127T160000.000Z-slow_commit.trace" {
		t.Fatalf("files %v, want one named for its time and reason", names)
	}
	b, err := os.ReadFile(filepath.Join(dir, names[0]))
	if err != nil || !bytes.HasPrefix(b, []byte("go 1.")) {
		t.Fatalf("%s: %d bytes beginning %q, want an execution trace (%v)", names[0], len(b), b[:min(len(b), 16)], err)
	}
	advance(time.Minute)
	r.Trigger(FlightShed) // still within Every
	time.Sleep(50 * time.Millisecond)
	if r.Written() != 1 {
		t.Fatalf("a trigger within Every wrote a file (%d)", r.Written())
	}

	tel, err := New(DefaultConfig(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	tel.SetFlightRecorder(r)
	advance(time.Hour)
	tel.Shed(ShedMerchantConcurrency) // one merchant at its share: no stall
	time.Sleep(50 * time.Millisecond)
	if r.Written() != 1 {
		t.Fatalf("a merchant's concurrency limit wrote a file (%d)", r.Written())
	}
	tel.Shed(ShedWritesBehind)
	if names = waitFiles(2); !strings.HasSuffix(names[1], "-shed.trace") {
		t.Fatalf("files %v, want a second for the refusal", names)
	}
	advance(time.Hour)
	r.Trigger(FlightSlowCommit)
	names = waitFiles(3)
	if len(names) != 2 || !strings.HasSuffix(names[0], "-shed.trace") || !strings.Contains(names[1], "T180100.000Z-slow_commit") {
		t.Fatalf("files %v, want the two newest (FilesMax 2)", names)
	}

	var buf bytes.Buffer
	if _, err := r.WriteTo(&buf); err != nil || !bytes.HasPrefix(buf.Bytes(), []byte("go 1.")) {
		t.Fatalf("WriteTo: %d bytes, %v; want the window", buf.Len(), err)
	}
	r.Stop()
	advance(time.Hour)
	r.Trigger(FlightSlowCommit)
	time.Sleep(50 * time.Millisecond)
	if r.Written() != 3 {
		t.Fatalf("a trigger after Stop wrote a file")
	}
	var nilRec *FlightRecorder
	nilRec.Trigger(FlightShed) // off: nothing, no panic

	// A file waits After its trigger, and Stop writes it at once.
	dir = t.TempDir()
	r, err = StartFlightRecorder(FlightConfig{Dir: dir, Window: 2 * time.Hour, After: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	r.Trigger(FlightSlowCommit)
	time.Sleep(50 * time.Millisecond)
	if r.Written() != 0 {
		t.Fatal("a file was written before After")
	}
	r.Stop()
	if ents, _ := os.ReadDir(dir); r.Written() != 1 || len(ents) != 1 {
		t.Fatalf("after Stop: %d written, %d files; want the waiting one", r.Written(), len(ents))
	}
}
