package admin

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/surgepay/surgepay/telemetry"
	"github.com/surgepay/surgepay/telemetry/telemetrytest"
)

// testAdminToken is the admin token of the tests.
const testAdminToken = "test-admin-token-0123456789"

// testAdminAuth guards a test's admin handler with testAdminToken.
var testAdminAuth = Guard{Token: func() string { return testAdminToken }}

// get sends a GET without a credential.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	code, body, _ := doRequest(t, http.DefaultClient, "GET", url, nil, nil)
	return code, body
}

// getAuth is get with the admin token as a bearer token.
func getAuth(t *testing.T, url, token string) (int, string) {
	t.Helper()
	code, body, _ := doRequest(t, http.DefaultClient, "GET", url, nil, map[string]string{"Authorization": "Bearer " + token})
	return code, body
}

// doRequest sends one request with headers and returns the status, body
// and headers (the body read and closed).
func doRequest(t *testing.T, hc *http.Client, method, url string, body io.Reader, headers map[string]string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	res, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b), res.Header
}

// noRedirect is a client that shows redirects instead of following them.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// TestAdminAuth: every route of the admin listener but the probes needs
// the token (bearer or basic auth), including routes mounted later (the
// admin API under /admin/v1/); /metrics opens by configuration only.
func TestAdminAuth(t *testing.T) {
	e := telemetrytest.Start(t, telemetrytest.Options{Telemetry: telemetry.DefaultConfig()})
	newAdmin := func(auth Guard) *httptest.Server {
		srv := httptest.NewServer(Handler(Config{Telemetry: e.Tel, Config: func() any { return struct{ Listen string }{"127.0.0.1:8080"} },
			Auth: auth}))
		t.Cleanup(srv.Close)
		return srv
	}
	admin := newAdmin(testAdminAuth)
	guarded := []string{"/config", "/metrics", "/dashboard", "/dashboard/data", "/debug/pprof/", "/debug/pprof/cmdline",
		"/admin/v1/merchants", "/nothing-here"}
	t.Run("ProbesOpen", func(t *testing.T) {
		for _, p := range []string{"/healthz", "/readyz"} {
			if code, _ := get(t, admin.URL+p); code != http.StatusOK {
				t.Errorf("GET %s without a credential: status %d, want 200", p, code)
			}
		}
	})
	t.Run("ErrNoCredential", func(t *testing.T) {
		for _, p := range guarded {
			code, body, hdr := doRequest(t, http.DefaultClient, "GET", admin.URL+p, nil, nil)
			if code != http.StatusUnauthorized || !strings.Contains(hdr.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("GET %s without a credential: status %d, WWW-Authenticate %q, want 401 with Bearer",
					p, code, hdr.Get("WWW-Authenticate"))
			}
			if strings.Contains(body, testAdminToken) {
				t.Errorf("GET %s: the refusal shows the token", p)
			}
		}
	})
	t.Run("ErrWrongToken", func(t *testing.T) {
		for _, h := range []string{"Bearer " + testAdminToken + "x", "Bearer " + testAdminToken[:len(testAdminToken)-1],
			"Bearer", "Token " + testAdminToken, "Basic " + "dXNlcjp3cm9uZw=="} {
			if code, _, _ := doRequest(t, http.DefaultClient, "GET", admin.URL+"/config", nil, map[string]string{"Authorization": h}); code != 401 {
				t.Errorf("GET /config with Authorization %q: status %d, want 401", h, code)
			}
		}
	})
	t.Run("Bearer", func(t *testing.T) {
		for _, p := range guarded[:6] {
			if code, _ := getAuth(t, admin.URL+p, testAdminToken); code != http.StatusOK {
				t.Errorf("GET %s with the token: status %d, want 200", p, code)
			}
		}
		if code, _ := getAuth(t, admin.URL+"/nothing-here", testAdminToken); code != http.StatusNotFound {
			t.Errorf("GET /nothing-here with the token: status %d, want 404", code)
		}
	})
	t.Run("BasicAuth", func(t *testing.T) {
		req, _ := http.NewRequest("GET", admin.URL+"/config", nil)
		req.SetBasicAuth("anyone", testAdminToken)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Errorf("GET /config with the token as basic-auth password: status %d, want 200", res.StatusCode)
		}
	})
	t.Run("ErrNoToken", func(t *testing.T) {
		closed := newAdmin(Guard{Token: func() string { return "" }})
		if code, _ := getAuth(t, closed.URL+"/config", ""); code != http.StatusUnauthorized {
			t.Errorf("GET /config with an empty token against no token: status %d, want 401", code)
		}
	})
	t.Run("ErrTooManyWrongCredentials", func(t *testing.T) {
		// A budget of 3 wrong credentials that does not refill in the test.
		limited := newAdmin(Guard{Token: testAdminAuth.Token, failures: testFailureBudget(3)})
		for i := range 3 {
			if code, _ := getAuth(t, limited.URL+"/config", "wrong-token-0123456789"); code != http.StatusUnauthorized {
				t.Fatalf("wrong token %d of the budget: status %d, want 401", i+1, code)
			}
		}
		code, _, hdr := doRequest(t, http.DefaultClient, "GET", limited.URL+"/config", nil,
			map[string]string{"Authorization": "Bearer wrong-token-0123456789"})
		if code != http.StatusTooManyRequests || hdr.Get("Retry-After") == "" {
			t.Errorf("a wrong token after the budget of wrong ones: status %d, Retry-After %q; want 429 with Retry-After",
				code, hdr.Get("Retry-After"))
		}
		form := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
		if code, _, _ := doRequest(t, noRedirect, "POST", limited.URL+"/login", strings.NewReader("token=wrong-token-0123456789"), form); code != http.StatusTooManyRequests {
			t.Errorf("POST /login with a wrong token after the budget: status %d, want 429", code)
		}
		if code, _ := get(t, limited.URL+"/healthz"); code != http.StatusOK {
			t.Errorf("GET /healthz after the budget: status %d, want 200", code)
		}
	})
	t.Run("ErrTooManyWrongCredentialsHeldMax", func(t *testing.T) {
		// With every hold slot taken, a wrong credential past the budget
		// is answered at once instead of waiting an hour.
		b := testFailureBudget(0)
		b.hold = time.Hour
		for range cap(b.held) {
			b.held <- struct{}{}
		}
		held := newAdmin(Guard{Token: testAdminAuth.Token, failures: b})
		if code, _ := getAuth(t, held.URL+"/config", "wrong-token-0123456789"); code != http.StatusTooManyRequests {
			t.Errorf("a wrong token past the budget with every hold slot taken: status %d, want 429", code)
		}
	})
	t.Run("MetricsOpen", func(t *testing.T) {
		open := newAdmin(Guard{Token: testAdminAuth.Token, MetricsOpen: true})
		if code, body := get(t, open.URL+"/metrics"); code != http.StatusOK || !strings.Contains(body, "go_goroutines") {
			t.Errorf("GET /metrics with admin_metrics_open: status %d, want 200 with the metrics", code)
		}
		if code, _ := get(t, open.URL+"/config"); code != http.StatusUnauthorized {
			t.Errorf("GET /config with admin_metrics_open: status %d, want 401 (only /metrics opens)", code)
		}
	})
}

