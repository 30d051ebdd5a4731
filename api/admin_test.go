package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/api"
	"github.com/surgepay/surgepay/engine"
	"github.com/surgepay/surgepay/internal/testenv"
)

// adminClock is a settable engine clock.
type adminClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *adminClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *adminClock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// adminEnv is an env with the admin API served beside the public one, on
// the same engine (as serve does), and the engine's adminClock in the test's
// hands.
type adminEnv struct {
	*env
	admin string
	clock *adminClock
}

func newAdminEnv(t *testing.T, store surgepay.Store) *adminEnv {
	t.Helper()
	c := &adminClock{t: time.Now().UTC()}
	e := newEnvWith(t, store, func(cfg *engine.Config) { cfg.Now = c.now })
	srv := httptest.NewServer(api.NewAdmin(api.AdminConfig{Engine: e.eng,
		Actor: func(r *http.Request) string { return "admin_api:test" }}))
	t.Cleanup(srv.Close)
	return &adminEnv{env: e, admin: srv.URL, clock: c}
}

// call sends an admin request and fails t unless the status is want.
func (a *adminEnv) call(t *testing.T, want int, method, path, body string) map[string]any {
	t.Helper()
	req, err := http.NewRequest(method, a.admin+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode != want {
		t.Fatalf("%s %s %s: got %d %s, want %d", method, path, body, res.StatusCode, raw, want)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s %s: not JSON: %s", method, path, raw)
	}
	return out
}

func str(m map[string]any, k string) string { s, _ := m[k].(string); return s }

func errOf(m map[string]any) (code, param string) {
	e, _ := m["error"].(map[string]any)
	return str(e, "code"), str(e, "param")
}

// wantRefused fails t unless the key's request is refused with status and
// code.
func (a *adminEnv) wantRefused(t *testing.T, key, method, path, body string, status int, code string) *response {
	t.Helper()
	r := a.do(key, method, path, body, "")
	if r.Status != status || r.errField("code") != code {
		t.Fatalf("%s %s: got %d %s, want %d %s", method, path, r.Status, r.Raw, status, code)
	}
	return r
}

// TestAdminMerchantDisableAtOnce: a merchant made through the admin API
// gets a key that works; disabling it refuses the key at once (403
// merchant_disabled, the key cached in this process beforehand), leaves
// its payments as they were and another merchant untouched; enabling it
// lets the key back in at once. Every change is in the audit trail with
// its actor.
func TestAdminMerchantDisableAtOnce(t *testing.T) {
	for _, b := range testenv.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			a := newAdminEnv(t, b.Open(t))
			m := a.call(t, 200, "POST", "/admin/v1/merchants", `{"name":"Shop"}`)
			id := str(m, "id")
			if m["disabled"] != false || str(m, "name") != "Shop" {
				t.Fatalf("created merchant: %v", m)
			}
			k := a.call(t, 200, "POST", "/admin/v1/api_keys", `{"merchant":"`+id+`"}`)
			key := str(k, "secret")
			if !strings.HasPrefix(key, "sk_") || !strings.HasPrefix(key, str(k, "prefix")) {
				t.Fatalf("created key: %v", k)
			}
			cus, pm := a.customerWithCard(key, "4242424242424242")
			pay := a.must(200, key, "POST", "/v1/payments", paymentBody(cus, pm, 1234, "automatic"))
			before, _ := a.store.FindPayment(context.Background(), id, pay.str("id"))

			a.call(t, 200, "POST", "/admin/v1/merchants/"+id+"/disable", "")
			a.wantRefused(t, key, "GET", "/v1/payments/"+pay.str("id"), "", 403, "merchant_disabled")
			a.wantRefused(t, key, "POST", "/v1/customers", `{"name":"x"}`, 403, "merchant_disabled")
			a.must(200, a.keyA, "GET", "/v1/customers", "")
			if got := a.call(t, 200, "GET", "/admin/v1/merchants/"+id, ""); got["disabled"] != true {
				t.Errorf("GET merchant after disable: %v", got)
			}
			after, err := a.store.FindPayment(context.Background(), id, pay.str("id"))
			if err != nil || after.Version != before.Version || after.Status != before.Status || after.AmountCaptured != 1234 {
				t.Errorf("payment after disable: %+v, %v; want it unchanged", after, err)
			}

			a.call(t, 200, "POST", "/admin/v1/merchants/"+id+"/enable", "")
			a.must(200, key, "GET", "/v1/payments/"+pay.str("id"), "")

			list := a.call(t, 200, "GET", "/admin/v1/audit_events?merchant="+id, "")
			var actions []string
			for _, ev := range list["data"].([]any) {
				ev := ev.(map[string]any)
				actions = append(actions, str(ev, "action"))
				if str(ev, "actor") != "admin_api:test" {
					t.Errorf("audit event %v: actor %q, want admin_api:test", ev, str(ev, "actor"))
				}
				if strings.Contains(str(ev, "detail"), key) {
					t.Errorf("audit event holds the secret: %v", ev)
				}
			}
			want := []string{surgepay.AuditMerchantEnabled, surgepay.AuditMerchantDisabled, surgepay.AuditAPIKeyCreated,
				surgepay.AuditMerchantCreated}
			if strings.Join(actions, " ") != strings.Join(want, " ") {
				t.Errorf("audit actions %v, want %v", actions, want)
			}
		})
	}
}

