package memlimit

import (
	"bytes"
	"log/slog"
	"math"
	"runtime/metrics"
	"strings"
	"testing"
)

// gcSettings reads the collector's target and the memory limit in force,
// without changing them.
func gcSettings() (percent, limit int64) {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}, {Name: "/gc/gomemlimit:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64()), int64(s[1].Value.Uint64())
}

// TestApply: serve's gc_percent and memory_limit_mib are set
// unless GOGC and GOMEMLIMIT are (the environment wins), 0 means no
// limit, and restore puts back what was in force.
func TestApply(t *testing.T) {
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
			var logs bytes.Buffer
			restore := Apply(tc.cfgPercent, tc.cfgMiB, func(k string) string { return tc.env[k] }, slog.New(slog.NewTextHandler(&logs, nil)))
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