// testFailureBudget is a budget of burst wrong credentials that does not
// refill during a test, answering past it without a hold.
func testFailureBudget(burst int) *failureBudget {
	b := newFailureBudget(rate.Every(time.Hour), burst)
	b.hold = 0
	return b
}

// TestAdminRightTokenNotRefusedAfterWrongOnes is issue 34 item 9: 30
// wrong admin tokens from an address made the next right one 429, and a
// process sending wrong tokens at 10/s refused 24 of the operator's 40
// requests. The right credential (token, login, cookie) is checked
// before the budget of wrong ones, which goes on refusing wrong ones.
func TestAdminRightTokenNotRefusedAfterWrongOnes(t *testing.T) {
	h := Guard{Token: testAdminAuth.Token, failures: testFailureBudget(20)}.Wrap(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
	ask := func(addr, auth string) int {
		r := httptest.NewRequest("GET", "/config", nil)
		r.RemoteAddr = addr
		r.Header.Set("Authorization", auth)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	for range 30 {
		ask("127.0.0.1:40000", "Bearer wrong-token-0123456789")
	}
	// The guesser keeps going between the operator's requests, from the
	// same address (another local process).
	refused := 0
	for i := range 40 {
		if code := ask("127.0.0.1:40000", "Bearer wrong-token-0123456789"); code != http.StatusTooManyRequests {
			t.Fatalf("wrong token %d past the budget: status %d, want 429", i+1, code)
		}
		if code := ask("127.0.0.1:40001", "Bearer "+testAdminToken); code != http.StatusOK {
			refused++
		}
	}
	if refused != 0 {
		t.Errorf("the right token while a guesser at its address is past the budget: %d of 40 refused, want 0", refused)
	}
	r := httptest.NewRequest("GET", "/config", nil)
	r.RemoteAddr = "127.0.0.1:40002"
	r.SetBasicAuth("operator", testAdminToken)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Errorf("the right token as basic auth past the budget: status %d, want 200", w.Code)
	}
	r = httptest.NewRequest("POST", "/login", strings.NewReader("token="+testAdminToken))
	r.RemoteAddr = "127.0.0.1:40003"
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	w = httptest.NewRecorder()
	h.ServeHTTP(w, r)
	var cookie *http.Cookie
	for _, c := range w.Result().Cookies() {
		if c.Name == SessionCookie {
			cookie = c
		}
	}
	if w.Code != http.StatusSeeOther || cookie == nil {
		t.Fatalf("POST /login with the right token past the budget: status %d, cookie %v; want 303 with the cookie", w.Code, cookie)
	}
	r = httptest.NewRequest("GET", "/config", nil)
	r.RemoteAddr = "127.0.0.1:40004"
	r.AddCookie(cookie)
	w = httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Errorf("the session cookie past the budget: status %d, want 200", w.Code)
	}
}

