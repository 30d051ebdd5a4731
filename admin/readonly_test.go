package admin

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/surgepay/surgepay/telemetry"
	"github.com/surgepay/surgepay/telemetry/telemetrytest"
)

// testReadToken is the read-only token of the tests.
const testReadToken = "test-read-token-0123456789"

// seen is a handler that records what reached it: the method, and what
// ReadOnly and Actor said of the request.
type seen struct {
	method   string
	readOnly bool
	actor    string
}

func (s *seen) handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		*s = seen{method: r.Method, readOnly: ReadOnly(r), actor: Actor(r)}
		w.Write([]byte("ok"))
	})
}

// readOnlyAdmin serves the admin listener with both tokens, the admin
// API and the console stubbed by got.
func readOnlyAdmin(t *testing.T, got *seen, auth Guard) *httptest.Server {
	t.Helper()
	e := telemetrytest.Start(t, telemetrytest.Options{Telemetry: telemetry.DefaultConfig()})
	srv := httptest.NewServer(Handler(Config{Telemetry: e.Tel, Config: func() any { return struct{ Listen string }{"127.0.0.1:8080"} },
		Auth: auth, AdminAPI: got.handler(), Console: got.handler()}))
	t.Cleanup(srv.Close)
	return srv
}

var testReadAuth = Guard{Token: testAdminAuth.Token, ReadToken: func() string { return testReadToken }}

// TestReadOnlyToken: the read-only token GETs everything the listener
// serves, marked ReadOnly and named admin_api:read_token; every other
// method is refused 403 before the handler: in the admin API's error
// format under /admin/v1/, a page for a browser elsewhere. The admin
// token still acts.
func TestReadOnlyToken(t *testing.T) {
	var got seen
	srv := readOnlyAdmin(t, &got, testReadAuth)
	bearer := func(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }
	t.Run("GET", func(t *testing.T) {
		for _, p := range []string{"/config", "/metrics", "/dashboard", "/dashboard/data", "/debug/pprof/", "/admin/v1/merchants", "/console/"} {
			got = seen{}
			code, body, _ := doRequest(t, http.DefaultClient, "GET", srv.URL+p, nil, bearer(testReadToken))
			if code != http.StatusOK {
				t.Errorf("GET %s with the read-only token: status %d, want 200", p, code)
			}
			if strings.Contains(body, testReadToken) {
				t.Errorf("GET %s shows the read-only token", p)
			}
		}
		if !got.readOnly || got.actor != "admin_api:read_token" {
			t.Errorf("the console saw ReadOnly %t, actor %q; want true, admin_api:read_token", got.readOnly, got.actor)
		}
	})
	t.Run("ErrAdminAPIWrite", func(t *testing.T) {
		for _, m := range []string{"POST", "PUT", "PATCH", "DELETE"} {
			got = seen{}
			code, body, hdr := doRequest(t, http.DefaultClient, m, srv.URL+"/admin/v1/merchants", strings.NewReader(`{"name":"x"}`),
				bearer(testReadToken))
			var e struct {
				Error struct{ Type, Code, Message string } `json:"error"`
			}
			if err := json.Unmarshal([]byte(body), &e); err != nil || code != http.StatusForbidden ||
				e.Error.Code != ReasonReadOnly || e.Error.Type != "permission_error" || !strings.Contains(e.Error.Message, "read-only") ||
				hdr.Get("Content-Type") != "application/json" {
				t.Errorf("%s /admin/v1/merchants with the read-only token: %d %q %s (%v); want 403 JSON %s",
					m, code, hdr.Get("Content-Type"), body, err, ReasonReadOnly)
			}
			if got.method != "" {
				t.Errorf("%s with the read-only token reached the admin API", m)
			}
		}
	})
	t.Run("ErrConsoleWrite", func(t *testing.T) {
		got = seen{}
		h := bearer(testReadToken)
		h["Accept"] = "text/html"
		code, body, _ := doRequest(t, http.DefaultClient, "POST", srv.URL+"/console/merchants/m/payments/p/refund", strings.NewReader("amount=1"), h)
		if code != http.StatusForbidden || !strings.Contains(body, "read-only: you can search but not act") {
			t.Errorf("POST to the console with the read-only token: %d, want 403 with the read-only page:\n%s", code, body)
		}
		if got.method != "" {
			t.Error("a POST with the read-only token reached the console")
		}
	})
	t.Run("AdminTokenActs", func(t *testing.T) {
		got = seen{}
		if code, _, _ := doRequest(t, http.DefaultClient, "POST", srv.URL+"/admin/v1/merchants", strings.NewReader(`{}`), bearer(testAdminToken)); code != http.StatusOK {
			t.Errorf("POST with the admin token: status %d, want 200", code)
		}
		if got.method != "POST" || got.readOnly || got.actor != "admin_api:token" {
			t.Errorf("the admin API saw %+v; want a POST, not read-only, by admin_api:token", got)
		}
	})
	t.Run("BasicAuth", func(t *testing.T) {
		req, _ := http.NewRequest("POST", srv.URL+"/admin/v1/merchants", strings.NewReader(`{}`))
		req.SetBasicAuth("", testReadToken)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusForbidden {
			t.Errorf("POST with the read-only token as basic-auth password: status %d, want 403", res.StatusCode)
		}
	})
	t.Run("ErrNoReadToken", func(t *testing.T) {
		closed := readOnlyAdmin(t, &got, Guard{Token: testAdminAuth.Token, ReadToken: func() string { return "" }})
		if code, _ := getAuth(t, closed.URL+"/config", ""); code != http.StatusUnauthorized {
			t.Errorf("an empty bearer token with no read-only token: status %d, want 401", code)
		}
	})
}

