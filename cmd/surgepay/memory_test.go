package main

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime/metrics"
	"testing"
	"time"
)

// TestServeAppliesMemorySettings: `surgepay serve` runs under the
// configured memory limit and collector target, and puts the previous
// ones back when it returns.
func TestServeAppliesMemorySettings(t *testing.T) {
	isolateEnv(t)
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	percent0, limit0 := gcSettings()
	dir := t.TempDir()
	listen := freeAddr(t)
	path := writeFile(t, "surgepay.toml", fmt.Sprintf(`listen = %q
admin_listen = "off"
data_dir = %q
log_level = "warn"
gc_percent = 150
memory_limit_mib = 96
`, listen, filepath.Join(dir, "data")))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	var stdout, stderr syncBuffer
	go func() {
		code := run(ctx, []string{"serve", "--config", path}, &stdout, &stderr)
		done <- fmt.Errorf("serve exited %d", code)
	}()
	if err := waitHealthy("http://"+listen, startTimeout, done); err != nil {
		t.Fatalf("serve: %v\n%s", err, stderr.String())
	}
	if percent, limit := gcSettings(); percent != 150 || limit != 96<<20 {
		t.Errorf("while serving: gc percent %d, memory limit %d; want 150, %d", percent, limit, 96<<20)
	}
	cancel()
	select {
	case <-done: //nolint:errcheck // it always holds the exit status; this test checks that serve returned and what it restored
	case <-time.After(stopTimeout):
		t.Fatalf("serve did not return within %s of its context ending", stopTimeout)
	}
	if p, l := gcSettings(); p != percent0 || l != limit0 {
		t.Errorf("after serve: gc percent %d, memory limit %d; want the previous %d, %d", p, l, percent0, limit0)
	}
}

// gcSettings reads the collector's target and the memory limit in force,
// without changing them.
func gcSettings() (percent, limit int64) {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}, {Name: "/gc/gomemlimit:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64()), int64(s[1].Value.Uint64())
}
