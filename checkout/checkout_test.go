package checkout_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/checkout"
)

const (
	testKey   = "pk_test_abcDEF012-_xyz"
	shop      = "https://shop.example"
	shopAdmin = "http://127.0.0.1:8080"
)

// origins is the Config.Origins of the tests: testKey's merchant lists
// shop and shopAdmin (written as an operator might, in upper case with a
// default port, and one entry invalid, which is ignored); "pk_test_down"
// finds the store down; every other key is unknown.
func origins(_ context.Context, key string) ([]string, error) {
	switch key {
	case testKey:
		return []string{"HTTPS://Shop.Example:443", shopAdmin, "https://evil.example; script-src *", shop}, nil
	case "pk_test_down":
		return nil, surgepay.Errorf(surgepay.EUNAVAILABLE, "store down")
	}
	return nil, errors.New("no such key")
}

func newServer(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(checkout.Handler(checkout.Config{Origins: origins}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// answer is what a test reads of a response: get has read and closed its body.
type answer struct {
	StatusCode    int
	Header        http.Header
	ContentLength int64
	Path          string
}

func get(t *testing.T, method, u string) (answer, string) {
	t.Helper()
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{StatusCode: res.StatusCode, Header: res.Header, ContentLength: res.ContentLength, Path: res.Request.URL.Path}, string(b)
}

func frameURL(base, key, origin string) string {
	return base + "/checkout/v1/frame?" + url.Values{"key": {key}, "origin": {origin}}.Encode()
}

func wantHeaders(t *testing.T, res answer, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got := res.Header.Get(k); got != v {
			t.Errorf("%s: %s = %q, want %q", res.Path, k, got, v)
		}
	}
}

const cspBase = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; " +
	"img-src 'self' data:; form-action 'none'; base-uri 'none'; frame-ancestors "

func TestAssets(t *testing.T) {
	base := newServer(t)
	tests := []struct {
		path, contentType, contains string
		corp                        string
	}{
		{"surgepay.js", "text/javascript; charset=utf-8", "window.Surgepay = Surgepay", "cross-origin"},
		{"frame.js", "text/javascript; charset=utf-8", "postMessage", ""},
		{"frame.css", "text/css; charset=utf-8", "aria-invalid", ""},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			res, body := get(t, "GET", base+"/checkout/v1/"+tc.path)
			if res.StatusCode != http.StatusOK || !strings.Contains(body, tc.contains) {
				t.Fatalf("GET %s = %d, want 200 with %q", tc.path, res.StatusCode, tc.contains)
			}
			wantHeaders(t, res, map[string]string{"Content-Type": tc.contentType, "Cache-Control": "public, max-age=300",
				"X-Content-Type-Options": "nosniff", "Cross-Origin-Resource-Policy": tc.corp})
			etag := res.Header.Get("ETag")
			if etag == "" {
				t.Fatal("no ETag")
			}
			req, _ := http.NewRequest("GET", base+"/checkout/v1/"+tc.path, nil)
			req.Header.Set("If-None-Match", etag)
			res2, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res2.Body.Close()
			if res2.StatusCode != http.StatusNotModified {
				t.Errorf("GET with If-None-Match = %d, want 304", res2.StatusCode)
			}
			head, hbody := get(t, "HEAD", base+"/checkout/v1/"+tc.path)
			if head.StatusCode != http.StatusOK || hbody != "" || head.Header.Get("Content-Type") != tc.contentType ||
				head.ContentLength != int64(len(body)) {
				t.Errorf("HEAD = %d, %d bytes, length %d, %q; want 200, no body, length %d", head.StatusCode, len(hbody),
					head.ContentLength, head.Header.Get("Content-Type"), len(body))
			}
		})
	}
}

// TestAssetsNoInline: the CSP forbids inline script and style, so none
// of the assets may rely on them.
func TestAssetsNoInline(t *testing.T) {
	base := newServer(t)
	_, html := get(t, "GET", frameURL(base, testKey, shop))
	for _, bad := range []string{"<script>", "style=", "<style", "onclick", "onload", "onsubmit", "javascript:"} {
		if strings.Contains(strings.ToLower(html), bad) {
			t.Errorf("frame.html holds %q", bad)
		}
	}
	for _, want := range []string{`<script src="frame.js"`, `href="frame.css"`, `aria-describedby="number-error`,
		`aria-describedby="expiry-error"`, `aria-describedby="cvc-error"`, `autocomplete="cc-number"`, `autocomplete="cc-exp"`,
		`autocomplete="cc-csc"`, `role="alert"`} {
		if !strings.Contains(html, want) {
			t.Errorf("frame.html lacks %s", want)
		}
	}
	_, js := get(t, "GET", base+"/checkout/v1/frame.js")
	if strings.Contains(js, "'*'") || strings.Contains(js, `"*"`) || strings.Contains(js, "innerHTML") || strings.Contains(js, "eval(") {
		t.Error("frame.js posts to '*', sets innerHTML or evaluates text")
	}
}