// TestAdminDashboardLogin: a browser without a credential is sent to the
// login page; the token there sets an HttpOnly, SameSite=Strict session
// cookie that opens the dashboard and its data, never holds the token,
// and ends with its lifetime or a new token. A cross-site form post is
// refused.
func TestAdminDashboardLogin(t *testing.T) {
	e := telemetrytest.Start(t, telemetrytest.Options{Telemetry: telemetry.DefaultConfig()})
	now := time.Now()
	token := testAdminToken
	auth := Guard{Token: func() string { return token }, now: func() time.Time { return now }}
	admin := httptest.NewServer(Handler(Config{Telemetry: e.Tel, Auth: auth}))
	defer admin.Close()
	html := map[string]string{"Accept": "text/html,application/xhtml+xml"}
	form := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}

	code, _, hdr := doRequest(t, noRedirect, "GET", admin.URL+"/dashboard", nil, html)
	if loc := hdr.Get("Location"); code != http.StatusSeeOther || loc != "/login?next=%2Fdashboard" {
		t.Fatalf("GET /dashboard from a browser without a credential: status %d, Location %q; want 303 to the login page", code, loc)
	}
	code, body, _ := doRequest(t, noRedirect, "GET", admin.URL+"/login?next=%2Fdashboard", nil, html)
	if code != http.StatusOK || !strings.Contains(body, `name="token"`) || !strings.Contains(body, `value="/dashboard"`) {
		t.Fatalf("GET /login: status %d, want the form:\n%s", code, body)
	}
	login := func(tok, next string, headers map[string]string) (int, http.Header) {
		h := map[string]string{}
		for k, v := range form {
			h[k] = v
		}
		for k, v := range headers {
			h[k] = v
		}
		code, _, hdr := doRequest(t, noRedirect, "POST", admin.URL+"/login",
			strings.NewReader(url.Values{"token": {tok}, "next": {next}}.Encode()), h)
		return code, hdr
	}
	if code, hdr := login("wrong-token-0123456789", "/dashboard", nil); code != http.StatusUnauthorized || len(hdr.Values("Set-Cookie")) > 0 {
		t.Errorf("POST /login with a wrong token: status %d, cookies %v; want 401 and none", code, hdr.Values("Set-Cookie"))
	}
	if code, _ := login(token, "/dashboard", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}); code != http.StatusForbidden {
		t.Errorf("POST /login from another site: status %d, want 403", code)
	}
	for _, next := range []string{"//evil.example/x", "/\t/evil.example", "/\x7f/evil.example", "/\\evil.example"} {
		code, hdr = login(token, next, nil)
		if loc := hdr.Get("Location"); code != http.StatusSeeOther || loc != "/dashboard" {
			t.Errorf("POST /login with next=%q: status %d, Location %q; want 303 to /dashboard", next, code, loc)
		}
	}
	var cookie *http.Cookie
	for _, c := range (&http.Response{Header: hdr}).Cookies() {
		if c.Name == SessionCookie {
			cookie = c
		}
	}
	if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.Path != "/" {
		t.Fatalf("POST /login with the token: cookie %v, want %s HttpOnly, SameSite=Strict, Path=/", cookie, SessionCookie)
	}
	if strings.Contains(cookie.Value, token) {
		t.Error("the session cookie holds the token")
	}
	withCookie := func(c *http.Cookie) int {
		code, _, _ := doRequest(t, noRedirect, "GET", admin.URL+"/dashboard/data", nil, map[string]string{"Cookie": c.Name + "=" + c.Value})
		return code
	}
	if code := withCookie(cookie); code != http.StatusOK {
		t.Errorf("GET /dashboard/data with the session cookie: status %d, want 200", code)
	}
	tampered := *cookie
	parts := strings.Split(cookie.Value, ".")
	if len(parts) != 3 || parts[0] != "admin" {
		t.Fatalf("the session cookie is %d fields, role %q; want ROLE.EXPIRY.MAC of role admin", len(parts), parts[0])
	}
	n, _ := strconv.ParseInt(parts[1], 10, 64)
	tampered.Value = parts[0] + "." + strconv.FormatInt(n+86400, 10) + "." + parts[2]
	if code := withCookie(&tampered); code != http.StatusUnauthorized {
		t.Errorf("GET /dashboard/data with a cookie whose expiry was changed: status %d, want 401", code)
	}
	now = now.Add(SessionLifetime + time.Second)
	if code := withCookie(cookie); code != http.StatusUnauthorized {
		t.Errorf("GET /dashboard/data with a session past its lifetime: status %d, want 401", code)
	}
	now = now.Add(-SessionLifetime)
	token = "another-admin-token-0123456789"
	if code := withCookie(cookie); code != http.StatusUnauthorized {
		t.Errorf("GET /dashboard/data with a session of the previous token: status %d, want 401", code)
	}
	if code, _ := getAuth(t, admin.URL+"/dashboard/data", testAdminToken); code != http.StatusUnauthorized {
		t.Errorf("GET /dashboard/data with the previous token: status %d, want 401", code)
	}
}

