// Package telemetrytest runs a real surgepay API (SQLite store, card
// simulator, engine, api.Server) with telemetry wired as `surgepay serve`
// wires it, for the tests of telemetry, the admin listener and `surgepay
// trace`.
package telemetrytest

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/api"
	"github.com/surgepay/surgepay/engine"
	"github.com/surgepay/surgepay/provider/sim"
	"github.com/surgepay/surgepay/sqlite"
	"github.com/surgepay/surgepay/tax"
	"github.com/surgepay/surgepay/telemetry"
	"github.com/surgepay/surgepay/vault"
)

// Options configure an Env.
type Options struct {
	Telemetry telemetry.Config
	// Provider wraps the simulator before telemetry wraps it (to inject
	// faults). Nil: the simulator as it is.
	Provider func(surgepay.Provider) surgepay.Provider
	// Cache reports cache statistics. Nil: a fixed sample.
	Cache func() []telemetry.CacheStat
	// Exporter receives the spans. Nil: Env.Spans, in memory.
	Exporter sdktrace.SpanExporter
	// LogWriter receives the logs. Nil: Env.Logs.
	LogWriter io.Writer
}

// Env is a running API with telemetry.
type Env struct {
	URL   string                      // the API
	Admin string                      // /metrics and /dashboard
	Tel   *telemetry.Telemetry        //
	Spans *tracetest.InMemoryExporter // exported spans, when tracing is on
	Logs  *SyncBuffer                 // every log line (JSON), of the API and the engine
	Key   string                      // an API key
	Store *sqlite.DB
	// Handler is the API's handler, for benchmarks without the network.
	Handler http.Handler
}

// Start runs an Env until the test ends.
func Start(t testing.TB, o Options) *Env {
	t.Helper()
	e := &Env{Logs: &SyncBuffer{}, Spans: tracetest.NewInMemoryExporter()}
	// No RedactingHandler: the tests check that nothing needs redacting.
	var lw io.Writer = e.Logs
	if o.LogWriter != nil {
		lw = o.LogWriter
	}
	log := slog.New(slog.NewJSONHandler(lw, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var exp sdktrace.SpanExporter = e.Spans
	if o.Exporter != nil {
		exp = o.Exporter
	}
	tel, err := telemetry.New(o.Telemetry, telemetry.Options{Exporter: exp})
	if err != nil {
		t.Fatal(err)
	}
	e.Tel = tel
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		tel.Shutdown(ctx)
	})
	db, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "surgepay.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	e.Store = db
	if err := tel.RegisterStore(db); err != nil {
		t.Fatal(err)
	}
	if _, ok := any(db).(surgepay.StagedStore); !ok { // the stage gauges exist all the same
		if err := tel.RegisterStage(func(context.Context) (telemetry.StageStat, error) {
			return telemetry.StageStat{}, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	cache := o.Cache
	if cache == nil {
		cache = func() []telemetry.CacheStat {
			return []telemetry.CacheStat{{Entity: "api_key", Scope: "process", Hits: 10, Misses: 1, Loads: 1}}
		}
	}
	if err := tel.RegisterCache(cache); err != nil {
		t.Fatal(err)
	}
	keys, err := vault.Generate()
	if err != nil {
		t.Fatal(err)
	}
	var prov surgepay.Provider = sim.New(sim.DefaultConfig())
	if o.Provider != nil {
		prov = o.Provider(prov)
	}
	eng, err := engine.New(engine.Config{Store: tel.WrapStore(db), Provider: tel.WrapProvider(prov), Vault: keys,
		Logger: log, Tax: func() surgepay.TaxTable { return tax.Sample() }})
	if err != nil {
		t.Fatal(err)
	}
	e.Handler = api.New(api.Config{Engine: eng, Logger: log, Debug: true, Telemetry: tel})
	srv := httptest.NewServer(e.Handler)
	t.Cleanup(srv.Close)
	e.URL = srv.URL
	admin := http.NewServeMux()
	admin.Handle("GET /metrics", tel.MetricsHandler())
	admin.Handle("GET /dashboard", tel.DashboardHandler())
	admin.Handle("GET /dashboard/", tel.DashboardHandler())
	asrv := httptest.NewServer(admin)
	t.Cleanup(asrv.Close)
	e.Admin = asrv.URL
	m, err := eng.CreateMerchant(context.Background(), "Telemetry test")
	if err != nil {
		t.Fatal(err)
	}
	if e.Key, _, err = eng.CreateAPIKey(context.Background(), m.ID); err != nil {
		t.Fatal(err)
	}
	return e
}

// Response is an API answer.
type Response struct {
	Status int
	Header http.Header
	Body   string
}

// Do sends a request with the Env's key; header holds extra headers as
// "Name: value" strings.
func (e *Env) Do(t testing.TB, method, path, body string, header ...string) *Response {
	t.Helper()
	req, err := http.NewRequest(method, e.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e.Key)
	req.Header.Set("Content-Type", "application/json")
	for _, h := range header {
		k, v, _ := strings.Cut(h, ":")
		req.Header.Set(k, strings.TrimSpace(v))
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return &Response{Status: res.StatusCode, Header: res.Header, Body: string(b)}
}

// Get returns the body of GET url.
func Get(t testing.TB, url string) string {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		t.Fatalf("GET %s: status %d: %s", url, res.StatusCode, b)
	}
	return string(b)
}

// SyncBuffer is a bytes.Buffer safe for concurrent use.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
