package console_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/console"
	"github.com/surgepay/surgepay/engine"
)

// syncBuffer is a log sink safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// keyForm reads every hidden field of a key's confirmation page (scopes
// repeat).
func keyForm(t *testing.T, page string) url.Values {
	t.Helper()
	v := url.Values{}
	for _, m := range hiddenField.FindAllStringSubmatch(page, -1) {
		v.Add(m[1], m[2])
	}
	if v.Get("csrf") == "" || v.Get("key") == "" {
		t.Fatalf("the confirmation page has no csrf or key field:\n%s", page)
	}
	return v
}

var secretOnPage = regexp.MustCompile(`<code id="secret">(sk_[A-Za-z0-9_-]+)</code>`)

// postKey submits a key confirmation and returns the status, page and
// headers.
func (e *env) postKey(path string, form url.Values) (int, string, http.Header) {
	e.t.Helper()
	return e.do("POST", path, form, nil)
}

// createKey makes a key through the console and returns its secret.
func (e *env) createKey(query string) string {
	e.t.Helper()
	page := e.get(merchantKeys(e.merchant.ID)+"/new?"+query, http.StatusOK)
	code, body, h := e.postKey(merchantKeys(e.merchant.ID)+"/new", keyForm(e.t, page))
	m := secretOnPage.FindStringSubmatch(body)
	if code != http.StatusOK || m == nil {
		e.t.Fatalf("create key = %d, want 200 with a secret:\n%s", code, body)
	}
	if cc := h.Get("Cache-Control"); cc != "no-store" {
		e.t.Fatalf("the secret's page has Cache-Control %q, want no-store", cc)
	}
	return m[1]
}

func merchantKeys(id string) string { return "/console/merchants/" + id + "/keys" }

// auditActors returns the actor of each audit row of the test merchant,
// by action.
func (e *env) auditActors() map[string][]string {
	e.t.Helper()
	es, _, err := e.eng.ListAuditEvents(context.Background(), surgepay.AuditFilter{Page: surgepay.Page{Limit: 100}, MerchantID: e.merchant.ID})
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string][]string{}
	for _, a := range es {
		out[a.Action] = append(out[a.Action], a.Actor)
	}
	return out
}

