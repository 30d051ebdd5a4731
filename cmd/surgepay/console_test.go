package main

import (
	"net/http"
	"strings"
	"testing"
)

// TestServeConsole: serve mounts the operators' console on the admin
// listener, behind the admin credential, with the development merchant
// to search.
func TestServeConsole(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir, nil)
	startServe(t, cfg)
	token := readAdminToken(t, dir)
	base := "http://" + cfg.AdminListen
	if code, _ := get(t, base+"/console/"); code != http.StatusUnauthorized {
		t.Errorf("GET /console/ without the token: status %d, want 401", code)
	}
	code, body := getAuth(t, base+"/console/", token)
	if code != http.StatusOK || !strings.Contains(body, `<option value="mer_`) {
		t.Errorf("GET /console/ with the token: status %d, want 200 with the merchants to choose:\n%s", code, body)
	}
	if code, body := getAuth(t, base+"/console/?status=succeeded", token); code != http.StatusOK || !strings.Contains(body, `id="none"`) {
		t.Errorf("a search of a new server: status %d, want 200 and no payment:\n%s", code, body)
	}
}
