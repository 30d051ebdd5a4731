package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/surgepay/surgepay/config"
	"github.com/surgepay/surgepay/internal/testenv"
	"github.com/surgepay/surgepay/sqlite"
	"github.com/surgepay/surgepay/tax"
)

// Bounds of the end-to-end tests.
const (
	startTimeout   = 30 * time.Second // until GET /healthz answers
	stopTimeout    = 40 * time.Second // serve's own shutdown bound is 30s
	requestTimeout = 15 * time.Second
)

// syncBuffer is a bytes.Buffer safe for concurrent use: serve writes to
// it while the test reads it.
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

// freeAddr returns a loopback address with a port that was free a moment
// ago.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// pgSchema returns a fresh schema name for one test and drops the schema
// at cleanup.
func pgSchema(t testing.TB, url string) string {
	t.Helper()
	var b [6]byte
	rand.Read(b[:])
	schema := "t_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Logf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
			t.Logf("drop schema %s: %v", schema, err)
		}
	})
	return schema
}

// backend is a storage configuration for the end-to-end tests.
type backend struct {
	name string
	// env returns the SURGEPAY_* variables that select the storage, for a
	// fresh, empty database.
	env func(t testing.TB) map[string]string
}

// backends returns SQLite, and PostgreSQL when SURGEPAY_TEST_POSTGRES_URL
// is set (under CI it must be).
func backends(t testing.TB) []backend {
	bs := []backend{{"sqlite", func(testing.TB) map[string]string { return nil }}}
	if url := testenv.PostgresURL(t); url != "" {
		bs = append(bs, backend{"postgres", func(t testing.TB) map[string]string {
			return map[string]string{"SURGEPAY_STORAGE": "postgres", "SURGEPAY_POSTGRES_DSN": url,
				"SURGEPAY_POSTGRES_SCHEMA": pgSchema(t, url)}
		}})
	}
	return bs
}