// login posts tok to the login form and returns the session cookie.
func loginCookie(t *testing.T, base, tok string) *http.Cookie {
	t.Helper()
	code, _, hdr := doRequest(t, noRedirect, "POST", base+"/login", strings.NewReader(url.Values{"token": {tok}, "next": {"/console/"}}.Encode()),
		map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
	for _, c := range (&http.Response{Header: hdr}).Cookies() {
		if c.Name == SessionCookie && code == http.StatusSeeOther {
			return c
		}
	}
	t.Fatalf("POST /login: status %d, no %s cookie", code, SessionCookie)
	return nil
}

// TestReadOnlySession: a login with the read-only token is a read-only
// session: it reads and cannot act, and no change to its cookie makes
// it a full one (the MAC binds the role, under the read-only token's
// key); a new read-only token ends it, not the admin's sessions.
func TestReadOnlySession(t *testing.T) {
	var got seen
	readToken := testReadToken
	auth := testReadAuth
	auth.ReadToken = func() string { return readToken }
	srv := readOnlyAdmin(t, &got, auth)
	with := func(method string, c *http.Cookie) int {
		got = seen{}
		code, _, _ := doRequest(t, noRedirect, method, srv.URL+"/admin/v1/merchants", strings.NewReader(`{}`),
			map[string]string{"Cookie": c.Name + "=" + c.Value})
		return code
	}
	read := loginCookie(t, srv.URL, testReadToken)
	if strings.Contains(read.Value, testReadToken) {
		t.Error("the read-only session cookie holds the token")
	}
	if code := with("GET", read); code != http.StatusOK || !got.readOnly {
		t.Errorf("GET with the read-only session: status %d, ReadOnly %t; want 200, true", code, got.readOnly)
	}
	if code := with("POST", read); code != http.StatusForbidden || got.method != "" {
		t.Errorf("POST with the read-only session: status %d, reached %q; want 403, not reached", code, got.method)
	}
	full := loginCookie(t, srv.URL, testAdminToken)
	if code := with("POST", full); code != http.StatusOK || got.readOnly {
		t.Errorf("POST with the admin session: status %d, ReadOnly %t; want 200, false", code, got.readOnly)
	}
	t.Run("ErrForgedRole", func(t *testing.T) {
		role, rest, _ := strings.Cut(read.Value, ".")
		_, fullMAC, _ := strings.Cut(strings.SplitN(full.Value, ".", 2)[1], ".")
		exp, _, _ := strings.Cut(rest, ".")
		for name, v := range map[string]string{
			"RoleAdmin":        "admin." + rest,
			"NoRole":           rest,
			"OtherRole":        "root." + rest,
			"AdminMACReadRole": role + "." + exp + "." + fullMAC,
		} {
			forged := *read
			forged.Value = v
			if code := with("GET", &forged); code != http.StatusUnauthorized {
				t.Errorf("%s: GET with the forged cookie: status %d, want 401", name, code)
			}
			if code := with("POST", &forged); code != http.StatusUnauthorized || got.method != "" {
				t.Errorf("%s: POST with the forged cookie: status %d, reached %q; want 401", name, code, got.method)
			}
		}
	})
	t.Run("ReadTokenRotated", func(t *testing.T) {
		readToken = "another-read-token-0123456789"
		if code := with("GET", read); code != http.StatusUnauthorized {
			t.Errorf("GET with a session of the previous read-only token: status %d, want 401", code)
		}
		if code := with("GET", full); code != http.StatusOK {
			t.Errorf("GET with the admin session after the read-only token changed: status %d, want 200", code)
		}
	})
	t.Run("LogoutStaysOpen", func(t *testing.T) {
		code, _, hdr := doRequest(t, noRedirect, "POST", srv.URL+"/logout", nil, map[string]string{"Cookie": read.Name + "=" + read.Value})
		if code != http.StatusSeeOther || hdr.Get("Location") != "/login" {
			t.Errorf("POST /logout with a read-only session: status %d to %q, want 303 to /login", code, hdr.Get("Location"))
		}
	})
}

// certRequest is a request over TLS with a verified client certificate
// named cn.
func certRequest(method, path, cn string) *http.Request {
	r := httptest.NewRequest(method, path, strings.NewReader("{}"))
	r.TLS = &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{{Subject: pkix.Name{CommonName: cn}}}}}
	return r
}

