package main

import (
	"crypto/tls"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/surgepay/surgepay/admin"
	"github.com/surgepay/surgepay/internal/datadir"
)

// testAdminToken is the admin token of the tests that build the admin
// handler themselves.
const testAdminToken = "test-admin-token-0123456789"

// testAdminAuth guards a test's admin handler with testAdminToken.
var testAdminAuth = admin.Guard{Token: func() string { return testAdminToken }}

// getAuth is get with the admin token as a bearer token.
func getAuth(t *testing.T, url, token string) (int, string) {
	t.Helper()
	code, body, _ := doRequest(t, http.DefaultClient, "GET", url, nil, map[string]string{"Authorization": "Bearer " + token})
	return code, body
}

// doRequest sends one request with headers and returns the status, body
// and TLS state (nil without TLS), the body read and closed.
func doRequest(t *testing.T, hc *http.Client, method, url string, body io.Reader, headers map[string]string) (int, string, *tls.ConnectionState) {
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
	return res.StatusCode, string(b), res.TLS
}

// readAdminToken reads the admin token serve created in the data folder
// dir.
func readAdminToken(t testing.TB, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, admin.TokenFileName))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// TestServeAdminAuth: serve's first start creates the admin token and
// prints the dashboard's address and where the token is; its admin
// listener refuses /config without it and serves it with it.
func TestServeAdminAuth(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir, nil)
	s := startServe(t, cfg)
	token := readAdminToken(t, dir)
	want := "Admin dashboard: http://" + cfg.AdminListen + "/dashboard (log in with the admin token in the file " +
		filepath.Join(dir, admin.TokenFileName) + ", just created)"
	if !strings.Contains(s.out.String(), want) {
		t.Errorf("serve's stdout lacks %q:\n%s", want, s.out)
	}
	if strings.Contains(s.out.String(), token) || strings.Contains(s.logs.String(), token) {
		t.Error("serve printed the admin token")
	}
	base := "http://" + cfg.AdminListen
	if code, _ := get(t, base+"/config"); code != http.StatusUnauthorized {
		t.Errorf("GET /config without the token: status %d, want 401", code)
	}
	if code, body := getAuth(t, base+"/config", token); code != http.StatusOK || !strings.Contains(body, "admin_token_file") {
		t.Errorf("GET /config with the token: status %d, want 200 with the configuration", code)
	}
	if code, _ := get(t, base+"/readyz"); code != http.StatusOK {
		t.Errorf("GET /readyz without the token: status %d, want 200", code)
	}
}

// TestServeAdminTokenRotation: a new token written to the token file is
// required after SIGHUP; the old one is refused at once.
func TestServeAdminTokenRotation(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir, nil)
	startServe(t, cfg)
	url := "http://" + cfg.AdminListen + "/config"
	old := readAdminToken(t, dir)
	if code, _ := getAuth(t, url, old); code != http.StatusOK {
		t.Fatalf("GET /config with the first token: status %d, want 200", code)
	}
	const rotated = "rotated-admin-token-0123456789"
	if err := datadir.WriteFileAtomic(filepath.Join(dir, admin.TokenFileName), []byte(rotated+"\n")); err != nil {
		t.Fatal(err)
	}
	sendHUP(t) // serve's signal.Notify takes it
	for deadline := time.Now().Add(reloadTimeoutTLS); ; time.Sleep(50 * time.Millisecond) {
		if code, _ := getAuth(t, url, rotated); code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the rotated token is not accepted %s after SIGHUP", reloadTimeoutTLS)
		}
	}
	if code, _ := getAuth(t, url, old); code != http.StatusUnauthorized {
		t.Errorf("GET /config with the old token after the rotation: status %d, want 401", code)
	}
}

// TestServeAdminReadToken: serve's first start creates the read-only
// token beside the admin token and prints where it is, never what; the
// read-only token reads the admin listener (the configuration, the
// console, the admin API) and is refused any change: 403
// read_only_operator from the admin API, and the console's pages show
// no action.
func TestServeAdminReadToken(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir, nil)
	s := startServe(t, cfg)
	b, err := os.ReadFile(filepath.Join(dir, admin.ReadTokenFileName))
	if err != nil {
		t.Fatal(err)
	}
	read := strings.TrimSpace(string(b))
	if !strings.HasPrefix(read, admin.ReadTokenPrefix) || read == readAdminToken(t, dir) {
		t.Fatalf("the read-only token starts %q, want %s and not the admin token", read[:7], admin.ReadTokenPrefix)
	}
	want := "log in with the read-only token in the file " + filepath.Join(dir, admin.ReadTokenFileName) + ", just created"
	if !strings.Contains(s.out.String(), want) || strings.Contains(s.out.String(), read) || strings.Contains(s.logs.String(), read) {
		t.Errorf("serve's stdout lacks %q, or shows the read-only token:\n%s", want, s.out)
	}
	base := "http://" + cfg.AdminListen
	for _, p := range []string{"/config", "/console/", "/console/merchants", "/admin/v1/merchants"} {
		if code, _ := getAuth(t, base+p, read); code != http.StatusOK {
			t.Errorf("GET %s with the read-only token: status %d, want 200", p, code)
		}
	}
	code, body, _ := doRequest(t, http.DefaultClient, "POST", base+"/admin/v1/merchants", strings.NewReader(`{"name":"Shop"}`),
		map[string]string{"Authorization": "Bearer " + read})
	if code != http.StatusForbidden || !strings.Contains(body, `"code":"`+admin.ReasonReadOnly+`"`) {
		t.Errorf("POST /admin/v1/merchants with the read-only token: %d %s, want 403 %s", code, body, admin.ReasonReadOnly)
	}
	_, list := getAuth(t, base+"/admin/v1/merchants", read)
	i := strings.Index(list, `"id":"mer_`)
	if i < 0 {
		t.Fatalf("no merchant listed: %s", list)
	}
	id := list[i+len(`"id":"`):]
	id = id[:strings.IndexByte(id, '"')]
	if code, page := getAuth(t, base+"/console/merchants/"+id, read); code != http.StatusOK ||
		!strings.Contains(page, "read-only: you can search but not act") || strings.Contains(page, `id="create"`) {
		t.Errorf("the merchant's console page with the read-only token: %d, want 200 with the read-only notice and no create form", code)
	}
	if code, _ := getAuth(t, base+"/console/merchants/"+id+"/keys/new", read); code != http.StatusForbidden {
		t.Errorf("a key's confirmation with the read-only token: status %d, want 403", code)
	}
}