// testConfig is the configuration of an in-process server on a fresh
// port, with data in dir and the storage variables in env.
func testConfig(t testing.TB, dir string, env map[string]string) config.Config {
	t.Helper()
	all := map[string]string{"SURGEPAY_DATA_DIR": dir, "SURGEPAY_LISTEN": freeAddr(t),
		"SURGEPAY_ADMIN_LISTEN": freeAddr(t), "SURGEPAY_LOG_LEVEL": "warn"}
	for k, v := range env {
		all[k] = v
	}
	cfg, err := config.Load("", envOf(all))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// server is `serve` running in process.
type server struct {
	t       testing.TB
	url     string
	admin   string      // the admin listener's address, "" if off
	cfgPath string      // the configuration file, if serve read one
	dataDir string      // the data folder: dev-api-key, admin-token
	out     *syncBuffer // serve's stdout
	logs    *syncBuffer
	cancel  context.CancelFunc
	done    chan error
	err     error
	ended   bool
}

// startServe runs serve(ctx, cfg, ...) in a goroutine and waits until it
// answers GET /healthz. Cleanup stops it if the test has not.
func startServe(t testing.TB, cfg config.Config) *server {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &server{t: t, url: "http://" + cfg.Listen, admin: cfg.AdminListen, cfgPath: cfg.Path(), dataDir: cfg.DataDir, out: &syncBuffer{}, logs: &syncBuffer{}, cancel: cancel,
		done: make(chan error, 1)}
	log := slog.New(slog.NewTextHandler(s.logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	go func() { s.done <- serve(ctx, cfg, log, s.out) }()
	t.Cleanup(func() {
		if !s.ended {
			_ = s.stop() // a test that checks how serve ended stops it itself; the cleanup only ends it
		}
		if t.Failed() {
			t.Logf("serve stdout:\n%s\nserve logs:\n%s", s.out, s.logs)
		}
	})
	if cfg.TLS.Enabled() {
		s.url = "https://" + cfg.Listen
	}
	if err := waitHealthy(s.url, startTimeout, s.done); err != nil {
		s.ended = true
		cancel()
		t.Fatalf("serve on %s: %v\nlogs:\n%s", cfg.Listen, err, s.logs)
	}
	return s
}

// serveFromFile starts serve in this process, its SURGEPAY_ variables
// cleared (isolateEnv), from a configuration file it writes in a fresh
// data folder: data_dir, free loopback listen and admin_listen, log_level
// warn, then extra (more TOML). It returns the file, the configuration
// loaded from it and the server.
func serveFromFile(t *testing.T, extra string) (file string, cfg config.Config, s *server) {
	t.Helper()
	isolateEnv(t)
	dir := t.TempDir()
	file = filepath.Join(dir, "surgepay.toml")
	conf := fmt.Sprintf("data_dir = %q\nlisten = %q\nadmin_listen = %q\nlog_level = \"warn\"\n", dir, freeAddr(t), freeAddr(t)) + extra
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(file, envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	return file, cfg, startServe(t, cfg)
}

// stop cancels serve's context and returns what serve returned.
func (s *server) stop() error {
	s.t.Helper()
	if s.ended {
		return s.err
	}
	s.ended = true
	s.cancel()
	select {
	case s.err = <-s.done:
	case <-time.After(stopTimeout):
		s.err = fmt.Errorf("serve did not return within %s of its context ending", stopTimeout)
	}
	return s.err
}

// waitHealthy polls GET url/healthz until it answers 200, done reports
// that the server ended, or timeout passes.
func waitHealthy(url string, timeout time.Duration, done <-chan error) error {
	// The certificate is not what this poll checks: the TLS tests do.
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	defer hc.CloseIdleConnections()
	deadline := time.Now().Add(timeout)
	for {
		resp, err := hc.Get(url + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case err := <-done:
			return fmt.Errorf("ended before it was healthy: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("GET /healthz not 200 within %s (last error %v)", timeout, err)
		}
	}
}

// client calls the API with one key.
type client struct {
	base, key string
	hc        *http.Client
}

func newClient(base, key string) *client {
	return &client{base: base, key: key, hc: &http.Client{Timeout: requestTimeout,
		Transport: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second}}}
}

// response is one answer of the API.
type response struct {
	status int
	header http.Header
	body   []byte
}

// do sends a request; body, if not nil, is marshalled as JSON, and
// idemKey, if not empty, goes in the Idempotency-Key header.
func (c *client) do(ctx context.Context, method, path, idemKey string, body any) (*response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if idemKey != "" {
		req.Header.Set("Idempotency-Key", idemKey)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return nil, err
	}
	return &response{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

// must sends a request, checks the status and decodes the answer into out
// (if not nil).
func (c *client) must(t testing.TB, method, path, idemKey string, body any, status int, out any) *response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	r, err := c.do(ctx, method, path, idemKey, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	if r.status != status {
		t.Fatalf("%s %s: status %d, want %d; body %s", method, path, r.status, status, r.body)
	}
	if out != nil {
		if err := json.Unmarshal(r.body, out); err != nil {
			t.Fatalf("%s %s: decode %s: %v", method, path, r.body, err)
		}
	}
	return r
}

// payment is the part of the API's payment the tests look at.
type payment struct {
	ID             string            `json:"id"`
	Status         string            `json:"status"`
	Amount         int64             `json:"amount"`
	AmountTax      int64             `json:"amount_tax"`
	AmountTotal    int64             `json:"amount_total"`
	AmountCaptured int64             `json:"amount_captured"`
	AmountRefunded int64             `json:"amount_refunded"`
	Customer       string            `json:"customer"`
	DeclineCode    string            `json:"decline_code"`
	Metadata       map[string]string `json:"metadata"`
	Tax            *struct {
		RateBPS int `json:"rate_bps"`
	} `json:"tax"`
}

type object struct {
	ID string `json:"id"`
}

// isolateEnv clears the SURGEPAY_* variables of the process for one test,
// for the commands that read the real environment.
func isolateEnv(t *testing.T) {
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "SURGEPAY_") && k != "SURGEPAY_TEST_POSTGRES_URL" {
			t.Setenv(k, "")
		}
	}
}

func readDevKey(t testing.TB, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "dev-api-key"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func TestServeDevMerchant(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir, nil)

	s := startServe(t, cfg)
	keyFile := filepath.Join(dir, "dev-api-key")
	fi, err := os.Stat(keyFile)
	if err != nil {
		t.Fatalf("first start wrote no dev-api-key: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("dev-api-key mode %v, want 0600", fi.Mode().Perm())
	}
	key := readDevKey(t, dir)
	if !strings.HasPrefix(key, "sk_") {
		t.Errorf("dev-api-key holds %q, want an sk_ key", key)
	}
	if out := s.out.String(); !strings.Contains(out, "Created development merchant") || !strings.Contains(out, key) {
		t.Errorf("first start printed %q, want the new merchant and its key %s", out, key)
	}
	c := newClient(s.url, key)
	c.must(t, "GET", "/v1/customers", "", nil, http.StatusOK, nil)

	t.Run("OpenAPI", func(t *testing.T) {
		r := c.must(t, "GET", "/v1/openapi.json", "", nil, http.StatusOK, nil)
		if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Errorf("Content-Type %q, want application/json", ct)
		}
		var doc struct {
			OpenAPI string         `json:"openapi"`
			Paths   map[string]any `json:"paths"`
		}
		if err := json.Unmarshal(r.body, &doc); err != nil {
			t.Fatalf("GET /v1/openapi.json is not JSON: %v", err)
		}
		if !strings.HasPrefix(doc.OpenAPI, "3.") || doc.Paths["/v1/payments"] == nil {
			t.Errorf("openapi %q with %d paths, want an OpenAPI 3 document with /v1/payments", doc.OpenAPI, len(doc.Paths))
		}
	})
	t.Run("ErrUnauthenticated", func(t *testing.T) {
		newClient(s.url, "sk_wrong").must(t, "GET", "/v1/customers", "", nil, http.StatusUnauthorized, nil)
	})
	if err := s.stop(); err != nil {
		t.Fatalf("serve returned %v after its context ended, want nil", err)
	}

	t.Run("SecondStartKeepsMerchant", func(t *testing.T) {
		cfg := testConfig(t, dir, nil)
		s := startServe(t, cfg)
		if out := s.out.String(); strings.Contains(out, "Created development merchant") || !strings.Contains(out, keyFile) {
			t.Errorf("second start printed %q, want only where the key is", out)
		}
		if got := readDevKey(t, dir); got != key {
			t.Errorf("dev-api-key changed from %q to %q", key, got)
		}
		newClient(s.url, key).must(t, "GET", "/v1/customers", "", nil, http.StatusOK, nil)
		if err := s.stop(); err != nil {
			t.Fatalf("serve returned %v, want nil", err)
		}
		db, err := sqlite.Open(context.Background(), sqlite.Config{Path: cfg.SQLite.Path})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		ms, err := db.ListMerchants(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) != 1 {
			t.Errorf("%d merchants after two starts, want 1", len(ms))
		}
	})
}

// TestServeWalkthrough runs the README's walk through the API over HTTP.
func TestServeWalkthrough(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			dir := t.TempDir()
			s := startServe(t, testConfig(t, dir, b.env(t)))
			walkthrough(t, newClient(s.url, readDevKey(t, dir)))
			if err := s.stop(); err != nil {
				t.Fatalf("serve returned %v after its context ended, want nil", err)
			}
		})
	}
}

func walkthrough(t *testing.T, c *client) {
	var cus, pm object
	c.must(t, "POST", "/v1/customers", "", map[string]any{"name": "Ada Lovelace", "email": "ada@example.com"}, 200, &cus)
	c.must(t, "POST", "/v1/payment_methods", "", map[string]any{"customer": cus.ID,
		"card": map[string]any{"number": "4242424242424242", "exp_month": 12, "exp_year": 2030, "cvc": "123"}}, 200, &pm)

	req := map[string]any{"amount": 2000, "currency": "usd", "customer": cus.ID, "payment_method": pm.ID,
		"capture_method": "manual", "tax": map[string]any{"country": "US", "region": "CA", "postal_code": "94105"}}
	var p payment
	first := c.must(t, "POST", "/v1/payments", "order-1001", req, 200, &p)
	rate, ok := tax.Sample().RateBPS("US", "CA", "94105", "")
	if !ok {
		t.Fatal("the sample tax table has no rate for US/CA/94105")
	}
	wantTax, err := tax.Sample().Compute(2000, rate)
	if err != nil {
		t.Fatal(err)
	}
	if p.Status != "requires_capture" || p.AmountTax != wantTax || p.AmountTotal != 2000+wantTax ||
		p.Tax == nil || p.Tax.RateBPS != rate || p.AmountCaptured != 0 {
		t.Fatalf("manual payment %s, want requires_capture with tax %d at %d bps", first.body, wantTax, rate)
	}
	if v := first.header.Get("Idempotent-Replayed"); v != "" {
		t.Errorf("first request has Idempotent-Replayed %q, want none", v)
	}

	t.Run("Replay", func(t *testing.T) {
		again := c.must(t, "POST", "/v1/payments", "order-1001", req, 200, nil)
		if v := again.header.Get("Idempotent-Replayed"); v != "true" {
			t.Errorf("Idempotent-Replayed %q, want true", v)
		}
		if !bytes.Equal(again.body, first.body) {
			t.Errorf("replay body differs:\n got %s\nwant %s", again.body, first.body)
		}
	})

	c.must(t, "POST", "/v1/payments/"+p.ID+"/capture", "", nil, 200, &p)
	if p.Status != "succeeded" || p.AmountCaptured != 2000+wantTax {
		t.Fatalf("after capture: status %s captured %d, want succeeded %d", p.Status, p.AmountCaptured, 2000+wantTax)
	}
	c.must(t, "POST", "/v1/payments/"+p.ID+"/refunds", "", map[string]any{"amount": 500}, 200, &p)
	if p.Status != "partially_refunded" || p.AmountRefunded != 500 {
		t.Fatalf("after refund 500: status %s refunded %d, want partially_refunded 500", p.Status, p.AmountRefunded)
	}
	c.must(t, "POST", "/v1/payments/"+p.ID+"/refunds", "", nil, 200, &p)
	if p.Status != "refunded" || p.AmountRefunded != p.AmountCaptured {
		t.Fatalf("after refunding the rest: status %s refunded %d of %d, want refunded all", p.Status, p.AmountRefunded, p.AmountCaptured)
	}
	var got payment
	c.must(t, "GET", "/v1/payments/"+p.ID, "", nil, 200, &got)
	if got.Status != "refunded" || got.AmountCaptured != 2000+wantTax || got.AmountRefunded != 2000+wantTax {
		t.Errorf("GET payment: status %s captured %d refunded %d, want refunded %d/%d", got.Status,
			got.AmountCaptured, got.AmountRefunded, 2000+wantTax, 2000+wantTax)
	}

	var events struct {
		Data []struct {
			Type       string `json:"type"`
			FromStatus string `json:"from_status"`
			ToStatus   string `json:"to_status"`
			Amount     int64  `json:"amount"`
		} `json:"data"`
	}
	c.must(t, "GET", "/v1/payments/"+p.ID+"/events", "", nil, 200, &events)
	var trail []string
	for _, e := range events.Data {
		trail = append(trail, fmt.Sprintf("%s %s->%s %d", e.Type, e.FromStatus, e.ToStatus, e.Amount))
	}
	total := 2000 + wantTax
	want := []string{
		fmt.Sprintf("authorization ->requires_capture %d", total),
		fmt.Sprintf("capture requires_capture->succeeded %d", total),
		"refund succeeded->partially_refunded 500",
		fmt.Sprintf("refund partially_refunded->refunded %d", total-500),
	}
	if strings.Join(trail, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(trail, "\n"), strings.Join(want, "\n"))
	}

	t.Run("ErrDeclined", func(t *testing.T) {
		var pm2 object
		c.must(t, "POST", "/v1/payment_methods", "", map[string]any{"customer": cus.ID,
			"card": map[string]any{"number": "4000000000009995", "exp_month": 12, "exp_year": 2030}}, 200, &pm2)
		var e struct {
			Error struct {
				Code        string `json:"code"`
				DeclineCode string `json:"decline_code"`
			} `json:"error"`
		}
		c.must(t, "POST", "/v1/payments", "", map[string]any{"amount": 500, "currency": "usd", "payment_method": pm2.ID}, 402, &e)
		if e.Error.DeclineCode != "insufficient_funds" {
			t.Errorf("decline_code %q, want insufficient_funds", e.Error.DeclineCode)
		}
	})
}

