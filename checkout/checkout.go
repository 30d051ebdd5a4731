// Package checkout serves the browser checkout: surgepay.js, the library a
// merchant's page loads, and the card frame it mounts, whose fields send
// the card straight to surgepay's API. The assets are embedded in the
// binary (no CDN, no build step: hand-written ES2020 without
// dependencies).
//
// The frame is the PCI boundary: it is served from surgepay's origin, so
// the merchant's page cannot read its fields (the same-origin policy), and
// it may only be embedded by the merchant's checkout origins (the CSP's
// frame-ancestors, the browser's check; the origin parameter is checked
// here too, so a page on another origin gets a refusal, not a form). It
// talks to the page only by postMessage, to that origin alone, and never
// sends card data there.
//
// Limits: the frame's script trusts the origin query parameter for its
// postMessage target; that is safe because the server checked it against
// the merchant's origins and the browser enforces frame-ancestors with
// the same list. Browsers without CSP Level 2 frame-ancestors (none
// current) would render the frame anywhere.
package checkout

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/surgepay/surgepay"
)

// Prefix is the path under which Handler serves.
const Prefix = "/checkout/v1/"

const (
	// KeyBytesMax bounds the key query parameter of the frame.
	KeyBytesMax = 200
	// FrameAncestorsMax bounds how many of a merchant's origins go into
	// the frame's frame-ancestors (and so may embed it); origins beyond
	// it are ignored, which keeps the header well under the 8 KiB that
	// proxies commonly allow.
	FrameAncestorsMax = 32
	// OriginsTimeout bounds the Config.Origins call of one frame request.
	OriginsTimeout = 5 * time.Second
)

// Config configures the Handler.
type Config struct {
	// Origins returns the web origins (scheme://host[:port]) allowed to
	// embed the card frame for a publishable key (pk_test_… / pk_live_…):
	// the merchant's checkout_origins. An error means the key is unknown,
	// revoked, not publishable, or its merchant has no origins: the frame
	// is refused (403; 503 if the error's code is surgepay.EUNAVAILABLE
	// or the call timed out). Required.
	Origins func(ctx context.Context, publishableKey string) ([]string, error)
}

//go:embed static
var static embed.FS

// asset is one embedded file, read once.
type asset struct {
	body        []byte
	contentType string
	etag        string
}

func load(name, contentType string) asset {
	b, err := fs.ReadFile(static, "static/"+name)
	if err != nil {
		panic("checkout: embedded asset missing: " + name) // a build error, not an operating one
	}
	sum := sha256.Sum256(b)
	return asset{body: b, contentType: contentType, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
}

var (
	libraryJS = load("surgepay.js", "text/javascript; charset=utf-8")
	frameHTML = load("frame.html", "text/html; charset=utf-8")
	frameJS   = load("frame.js", "text/javascript; charset=utf-8")
	frameCSS  = load("frame.css", "text/css; charset=utf-8")
)

// cspBase is the frame's policy before frame-ancestors: its own script,
// style and API calls, nothing inline, no form posts, no <base>.
const cspBase = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; " +
	"img-src 'self' data:; form-action 'none'; base-uri 'none'; frame-ancestors "

// Handler serves GET (and HEAD) of:
//
//	/checkout/v1/surgepay.js   the merchant page's library
//	/checkout/v1/frame         the card frame's HTML; query: key=<publishable key>&origin=<the embedding page's origin>
//	/checkout/v1/frame.js, /checkout/v1/frame.css   the frame's script and style
//
// Anything else under /checkout/v1/ is 404; another method is 405. It
// panics if cfg.Origins is nil. Safe for concurrent use.
func Handler(cfg Config) http.Handler {
	if cfg.Origins == nil {
		panic("checkout: Config.Origins is nil")
	}
	return &handler{cfg: cfg}
}

type handler struct{ cfg Config }

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("X-Content-Type-Options", "nosniff")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hd.Set("Allow", "GET, HEAD")
		refuse(w, http.StatusMethodNotAllowed)
		return
	}
	switch r.URL.Path {
	case Prefix + "surgepay.js":
		// Merchant pages on any origin load it, under COEP too.
		hd.Set("Cross-Origin-Resource-Policy", "cross-origin")
		serveAsset(w, r, libraryJS)
	case Prefix + "frame.js":
		serveAsset(w, r, frameJS)
	case Prefix + "frame.css":
		serveAsset(w, r, frameCSS)
	case Prefix + "frame":
		h.serveFrame(w, r)
	default:
		refuse(w, http.StatusNotFound)
	}
}

