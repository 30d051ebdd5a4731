package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/surgepay/surgepay/admin"
	"github.com/surgepay/surgepay/telemetry"
	"github.com/surgepay/surgepay/telemetry/telemetrytest"
)

// traffic drives every kind of request the dashboards chart: payments
// (approved, declined, manual capture, refund), an error, a replay.
func traffic(t *testing.T, e *telemetrytest.Env) {
	t.Helper()
	cus := idOf(t, e.Do(t, "POST", "/v1/customers", `{"name":"Ada"}`))
	pm := idOf(t, e.Do(t, "POST", "/v1/payment_methods", `{"customer":"`+cus+`","card":{"number":"4242424242424242","exp_month":12,"exp_year":2040}}`))
	bad := idOf(t, e.Do(t, "POST", "/v1/payment_methods", `{"customer":"`+cus+`","card":{"number":"4000000000009995","exp_month":12,"exp_year":2040}}`))
	for i := 0; i < 3; i++ {
		e.Do(t, "POST", "/v1/payments", `{"amount":1000,"currency":"usd","payment_method":"`+pm+`"}`)
		e.Do(t, "POST", "/v1/payments", `{"amount":1000,"currency":"usd","payment_method":"`+bad+`"}`)
		p := idOf(t, e.Do(t, "POST", "/v1/payments", `{"amount":1000,"currency":"usd","payment_method":"`+pm+`","capture_method":"manual"}`))
		e.Do(t, "POST", "/v1/payments/"+p+"/capture", ``)
		e.Do(t, "POST", "/v1/payments/"+p+"/refunds", `{"amount":100}`)
		e.Do(t, "GET", "/v1/payments/"+p, ``)
		e.Do(t, "POST", "/v1/customers", `{"nmae":"typo"}`) //nolint:misspell // a misspelt field name is the input under test
	}
	e.Tel.ObserveBatch(3, 0) // the OnBatch hook, until the stores call it
}

func idOf(t *testing.T, r *telemetrytest.Response) string {
	t.Helper()
	var v struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(r.Body), &v); err != nil || v.ID == "" {
		t.Fatalf("status %d, no id in %s", r.Status, r.Body)
	}
	return v.ID
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func TestAdminTelemetryEndpoints(t *testing.T) {
	e := telemetrytest.Start(t, telemetrytest.Options{Telemetry: telemetry.DefaultConfig()})
	traffic(t, e)
	cfg := testConfig(t, t.TempDir(), map[string]string{"SURGEPAY_POSTGRES_DSN": "postgres://u:hunter2secret@db/x"})
	var ready atomic.Bool
	admin := httptest.NewServer(admin.Handler(admin.Config{Ready: ready.Load, Telemetry: e.Tel,
		Config: func() any { return cfg.Redacted() }, Auth: testAdminAuth}))
	defer admin.Close()

	if code, _ := get(t, admin.URL+"/readyz"); code != 503 {
		t.Errorf("/readyz before ready: got %d, want 503", code)
	}
	ready.Store(true)
	if code, _ := get(t, admin.URL+"/readyz"); code != 200 {
		t.Errorf("/readyz when ready: got %d, want 200", code)
	}
	code, body := getAuth(t, admin.URL+"/metrics", testAdminToken)
	for _, want := range []string{`surgepay_http_requests_total{method="POST",route="POST /v1/payments",status="200"}`,
		`surgepay_payments_total{decline_code="insufficient_funds",operation="authorize",outcome="failed",path="unknown"}`,
		`surgepay_provider_calls_total{op="authorize",outcome="approved"}`, "go_goroutines", "go_sched_latencies_seconds_bucket", "go_sched_pauses_total_gc_seconds_bucket", "process_cpu_seconds_total"} {
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("/metrics (status %d) lacks %s", code, want)
		}
	}
	code, body = getAuth(t, admin.URL+"/config", testAdminToken)
	if code != 200 || strings.Contains(body, "hunter2secret") || !strings.Contains(body, "admin_listen") {
		t.Errorf("/config: status %d, want 200 with the configuration and no secret:\n%s", code, body)
	}
	if code, body = getAuth(t, admin.URL+"/dashboard", testAdminToken); code != 200 || !strings.Contains(body, "uPlot") {
		t.Errorf("/dashboard: status %d", code)
	}
	if code, _ = getAuth(t, admin.URL+"/dashboard/assets/uPlot.iife.min.js", testAdminToken); code != 200 {
		t.Errorf("/dashboard/assets/uPlot.iife.min.js: status %d", code)
	}
	if code, body = getAuth(t, admin.URL+"/dashboard/data", testAdminToken); code != 200 || !strings.Contains(body, `"p99_ms"`) {
		t.Errorf("/dashboard/data: status %d: %s", code, body)
	}
}

// TestServeRecordsHTTPTelemetry checks the wiring of the real `serve`: its
// API hands every request to the telemetry, so the admin listener's
// /metrics counts it. (Until session 3, serve built its API without the
// telemetry: no request metrics or spans, and access lines whatever
// telemetry.access_log said.)
func TestServeRecordsHTTPTelemetry(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir, nil)
	s := startServe(t, cfg)
	c := newClient(s.url, readDevKey(t, dir))
	c.must(t, "POST", "/v1/customers", `{"name":"Ada"}`, nil, http.StatusOK, nil)
	c.must(t, "GET", "/v1/customers", "", nil, http.StatusOK, nil)
	code, body := getAuth(t, "http://"+cfg.AdminListen+"/metrics", readAdminToken(t, dir))
	for _, want := range []string{`surgepay_http_requests_total{method="POST",route="POST /v1/customers",status="200"} 1`,
		`surgepay_http_requests_total{method="GET",route="GET /v1/customers",status="200"} 1`,
		`surgepay_http_request_duration_seconds_count{method="POST",route="POST /v1/customers"} 1`} {
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("serve's /metrics (status %d) lacks %s", code, want)
		}
	}
}

