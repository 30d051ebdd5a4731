package sim_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/provider/sim"
)

// noRedirects is a browser that shows each answer instead of following it.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// page is an answer, read in full.
type page struct {
	StatusCode int
	Header     http.Header
}

func get(t *testing.T, u string) (page, string) {
	t.Helper()
	resp, err := noRedirects.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return page{resp.StatusCode, resp.Header}, string(b)
}

func postForm(t *testing.T, u, body string) page {
	t.Helper()
	resp, err := noRedirects.Post(u, "application/x-www-form-urlencoded", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return page{resp.StatusCode, resp.Header}
}

// pagesServer serves p's pages on 127.0.0.1, as `surgepay serve` does on
// its API listener, and returns a ReturnURL on that origin: the
// challenges' ActionURLs then point at the server.
func pagesServer(t *testing.T, p *sim.Provider) (srvURL, ret string) {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(surgepay.PagesPrefix, p.Pages())
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL, srv.URL + "/v1/checkout/return?payment=pay_k&client_secret=cs_x"
}

func startChallenge(t *testing.T, c surgepay.Provider, key, number, ret string) *surgepay.ProviderResult {
	t.Helper()
	res, err := c.Authorize(t.Context(), browserReq(key, number, 123456, true, ret))
	if err != nil || !res.RequiresAction {
		t.Fatalf("authorize %s: got %+v, %v; want RequiresAction", key, res, err)
	}
	return res
}

func TestChallengePage(t *testing.T) {
	p := sim.New(sim.DefaultConfig())
	srvURL, ret := pagesServer(t, p)
	res := startChallenge(t, p, "k", sim.Card3DSChallenge, ret)
	if !strings.HasPrefix(res.ActionURL, srvURL+surgepay.PagesPrefix+"3ds/") {
		t.Fatalf("action URL %q: want one on %s", res.ActionURL, srvURL)
	}

	resp, body := get(t, res.ActionURL)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET: got %d, want 200", resp.StatusCode)
	}
	wantHeaders := map[string]string{
		"Content-Security-Policy": "default-src 'none'; style-src 'self'; form-action 'self' http: https:; frame-ancestors 'none'; base-uri 'none'",
		"X-Content-Type-Options":  "nosniff",
		"Referrer-Policy":         "no-referrer",
		"Cache-Control":           "no-store",
		"Content-Type":            "text/html; charset=utf-8",
	}
	for h, want := range wantHeaders {
		if got := resp.Header.Get(h); got != want {
			t.Errorf("%s: got %q, want %q", h, got, want)
		}
	}
	for _, want := range []string{`<html lang="en">`, "<title>Simulated 3-D Secure</title>", "1,234.56 USD", "3220",
		`<form method="post"`, `name="outcome" value="authenticate">Authenticate</button>`,
		`name="outcome" value="fail" class="secondary">Fail</button>`, `href="../3ds.css"`} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q:\n%s", want, body)
		}
	}
	for _, bad := range []string{"<script", "style=", "<style", sim.Card3DSChallenge, "4000"} {
		if strings.Contains(body, bad) {
			t.Errorf("page has %q", bad)
		}
	}
	if _, again := get(t, res.ActionURL); again != body {
		t.Errorf("reload: the page changed")
	}

	css, cssBody := get(t, srvURL+surgepay.PagesPrefix+"3ds.css")
	if css.StatusCode != http.StatusOK || css.Header.Get("Content-Type") != "text/css; charset=utf-8" || !strings.Contains(cssBody, "button") {
		t.Errorf("3ds.css: got %d %q", css.StatusCode, css.Header.Get("Content-Type"))
	}

	// Nothing happens until the cardholder chooses.
	if got, err := p.Lookup(t.Context(), "k"); err != nil || !got.RequiresAction || got.ActionURL != res.ActionURL {
		t.Fatalf("lookup before the choice: got %+v, %v", got, err)
	}

	post := postForm(t, res.ActionURL, "outcome=authenticate")
	if post.StatusCode != http.StatusSeeOther || post.Header.Get("Location") != ret {
		t.Fatalf("POST authenticate: got %d to %q, want 303 to %q", post.StatusCode, post.Header.Get("Location"), ret)
	}
	got, err := p.Lookup(t.Context(), "k")
	if err != nil || !got.Approved || !got.Captured || got.RequiresAction || got.ActionURL != "" || got.Amount != 123456 {
		t.Fatalf("lookup after authenticating: got %+v, %v; want the approved sale", got, err)
	}
	replay, err := p.Authorize(t.Context(), browserReq("k", sim.Card3DSChallenge, 123456, true, ret))
	if err != nil || replay.Reference != got.Reference || !replay.Approved {
		t.Fatalf("replay after authenticating: got %+v, %v; want %+v", replay, err, got)
	}

	// A second post (the back button, a double click) does nothing more.
	if again := postForm(t, res.ActionURL, "outcome=fail"); again.StatusCode != http.StatusSeeOther || again.Header.Get("Location") != ret {
		t.Fatalf("second POST: got %d to %q", again.StatusCode, again.Header.Get("Location"))
	}
	if e := p.Effects("pay_k"); e.Authorizations != 1 || e.Captures != 1 || e.AuthorizationsDeclined != 0 {
		t.Fatalf("effects: got %+v; want one sale", e)
	}
	resp, body = get(t, res.ActionURL)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "You authenticated") ||
		!strings.Contains(body, `href="`+strings.ReplaceAll(ret, "&", "&amp;")+`"`) || strings.Contains(body, "<form") {
		t.Fatalf("page after completion: got %d\n%s", resp.StatusCode, body)
	}
}

