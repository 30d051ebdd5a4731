package telemetry

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// answerError is a processor's HTTP answer as a connector reports it
// (stripe.CallError has the same methods).
type answerError struct {
	status        int
	code, message string
}

func (e *answerError) Error() string            { return fmt.Sprintf("%d %s: %s", e.status, e.code, e.message) }
func (e *answerError) ProcessorStatus() int     { return e.status }
func (e *answerError) ProcessorCode() string    { return e.code }
func (e *answerError) ProcessorMessage() string { return e.message }

// TestProcessorStateLoggedOncePerChange: a revoked key and a refused
// connection used to show only as the same 503 with no processor, status
// or code in the log. Each change of a processor's state is now logged
// once, with its status, code and message, and shown on /metrics and the
// dashboard; repeated failures of the same kind log nothing more.
func TestProcessorStateLoggedOncePerChange(t *testing.T) {
	tel, err := New(DefaultConfig(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	pm, err := tel.ProcessorMetrics([]string{"stripe_eu", "default"}, slog.New(slog.NewJSONHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	revoked := fmt.Errorf("authorize: %w", &answerError{401, "api_key_expired", "Expired API Key provided"})
	refused := fmt.Errorf("dial: %w", syscall.ECONNREFUSED)
	for range 3 {
		pm.Result("stripe_eu", "authorize", nil)
	}
	for range 5 {
		pm.Result("stripe_eu", "authorize", revoked)
	}
	state := func(st string) float64 { return gaugeValue(t, pm.state.WithLabelValues("stripe_eu", st)) }
	if got := state(ProcessorFailing); got != 1 {
		t.Errorf("got failing gauge %v, want 1", got)
	}
	if got := gaugeValue(t, pm.lastError.WithLabelValues("stripe_eu", "401", "api_key_expired")); got == 0 {
		t.Errorf("got last_error_info{401,api_key_expired} %v, want the time of the error", got)
	}
	pm.Result("stripe_eu", "authorize", refused)
	pm.Result("stripe_eu", "authorize", refused)
	if n := collectedSeries(pm.lastError); n != 1 {
		t.Errorf("got %d last_error_info series, want 1 per processor", n)
	}
	pm.Breaker("stripe_eu", "open")
	pm.Result("stripe_eu", "lookup", nil) // a lookup passes an open breaker: the breaker's state stands
	pm.Breaker("stripe_eu", "half-open")
	if got := state(ProcessorBreakerOpen); got != 1 {
		t.Errorf("got breaker_open gauge %v, want 1", got)
	}
	pm.Breaker("stripe_eu", "closed")
	pm.Result("stripe_eu", "authorize", nil)

	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		lines = append(lines, m)
	}
	want := []string{
		"processor failing 401 api_key_expired Expired API Key provided",
		"processor failing 0 connection_refused dial: connection refused",
		"processor breaker_open 0 connection_refused dial: connection refused",
		"processor healthy",
	}
	if len(lines) != len(want) {
		t.Fatalf("got %d log lines, want %d:\n%s", len(lines), len(want), logs.String())
	}
	for i, l := range lines {
		got := fmt.Sprint(l["msg"])
		if l["status"] != nil {
			got = fmt.Sprintf("%s %v %v %v", got, l["status"], l["code"], l["message"])
		}
		if l["processor"] != "stripe_eu" || got != want[i] {
			t.Errorf("log %d: got %q of %v, want %q of stripe_eu", i, got, l["processor"], want[i])
		}
	}
	if got := state(ProcessorHealthy); got != 1 {
		t.Errorf("got healthy gauge %v, want 1", got)
	}

	pm.Result("stripe_eu", "capture", revoked)
	rec := httptest.NewRecorder()
	tel.DashboardHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/dashboard/data", nil))
	var d struct{ Processors []ProcessorState }
	if err := json.Unmarshal(rec.Body.Bytes(), &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Processors) != 2 || d.Processors[1].Processor != "stripe_eu" || d.Processors[1].State != ProcessorFailing ||
		d.Processors[1].Status != 401 || d.Processors[1].Code != "api_key_expired" {
		t.Errorf("got dashboard processors %+v, want stripe_eu failing 401 api_key_expired beside default", d.Processors)
	}
}

// TestProcessorStateWithoutMetrics: the log of state changes does not
// depend on metrics being on.
func TestProcessorStateWithoutMetrics(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Metrics.Enabled = false
	tel, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	pm, err := tel.ProcessorMetrics([]string{"stripe_eu"}, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil || pm == nil {
		t.Fatalf("got %v, %v, want a recorder", pm, err)
	}
	pm.Call("stripe_eu", "authorize", "not_performed", 0)
	pm.Result("stripe_eu", "authorize", &answerError{403, "", "test key in live mode"})
	pm.Refused("stripe_eu", "budget")
	if !strings.Contains(logs.String(), "status=403") {
		t.Errorf("got log %q, want the 403 logged", logs.String())
	}
}

func gaugeValue(t *testing.T, g prometheus.Gauge) float64 {
	var m dto.Metric
	if err := g.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}

func collectedSeries(c prometheus.Collector) int {
	ch := make(chan prometheus.Metric, 16)
	go func() { c.Collect(ch); close(ch) }()
	n := 0
	for range ch {
		n++
	}
	return n
}
