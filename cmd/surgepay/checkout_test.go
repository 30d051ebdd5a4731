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

// TestPublishableKeys: `keys create --publishable` and the admin API make
// a pk_test_ key that serve's API refuses outside the checkout routes,
// and serve serves the card frame's script.
func TestPublishableKeys(t *testing.T) {
	file, cfg, _ := serveFromFile(t, "")
	dir := cfg.DataDir
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"keys", "create", "--publishable", "--scopes", "read_only", "--config", file}, &stdout, &stderr); code == 0 ||
		strings.Contains(stdout.String(), "pk_") {
		t.Fatalf("--publishable with --scopes: exit %d, stdout %q; want refused", code, stdout.String())
	}
	stdout.Reset()
	if code := run(context.Background(), []string{"keys", "create", "--publishable", "--config", file}, &stdout, &stderr); code != 0 {
		t.Fatalf("keys create --publishable: exit %d: %s", code, stderr.String())
	}
	var pk string
	for _, f := range strings.Fields(stdout.String()) {
		if strings.HasPrefix(f, "pk_test_") {
			pk = f
		}
	}
	if pk == "" {
		t.Fatalf("keys create --publishable printed no pk_test_ key: %q", stdout.String())
	}
	api := "http://" + cfg.Listen
	if code, body, _ := doRequest(t, http.DefaultClient, "GET", api+"/v1/payments", nil,
		map[string]string{"Authorization": "Bearer " + pk}); code != http.StatusForbidden || !strings.Contains(body, "insufficient_scope") {
		t.Errorf("GET /v1/payments with a publishable key: %d %s", code, body)
	}
	if code, body, _ := doRequest(t, http.DefaultClient, "GET", api+"/checkout/v1/surgepay.js", nil, nil); code != http.StatusOK ||
		!strings.Contains(body, "Surgepay") {
		t.Errorf("GET /checkout/v1/surgepay.js: %d", code)
	}

	token := readAdminToken(t, dir)
	admin := "http://" + cfg.AdminListen
	auth := map[string]string{"Authorization": "Bearer " + token, "Content-Type": "application/json"}
	_, body, _ := doRequest(t, http.DefaultClient, "GET", admin+"/admin/v1/merchants", nil, auth)
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &list); err != nil || len(list.Data) == 0 {
		t.Fatalf("GET /admin/v1/merchants: %v, %s", err, body)
	}
	code, body, _ := doRequest(t, http.DefaultClient, "POST", admin+"/admin/v1/api_keys",
		strings.NewReader(fmt.Sprintf(`{"merchant":%q,"type":"publishable"}`, list.Data[0].ID)), auth)
	var k struct {
		Type   string   `json:"type"`
		Secret string   `json:"secret"`
		Scopes []string `json:"scopes"`
	}
	if err := json.Unmarshal([]byte(body), &k); err != nil || code != http.StatusOK || k.Type != "publishable" ||
		!strings.HasPrefix(k.Secret, "pk_test_") || len(k.Scopes) != 1 || k.Scopes[0] != "checkout" {
		t.Errorf("POST /admin/v1/api_keys type publishable: %d %s", code, body)
	}
	code, body, _ = doRequest(t, http.DefaultClient, "POST", admin+"/admin/v1/api_keys",
		strings.NewReader(fmt.Sprintf(`{"merchant":%q,"type":"public"}`, list.Data[0].ID)), auth)
	if code != http.StatusBadRequest || !strings.Contains(body, `"param":"type"`) {
		t.Errorf("POST /admin/v1/api_keys type public: %d %s", code, body)
	}
}