// TestAPIKeyExpiresAndRollGrace: a key made to expire works until then
// and is refused 401 api_key_expired after; a rolled key's old secret
// works through the grace period and is refused after it, while the new
// one works; a roll with grace 0 stops the old secret at once. The clock
// is the engine's, moved by the test.
func TestAPIKeyExpiresAndRollGrace(t *testing.T) {
	a := newAdminEnv(t, openSQLite(t))
	k := a.call(t, 200, "POST", "/admin/v1/api_keys", `{"merchant":"`+a.merchants[0]+`","expires_in":"1h"}`)
	short := str(k, "secret")
	a.must(200, short, "GET", "/v1/customers", "")
	a.clock.add(59 * time.Minute)
	a.must(200, short, "GET", "/v1/customers", "")
	a.clock.add(time.Minute)
	a.wantRefused(t, short, "GET", "/v1/customers", "", 401, "api_key_expired")
	a.call(t, 409, "POST", "/admin/v1/api_keys/"+str(k, "id")+"/roll", `{"grace":"1h"}`)

	k = a.call(t, 200, "POST", "/admin/v1/api_keys", `{"merchant":"`+a.merchants[0]+`","scopes":["read_only"]}`)
	old := str(k, "secret")
	a.must(200, old, "GET", "/v1/customers", "") // cached now
	r := a.call(t, 200, "POST", "/admin/v1/api_keys/"+str(k, "id")+"/roll", `{"grace":"24h"}`)
	nk := r["new"].(map[string]any)
	fresh := str(nk, "secret")
	if scopes, _ := nk["scopes"].([]any); len(scopes) != 5 {
		t.Errorf("rolled key's scopes %v, want the old key's 5", nk["scopes"])
	}
	if r["old"].(map[string]any)["secret"] != nil {
		t.Errorf("roll answer shows the old key's secret")
	}
	a.clock.add(24*time.Hour - time.Second)
	a.must(200, old, "GET", "/v1/customers", "")
	a.must(200, fresh, "GET", "/v1/customers", "")
	a.clock.add(time.Second)
	a.wantRefused(t, old, "GET", "/v1/customers", "", 401, "api_key_expired")
	a.must(200, fresh, "GET", "/v1/customers", "")
	a.wantRefused(t, fresh, "POST", "/v1/customers", `{"name":"x"}`, 403, "insufficient_scope")

	// An expiry set on a live key, then only brought forward.
	k = a.call(t, 200, "POST", "/admin/v1/api_keys", `{"merchant":"`+a.merchants[0]+`"}`)
	later := str(k, "secret")
	got := a.call(t, 200, "POST", "/admin/v1/api_keys/"+str(k, "id")+"/expire", `{"expires_in":"10m"}`)
	if got["expires_at"] == nil {
		t.Errorf("expire answer: %v", got)
	}
	if code, param := errOf(a.call(t, 400, "POST", "/admin/v1/api_keys/"+str(k, "id")+"/expire", `{"expires_in":"1h"}`)); code != "invalid_value" || param != "expires_at" {
		t.Errorf("pushing an expiry later: %s %s, want invalid_value expires_at", code, param)
	}
	a.must(200, later, "GET", "/v1/customers", "")
	a.clock.add(10 * time.Minute)
	a.wantRefused(t, later, "GET", "/v1/customers", "", 401, "api_key_expired")
	if ev := a.call(t, 200, "GET", "/admin/v1/audit_events?object="+str(k, "id"), "")["data"].([]any); len(ev) != 2 ||
		str(ev[0].(map[string]any), "action") != surgepay.AuditAPIKeyExpirySet {
		t.Errorf("audit of the expired key: %v", ev)
	}

	r = a.call(t, 200, "POST", "/admin/v1/api_keys/"+str(nk, "id")+"/roll", `{"grace":"0s"}`)
	a.wantRefused(t, fresh, "GET", "/v1/customers", "", 401, "invalid_api_key")
	a.must(200, str(r["new"].(map[string]any), "secret"), "GET", "/v1/customers", "")

	var actions []string
	list := a.call(t, 200, "GET", "/admin/v1/audit_events?object="+str(nk, "id"), "")
	for _, ev := range list["data"].([]any) {
		actions = append(actions, str(ev.(map[string]any), "action"))
	}
	if want := "api_key.rolled api_key.created"; strings.Join(actions, " ") != want {
		t.Errorf("audit of the rolled key: %v, want %s", actions, want)
	}
}

