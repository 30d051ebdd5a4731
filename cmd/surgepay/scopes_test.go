package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestContradictoryScopesRefused is issue 34 item 12: scopes
// ["read_only","full"] made a full-access key. `keys create --scopes`
// and the admin API both refuse them (400 invalid_scope naming scopes on
// the API) and make no key.
func TestContradictoryScopesRefused(t *testing.T) {
	file, cfg, _ := serveFromFile(t, "")
	dir := cfg.DataDir
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"keys", "create", "--scopes", "read_only,full", "--config", file}, &stdout, &stderr)
	if code == 0 || strings.Contains(stdout.String(), "sk_") || !strings.Contains(stderr.String(), "--scopes") {
		t.Errorf("keys create --scopes read_only,full: exit %d, stdout %q, stderr %q; want refused naming --scopes, no key",
			code, stdout.String(), stderr.String())
	}

	token := readAdminToken(t, dir)
	admin := "http://" + cfg.AdminListen
	_, body, _ := doRequest(t, http.DefaultClient, "GET", admin+"/admin/v1/merchants", nil,
		map[string]string{"Authorization": "Bearer " + token})
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &list); err != nil || len(list.Data) == 0 {
		t.Fatalf("GET /admin/v1/merchants: %v, %s", err, body)
	}
	req := fmt.Sprintf(`{"merchant":%q,"scopes":["read_only","full"]}`, list.Data[0].ID)
	code, body, _ = doRequest(t, http.DefaultClient, "POST", admin+"/admin/v1/api_keys", strings.NewReader(req),
		map[string]string{"Authorization": "Bearer " + token, "Content-Type": "application/json"})
	var e struct {
		Error struct {
			Code  string `json:"code"`
			Param string `json:"param"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("POST /admin/v1/api_keys: %v: %s", err, body)
	}
	if code != http.StatusBadRequest || e.Error.Code != "invalid_scope" || e.Error.Param != "scopes" {
		t.Errorf("POST /admin/v1/api_keys with scopes [read_only, full]: status %d, body %s; want 400 invalid_scope naming scopes",
			code, body)
	}
}