// TestReadOnlyClientCert: a client certificate named in
// ReadOnlyClients reads and cannot act, even with the admin token
// beside it (the certificate names the operator); any other verified
// certificate acts.
func TestReadOnlyClientCert(t *testing.T) {
	var got seen
	h := Guard{Token: testAdminAuth.Token, ClientCert: true, ReadOnlyClients: []string{"support-alice"}}.Wrap(got.handler())
	for _, tc := range []struct {
		name, method, cn, token string
		want                    int
		readOnly                bool
	}{
		{"ReadOnlyGET", "GET", "support-alice", "", http.StatusOK, true},
		{"ErrReadOnlyPOST", "POST", "support-alice", "", http.StatusForbidden, false},
		{"ErrReadOnlyPOSTWithAdminToken", "POST", "support-alice", testAdminToken, http.StatusForbidden, false},
		{"ErrReadOnlyDELETE", "DELETE", "support-alice", "", http.StatusForbidden, false},
		{"OtherCertPOST", "POST", "ops-bob", "", http.StatusOK, false},
		{"NamePrefixActs", "POST", "support-alice2", "", http.StatusOK, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got = seen{}
			r := certRequest(tc.method, "/admin/v1/merchants", tc.cn)
			if tc.token != "" {
				r.Header.Set("Authorization", "Bearer "+tc.token)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tc.want || got.readOnly != tc.readOnly {
				t.Fatalf("%s by %s: status %d, ReadOnly %t; want %d, %t", tc.method, tc.cn, w.Code, got.readOnly, tc.want, tc.readOnly)
			}
			if tc.want == http.StatusForbidden && (got.method != "" || !strings.Contains(w.Body.String(), ReasonReadOnly)) {
				t.Fatalf("refused %s reached the handler (%q) or lacks %s: %s", tc.method, got.method, ReasonReadOnly, w.Body)
			}
			if tc.want == http.StatusOK && got.actor != "admin_api:cert:"+tc.cn {
				t.Fatalf("actor %q, want admin_api:cert:%s", got.actor, tc.cn)
			}
		})
	}
}