func TestTaxImport(t *testing.T) {
	isolateEnv(t)
	dir := t.TempDir()
	t.Setenv("SURGEPAY_DATA_DIR", dir)
	ctx := context.Background()

	t.Run("ErrBadLineNamed", func(t *testing.T) {
		bad := writeFile(t, "rates.csv", tax.Header+"\nUS,CA,,,725\nUS,NY,,,lots\n")
		var stdout, stderr bytes.Buffer
		if code := run(ctx, []string{"tax", "import", bad}, &stdout, &stderr); code == 0 {
			t.Fatalf("tax import of a bad file exited 0; stdout %q", stdout.String())
		}
		if !strings.Contains(stderr.String(), "line 3") || !strings.Contains(stderr.String(), bad) {
			t.Errorf("stderr %q, want the file and \"line 3\"", stderr.String())
		}
		if _, err := os.Stat(filepath.Join(dir, "tax-rates.csv")); !os.IsNotExist(err) {
			t.Errorf("a refused import installed tax-rates.csv (stat: %v)", err)
		}
	})
	t.Run("ErrMissingFile", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		if code := run(ctx, []string{"tax", "import", filepath.Join(dir, "nope.csv")}, &stdout, &stderr); code == 0 {
			t.Errorf("tax import of a missing file exited 0")
		}
	})
	t.Run("OK", func(t *testing.T) {
		good := writeFile(t, "rates.csv", tax.Header+"\nUS,CA,,,725\nUS,NY,,,400\n")
		var stdout, stderr bytes.Buffer
		if code := run(ctx, []string{"tax", "import", good}, &stdout, &stderr); code != 0 {
			t.Fatalf("tax import exited %d: %s", code, stderr.String())
		}
		if !strings.Contains(stdout.String(), "imported 2 tax rates") {
			t.Errorf("stdout %q, want \"imported 2 tax rates\"", stdout.String())
		}
		if _, err := os.Stat(filepath.Join(dir, "tax-rates.csv")); err != nil {
			t.Errorf("tax-rates.csv not installed: %v", err)
		}
	})
}

