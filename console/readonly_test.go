package console_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/console"
	"github.com/surgepay/surgepay/engine"
)

// readOnlyFixture is a fixture with a webhook endpoint (so that the
// payments have deliveries to resend) and an API key of the merchant.
func readOnlyFixture(t *testing.T, e *env) (*fixture, *surgepay.APIKey) {
	t.Helper()
	if _, _, err := e.eng.CreateWebhookEndpoint(context.Background(), e.call,
		&engine.WebhookEndpointInput{URL: "http://127.0.0.1:9/hooks"}); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, e)
	_, k, err := e.eng.CreateAPIKey(context.Background(), e.merchant.ID)
	if err != nil {
		t.Fatal(err)
	}
	return f, k
}

// actionMarks are what a page shows of the actions: the payment's forms
// and buttons, a delivery's resend link, a key's roll, revoke and create.
var actionMarks = []string{`id="capture"`, `id="void"`, `id="refund"`, `class="resend"`, `/capture"`, `/refund"`,
	`id="create"`, `class="revoke"`, `/roll"`, `Roll…`, `/keys/new"`}

// TestReadOnlyPagesShowNoAction: an operator logged in with the
// read-only token sees the payment's and the merchant's pages with the
// read-only notice and none of the actions an operator with the admin
// token sees there; every other page reads.
func TestReadOnlyPagesShowNoAction(t *testing.T) {
	e := newEnv(t)
	f, _ := readOnlyFixture(t, e)
	ro := e.as(testReadToken)
	pages := []string{paymentPath(f.auth), paymentPath(f.sale), "/console/merchants/" + e.merchant.ID}
	for _, p := range pages {
		full := e.get(p, http.StatusOK)
		body := ro.get(p, http.StatusOK)
		if !strings.Contains(body, console.ReadOnlyNotice) || !strings.Contains(body, `id="read-only"`) {
			t.Errorf("%s read-only: the page does not say %q", p, console.ReadOnlyNotice)
		}
		if strings.Contains(full, console.ReadOnlyNotice) {
			t.Errorf("%s with the admin token says %q", p, console.ReadOnlyNotice)
		}
		shown := 0
		for _, mark := range actionMarks {
			if strings.Contains(full, mark) {
				shown++
			}
			if strings.Contains(body, mark) {
				t.Errorf("%s read-only shows an action: %s", p, mark)
			}
		}
		if shown == 0 {
			t.Errorf("%s with the admin token shows no action: the check above proves nothing", p)
		}
		if strings.Count(body, "<form") != 1 { // the navigation's "Log out"
			t.Errorf("%s read-only has %d forms, want 1 (Log out)", p, strings.Count(body, "<form"))
		}
	}
	for _, p := range []string{"/console/?merchant=" + e.merchant.ID + "&email=zoe@example.com", "/console/merchants",
		"/console/staged", "/console/unknown", "/console/processors", "/console/webhooks", "/console/audit"} {
		ro.get(p, http.StatusOK)
	}
}

// TestReadOnlyActionsRefused: every action's confirmation page is 403
// to a read-only operator reaching it by its address, and so is the
// POST of a confirmation an operator with the admin token was shown:
// nothing is done, nothing audited.
func TestReadOnlyActionsRefused(t *testing.T) {
	e := newEnv(t)
	f, k := readOnlyFixture(t, e)
	ro := e.as(testReadToken)
	full := e.get(paymentPath(f.sale), http.StatusOK)
	i := strings.Index(full, `class="resend"`)
	if i < 0 {
		t.Fatal("the payment's page lists no delivery to resend")
	}
	resend := full[strings.LastIndex(full[:i], `href="`)+len(`href="`):]
	resend = resend[:strings.IndexByte(resend, '"')]
	keys := merchantKeys(e.merchant.ID)
	confirms := []string{paymentPath(f.sale) + "/refund?amount=100", paymentPath(f.auth) + "/capture", paymentPath(f.auth) + "/void",
		resend, keys + "/new", keys + "/" + k.ID + "/roll?grace=24h", keys + "/" + k.ID + "/revoke"}
	for _, p := range confirms {
		action, _, _ := strings.Cut(p, "?")
		t.Run(action[strings.LastIndexByte(action, '/')+1:], func(t *testing.T) {
			body := ro.get(p, http.StatusForbidden)
			if !strings.Contains(body, console.ReadOnlyNotice) || strings.Contains(body, `name="key"`) {
				t.Errorf("GET %s read-only: the 403 page does not say %q, or holds a form", p, console.ReadOnlyNotice)
			}
			// The form an operator who may act was shown, posted by the
			// read-only operator: refused.
			form := keyForm(t, e.get(p, http.StatusOK))
			if code, body, _ := ro.do("POST", action, form, map[string]string{"Accept": "text/html"}); code != http.StatusForbidden ||
				!strings.Contains(body, "read-only") {
				t.Errorf("POST %s read-only = %d, want 403 read-only:\n%s", action, code, body)
			}
		})
	}
	if p := e.payment(f.sale.ID); p.AmountRefunded != 0 {
		t.Errorf("refunded %d by a read-only operator", p.AmountRefunded)
	}
	if p := e.payment(f.auth.ID); p.Status != surgepay.StatusRequiresCapture {
		t.Errorf("the authorization is %s after a read-only operator's forms, want requires_capture", p.Status)
	}
	if got, err := e.eng.GetAPIKey(context.Background(), k.ID); err != nil || got.Revoked {
		t.Errorf("the key after a read-only operator's revoke: revoked %v, %v; want not revoked", got != nil && got.Revoked, err)
	}
	for action, actors := range e.auditActors() {
		for _, a := range actors {
			if strings.HasPrefix(a, "console:") {
				t.Errorf("audit row %s by %s after a read-only operator's forms, want none by the console", action, a)
			}
		}
	}
}

// TestReadOnlyConsoleRefusesPOST: the console refuses a read-only
// operator's action itself, behind any guard: a POST that reaches it is
// 403 before its form is read, and a GET of a confirmation too.
func TestReadOnlyConsoleRefusesPOST(t *testing.T) {
	e := newEnv(t)
	f := newFixture(t, e)
	h := console.New(console.Config{Engine: e.eng, ReadOnly: func(*http.Request) bool { return true }})
	for _, tc := range []struct{ method, path string }{
		{"POST", paymentPath(f.sale) + "/refund"},
		{"POST", merchantKeys(e.merchant.ID) + "/new"},
		{"GET", paymentPath(f.auth) + "/void"},
	} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(tc.method, tc.path, strings.NewReader("amount=100")))
		if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), console.ReadOnlyNotice) {
			t.Errorf("%s %s read-only = %d, want 403 with %q", tc.method, tc.path, w.Code, console.ReadOnlyNotice)
		}
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", paymentPath(f.sale), nil))
	if w.Code != http.StatusOK {
		t.Errorf("GET the payment read-only = %d, want 200", w.Code)
	}
}