// TestLoadToken: the first start creates a random token in a 0600 file
// that later starts read; the environment's token wins; a file others can
// read, or too short a token, is refused by name.
func TestLoadToken(t *testing.T) {
	path := filepath.Join(t.TempDir(), TokenFileName)
	token, created, err := LoadToken("", path)
	if err != nil || !created || !strings.HasPrefix(token, TokenPrefix) || len(token) < 40 {
		t.Fatalf("first LoadToken: %q, created %t, %v; want a new random token", token, created, err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v, %v; want mode 0600", fi, err)
	}
	again, created, err := LoadToken("", path)
	if err != nil || created || again != token {
		t.Errorf("second LoadToken: created %t, same %t, %v; want the file's token", created, again == token, err)
	}
	other, _, _ := LoadToken("", filepath.Join(t.TempDir(), TokenFileName))
	if other == token {
		t.Error("two data folders got the same token")
	}
	if got, _, err := LoadToken("env-token-0123456789", path); err != nil || got != "env-token-0123456789" {
		t.Errorf("with SURGEPAY_ADMIN_TOKEN: %q, %v; want the variable's token", got, err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadToken("", path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a token file others can read: %v; want refused with chmod 600", err)
	}
	if err := os.WriteFile(path, []byte("short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadToken("", path); err == nil || !strings.Contains(err.Error(), "admin_token_file") {
		t.Errorf("a 5-character token file: %v; want refused naming admin_token_file", err)
	}
}