// TestServeFlightRecorder: with [flight_recorder] on, the admin listener
// serves the execution trace's window, and no card number a request
// carried is in it; off, the route says how to turn it on.
func TestServeFlightRecorder(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir, nil)
	cfg.FlightRecorder.Enabled = true
	s := startServe(t, cfg)
	c := newClient(s.url, readDevKey(t, dir))
	var cus, pm object
	c.must(t, "POST", "/v1/customers", "", map[string]any{"name": "Ada"}, http.StatusOK, &cus)
	c.must(t, "POST", "/v1/payment_methods", "", map[string]any{"customer": cus.ID,
		"card": map[string]any{"number": "4242424242424242", "exp_month": 12, "exp_year": 2040, "cvc": "123"}}, http.StatusOK, &pm)
	for i := range 3 {
		c.must(t, "POST", "/v1/payments", "flight-"+strconv.Itoa(i), map[string]any{"amount": 1000, "currency": "usd",
			"customer": cus.ID, "payment_method": pm.ID}, http.StatusOK, nil)
	}
	code, body := getAuth(t, "http://"+cfg.AdminListen+"/debug/flight-recorder", readAdminToken(t, dir))
	if code != 200 || !strings.HasPrefix(body, "go 1.") {
		t.Fatalf("/debug/flight-recorder: status %d, %d bytes beginning %q; want an execution trace", code, len(body), body[:min(len(body), 16)])
	}
	if strings.Contains(body, "4242424242424242") || strings.Contains(body, "424242424242") {
		t.Error("the execution trace holds the card number")
	}
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}

	dir = t.TempDir()
	s = startServe(t, testConfig(t, dir, nil))
	code, body = getAuth(t, "http://"+s.admin+"/debug/flight-recorder", readAdminToken(t, dir))
	if code != 404 || !strings.Contains(body, "[flight_recorder] enabled = true") {
		t.Errorf("/debug/flight-recorder, recorder off: status %d %q, want 404 naming the setting", code, body)
	}
}

func TestGrafanaDashboardMetricsExist(t *testing.T) {
	b, err := os.ReadFile("../../etc/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("etc/grafana-dashboard.json: %v", err)
	}
	names := map[string]string{} // metric → panel
	metric := regexp.MustCompile(`\b(?:surgepay|go|process)_[a-z0-9_]+`)
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, n := range metric.FindAllString(tg.Expr, -1) {
				names[n] = p.Title
			}
		}
	}
	if len(names) < 20 {
		t.Fatalf("found %d metric names in the dashboard, want at least 20", len(names))
	}
	e := telemetrytest.Start(t, telemetrytest.Options{Telemetry: telemetry.DefaultConfig()})
	traffic(t, e)
	// The staged-backlog gauges appear once the first count has ended,
	// in the background of the first scrape: scrape until every name is
	// there, for a few seconds.
	var missing []string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		exposed := map[string]bool{}
		for _, line := range strings.Split(telemetrytest.Get(t, e.Admin+"/metrics"), "\n") {
			if n := metric.FindString(line); n != "" && !strings.HasPrefix(line, "#") {
				exposed[n] = true
			}
		}
		missing = missing[:0]
		for n, panel := range names {
			if !exposed[n] {
				missing = append(missing, n+" (panel "+panel+")")
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("the Grafana dashboard queries metrics that /metrics does not expose:\n%s", strings.Join(missing, "\n"))
	}
}

func TestTraceCommand(t *testing.T) {
	e := telemetrytest.Start(t, telemetrytest.Options{Telemetry: func() telemetry.Config {
		c := telemetry.DefaultConfig()
		c.Tracing.Enabled = true
		return c
	}()})
	for _, tc := range []struct {
		scenario string
		routes   []string
	}{
		{"checkout", []string{"POST /v1/customers", "POST /v1/payment_methods", "POST /v1/payments"}},
		{"returning", []string{"POST /v1/payments/{id}/capture"}},
		{"refund", []string{"POST /v1/payments/{id}/refunds"}},
	} {
		t.Run(tc.scenario, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := cmdTrace(context.Background(), []string{"--scenario", tc.scenario, "--url", e.URL, "--api-key", e.Key},
				&out, &errb)
			if code != 0 {
				t.Fatalf("exit %d: %s\n%s", code, errb.String(), out.String())
			}
			s := out.String()
			for _, want := range append(tc.routes, "sql", "provider_ms", "SQL statements") {
				if !strings.Contains(s, want) {
					t.Errorf("output lacks %q:\n%s", want, s)
				}
			}
			if strings.Contains(s, "debug = true") {
				t.Errorf("the server is in debug mode, but trace says it is not:\n%s", s)
			}
			if !regexp.MustCompile(`[0-9a-f]{32}`).MatchString(s) {
				t.Errorf("output lacks trace IDs:\n%s", s)
			}
			t.Logf("\n%s", s)
		})
	}
	var errb bytes.Buffer
	if code := cmdTrace(context.Background(), []string{"--scenario", "nope", "--api-key", "k"}, io.Discard, &errb); code != 2 {
		t.Errorf("unknown scenario: exit %d, want 2", code)
	}
}