func TestFrame(t *testing.T) {
	base := newServer(t)
	for _, origin := range []string{shop, shopAdmin} {
		res, body := get(t, "GET", frameURL(base, testKey, origin))
		if res.StatusCode != http.StatusOK || !strings.Contains(body, `id="card-form"`) {
			t.Fatalf("GET frame from %s = %d, want 200 with the form:\n%s", origin, res.StatusCode, body)
		}
		wantHeaders(t, res, map[string]string{
			"Content-Security-Policy":    cspBase + shop + " " + shopAdmin,
			"Content-Type":               "text/html; charset=utf-8",
			"X-Content-Type-Options":     "nosniff",
			"Referrer-Policy":            "no-referrer",
			"Cache-Control":              "no-store",
			"Cross-Origin-Opener-Policy": "same-origin",
			"X-Frame-Options":            "",
		})
	}
	head, body := get(t, "HEAD", frameURL(base, testKey, shop))
	if head.StatusCode != http.StatusOK || body != "" || !strings.Contains(head.Header.Get("Content-Security-Policy"), shop) {
		t.Errorf("HEAD frame = %d with %d bytes, CSP %q; want 200, no body", head.StatusCode, len(body),
			head.Header.Get("Content-Security-Policy"))
	}
	// The origin as a browser writes it matches the merchant's entry in
	// another case with its default port.
	if res, _ := get(t, "GET", frameURL(base, testKey, "https://SHOP.example:443")); res.StatusCode != http.StatusOK {
		t.Errorf("GET frame from https://SHOP.example:443 = %d, want 200", res.StatusCode)
	}
}

func TestFrameRefused(t *testing.T) {
	base := newServer(t)
	long := "https://" + strings.Repeat("a", 200) + ".example"
	tests := []struct {
		name, rawQuery string
		status         int
	}{
		{"ErrKeyUnknown", url.Values{"key": {"pk_test_nope"}, "origin": {shop}}.Encode(), 403},
		{"ErrOriginNotAllowed", url.Values{"key": {testKey}, "origin": {"https://other.example"}}.Encode(), 403},
		{"ErrOriginOtherPort", url.Values{"key": {testKey}, "origin": {"https://shop.example:8443"}}.Encode(), 403},
		{"ErrOriginOtherScheme", url.Values{"key": {testKey}, "origin": {"http://shop.example"}}.Encode(), 403},
		{"ErrOriginInvalidListed", url.Values{"key": {testKey}, "origin": {"https://evil.example"}}.Encode(), 403},
		{"ErrStoreDown", url.Values{"key": {"pk_test_down"}, "origin": {shop}}.Encode(), 503},
		{"ErrSecretKey", url.Values{"key": {"sk_abc"}, "origin": {shop}}.Encode(), 400},
		{"ErrKeyNoPrefix", url.Values{"key": {"pk_test_"}, "origin": {shop}}.Encode(), 400},
		{"ErrKeyTooLong", url.Values{"key": {"pk_test_" + strings.Repeat("a", 193)}, "origin": {shop}}.Encode(), 400},
		{"ErrKeyCharacters", url.Values{"key": {"pk_test_a b"}, "origin": {shop}}.Encode(), 400},
		{"ErrNoKey", url.Values{"origin": {shop}}.Encode(), 400},
		{"ErrNoOrigin", url.Values{"key": {testKey}}.Encode(), 400},
		{"ErrTwoOrigins", url.Values{"key": {testKey}, "origin": {"https://other.example", shop}}.Encode(), 400},
		{"ErrOriginPath", url.Values{"key": {testKey}, "origin": {"https://shop.example/path"}}.Encode(), 400},
		{"ErrOriginSlash", url.Values{"key": {testKey}, "origin": {"https://shop.example/"}}.Encode(), 400},
		{"ErrOriginQuery", url.Values{"key": {testKey}, "origin": {"https://shop.example?x"}}.Encode(), 400},
		{"ErrOriginUserinfo", url.Values{"key": {testKey}, "origin": {"https://u@shop.example"}}.Encode(), 400},
		{"ErrOriginJavascript", url.Values{"key": {testKey}, "origin": {"javascript:alert(1)"}}.Encode(), 400},
		{"ErrOriginData", url.Values{"key": {testKey}, "origin": {"data:text/html,x"}}.Encode(), 400},
		{"ErrOriginFTP", url.Values{"key": {testKey}, "origin": {"ftp://shop.example"}}.Encode(), 400},
		{"ErrOriginNull", url.Values{"key": {testKey}, "origin": {"null"}}.Encode(), 400},
		{"ErrOriginCRLF", url.Values{"key": {testKey}, "origin": {"https://shop.example\r\nSet-Cookie: a=b"}}.Encode(), 400},
		{"ErrOriginSemicolon", url.Values{"key": {testKey}, "origin": {"https://shop.example; script-src *"}}.Encode(), 400},
		{"ErrOriginComma", url.Values{"key": {testKey}, "origin": {"https://shop.example,https://a.example"}}.Encode(), 400},
		{"ErrOriginSpace", url.Values{"key": {testKey}, "origin": {"https://shop.example https://a.example"}}.Encode(), 400},
		{"ErrOriginQuote", url.Values{"key": {testKey}, "origin": {"https://shop.example'"}}.Encode(), 400},
		{"ErrOriginBadPort", url.Values{"key": {testKey}, "origin": {"https://shop.example:99999"}}.Encode(), 400},
		{"ErrOriginEmptyPort", url.Values{"key": {testKey}, "origin": {"https://shop.example:"}}.Encode(), 400},
		{"ErrOriginNoHost", url.Values{"key": {testKey}, "origin": {"https://"}}.Encode(), 400},
		{"ErrOriginTooLong", url.Values{"key": {testKey}, "origin": {long}}.Encode(), 400},
		{"ErrOriginUnicode", url.Values{"key": {testKey}, "origin": {"https://shöp.example"}}.Encode(), 400},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, body := get(t, "GET", base+"/checkout/v1/frame?"+tc.rawQuery)
			if res.StatusCode != tc.status {
				t.Fatalf("GET frame?%s = %d, want %d", tc.rawQuery, res.StatusCode, tc.status)
			}
			checkRefusal(t, res, body)
			if strings.Contains(body, "shop.example") || strings.Contains(body, "pk_test") || strings.Contains(body, "card-form") {
				t.Errorf("the refusal echoes the request or holds the form:\n%s", body)
			}
		})
	}
}