func TestChallengePageFail(t *testing.T) {
	p := sim.New(sim.DefaultConfig())
	_, ret := pagesServer(t, p)
	res := startChallenge(t, p, "k", sim.Card3DSChallenge, ret)
	if post := postForm(t, res.ActionURL, "outcome=fail"); post.StatusCode != http.StatusSeeOther || post.Header.Get("Location") != ret {
		t.Fatalf("POST fail: got %d to %q", post.StatusCode, post.Header.Get("Location"))
	}
	got, err := p.Lookup(t.Context(), "k")
	if err != nil || got.Approved || got.DeclineCode != surgepay.DeclineAuthenticationFailed {
		t.Fatalf("lookup: got %+v, %v; want declined authentication_failed", got, err)
	}
	if e := p.Effects("pay_k"); e != (sim.Effects{AuthorizationsDeclined: 1}) {
		t.Fatalf("effects: got %+v; want one declined authorization", e)
	}
	if _, body := get(t, res.ActionURL); !strings.Contains(body, "Authentication failed") {
		t.Fatalf("page after failing:\n%s", body)
	}
}

// TestChallengeDeclinedAfterAuthentication: 4000008400001629 passes the
// challenge, then the issuer declines.
func TestChallengeDeclinedAfterAuthentication(t *testing.T) {
	p := sim.New(sim.DefaultConfig())
	_, ret := pagesServer(t, p)
	res := startChallenge(t, p, "k", sim.Card3DSChallengeDeclined, ret)
	postForm(t, res.ActionURL, "outcome=authenticate")
	got, err := p.Lookup(t.Context(), "k")
	if err != nil || got.Approved || got.DeclineCode != surgepay.DeclineGeneric {
		t.Fatalf("lookup: got %+v, %v; want declined generic_decline", got, err)
	}
}