func TestKeysCreate(t *testing.T) {
	isolateEnv(t)
	dir := t.TempDir()
	t.Setenv("SURGEPAY_DATA_DIR", dir)
	ctx := context.Background()

	t.Run("ErrNoMerchant", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		if code := run(ctx, []string{"keys", "create"}, &stdout, &stderr); code == 0 {
			t.Fatalf("keys create before any merchant exited 0: %s", stdout.String())
		}
		if !strings.Contains(stderr.String(), "no merchant") {
			t.Errorf("stderr %q, want it to say there is no merchant", stderr.String())
		}
	})

	s := startServe(t, testConfig(t, dir, nil))
	var stdout, stderr bytes.Buffer
	if code := run(ctx, []string{"keys", "create"}, &stdout, &stderr); code != 0 {
		t.Fatalf("keys create exited %d: %s", code, stderr.String())
	}
	var key string
	for _, f := range strings.Fields(stdout.String()) {
		if strings.HasPrefix(f, "sk_") {
			key = f
		}
	}
	if key == "" {
		t.Fatalf("keys create printed no sk_ key: %q", stdout.String())
	}
	if dev := readDevKey(t, dir); key == dev {
		t.Fatalf("keys create printed the development key, want a new one")
	}
	// The running server has not seen the key: it must find it in the store.
	newClient(s.url, key).must(t, "GET", "/v1/customers", "", nil, http.StatusOK, nil)
	if err := s.stop(); err != nil {
		t.Fatalf("serve returned %v, want nil", err)
	}
}