// checkRefusal checks a refusal's headers: nobody may embed it.
func checkRefusal(t *testing.T, res answer, body string) {
	t.Helper()
	wantHeaders(t, res, map[string]string{
		"Content-Security-Policy": cspBase + "'none'",
		"Content-Type":            "text/html; charset=utf-8",
		"X-Content-Type-Options":  "nosniff",
		"Cache-Control":           "no-store",
	})
	if res.Header.Get("Set-Cookie") != "" || len(res.Header.Values("Content-Security-Policy")) != 1 {
		t.Errorf("headers %v: an injected header or policy", res.Header)
	}
	if !strings.Contains(body, "cannot be shown here") {
		t.Errorf("the refusal page says:\n%s", body)
	}
}

func TestNotFound(t *testing.T) {
	base := newServer(t)
	for _, p := range []string{"/checkout/v1/", "/checkout/v1/static/frame.js", "/checkout/v1/frame.html",
		"/checkout/v1/frame/", "/checkout/v1/surgepay.js/x", "/checkout/v1/../v1/frame.js.map", "/checkout/v2/frame.js"} {
		res, body := get(t, "GET", base+p)
		if res.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s = %d, want 404", p, res.StatusCode)
			continue
		}
		checkRefusal(t, res, body)
	}
}

func TestMethodNotAllowed(t *testing.T) {
	base := newServer(t)
	res, _ := get(t, "POST", base+"/checkout/v1/surgepay.js")
	if res.StatusCode != http.StatusMethodNotAllowed || res.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST = %d, Allow %q; want 405, GET, HEAD", res.StatusCode, res.Header.Get("Allow"))
	}
}

// TestFrameAncestorsMax: a merchant listing more origins than fit gets
// the first FrameAncestorsMax in its policy; a page on a later one is
// refused, as the browser would refuse it.
func TestFrameAncestorsMax(t *testing.T) {
	var list []string
	for i := range checkout.FrameAncestorsMax + 2 {
		list = append(list, "https://s"+strings.Repeat("x", i)+".example")
	}
	h := checkout.Handler(checkout.Config{Origins: func(context.Context, string) ([]string, error) { return list, nil }})
	srv := httptest.NewServer(h)
	defer srv.Close()
	res, _ := get(t, "GET", frameURL(srv.URL, testKey, list[0]))
	if n := strings.Count(res.Header.Get("Content-Security-Policy"), "https://"); res.StatusCode != 200 || n != checkout.FrameAncestorsMax {
		t.Errorf("GET frame = %d with %d origins in the CSP, want 200 and %d", res.StatusCode, n, checkout.FrameAncestorsMax)
	}
	if res, _ := get(t, "GET", frameURL(srv.URL, testKey, list[len(list)-1])); res.StatusCode != http.StatusForbidden {
		t.Errorf("GET frame from an origin beyond the maximum = %d, want 403", res.StatusCode)
	}
}
