package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/api"
	"github.com/surgepay/surgepay/engine"
	"github.com/surgepay/surgepay/internal/testenv"
	"github.com/surgepay/surgepay/provider/sim"
	"github.com/surgepay/surgepay/sqlite"
	"github.com/surgepay/surgepay/tax"
	"github.com/surgepay/surgepay/vault"
)

// env is a real surgepay API over loopback HTTP on a real store.
type env struct {
	t         testing.TB
	url       string
	store     surgepay.Store
	sim       *sim.Provider
	eng       *engine.Engine
	logs      *syncBuffer
	keyA      string    // merchant A's API key
	keyB      string    // merchant B's API key
	merchants [2]string // A's and B's IDs
	http      *http.Client
	keys      *vault.Keyring
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// forEachBackend runs f against SQLite and, when configured, PostgreSQL.
// newKeyReads is the statements a request with a new Idempotency-Key
// spends reading it on store: none on SQLite, whose filter of stored keys
// answers (sqlite/idemfilter.go); one SELECT on PostgreSQL.
func newKeyReads(store surgepay.Store) int {
	if _, ok := store.(*sqlite.DB); ok {
		return 0
	}
	return 1
}

// sqlBudget is the start of a Surgepay-Sql header: "total=T select=S ".
func sqlBudget(total, selects int) string { return fmt.Sprintf("total=%d select=%d ", total, selects) }

func forEachBackend(t *testing.T, f func(t *testing.T, e *env)) {
	for _, b := range testenv.Backends(t) {
		t.Run(b.Name, func(t *testing.T) { f(t, newEnv(t, b.Open(t))) })
	}
}

func newEnv(t *testing.T, store surgepay.Store) *env {
	t.Helper()
	return newEnvTB(t, store)
}

// newFuzzEnv is an env on SQLite for a fuzz target.
func newFuzzEnv(f *testing.F) *env { return newEnvTB(f, testenv.OpenSQLite(f)) }

func newEnvTB(t testing.TB, store surgepay.Store) *env {
	t.Helper()
	return newEnvWith(t, store, nil)
}

// newEnvWith is newEnv with a hook to change the engine's configuration.
func newEnvWith(t testing.TB, store surgepay.Store, configure func(*engine.Config)) *env {
	t.Helper()
	keys, err := vault.Generate()
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	p := sim.New(sim.DefaultConfig())
	ecfg := engine.Config{Store: store, Provider: p, Vault: keys, Logger: log,
		Tax: func() surgepay.TaxTable { return tax.Sample() }}
	if configure != nil {
		configure(&ecfg)
	}
	eng, err := engine.New(ecfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.New(api.Config{Engine: eng, Logger: log, Debug: true}))
	t.Cleanup(srv.Close)
	e := &env{t: t, url: srv.URL, store: store, sim: p, eng: eng, logs: logs, http: srv.Client(), keys: keys}
	ctx := context.Background()
	for i, k := range []*string{&e.keyA, &e.keyB} {
		m, err := eng.CreateMerchant(ctx, "merchant")
		if err != nil {
			t.Fatal(err)
		}
		e.merchants[i] = m.ID
		if *k, _, err = eng.CreateAPIKey(ctx, m.ID); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// restart is e after a restart of the server: a new engine and API on the
// same store and keyring, with nothing in memory, calling provider p.
func (e *env) restart(t *testing.T, p surgepay.Provider) *env {
	t.Helper()
	log := slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	eng, err := engine.New(engine.Config{Store: e.store, Provider: p, Vault: e.keys, Logger: log,
		Tax: func() surgepay.TaxTable { return tax.Sample() }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.New(api.Config{Engine: eng, Logger: log, Debug: true}))
	t.Cleanup(srv.Close)
	next := *e
	next.t, next.url, next.eng, next.http, next.sim = t, srv.URL, eng, srv.Client(), nil
	if s, ok := p.(*sim.Provider); ok {
		next.sim = s
	}
	return &next
}

// response is an HTTP answer with its JSON decoded.
type response struct {
	Status int
	Header http.Header
	Raw    []byte
	JSON   map[string]any
}

func (r *response) str(k string) string { s, _ := r.JSON[k].(string); return s }

func (r *response) num(k string) int64 { f, _ := r.JSON[k].(float64); return int64(f) }

func (r *response) errField(k string) string {
	m, _ := r.JSON["error"].(map[string]any)
	s, _ := m[k].(string)
	return s
}

// do sends a request as the API key, with an optional Idempotency-Key.
func (e *env) do(key, method, path, body, idem string) *response {
	e.t.Helper()
	return e.doT(e.t, key, method, path, body, idem)
}

// doT is do reporting to t (a fuzz target's own T).
func (e *env) doT(t testing.TB, key, method, path, body, idem string) *response {
	t.Helper()
	h := http.Header{"Content-Type": {"application/json"}}
	if idem != "" {
		h.Set("Idempotency-Key", idem)
	}
	return e.doHeader(t, key, method, path, body, h)
}

// doHeader sends a request as the API key with exactly the headers h
// (and Authorization).
func (e *env) doHeader(t testing.TB, key, method, path, body string, h http.Header) *response {
	t.Helper()
	req, err := http.NewRequest(method, e.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = h.Clone()
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	res, err := e.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	out := &response{Status: res.StatusCode, Header: res.Header, Raw: raw}
	_ = json.Unmarshal(raw, &out.JSON)
	if res.StatusCode >= 500 && res.StatusCode != 503 {
		t.Errorf("%s %s: status %d: %s", method, path, res.StatusCode, raw)
	}
	return out
}

// must sends a request and fails the test unless the status is want.
func (e *env) must(want int, key, method, path, body string) *response {
	e.t.Helper()
	r := e.do(key, method, path, body, "")
	if r.Status != want {
		e.t.Fatalf("%s %s %s: got %d %s, want %d", method, path, body, r.Status, r.Raw, want)
	}
	return r
}

// customerWithCard creates a customer and a saved card for the key.
func (e *env) customerWithCard(key, number string) (cus, pm string) {
	e.t.Helper()
	cus = e.must(200, key, "POST", "/v1/customers", `{"name":"Ada","email":"ada@example.com"}`).str("id")
	pm = e.must(200, key, "POST", "/v1/payment_methods",
		`{"customer":"`+cus+`","card":{"number":"`+number+`","exp_month":12,"exp_year":2030,"cvc":"123"}}`).str("id")
	return cus, pm
}

func paymentBody(cus, pm string, amount int64, capture string) string {
	b, _ := json.Marshal(map[string]any{"amount": amount, "currency": "usd", "customer": cus,
		"payment_method": pm, "capture_method": capture})
	return string(b)
}

func openSQLite(t *testing.T) surgepay.Store { return testenv.OpenSQLite(t) }

// callFor returns an engine call for the merchant of an API key.
func callFor(e *env, key string) *engine.Call {
	e.t.Helper()
	k, err := e.eng.Authenticate(context.Background(), key)
	if err != nil {
		e.t.Fatal(err)
	}
	return &engine.Call{MerchantID: k.MerchantID, KeyID: k.ID}
}