// TestAPIKeyScopesEnforced: a read-only key reads and is refused every
// write with 403 insufficient_scope naming the scope; a payments key
// without refunds captures and is refused the refund; a full key does
// both.
func TestAPIKeyScopesEnforced(t *testing.T) {
	a := newAdminEnv(t, openSQLite(t))
	mk := func(scopes string) string {
		return str(a.call(t, 200, "POST", "/admin/v1/api_keys", `{"merchant":"`+a.merchants[0]+`","scopes":`+scopes+`}`), "secret")
	}
	ro, noRefunds := mk(`["read_only"]`), mk(`["payments_no_refunds"]`)
	cus, pm := a.customerWithCard(noRefunds, "4242424242424242")
	pay := a.must(200, noRefunds, "POST", "/v1/payments", paymentBody(cus, pm, 500, "manual")).str("id")
	a.must(200, noRefunds, "POST", "/v1/payments/"+pay+"/capture", "")
	r := a.wantRefused(t, noRefunds, "POST", "/v1/payments/"+pay+"/refunds", `{"amount":100}`, 403, "insufficient_scope")
	if r.errField("param") != "refunds:write" || r.errField("type") != "permission_error" {
		t.Errorf("refund refusal: %s; want param refunds:write, type permission_error", r.Raw)
	}
	a.must(200, ro, "GET", "/v1/payments/"+pay, "")
	a.must(200, ro, "GET", "/v1/customers", "")
	for _, w := range []struct{ method, path, body, scope string }{
		{"POST", "/v1/customers", `{"name":"x"}`, "customers:write"},
		{"POST", "/v1/payments", paymentBody(cus, pm, 500, "automatic"), "payments:write"},
		{"POST", "/v1/payments/" + pay + "/refunds", `{"amount":100}`, "refunds:write"},
		{"DELETE", "/v1/payment_methods/" + pm, "", "payment_methods:write"},
		{"POST", "/v1/webhook_endpoints", `{"url":"https://example.com/h"}`, "webhook_endpoints:write"},
	} {
		r := a.wantRefused(t, ro, w.method, w.path, w.body, 403, "insufficient_scope")
		if r.errField("param") != w.scope {
			t.Errorf("%s %s: param %q, want %s", w.method, w.path, r.errField("param"), w.scope)
		}
	}
	a.must(200, a.keyA, "POST", "/v1/payments/"+pay+"/refunds", `{"amount":100}`)
}

