package main

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/surgepay/surgepay/admin"
	"github.com/surgepay/surgepay/cache"
	"github.com/surgepay/surgepay/config"
	"github.com/surgepay/surgepay/provider/processors"
	"github.com/surgepay/surgepay/provider/sim"
	"github.com/surgepay/surgepay/provider/stripe/stripedouble"
)

// TestConfigShowsProcessorDefaults: /config showed timeout = "0s",
// conns_max = 0 and search_lag = "0s" for a processor that left them
// out, where the documented defaults apply; it now shows those in effect.
func TestConfigShowsProcessorDefaults(t *testing.T) {
	file := filepath.Join(t.TempDir(), "c.toml")
	conf := "[processors.stripe_eu]\nkind = \"stripe\"\nsecret_key = \"sk_test_x\"\ncalls_per_second = 20\n" +
		"[processors.stripe_us]\nkind = \"stripe\"\nsecret_key = \"sk_test_y\"\ntimeout = \"20m\"\nretries_max = -1\nconns_max = 8\n"
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(file, envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	admin := httptest.NewServer(admin.Handler(admin.Config{Config: func() any { return cfg.View() }, Auth: testAdminAuth}))
	defer admin.Close()
	code, body := getAuth(t, admin.URL+"/config", testAdminToken)
	if code != http.StatusOK {
		t.Fatalf("GET /config: status %d, want 200: %s", code, body)
	}
	section := func(name string) string {
		_, rest, _ := strings.Cut(body, "[processors."+name+"]")
		if i := strings.Index(rest, "\n["); i >= 0 {
			rest = rest[:i]
		}
		return rest
	}
	for name, want := range map[string][]string{
		"stripe_eu": {`timeout = "30s"`, "conns_max = 64", "retries_max = 2", `search_lag = "15m0s"`, `budget_wait = "50ms"`,
			"inflight_max = 64", "settle_calls_per_second = 20.0"},
		// Set values stay; the search lag is never less than the timeout,
		// as the connector takes it.
		"stripe_us": {`timeout = "20m0s"`, "conns_max = 8", "retries_max = -1", `search_lag = "20m0s"`, "inflight_max = 8"},
	} {
		got := section(name)
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Errorf("[processors.%s] in /config: got\n%s\nwant %s", name, got, w)
			}
		}
	}
}