// serveAsset answers a static file, cached for five minutes by browsers
// and proxies (a release reaches every page within that), with an ETag
// so that a revalidation costs a 304.
func serveAsset(w http.ResponseWriter, r *http.Request, a asset) {
	hd := w.Header()
	hd.Set("Content-Type", a.contentType)
	hd.Set("Cache-Control", "public, max-age=300")
	hd.Set("ETag", a.etag)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.body))
}

// serveFrame answers the card frame if key names a merchant that lists
// origin among its checkout origins, with a CSP whose frame-ancestors are
// all of them; a refusal otherwise.
func (h *handler) serveFrame(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	key, rawOrigin := q.Get("key"), q.Get("origin")
	origin, ok := surgepay.CanonicalOrigin(rawOrigin)
	if !validKey(key) || !ok || len(q["key"]) != 1 || len(q["origin"]) != 1 {
		refuse(w, http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), OriginsTimeout)
	defer cancel()
	allowed, err := h.cfg.Origins(ctx, key)
	if err != nil {
		if surgepay.ErrorCode(err) == surgepay.EUNAVAILABLE || errors.Is(err, context.DeadlineExceeded) {
			w.Header().Set("Retry-After", "1")
			refuse(w, http.StatusServiceUnavailable)
			return
		}
		refuse(w, http.StatusForbidden)
		return
	}
	ancestors, found := frameAncestors(allowed, origin)
	if !found {
		refuse(w, http.StatusForbidden)
		return
	}
	hd := w.Header()
	hd.Set("Content-Security-Policy", cspBase+strings.Join(ancestors, " "))
	hd.Set("Content-Type", frameHTML.contentType)
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Cache-Control", "no-store")
	// Applies only if the frame is opened as a top-level page; an
	// embedded frame's postMessage to its parent is unaffected.
	hd.Set("Cross-Origin-Opener-Policy", "same-origin")
	hd.Set("Content-Length", strconv.Itoa(len(frameHTML.body)))
	w.WriteHeader(http.StatusOK)
	w.Write(frameHTML.body) //nolint:errcheck // the client went away
}

// frameAncestors returns the canonical forms of the valid origins among
// allowed (at most FrameAncestorsMax, duplicates dropped) and whether
// origin is one of them.
func frameAncestors(allowed []string, origin string) ([]string, bool) {
	out := make([]string, 0, min(len(allowed), FrameAncestorsMax))
	found := false
	for _, a := range allowed {
		c, ok := surgepay.CanonicalOrigin(a)
		if !ok || containsString(out, c) {
			continue
		}
		if len(out) == FrameAncestorsMax {
			break
		}
		out = append(out, c)
		found = found || c == origin
	}
	return out, found
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// validKey reports whether key looks like a publishable key: the prefix,
// then URL-safe base64 characters, at most KeyBytesMax bytes in all.
func validKey(key string) bool {
	rest, ok := strings.CutPrefix(key, "pk_test_")
	if !ok {
		rest, ok = strings.CutPrefix(key, "pk_live_")
	}
	if !ok || rest == "" || len(key) > KeyBytesMax {
		return false
	}
	for i := 0; i < len(rest); i++ {
		c := rest[i]
		if !alnum(c) && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

// alnum reports whether c is an ASCII letter or digit.
func alnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }

// refusalPage is every refusal's body: static, naming nothing of the
// request.
const refusalPage = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Payment form unavailable</title></head>
<body><p>This payment form cannot be shown here.</p></body></html>
`

// refuse answers status with the static refusal page, under a policy
// that lets no page embed it.
func refuse(w http.ResponseWriter, status int) {
	hd := w.Header()
	hd.Del("ETag")
	hd.Del("Cross-Origin-Resource-Policy")
	hd.Set("Content-Security-Policy", cspBase+"'none'")
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Cache-Control", "no-store")
	hd.Set("Content-Length", strconv.Itoa(len(refusalPage)))
	w.WriteHeader(status)
	w.Write([]byte(refusalPage)) //nolint:errcheck // the client went away
}