// TestServeReplayAfterRestart is the regression test for a retry whose
// first attempt was stored before a restart: the new process has no cached
// idempotency record, so the request runs again, meets the stored key at
// commit, and must then answer with the stored bytes, not with the answer
// it rendered for a payment it never stored. (TestCrashRecovery found it:
// clients were told of payments that did not exist.)
func TestServeReplayAfterRestart(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			dir, env := t.TempDir(), b.env(t)
			s := startServe(t, testConfig(t, dir, env))
			c := newClient(s.url, readDevKey(t, dir))
			var cus, pm object
			c.must(t, "POST", "/v1/customers", "", map[string]any{"name": "Ada"}, 200, &cus)
			c.must(t, "POST", "/v1/payment_methods", "", map[string]any{"customer": cus.ID,
				"card": map[string]any{"number": "4242424242424242", "exp_month": 12, "exp_year": 2030}}, 200, &pm)
			create := map[string]any{"amount": 2000, "currency": "usd", "customer": cus.ID, "payment_method": pm.ID}
			var p payment
			first := c.must(t, "POST", "/v1/payments", "order-1", create, 200, &p)
			refund := map[string]any{"amount": 500}
			firstRefund := c.must(t, "POST", "/v1/payments/"+p.ID+"/refunds", "refund-1", refund, 200, nil)
			if err := s.stop(); err != nil {
				t.Fatalf("serve returned %v, want nil", err)
			}

			s = startServe(t, testConfig(t, dir, env)) // The same data, a fresh process state.
			c = newClient(s.url, readDevKey(t, dir))
			t.Run("Create", func(t *testing.T) {
				again := c.must(t, "POST", "/v1/payments", "order-1", create, 200, nil)
				if v := again.header.Get("Idempotent-Replayed"); v != "true" {
					t.Errorf("Idempotent-Replayed %q, want true", v)
				}
				if !bytes.Equal(again.body, first.body) {
					t.Errorf("retry after restart answered\n%s\nwant the stored\n%s", again.body, first.body)
				}
			})
			t.Run("Refund", func(t *testing.T) {
				// The stored answer, or the payment as it is: the refund
				// happened once either way.
				var got payment
				again := c.must(t, "POST", "/v1/payments/"+p.ID+"/refunds", "refund-1", refund, 200, &got)
				if again.header.Get("Idempotent-Replayed") == "true" && !bytes.Equal(again.body, firstRefund.body) {
					t.Errorf("replay after restart answered\n%s\nwant the stored\n%s", again.body, firstRefund.body)
				}
				if got.Status != "partially_refunded" || got.AmountRefunded != 500 {
					t.Errorf("retry after restart answered %s refunded %d, want partially_refunded 500", got.Status, got.AmountRefunded)
				}
			})
			var got payment
			c.must(t, "GET", "/v1/payments/"+p.ID, "", nil, 200, &got)
			if got.Status != "partially_refunded" || got.AmountRefunded != 500 {
				t.Errorf("payment %s refunded %d, want partially_refunded 500", got.Status, got.AmountRefunded)
			}
			var list struct {
				Data []payment `json:"data"`
			}
			c.must(t, "GET", "/v1/payments?customer="+cus.ID, "", nil, 200, &list)
			if len(list.Data) != 1 {
				t.Errorf("%d payments after retrying one create, want 1", len(list.Data))
			}
		})
	}
}