// TestLoadCredentials: the first start creates both token files (0600,
// each its prefix); the read-only token must differ from the admin
// token; a reload reads both again and says which changed, keeping both
// when one does not load; the announcement says where, never what.
func TestLoadCredentials(t *testing.T) {
	dir := t.TempDir()
	fullPath, readPath := filepath.Join(dir, TokenFileName), filepath.Join(dir, ReadTokenFileName)
	c, err := LoadCredentials(AdminTokenSource("", fullPath), ReadTokenSource("", readPath))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(c.Token(), TokenPrefix) || !strings.HasPrefix(c.ReadToken(), ReadTokenPrefix) || c.Token() == c.ReadToken() {
		t.Fatalf("tokens with prefixes %q and %q, want %s and %s, different", c.Token()[:7], c.ReadToken()[:7], TokenPrefix, ReadTokenPrefix)
	}
	if fi, err := os.Stat(readPath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("read-only token file: %v, %v; want mode 0600", fi, err)
	}
	var out strings.Builder
	c.Announce(&out, "http://127.0.0.1:9090")
	if !strings.Contains(out.String(), "read-only token in the file "+readPath+", just created") ||
		strings.Contains(out.String(), c.Token()) || strings.Contains(out.String(), c.ReadToken()) {
		t.Errorf("the announcement is %q: want where the read-only token is, never a token", out.String())
	}
	if changed, err := c.Reload(); err != nil || len(changed) != 0 {
		t.Errorf("a reload of unchanged files: %v, %v; want nothing changed", changed, err)
	}
	old := c.ReadToken()
	if err := os.WriteFile(readPath, []byte("rotated-read-token-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if changed, err := c.Reload(); err != nil || len(changed) != 1 || changed[0] != "read-only token" || c.ReadToken() != "rotated-read-token-0123456789" {
		t.Errorf("a reload after the read-only token changed: %v, %v; want [read-only token] and the new token", changed, err)
	}
	if err := os.WriteFile(readPath, []byte(c.Token()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Reload(); err == nil || strings.Contains(err.Error(), c.Token()) || c.ReadToken() == c.Token() {
		t.Errorf("a reload that made both tokens the same: %v; want refused without the token, the running ones kept", err)
	}
	if c.ReadToken() == old {
		t.Error("the refused reload brought back the first read-only token")
	}
	if err := os.Chmod(readPath, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = LoadCredentials(AdminTokenSource("", fullPath), ReadTokenSource("", readPath))
	if err == nil || !strings.Contains(err.Error(), "admin_read_token_file") || !strings.Contains(err.Error(), "SURGEPAY_ADMIN_READ_TOKEN") {
		t.Errorf("a read-only token file others can read: %v; want refused naming admin_read_token_file and SURGEPAY_ADMIN_READ_TOKEN", err)
	}
	same := "same-token-for-both-0123456789"
	if _, err := LoadCredentials(AdminTokenSource(same, ""), ReadTokenSource(same, "")); err == nil || strings.Contains(err.Error(), same) {
		t.Errorf("the same token twice: %v; want refused without the token", err)
	}
	var none *Credentials
	if none.Token() != "" || none.ReadToken() != "" {
		t.Error("a nil Credentials holds a token")
	}
	if changed, err := none.Reload(); changed != nil || err != nil {
		t.Errorf("a nil Credentials reloaded: %v, %v", changed, err)
	}
}