func TestMerchantsList(t *testing.T) {
	e := newEnv(t)
	other, err := e.eng.CreateMerchant(context.Background(), "Other")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.eng.SetMerchantDisabled(context.Background(), other.ID, true); err != nil {
		t.Fatal(err)
	}
	body := e.get("/console/merchants", http.StatusOK)
	for _, want := range []string{`href="/console/merchants/` + e.merchant.ID + `"`, "Shop &lt;b&gt;&amp;amp;&lt;/b&gt;",
		other.ID, "disabled", `href="/console/merchants" aria-current="page"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the merchants page lacks %q", want)
		}
	}
	page1 := e.get("/console/merchants?limit=1", http.StatusOK)
	if !strings.Contains(page1, `id="next"`) {
		t.Fatalf("a page of 1 of 2 merchants has no next link:\n%s", page1)
	}
	code, bad, _ := e.do("GET", "/console/merchants?limit=0", nil, nil)
	if code != http.StatusBadRequest || !strings.Contains(bad, "<code>limit</code>") {
		t.Fatalf("limit=0 = %d, want 400 naming limit:\n%s", code, bad)
	}
	e.get("/console/merchants/mer_nope", http.StatusNotFound)
}

func TestMerchantKeyCreateRollRevoke(t *testing.T) {
	var logs syncBuffer
	e := newEnv(t, func(_ *engine.Config, c *console.Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	ctx := context.Background()
	secret := e.createKey("scopes=payments:read&scopes=refunds:write&expires_in=720h")
	defer func() {
		if strings.Contains(logs.String(), secret) || !strings.Contains(logs.String(), "console key action") {
			t.Errorf("the console's log holds the secret, or no key action:\n%s", logs.String())
		}
	}()
	k, err := e.eng.Authenticate(ctx, secret)
	if err != nil {
		t.Fatalf("the new secret: %v", err)
	}
	if got := strings.Join(k.Scopes, ","); got != "payments:read,refunds:write" {
		t.Fatalf("scopes %q, want payments:read,refunds:write", got)
	}
	if k.Expires.IsZero() {
		t.Fatal("the key has no expiry, want 720h")
	}
	page := e.get("/console/merchants/"+e.merchant.ID, http.StatusOK)
	if strings.Contains(page, secret) || !strings.Contains(page, k.Prefix) || !strings.Contains(page, k.ID) {
		t.Fatalf("the merchant's page shows the secret, or not the key's ID and prefix:\n%s", page)
	}

	t.Run("Roll", func(t *testing.T) {
		confirm := e.get(merchantKeys(e.merchant.ID)+"/"+k.ID+"/roll?grace=1h", http.StatusOK)
		if strings.Contains(confirm, secret) {
			t.Fatal("the roll's confirmation shows the secret")
		}
		code, body, _ := e.postKey(merchantKeys(e.merchant.ID)+"/"+k.ID+"/roll", keyForm(t, confirm))
		m := secretOnPage.FindStringSubmatch(body)
		if code != http.StatusOK || m == nil {
			t.Fatalf("roll = %d, want 200 with a secret:\n%s", code, body)
		}
		if _, err := e.eng.Authenticate(ctx, m[1]); err != nil {
			t.Fatalf("the rolled secret: %v", err)
		}
		if _, err := e.eng.Authenticate(ctx, secret); err != nil {
			t.Fatalf("the old secret within its grace: %v", err)
		}
	})

	t.Run("Revoke", func(t *testing.T) {
		confirm := e.get(merchantKeys(e.merchant.ID)+"/"+k.ID+"/revoke", http.StatusOK)
		code, _, h := e.postKey(merchantKeys(e.merchant.ID)+"/"+k.ID+"/revoke", keyForm(t, confirm))
		if code != http.StatusSeeOther || !strings.HasSuffix(h.Get("Location"), "?done=revoked") {
			t.Fatalf("revoke = %d to %q, want 303 ?done=revoked", code, h.Get("Location"))
		}
		if _, err := e.eng.Authenticate(ctx, secret); err == nil {
			t.Fatal("the revoked secret authenticates")
		}
		if body := e.get(h.Get("Location"), http.StatusOK); !strings.Contains(body, "revoked") || strings.Contains(body, secret) {
			t.Fatalf("the merchant's page after a revoke:\n%s", body)
		}
		// Rolling a revoked key is refused at its confirmation.
		e.get(merchantKeys(e.merchant.ID)+"/"+k.ID+"/roll?grace=1h", http.StatusConflict)
	})

	got := e.auditActors()
	for action, want := range map[string]int{surgepay.AuditAPIKeyCreated: 2, surgepay.AuditAPIKeyRolled: 1, surgepay.AuditAPIKeyRevoked: 1} {
		if len(got[action]) != want {
			t.Errorf("%d %s rows, want %d", len(got[action]), action, want)
		}
		for _, a := range got[action] {
			if a != "console:token" {
				t.Errorf("%s actor %q, want console:token", action, a)
			}
		}
	}
}

func TestMerchantKeyDoubleSubmitActsOnce(t *testing.T) {
	e := newEnv(t)
	page := e.get(merchantKeys(e.merchant.ID)+"/new?scopes=read_only", http.StatusOK)
	form := keyForm(t, page)
	code, first, _ := e.postKey(merchantKeys(e.merchant.ID)+"/new", form)
	m := secretOnPage.FindStringSubmatch(first)
	if code != http.StatusOK || m == nil {
		t.Fatalf("first submit = %d, want 200 with a secret", code)
	}
	code, _, h := e.postKey(merchantKeys(e.merchant.ID)+"/new", form)
	if code != http.StatusSeeOther || !strings.HasSuffix(h.Get("Location"), "?done=replayed") {
		t.Fatalf("second submit = %d to %q, want 303 ?done=replayed", code, h.Get("Location"))
	}
	notice := e.get(h.Get("Location"), http.StatusOK)
	if !strings.Contains(notice, "submitted before") || strings.Contains(notice, m[1]) {
		t.Fatalf("the page after a replay:\n%s", notice)
	}
	other := url.Values{}
	for k, v := range form {
		other[k] = v
	}
	other["scopes"] = []string{"full"}
	code, _, h = e.postKey(merchantKeys(e.merchant.ID)+"/new", other)
	if code != http.StatusSeeOther || !strings.HasSuffix(h.Get("Location"), "?done=duplicate") {
		t.Fatalf("same key, other scopes = %d to %q, want 303 ?done=duplicate", code, h.Get("Location"))
	}
	keys, err := e.eng.ListAPIKeys(context.Background(), e.merchant.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 {
		t.Fatalf("%d keys, want 1", len(keys))
	}
	if n := len(e.auditActors()[surgepay.AuditAPIKeyCreated]); n != 1 {
		t.Fatalf("%d api_key.created rows, want 1", n)
	}
}

func TestMerchantKeyActionsNeedCSRFToken(t *testing.T) {
	e := newEnv(t)
	page := e.get(merchantKeys(e.merchant.ID)+"/new", http.StatusOK)
	form := keyForm(t, page)
	for _, tc := range []struct {
		name   string
		csrf   string
		header map[string]string
	}{
		{"ErrNoToken", "", nil},
		{"ErrWrongToken", strings.Repeat("A", 43), nil},
		{"ErrCrossSite", form.Get("csrf"), map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := url.Values{"key": {form.Get("key")}, "csrf": {tc.csrf}}
			code, body, _ := e.do("POST", merchantKeys(e.merchant.ID)+"/new", v, tc.header)
			if code != http.StatusForbidden || strings.Contains(body, `id="secret"`) {
				t.Fatalf("POST = %d, want 403 without a secret", code)
			}
		})
	}
	keys, err := e.eng.ListAPIKeys(context.Background(), e.merchant.ID)
	if err != nil || len(keys) != 0 {
		t.Fatalf("%d keys (%v), want none", len(keys), err)
	}
}

func TestMerchantKeyBadFields(t *testing.T) {
	e := newEnv(t)
	secret := e.createKey("")
	k, err := e.eng.Authenticate(context.Background(), secret)
	if err != nil {
		t.Fatal(err)
	}
	keys := merchantKeys(e.merchant.ID)
	for _, tc := range []struct{ name, path, field string }{
		{"ErrScopeUnknown", keys + "/new?scopes=everything", "scopes"},
		{"ErrScopesContradict", keys + "/new?scopes=full&scopes=payments:read", "scopes"},
		{"ErrExpiresIn", keys + "/new?expires_in=-1h", "expires_in"},
		{"ErrExpiresInTwice", keys + "/new?expires_in=1h&expires_in=2h", "expires_in"},
		{"ErrGraceMissing", keys + "/" + k.ID + "/roll", "grace"},
		{"ErrGraceTooLong", keys + "/" + k.ID + "/roll?grace=1000h", "grace"},
		{"ErrCardNumber", keys + "/new?expires_in=4242424242424242", "expires_in"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body, _ := e.do("GET", tc.path, nil, nil)
			if code != http.StatusBadRequest || !strings.Contains(body, "Field "+tc.field+":") {
				t.Fatalf("GET %s = %d, want 400 naming %s:\n%s", tc.path, code, tc.field, body)
			}
			if strings.Contains(body, secret) || strings.Contains(body, "4242424242424242") {
				t.Fatal("the page shows a secret or the card number")
			}
		})
	}
	other, err := e.eng.CreateMerchant(context.Background(), "Other")
	if err != nil {
		t.Fatal(err)
	}
	e.get(merchantKeys(other.ID)+"/"+k.ID+"/revoke", http.StatusNotFound)
	e.get(keys+"/"+k.ID+"/expire", http.StatusNotFound)
}

// TestMerchantKeyConcurrentSubmitActsOnce: two submits of one
// confirmation at once make one key (one is answered with the secret,
// the other with a notice).
func TestMerchantKeyConcurrentSubmitActsOnce(t *testing.T) {
	e := newEnv(t)
	form := keyForm(t, e.get(merchantKeys(e.merchant.ID)+"/new", http.StatusOK))
	var wg sync.WaitGroup
	codes := make([]int, 4)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i], _, _ = e.postKey(merchantKeys(e.merchant.ID)+"/new", form)
		}()
	}
	wg.Wait()
	ok := 0
	for _, c := range codes {
		if c == http.StatusOK {
			ok++
		} else if c != http.StatusSeeOther {
			t.Errorf("a submit = %d, want 200 or 303", c)
		}
	}
	keys, err := e.eng.ListAPIKeys(context.Background(), e.merchant.ID)
	if err != nil {
		t.Fatal(err)
	}
	if ok != 1 || len(keys) != 1 {
		t.Fatalf("%d answers with a secret and %d keys, want 1 and 1", ok, len(keys))
	}
}
