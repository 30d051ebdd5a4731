package statelog

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// A thousand failures make one warning; the recovery one line with their
// count; a second outage a second warning.
func TestOneLinePerChangeOfState(t *testing.T) {
	var buf bytes.Buffer
	tr := New(slog.New(slog.NewTextHandler(&buf, nil)), "stage")
	tr.OK()
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 250 {
				tr.Fail(errors.New("nats: timeout"))
			}
		}()
	}
	wg.Wait()
	if !tr.Failing() {
		t.Error("Failing() = false after failures")
	}
	tr.OK()
	tr.OK()
	tr.Fail(errors.New("again"))
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3 (down, up, down):\n%s", len(lines), buf.String())
	}
	for i, want := range []string{"stage unavailable", "stage available again", "stage unavailable"} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("line %d = %q, want %q", i, lines[i], want)
		}
	}
	if !strings.Contains(lines[1], "failed_calls=1000") {
		t.Errorf("recovery line %q does not count the 1000 failures", lines[1])
	}
}
