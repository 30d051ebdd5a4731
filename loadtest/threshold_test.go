package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseThreshold(t *testing.T) {
	for _, tc := range []struct {
		text string
		want Threshold
	}{
		{"checkout:p99<250ms", Threshold{Target: "checkout", Metric: "p99", Op: "<", Value: 250}},
		{"errors<0.1%", Threshold{Metric: "errors", Op: "<", Value: 0.001}},
		{"errors<=0.02", Threshold{Metric: "errors", Op: "<=", Value: 0.02}},
		{"payment.create:rate>=90", Threshold{Target: "payment.create", Metric: "rate", Op: ">=", Value: 90}},
		{"p99.9<1s", Threshold{Metric: "p999", Op: "<", Value: 1000}},
		{"mean<500us", Threshold{Metric: "mean", Op: "<", Value: 0.5}},
	} {
		t.Run(tc.text, func(t *testing.T) {
			got, err := ParseThreshold(tc.text)
			if err != nil {
				t.Fatal(err)
			}
			tc.want.Text = tc.text
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseThreshold(%q) mismatch (-want +got):\n%s", tc.text, diff)
			}
		})
	}
	for _, bad := range []string{"p99", "p98<1s", "p99<fast", "errors<x%", "<1s"} {
		if _, err := ParseThreshold(bad); err == nil {
			t.Errorf("ParseThreshold(%q): got nil error, want one", bad)
		}
	}
}

func TestParseSLODefaults(t *testing.T) {
	got, err := ParseSLO("p99<50ms")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Value != 50 || got[1].Metric != "errors" || got[1].Value != 0.01 {
		t.Errorf("ParseSLO(p99<50ms) = %+v, want p99<50ms and the default errors<1%%", got)
	}
}

// runMain runs Main and returns its exit code, stdout and stderr.
func runMain(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func okServer(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/fail" {
			w.WriteHeader(http.StatusInternalServerError)
			w.Write([]byte(`{"error":{"type":"api_error","code":"internal","message":"boom"}}`))
			return
		}
		w.Write([]byte("ok"))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestMainThresholds(t *testing.T) {
	srv := okServer(t)
	base := []string{"--url", srv.URL, "--scenario", "get", "--rate", "50", "--duration", "1s", "--quiet"}
	for _, tc := range []struct {
		name string
		args []string
		want int
	}{
		{"Met", []string{"--threshold", "p99<5s", "--threshold", "get:errors<1%", "--threshold", "get:rate>=40"}, ExitOK},
		{"LatencyBreached", []string{"--threshold", "get:p99<1us"}, ExitThresholds},
		{"RateBreached", []string{"--threshold", "rate>1000"}, ExitThresholds},
		{"ErrorsBreached", []string{"--path", "/fail", "--threshold", "errors<1%"}, ExitThresholds},
		{"UnknownTarget", []string{"--threshold", "checkout:p99<1s"}, ExitUsage},
		{"BadFlag", []string{"--rate", "-1"}, ExitUsage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runMain(t, append(base, tc.args...)...)
			if code != tc.want {
				t.Errorf("exit code = %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.want, stdout, stderr)
			}
		})
	}
}

// TestMainDropsFail: hitting --max-inflight drops arrivals, warns loudly and
// fails the run even without thresholds.
func TestMainDropsFail(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(300 * time.Millisecond)
	}))
	defer srv.Close()
	out := filepath.Join(t.TempDir(), "result.json")
	code, _, stderr := runMain(t, "--url", srv.URL, "--scenario", "get", "--rate", "50", "--duration", "1s",
		"--max-inflight", "2", "--quiet", "--out", out)
	if code != ExitThresholds {
		t.Errorf("exit code = %d, want %d", code, ExitThresholds)
	}
	if !strings.Contains(stderr, "WARNING") || !strings.Contains(stderr, "dropped") {
		t.Errorf("stderr = %q, want a WARNING about dropped iterations", stderr)
	}
	res, err := ReadResult(out)
	if err != nil {
		t.Fatal(err)
	}
	if res.Summary.Dropped == 0 || res.Summary.Dropped+res.Summary.Iterations != 50 {
		t.Errorf("dropped = %d, iterations = %d, want drops and a sum of 50", res.Summary.Dropped, res.Summary.Iterations)
	}
}

// TestMainResultFile checks the JSON result of a short run round-trips.
func TestMainResultFile(t *testing.T) {
	srv := okServer(t)
	out := filepath.Join(t.TempDir(), "result.json")
	code, stdout, _ := runMain(t, "--url", srv.URL, "--scenario", "get", "--rate", "20", "--duration", "1s", "--quiet", "--out", out)
	if code != ExitOK {
		t.Fatalf("exit code = %d, want 0\n%s", code, stdout)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var res Result
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	if res.Types["get"] == nil || res.Types["get"].Requests != 20 || res.StatusCodes["200"] != 20 {
		t.Errorf("get requests = %+v, status codes = %v, want 20 requests, all 200", res.Types["get"], res.StatusCodes)
	}
	if !strings.Contains(stdout, "achieved") {
		t.Errorf("stdout has no summary:\n%s", stdout)
	}
}