func TestChallengePageRefusals(t *testing.T) {
	p := sim.New(sim.DefaultConfig())
	srvURL, ret := pagesServer(t, p)
	res := startChallenge(t, p, "k", sim.Card3DSChallenge, ret)
	unknown := srvURL + surgepay.PagesPrefix + "3ds/" + strings.Repeat("a", 32)
	for _, tc := range []struct {
		name, method, url, body string
		status                  int
	}{
		{"UnknownID", http.MethodGet, unknown, "", http.StatusNotFound},
		{"UnknownIDPost", http.MethodPost, unknown, "outcome=authenticate", http.StatusNotFound},
		{"MalformedID", http.MethodGet, srvURL + surgepay.PagesPrefix + "3ds/nope", "", http.StatusNotFound},
		{"OtherPath", http.MethodGet, srvURL + surgepay.PagesPrefix + "other", "", http.StatusNotFound},
		{"Oversized", http.MethodPost, res.ActionURL, "outcome=authenticate&pad=" + strings.Repeat("x", sim.PageBodyBytesMax), http.StatusRequestEntityTooLarge},
		{"NoOutcome", http.MethodPost, res.ActionURL, "outcome=maybe", http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), tc.method, tc.url, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			resp, err := noRedirects.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("got %d, want %d", resp.StatusCode, tc.status)
			}
			if resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("Cache-Control") != "no-store" {
				t.Errorf("headers: got %v", resp.Header)
			}
		})
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPut, res.ActionURL, nil)
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("PUT: got %d; want 404 or 405", resp.StatusCode)
	}
	// None of the refusals touched the challenge.
	if got, err := p.Lookup(t.Context(), "k"); err != nil || !got.RequiresAction {
		t.Fatalf("lookup after refusals: got %+v, %v; want still pending", got, err)
	}
}

func TestHoldsPage(t *testing.T) {
	p := sim.New(sim.DefaultConfig())
	res := startChallenge(t, p, "k", sim.Card3DSChallenge, returnURL)
	u, _ := url.Parse(res.ActionURL)
	for path, want := range map[string]bool{
		u.Path:                                 true,
		surgepay.PagesPrefix + "3ds.css":       true,
		surgepay.PagesPrefix + "3ds/" + "abcd": false,
		"/v1/authorize":                        false,
	} {
		r := httptest.NewRequest(http.MethodGet, path, nil)
		if got := p.HoldsPage(r); got != want {
			t.Errorf("HoldsPage %s: got %v, want %v", path, got, want)
		}
	}
}

// TestHTTPSimulatorPages: the HTTP simulator carries ReturnURL,
// RequiresAction and ActionURL over the wire and serves the pages on its
// own listener, at PagesURL.
func TestHTTPSimulatorPages(t *testing.T) {
	p, base := newServer(t, sim.DefaultConfig())
	cfg := p.Config()
	cfg.PagesURL = base
	if err := p.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, base, nil)
	res := startChallenge(t, c, "k", sim.Card3DSChallenge, returnURL)
	if !strings.HasPrefix(res.ActionURL, base+surgepay.PagesPrefix+"3ds/") {
		t.Fatalf("action URL %q: want one on the simulator's listener %s", res.ActionURL, base)
	}
	if got, err := c.Lookup(t.Context(), "k"); err != nil || !got.RequiresAction || got.ActionURL != res.ActionURL {
		t.Fatalf("lookup over HTTP: got %+v, %v; want RequiresAction", got, err)
	}
	if resp, _ := get(t, res.ActionURL); resp.StatusCode != http.StatusOK ||
		!strings.Contains(resp.Header.Get("Content-Security-Policy"), "form-action 'self' http: https:;") {
		t.Fatalf("GET on the simulator's listener: got %d %v", resp.StatusCode, resp.Header)
	}
	if post := postForm(t, res.ActionURL, "outcome=authenticate"); post.StatusCode != http.StatusSeeOther || post.Header.Get("Location") != returnURL {
		t.Fatalf("POST: got %d to %q", post.StatusCode, post.Header.Get("Location"))
	}
	got, err := c.Lookup(context.Background(), "k")
	if err != nil || !got.Approved || got.RequiresAction {
		t.Fatalf("lookup after authenticating: got %+v, %v", got, err)
	}
}
