package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/surgepay/surgepay/config"
)

// gcSettings reads the collector's target and the memory limit in force,
// without changing them.
func gcSettings() (percent, limit int64) {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}, {Name: "/gc/gomemlimit:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64()), int64(s[1].Value.Uint64())
}

// TestApplyMemorySettings: serve's gc_percent and memory_limit_mib are set
// unless GOGC and GOMEMLIMIT are (the environment wins), 0 means no
// limit, and restore puts back what was in force.
func TestApplyMemorySettings(t *testing.T) {
	percent0, limit0 := gcSettings()
	for _, tc := range []struct {
		name                   string
		cfgPercent, cfgMiB     int
		env                    map[string]string
		wantPercent, wantLimit int64
		wantLog                string
	}{
		{"Config", 150, 64, nil, 150, 64 << 20, "gc_percent=150 memory_limit_mib=64"},
		{"LimitOff", 300, 0, nil, 300, math.MaxInt64, "gc_percent=300 memory_limit_mib=0"},
		{"EnvWins", 150, 64, map[string]string{"GOGC": "400", "GOMEMLIMIT": "1GiB"}, percent0, limit0,
			`gc_percent="GOGC=400" memory_limit_mib="GOMEMLIMIT=1GiB"`},
		{"GOMEMLIMITOnly", 150, 64, map[string]string{"GOMEMLIMIT": "1GiB"}, 150, limit0, `gc_percent=150 memory_limit_mib="GOMEMLIMIT=1GiB"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.GCPercent, cfg.MemoryLimitMiB = tc.cfgPercent, tc.cfgMiB
			var logs bytes.Buffer
			restore := applyMemorySettings(cfg, envOf(tc.env), slog.New(slog.NewTextHandler(&logs, nil)))
			percent, limit := gcSettings()
			restore()
			if percent != tc.wantPercent || limit != tc.wantLimit {
				t.Errorf("in force: gc percent %d, memory limit %d; want %d, %d", percent, limit, tc.wantPercent, tc.wantLimit)
			}
			if !strings.Contains(logs.String(), tc.wantLog) {
				t.Errorf("log %q, want it to say %q", logs.String(), tc.wantLog)
			}
			if p, l := gcSettings(); p != percent0 || l != limit0 {
				t.Errorf("after restore: gc percent %d, memory limit %d; want the previous %d, %d", p, l, percent0, limit0)
			}
		})
	}
}

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
	case <-done:
	case <-time.After(stopTimeout):
		t.Fatalf("serve did not return within %s of its context ending", stopTimeout)
	}
	if p, l := gcSettings(); p != percent0 || l != limit0 {
		t.Errorf("after serve: gc percent %d, memory limit %d; want the previous %d, %d", p, l, percent0, limit0)
	}
}
