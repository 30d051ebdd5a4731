package api_test

import (
	"net/http"
	"testing"

	"github.com/surgepay/surgepay/internal/testenv"
)

// A PostgreSQL that goes away (a restart, a failover) answers every
// request with a fast 503 store_unavailable and Retry-After, reads
// included: the API-key lookup of a key not in the cache used to be a 500
// internal_error. Once it is back, requests succeed again.
func TestPostgresDownAnswers503(t *testing.T) {
	store, proxy := testenv.OpenPostgresProxied(t)
	e := newEnv(t, store)
	cus := e.must(http.StatusOK, e.keyA, "POST", "/v1/customers", `{"name":"Ada"}`).str("id")

	we := e.must(http.StatusOK, e.keyA, "POST", "/v1/webhook_endpoints", `{"url":"https://example.com/hook"}`).str("id")

	proxy.Cut()
	for _, c := range []struct{ name, key, method, path, body string }{
		{"api key lookup", "sk_not_cached_" + cus, "GET", "/v1/customers/" + cus, ""},
		{"read", e.keyA, "GET", "/v1/customers/" + cus, ""},
		{"list", e.keyA, "GET", "/v1/payments", ""},
		{"webhook deliveries", e.keyA, "GET", "/v1/webhook_deliveries?endpoint=" + we, ""},
		{"write", e.keyA, "POST", "/v1/customers", `{"name":"Grace"}`},
	} {
		r := e.do(c.key, c.method, c.path, c.body, "")
		if r.Status != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" {
			t.Errorf("%s with the database down: %d Retry-After %q %s; want 503 with Retry-After",
				c.name, r.Status, r.Header.Get("Retry-After"), r.Raw)
			continue
		}
		if code := r.JSON["error"].(map[string]any)["code"]; code != "store_unavailable" {
			t.Errorf("%s with the database down: code %v, want store_unavailable", c.name, code)
		}
	}

	proxy.Restore()
	if got := e.must(http.StatusOK, e.keyA, "GET", "/v1/customers/"+cus, "").str("name"); got != "Ada" {
		t.Errorf("customer after the database came back: name %q, want Ada", got)
	}
}
