package loadtest

import (
	"math"
	"testing"
)

func TestTrendSlopes(t *testing.T) {
	var windows []Window
	for s := range 180 {
		minute := float64(s) / 60
		windows = append(windows, Window{
			Second: s, Requests: 10,
			Corrected: LatencySummary{P99: 20 + 3*minute},
			Server:    &ResourceSample{Second: s, RSSBytes: int64(1e6 + 2e5*minute)},
		})
	}
	got := computeTrend(windows)
	if math.Abs(got.P99MsPerMinute-3) > 1e-9 || math.Abs(got.ServerRSSBytesPerMinute-2e5) > 1 {
		t.Errorf("trend = %+v, want p99 3 ms/min and server RSS 200000 B/min", got)
	}
	if got := computeTrend(windows[:TrendWindowCountMin-1]); got != (Trend{}) {
		t.Errorf("short-run trend = %+v, want zero", got)
	}
}

func TestParseProcStat(t *testing.T) {
	line := "1234 (my (odd) cmd) S 1 1234 1234 0 -1 4194560 500 0 0 0 250 150 0 0 20 0 8 0 100 123456789 2560 18446744073709551615"
	cpu, rss, err := parseProcStat(line)
	if err != nil {
		t.Fatal(err)
	}
	if cpu != 4 || rss <= 0 || rss%2560 != 0 {
		t.Errorf("cpu = %v s, rss = %d B, want 4 s and 2560 pages", cpu, rss)
	}
}