// sealAs runs `surgepay processors seal` with args in dir, the secret on
// standard input.
func sealAs(t *testing.T, dir, secret string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	t.Chdir(dir)
	stdin = strings.NewReader(secret + "\n")
	t.Cleanup(func() { stdin = os.Stdin })
	var out, errb bytes.Buffer
	code = run(t.Context(), append([]string{"processors", "seal"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

// TestProcessorsSealAsDocumented: the seal command of docs/processors.md,
// run as written in a fresh clone, named a surgepay.toml a clone does not
// have and exited 2. It now works, seals with the keyring serve will use
// (./data/keyring.json by default) and says so.
func TestProcessorsSealAsDocumented(t *testing.T) {
	isolateEnv(t)
	doc, err := os.ReadFile("../../docs/processors.md")
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	for _, line := range strings.Split(string(doc), "\n") {
		if _, cmd, ok := strings.Cut(line, "| surgepay processors seal "); ok && strings.HasPrefix(line, "echo ") {
			args = strings.Fields(cmd)
			break
		}
	}
	if args == nil {
		t.Fatal("docs/processors.md has no `echo … | surgepay processors seal …` line")
	}
	dir := t.TempDir()
	code, out, errs := sealAs(t, dir, "sk_test_documented", args...)
	if code != 0 {
		t.Fatalf("surgepay processors seal %s: exit %d: %s", strings.Join(args, " "), code, errs)
	}
	keyring := filepath.Join(dir, "data", "keyring.json")
	if !strings.Contains(errs, keyring) {
		t.Errorf("got stderr %q, want it to name the keyring %s", errs, keyring)
	}
	cfg, err := config.Load("", envOf(nil)) // serve's configuration from the same folder
	if err != nil {
		t.Fatal(err)
	}
	keys, err := processors.KeyringNoCreate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sealed := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(out), `secret_key = "`), `"`)
	if got, err := processors.Unseal(keys, args[slices.Index(args, "--name")+1], cache.Secret(sealed)); err != nil || got != "sk_test_documented" {
		t.Errorf("serve's keyring opens the seal to %q, %v; want the key", got, err)
	}
}

// TestProcessorsSealRefusesKeyringServeDoesNotRead: run where serve's
// database is but its keyring is not (serve reads SURGEPAY_KEYRING or
// another keyring_file), seal silently made a new keyring whose seals
// serve could not open. It now refuses, naming both.
func TestProcessorsSealRefusesKeyringServeDoesNotRead(t *testing.T) {
	isolateEnv(t)
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data", "surgepay.db"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs := sealAs(t, dir, "sk_test_x", "--name", "stripe_eu")
	if code != 1 || out != "" || !strings.Contains(errs, "no keyring at "+filepath.Join(dir, "data", "keyring.json")) ||
		!strings.Contains(errs, "SURGEPAY_KEYRING") {
		t.Errorf("got exit %d, stdout %q, stderr %q; want 1 and a refusal naming the keyring and SURGEPAY_KEYRING", code, out, errs)
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "keyring.json")); err == nil {
		t.Error("a keyring was made; want none")
	}
}

// TestProcessorsCheck: `surgepay processors check` says ok for a working
// key (stripe-mock, sealed), what is wrong for a revoked key (401) and a
// processor that refuses connections, and exits 1 if any fails.
func TestProcessorsCheck(t *testing.T) {
	isolateEnv(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "surgepay.toml")
	base := fmt.Sprintf("data_dir = %q\n", filepath.Join(dir, "data"))
	if err := os.WriteFile(file, []byte(base), 0o600); err != nil {
		t.Fatal(err)
	}
	code, sealed, errs := sealAs(t, dir, "sk_test_check", "--name", "stripe_ok", "--config", file)
	if code != 0 {
		t.Fatalf("seal: exit %d: %s", code, errs)
	}
	revoked := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		w.Write([]byte(`{"error":{"type":"invalid_request_error","code":"api_key_expired","message":"Expired API Key provided"}}`))
	}))
	defer revoked.Close()
	closed := "http://" + freeAddr(t)
	conf := base + fmt.Sprintf("[processors.stripe_ok]\nkind = \"stripe\"\n%sbase_url = %q\n"+
		"[processors.stripe_revoked]\nkind = \"stripe\"\nsecret_key = \"sk_live_revoked\"\nbase_url = %q\n"+
		"[processors.stripe_down]\nkind = \"stripe\"\nsecret_key = \"sk_test_x\"\nbase_url = %q\n",
		sealed, stripedouble.StartStripeMock(t), revoked.URL, closed)
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	check := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(t.Context(), append([]string{"processors", "check", "--config", file}, args...), &out, &errb)
		return code, out.String(), errb.String()
	}
	code, out, errs := check()
	if code != 1 {
		t.Errorf("got exit %d, want 1 (two fail): %s", code, errs)
	}
	for _, want := range []string{
		"default: ok",
		"stripe_down: unreachable: connection refused",
		"stripe_ok: ok (test mode key",
		"stripe_revoked: authentication failed (401 invalid_request_error api_key_expired: Expired API Key provided): the key is wrong or revoked",
	} {
		if !strings.Contains(out, want+"") {
			t.Errorf("got\n%s\nwant a line %q", out, want)
		}
	}
	if strings.Contains(out, "sk_") {
		t.Errorf("got\n%s\nwant no key", out)
	}
	if code, out, errs := check("stripe_ok"); code != 0 || strings.Count(out, "\n") != 1 {
		t.Errorf("check stripe_ok: got exit %d, %q, %q; want 0 and one line", code, out, errs)
	}
	if code, _, errs := check("nope"); code != 2 || !strings.Contains(errs, `no processor "nope"`) {
		t.Errorf("check nope: got exit %d, %q; want 2 naming it", code, errs)
	}
}

