package loadtest

import (
	"flag"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the generated fixtures under testdata/")

func TestCompareFixtures(t *testing.T) {
	base, err := ReadResult("testdata/compare_base.json")
	if err != nil {
		t.Fatal(err)
	}
	cur, err := ReadResult("testdata/compare_new.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tolerance float64
		want      []string // subject/metric of every regression
	}{
		{0.10, []string{"customer.create/rate", "customer.create/errors", "payment.capture/requests", "payment.create/p99"}},
		{0.25, []string{"customer.create/errors", "payment.capture/requests"}},
	} {
		var got []string
		for _, d := range Compare(base, cur, tc.tolerance) {
			if d.Regression {
				got = append(got, d.Subject+"/"+d.Metric)
			}
		}
		if strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("tolerance %.2f: regressions = %v, want %v", tc.tolerance, got, tc.want)
		}
	}
	for _, d := range Compare(base, cur, 0.10) {
		if d.Subject == "payment.create" && d.Metric == "p99" && math.Abs(d.Change-0.20) > 1e-9 {
			t.Errorf("payment.create p99 change = %v, want +0.20", d.Change)
		}
		if d.Subject == "all" && d.Metric == "rate" && math.Abs(d.Change+0.05) > 1e-9 {
			t.Errorf("overall rate change = %v, want -0.05", d.Change)
		}
	}
}

func TestMainCompareExitCodes(t *testing.T) {
	base, cur := "testdata/compare_base.json", "testdata/compare_new.json"
	for _, tc := range []struct {
		name string
		args []string
		want int
	}{
		{"Regression", []string{base, cur}, ExitRegression},
		{"ToleranceAfterFiles", []string{base, cur, "--tolerance", "25%"}, ExitRegression},
		{"Same", []string{base, base, "--tolerance", "0%"}, ExitOK},
		{"MissingFile", []string{base, "testdata/nope.json"}, ExitUsage},
		{"OneFile", []string{base}, ExitUsage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runMain(t, append([]string{"compare"}, tc.args...)...)
			if code != tc.want {
				t.Errorf("exit code = %d, want %d\n%s%s", code, tc.want, stdout, stderr)
			}
		})
	}
}

// mergeFixture builds a result whose "get" type and scenario recorded the
// given latencies in milliseconds, with errors failed requests.
func mergeFixture(fromMs, toMs int, errors int64) *Result {
	h := newHistogram()
	for ms := fromMs; ms <= toMs; ms++ {
		_ = h.RecordValue(micros(time.Duration(ms) * time.Millisecond))
	}
	n := h.TotalCount()
	enc := encodeHistogram(h)
	return &Result{
		Version: ResultVersion,
		Summary: Summary{Requests: n, Errors: errors, Iterations: n, AchievedRate: 10, ElapsedSeconds: 10},
		Types: map[string]*TypeResult{"get": {
			Requests: n, Errors: errors, Rate: 10, Corrected: summarize(h), Service: summarize(h),
			Status: map[string]int64{"200": n - errors, "500": errors},
			HDR:    HDRPair{Corrected: enc, Service: enc},
		}},
		Scenarios: map[string]*ScenarioResult{"get": {Iterations: n, Rate: 10, Corrected: summarize(h), HDR: enc}},
		Windows:   []Window{{Second: 0, Requests: n, Corrected: summarize(h)}},
	}
}

// TestMergeFixtures merges two checked-in results (1..100ms and
// 101..200ms) and checks the exact percentiles of the union.
func TestMergeFixtures(t *testing.T) {
	a, b := filepath.Join("testdata", "merge_a.json"), filepath.Join("testdata", "merge_b.json")
	if *update {
		if err := WriteResult(a, mergeFixture(1, 100, 1)); err != nil {
			t.Fatal(err)
		}
		if err := WriteResult(b, mergeFixture(101, 200, 3)); err != nil {
			t.Fatal(err)
		}
	}
	ra, err := ReadResult(a)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := ReadResult(b)
	if err != nil {
		t.Fatal(err)
	}
	m, err := MergeResults(ra, rb)
	if err != nil {
		t.Fatal(err)
	}
	g := m.Types["get"]
	checks := []struct {
		name      string
		got, want float64
	}{
		{"requests", float64(g.Requests), 200},
		{"error rate", g.ErrorRate, 0.02},
		{"rate", g.Rate, 20},
		{"p50", g.Corrected.P50, 100},
		{"p90", g.Corrected.P90, 180},
		{"p99", g.Corrected.P99, 198},
		{"max", g.Corrected.Max, 200},
		{"min", g.Corrected.Min, 1},
		{"mean", g.Corrected.Mean, 100.5},
		{"all p99", m.Latency.Corrected.P99, 198},
		{"scenario p50", m.Scenarios["get"].Corrected.P50, 100},
		{"status 500", float64(g.Status["500"]), 4},
		{"window requests", float64(m.Windows[0].Requests), 200},
	}
	for _, c := range checks {
		// HDR keeps 3 significant digits: values are exact to 0.1%.
		if math.Abs(c.got-c.want) > 0.001*c.want {
			t.Errorf("%s = %v, want %v (±0.1%%)", c.name, c.got, c.want)
		}
	}
}

func TestMainTable(t *testing.T) {
	code, stdout, _ := runMain(t, "table", "--header", "testdata/compare_base.json")
	if code != ExitOK {
		t.Fatalf("exit code = %d", code)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[2], "| compare_base.json | constant |") || !strings.Contains(lines[2], "| 30.00 |") {
		t.Errorf("table = %q, want header, rule and a row with p99 30.00", stdout)
	}
}
