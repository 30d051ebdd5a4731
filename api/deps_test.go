package api_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/surgepay/surgepay/internal/testenv"
	"github.com/surgepay/surgepay/postgres"
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
	// The store's watch finds it back within a probe interval (a quarter
	// of postgres.hung_after); until then it still answers 503.
	deadline := time.Now().Add(30 * time.Second)
	for e.do(e.keyA, "GET", "/v1/customers/"+cus, "", "").Status == http.StatusServiceUnavailable && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if got := e.must(http.StatusOK, e.keyA, "GET", "/v1/customers/"+cus, "").str("name"); got != "Ada" {
		t.Errorf("customer after the database came back: name %q, want Ada", got)
	}
}

// A PostgreSQL that stops answering with its connections open (a stopped
// process, a frozen host: the proxy holds every byte) is found by the
// store's watch within postgres.hung_after: requests in flight and new
// ones get 503 store_unavailable with Retry-After while it is stopped,
// instead of waiting until it resumes (they waited 13 s for a 10 s
// SIGSTOP, then got 429). The store logs one line when it stops answering
// and one when it answers again, with the refused count; the API logs no
// line a request. Once it answers, requests succeed, and a sale retried
// under its key after an unknown outcome is stored once.
func TestPostgresHungAnswers503(t *testing.T) {
	storeLogs := &syncBuffer{}
	store, proxy := testenv.OpenPostgresProxiedWith(t, postgres.Config{HungAfter: 400 * time.Millisecond,
		Log: slog.New(slog.NewTextHandler(storeLogs, nil))})
	e := newEnv(t, store)
	cus, pm := e.customerWithCard(e.keyA, "4242424242424242")
	sale := paymentBody(cus, pm, 1500, "automatic")

	proxy.Freeze()
	thawed := false
	defer func() {
		if !thawed {
			proxy.Thaw()
		}
	}()
	type answer struct {
		name string
		r    *response
	}
	answers := make(chan answer)
	requests := []struct{ name, method, path, body, idem string }{
		{"read", "GET", "/v1/customers/" + cus, "", ""},
		{"sale", "POST", "/v1/payments", sale, "hung-sale-1"},
		{"write", "POST", "/v1/customers", `{"name":"Grace"}`, ""},
		{"list", "GET", "/v1/payments", "", ""},
	}
	for _, c := range requests {
		go func() { answers <- answer{c.name, e.do(e.keyA, c.method, c.path, c.body, c.idem)} }()
	}
	hang := time.After(30 * time.Second) // a hang guard: the proxy holds every byte until Thaw
	var saleStatus int
	for range requests {
		select {
		case a := <-answers:
			if a.name == "sale" {
				saleStatus = a.r.Status
			}
			if a.r.Status != http.StatusServiceUnavailable || a.r.Header.Get("Retry-After") == "" {
				t.Errorf("%s with the database stopped: %d Retry-After %q %s; want 503 with Retry-After",
					a.name, a.r.Status, a.r.Header.Get("Retry-After"), a.r.Raw)
			}
		case <-hang:
			t.Fatal("requests held 30 s while the database is stopped; want 503 once the watch finds it hung")
		}
	}
	// Found down: more requests are refused at once, without a line each.
	for i := range 20 {
		r := e.do(e.keyA, "GET", fmt.Sprintf("/v1/customers/cus_missing%d", i), "", "")
		if r.Status != http.StatusServiceUnavailable {
			t.Fatalf("request %d with the database found stopped: %d %s; want 503", i, r.Status, r.Raw)
		}
	}

	proxy.Thaw()
	thawed = true
	deadline := time.Now().Add(30 * time.Second)
	for e.do(e.keyA, "GET", "/v1/customers/"+cus, "", "").Status != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatal("requests still refused 30 s after the database resumed")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The sale's outcome was unknown or refused; its retry under the same
	// key is stored once, whichever it was (its first INSERT may have
	// been held by the stopped server and committed when it resumed).
	r := e.do(e.keyA, "POST", "/v1/payments", sale, "hung-sale-1")
	for r.Status == http.StatusConflict && time.Now().Before(deadline) { // still in flight on this node
		time.Sleep(50 * time.Millisecond)
		r = e.do(e.keyA, "POST", "/v1/payments", sale, "hung-sale-1")
	}
	if r.Status != http.StatusOK {
		t.Fatalf("sale retried after the database resumed (first answer %d): %d %s", saleStatus, r.Status, r.Raw)
	}
	list := e.must(http.StatusOK, e.keyA, "GET", "/v1/payments?customer="+cus+"&limit=100", "")
	if n := len(list.JSON["data"].([]any)); n != 1 {
		t.Errorf("%d payments for the customer after the retried sale, want 1", n)
	}

	logs := storeLogs.String()
	if n := strings.Count(logs, "PostgreSQL unavailable"); n != 1 {
		t.Errorf("%d lines saying the database is unavailable, want 1:\n%s", n, logs)
	}
	if n := strings.Count(logs, "PostgreSQL available again"); n != 1 || !strings.Contains(logs, "failed_calls=") {
		t.Errorf("%d lines saying the database is available again, want 1 with failed_calls:\n%s", n, logs)
	}
	// A write whose COMMIT was in flight when the watch cancelled it has
	// an unknown outcome, worth its line; refusals are not.
	for line := range strings.Lines(e.logs.String()) {
		if strings.Contains(line, `"level":"ERROR"`) && !strings.Contains(line, "may or may not be stored") {
			t.Errorf("the API logged an ERROR line a refused request, want none (the store logs its state): %s", line)
		}
	}
}