// TestServeProcessorRevokedKeyLogged: a processor answering 401 reached
// the client as a 503 and the log said only "the card network did not
// process the request". serve now logs the processor's state change once,
// with its name, status and code, however many payments fail, and shows
// it on /metrics and the dashboard.
func TestServeProcessorRevokedKeyLogged(t *testing.T) {
	isolateEnv(t)
	revoked := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		w.Write([]byte(`{"error":{"type":"invalid_request_error","code":"api_key_expired","message":"Expired API Key provided"}}`))
	}))
	defer revoked.Close()
	dir := t.TempDir()
	file := filepath.Join(dir, "surgepay.toml")
	conf := fmt.Sprintf("data_dir = %q\nlisten = %q\nadmin_listen = %q\nlog_level = \"warn\"\n"+
		"[processors.stripe_eu]\nkind = \"stripe\"\nsecret_key = \"sk_test_revoked\"\nbase_url = %q\n"+
		"[merchants.default]\nprocessors = [\"stripe_eu\"]\n", filepath.Join(dir, "data"), freeAddr(t), freeAddr(t), revoked.URL)
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(file, envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	s := startServe(t, cfg)
	c := newClient(s.url, readDevKey(t, cfg.DataDir))
	var cus, pm object
	c.must(t, "POST", "/v1/customers", "", map[string]any{"name": "Ada Lovelace"}, 200, &cus)
	c.must(t, "POST", "/v1/payment_methods", "", map[string]any{"customer": cus.ID,
		"card": map[string]any{"number": "4242424242424242", "exp_month": 12, "exp_year": 2030, "cvc": "123"}}, 200, &pm)
	for i := range 3 {
		c.must(t, "POST", "/v1/payments", fmt.Sprintf("revoked-%d", i), map[string]any{"amount": 1000, "currency": "usd",
			"customer": cus.ID, "payment_method": pm.ID}, http.StatusServiceUnavailable, nil)
	}
	logs := s.logs.String()
	if n := strings.Count(logs, `msg="processor failing"`); n != 1 ||
		!strings.Contains(logs, `processor=stripe_eu status=401 code=api_key_expired message="Expired API Key provided"`) {
		t.Errorf("got %d state-change lines in\n%s\nwant one naming stripe_eu, 401 and api_key_expired", n, logs)
	}
	if strings.Contains(logs, "sk_test_revoked") {
		t.Error("the key is in the log")
	}
	token := readAdminToken(t, cfg.DataDir)
	_, metrics := getAuth(t, "http://"+cfg.AdminListen+"/metrics", token)
	for _, want := range []string{`surgepay_processor_state{processor="stripe_eu",state="failing"} 1`,
		`surgepay_processor_last_error_info{code="api_key_expired",processor="stripe_eu",status="401"}`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics has no %s", want)
		}
	}
	if _, data := getAuth(t, "http://"+cfg.AdminListen+"/dashboard/data", token); !strings.Contains(data,
		`"processor":"stripe_eu","state":"failing"`) || !strings.Contains(data, `"status":401,"code":"api_key_expired"`) {
		t.Errorf("/dashboard/data shows no failing stripe_eu with 401 api_key_expired: %.400s", data)
	}
}

// TestProcessorsCheckSimulator: `default` over HTTP is checked at the
// simulator's /healthz; a closed port is unreachable.
func TestProcessorsCheckSimulator(t *testing.T) {
	simSrv := httptest.NewServer(sim.NewHandler(sim.New(sim.Config{})))
	defer simSrv.Close()
	cfg := config.Default()
	cfg.Provider.Kind, cfg.Provider.URL = "sim-http", simSrv.URL
	if line, err := processors.Check(t.Context(), cfg, "default", nil); err != nil || !strings.Contains(line, simSrv.URL) {
		t.Errorf("got %q, %v; want ok at %s", line, err, simSrv.URL)
	}
	cfg.Provider.URL = "http://" + freeAddr(t)
	if _, err := processors.Check(t.Context(), cfg, "default", nil); err == nil || !strings.HasPrefix(err.Error(), "unreachable: connection refused") {
		t.Errorf("got %v, want unreachable: connection refused", err)
	}
}