// TestAdminBadInput: the admin API refuses bad input with 4xx naming the
// field, never 500.
func TestAdminBadInput(t *testing.T) {
	a := newAdminEnv(t, openSQLite(t))
	keyID := ""
	for _, k := range a.call(t, 200, "GET", "/admin/v1/api_keys?merchant="+a.merchants[0], "")["data"].([]any) {
		keyID = str(k.(map[string]any), "id")
	}
	for _, tc := range []struct {
		method, path, body string
		status             int
		code, param        string
	}{
		{"POST", "/admin/v1/merchants", `{}`, 400, "parameter_missing", "name"},
		{"POST", "/admin/v1/merchants", `{"name":""}`, 400, "parameter_missing", "name"},
		{"POST", "/admin/v1/merchants", `{"name":"a\u202eb"}`, 400, "invalid_characters", "name"},
		{"POST", "/admin/v1/merchants", `{"name":"a","NAME":"b"}`, 400, "unknown_field", "NAME"}, // names match in their exact case
		{"POST", "/admin/v1/merchants", `{"name":"a","name":"b"}`, 400, "duplicate_field", "name"},
		{"POST", "/admin/v1/merchants", `{"nom":"a"}`, 400, "unknown_field", "nom"},
		{"POST", "/admin/v1/api_keys", `{}`, 400, "parameter_missing", "merchant"},
		{"POST", "/admin/v1/api_keys", `{"merchant":"mer_nope"}`, 404, "resource_missing", "merchant"},
		{"POST", "/admin/v1/api_keys", `{"merchant":"` + a.merchants[0] + `","scopes":["payments:admin"]}`, 400, "invalid_scope", "scopes"},
		// An empty list must not fail open into a full-access key.
		{"POST", "/admin/v1/api_keys", `{"merchant":"` + a.merchants[0] + `","scopes":[]}`, 400, "invalid_scope", "scopes"},
		{"POST", "/admin/v1/api_keys", `{"merchant":"` + a.merchants[0] + `","expires_in":"-1h"}`, 400, "invalid_value", "expires_in"},
		{"POST", "/admin/v1/api_keys", `{"merchant":"` + a.merchants[0] + `","expires_at":"2001-01-01T00:00:00Z"}`, 400, "invalid_value", "expires_at"},
		{"POST", "/admin/v1/api_keys", `{"merchant":"` + a.merchants[0] + `","expires_at":"tomorrow"}`, 400, "invalid_value", "expires_at"},
		{"POST", "/admin/v1/api_keys/" + keyID + "/roll", `{}`, 400, "parameter_missing", "grace"},
		{"POST", "/admin/v1/api_keys/" + keyID + "/roll", `{"grace":"1000h"}`, 400, "invalid_value", "grace"},
		{"POST", "/admin/v1/api_keys/" + keyID + "/roll", `{"grace":"soon"}`, 400, "invalid_value", "grace"},
		{"POST", "/admin/v1/api_keys/key_nope/revoke", ``, 404, "resource_missing", "id"},
		{"POST", "/admin/v1/merchants/mer_nope/disable", ``, 404, "resource_missing", "id"},
		{"GET", "/admin/v1/audit_events?limit=1000", ``, 400, "invalid_value", "limit"},
		{"GET", "/admin/v1/audit_events?merchant=%zz", ``, 400, "invalid_query", "query"},
		{"DELETE", "/admin/v1/merchants", ``, 405, "method_not_allowed", ""},
		{"GET", "/admin/v1/nothing", ``, 404, "route_not_found", ""},
	} {
		got := a.call(t, tc.status, tc.method, tc.path, tc.body)
		if code, param := errOf(got); code != tc.code || param != tc.param {
			t.Errorf("%s %s %s: code %q param %q, want %q %q", tc.method, tc.path, tc.body, code, param, tc.code, tc.param)
		}
	}
}

// TestAPIKeyLastUsedFlushed: a request records its key's use in memory,
// with no statement (the key comes from the cache); the flush writes it,
// and the admin list shows it.
func TestAPIKeyLastUsedFlushed(t *testing.T) {
	a := newAdminEnv(t, openSQLite(t))
	// A new key is read from the store at its first use (with its
	// merchant's state: CreateAPIKeyWith does not cache it); then cached.
	a.must(200, a.keyA, "GET", "/v1/customers", "")
	r := a.must(200, a.keyA, "GET", "/v1/customers", "")
	if sql := r.Header.Get("Surgepay-Sql"); !strings.HasPrefix(sql, "total=1 ") {
		t.Errorf("GET /v1/customers: Surgepay-Sql %q, want the list's one statement only", sql)
	}
	keys, err := a.store.ListAPIKeys(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if !k.LastUsed.IsZero() {
			t.Fatalf("key %s has a last-used time before any flush", k.ID)
		}
	}
	list := a.call(t, 200, "GET", "/admin/v1/api_keys?merchant="+a.merchants[0], "")
	data := list["data"].([]any)
	if len(data) != 1 || data[0].(map[string]any)["last_used"] == nil {
		t.Fatalf("admin key list after a request: %v; want last_used set", data)
	}
	if got := int64(data[0].(map[string]any)["last_used"].(float64)); got != a.clock.now().Unix() {
		t.Errorf("last_used %d, want %d", got, a.clock.now().Unix())
	}
	for _, k := range a.call(t, 200, "GET", "/admin/v1/api_keys?merchant="+a.merchants[1], "")["data"].([]any) {
		if k.(map[string]any)["last_used"] != nil {
			t.Errorf("merchant B's unused key has last_used %v", k.(map[string]any)["last_used"])
		}
	}
}
