package console

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
)

// CSRFCookie holds the console's CSRF token: random, HttpOnly,
// SameSite=Strict, for the console's paths only. Every form carries the
// same token in its csrf field, and a POST whose field does not match
// the cookie is refused (a double-submit token): a page of another site
// can neither read the cookie nor make the browser send it (SameSite),
// and the admin guard refuses cross-origin POSTs besides
// (http.CrossOriginProtection).
const CSRFCookie = "surgepay_console_csrf"

// csrfBytes is the randomness of a token: 256 bits.
const csrfBytes = 32

// csrfToken returns the request's CSRF token, setting a new cookie when
// it has none (or one that is not a token).
func (c *Console) csrfToken(w http.ResponseWriter, r *http.Request) string {
	if ck, err := r.Cookie(CSRFCookie); err == nil && validToken(ck.Value) {
		return ck.Value
	}
	b := make([]byte, csrfBytes)
	rand.Read(b) // never fails (crypto/rand)
	tok := base64.RawURLEncoding.EncodeToString(b)
	http.SetCookie(w, &http.Cookie{Name: CSRFCookie, Value: tok, Path: Prefix, HttpOnly: true, //nolint:gosec // G124: HttpOnly, SameSite=Strict, and Secure over TLS or behind a TLS proxy
		Secure: r.TLS != nil || c.cfg.SecureCookie, SameSite: http.SameSiteStrictMode})
	return tok
}

// csrfValid reports whether the form's csrf field matches the cookie
// (constant time).
func csrfValid(r *http.Request) bool {
	ck, err := r.Cookie(CSRFCookie)
	if err != nil || !validToken(ck.Value) {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(ck.Value), []byte(r.PostFormValue("csrf"))) == 1
}

func validToken(s string) bool {
	b, err := base64.RawURLEncoding.DecodeString(s)
	return err == nil && len(b) == csrfBytes
}
