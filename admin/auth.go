// Package admin serves the admin listener: health and readiness probes,
// the Go profiler, metrics and the dashboard, the effective configuration
// and the admin API, all but the probes behind the admin credential (the
// admin token as a bearer token or basic-auth password, the dashboard's
// session cookie from its login page, or a verified client certificate).
// Wrong credentials are budgeted per client address.
package admin

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

const (
	// TokenFileName is the admin token's file in the data folder.
	TokenFileName = "admin-token"
	// TokenLenMin is the shortest admin token accepted from
	// SURGEPAY_ADMIN_TOKEN or a token file: 16 characters of a random
	// token are 96 bits or more. A generated one has tokenBytes.
	TokenLenMin = 16
	// TokenLenMax bounds a token (and what is read of its file).
	TokenLenMax = 512
	// tokenBytes is the randomness of a generated token: 256 bits.
	tokenBytes = 32
	// TokenPrefix marks a generated token, so that a secret scanner
	// (or a reader of a leaked log) can tell what it is.
	TokenPrefix = "spadm_"
	// SessionCookie is the dashboard's login cookie.
	SessionCookie = "surgepay_admin"
	// SessionLifetime is how long a dashboard login lasts.
	SessionLifetime = 12 * time.Hour
	// loginBodyBytesMax bounds the body of POST /login.
	loginBodyBytesMax = 4 << 10
	// failuresPerSecond and failuresBurst are each client
	// address's budget of wrong credentials (token, cookie, login):
	// beyond, a wrong one gets 429, held for failureHold. Every
	// credential is checked first, so a right one is never refused: the
	// budget slows a guesser, and cannot lock the operator out (issue 34
	// item 9: 30 wrong tokens from an address made the right one 429, and
	// a process guessing at 10/s refused 24 of the operator's 40
	// requests). A client certificate and the open paths are not limited.
	failuresPerSecond = 5
	failuresBurst     = 20
	// failureHold is how long a wrong credential past the budget
	// waits for its 429: a guesser that sends one request at a time gets
	// one answer a second, so even a 16-character token from
	// SURGEPAY_ADMIN_TOKEN takes longer than anyone lives.
	failureHold = time.Second
	// failureHeldMax bounds the requests held at once (their
	// goroutines and connections); past it a wrong credential gets its
	// 429 at once. A guesser that keeps that many requests in flight is
	// bounded by the token's entropy only: 256 bits when generated.
	failureHeldMax = 64
)

// LoadToken returns the admin token: envToken (SURGEPAY_ADMIN_TOKEN) when
// set, else the content of the file at path (admin_token_file), which is
// created with a random token when it does not exist (created is then
// true). A file that the group or others can read or write is refused,
// as ssh refuses a private key: the token would no longer be secret.
func LoadToken(envToken, path string) (token string, created bool, err error) {
	if envToken != "" {
		return envToken, false, nil
	}
	token, err = readTokenFile(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return token, false, err
	}
	b := make([]byte, tokenBytes)
	rand.Read(b) // never fails (crypto/rand)
	token = TokenPrefix + base64.RawURLEncoding.EncodeToString(b)
	// O_EXCL: when serve and settle start at once, one creates the file
	// and the other reads it.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600) //nolint:gosec // G304: the operator names the file (admin_token_file)
	if errors.Is(err, fs.ErrExist) {
		token, err = readTokenFile(path)
		return token, false, err
	}
	if err != nil {
		return "", false, fmt.Errorf("admin_token_file %s: %w", path, err)
	}
	_, err = f.WriteString(token + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path) // best effort: the write's error is the one to report
		return "", false, fmt.Errorf("admin_token_file %s: %w", path, err)
	}
	return token, true, nil
}

// readTokenFile reads a token file, checking its mode and length;
// an error wraps fs.ErrNotExist when there is no file.
func readTokenFile(path string) (string, error) {
	f, err := os.Open(path) //nolint:gosec // G304: the operator names the file (admin_token_file)
	if err != nil {
		return "", fmt.Errorf("admin_token_file %s: %w", path, err)
	}
	defer f.Close() //nolint:errcheck // read-only: closing loses nothing
	st, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("admin_token_file %s: %w", path, err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("admin_token_file %s: mode %v lets others read it; chmod 600 it (or set SURGEPAY_ADMIN_TOKEN)",
			path, st.Mode().Perm())
	}
	b := make([]byte, TokenLenMax+2)
	n, _ := f.Read(b)
	token := strings.TrimSpace(string(b[:n]))
	if len(token) < TokenLenMin || len(token) > TokenLenMax {
		return "", fmt.Errorf("admin_token_file %s: the token is %d characters; it must be %d to %d (delete the file to have a new one made)",
			path, len(token), TokenLenMin, TokenLenMax)
	}
	return token, nil
}

// Guard guards the admin listener. The zero value refuses every
// guarded request (no token: nothing matches).
type Guard struct {
	// Token returns the admin token (it may change on a reload); nil or
	// "" refuses every credential but a client certificate.
	Token func() string
	// MetricsOpen serves GET /metrics without a credential.
	MetricsOpen bool
	// SecureCookie marks the login cookie Secure even when the request
	// came in plain HTTP: a proxy in front terminates TLS
	// (tls.proxy_terminated).
	SecureCookie bool
	// ClientCert accepts a client certificate verified by the listener's
	// TLS configuration (tls.admin_client_ca_file) as a credential.
	ClientCert bool
	// now is time.Now, replaced by tests.
	now func() time.Time
	// failures is the budget of wrong credentials; nil: Wrap makes one
	// of failuresPerSecond and failuresBurst.
	failures *failureBudget
}

// openPaths need no credential: probes of load balancers and
// orchestrators, and the login page itself.
var openPaths = map[string]bool{"/healthz": true, "/readyz": true, "/login": true}

// Wrap returns next behind the credential check and, for every method
// that changes something (POST /login, the admin API), the standard
// library's cross-origin protection: a browser request sent from another
// site (Sec-Fetch-Site, Origin) is refused, so a page the operator
// visits cannot use their login cookie, basic-auth or client
// certificate. Clients that are not browsers send neither header and
// pass.
func (a Guard) Wrap(next http.Handler) http.Handler {
	if a.failures == nil {
		a.failures = newFailureBudget(failuresPerSecond, failuresBurst)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /login", a.loginPage)
	mux.HandleFunc("POST /login", a.login)
	mux.HandleFunc("POST /logout", a.logout)
	mux.Handle("/", next)
	guarded := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if openPaths[r.URL.Path] || (a.MetricsOpen && r.URL.Path == "/metrics") || r.URL.Path == "/logout" || a.clientCert(r) {
			mux.ServeHTTP(w, r)
			return
		}
		// The credential is checked before the budget of wrong ones: a
		// right one passes whatever a guesser at the same address spent.
		if a.allowed(r) {
			mux.ServeHTTP(w, r)
			return
		}
		presented := r.Header.Get("Authorization") != "" || hasCookie(r, SessionCookie)
		if presented && !a.failures.spend(r) {
			a.failures.tooMany(w, r)
			return
		}
		a.refuse(w, r)
	})
	return http.NewCrossOriginProtection().Handler(guarded)
}

// allowed reports whether r carries a valid credential: the token as a
// bearer token or basic-auth password, a valid session cookie, or a
// verified client certificate.
func (a Guard) allowed(r *http.Request) bool {
	if a.clientCert(r) {
		return true
	}
	if h := r.Header.Get("Authorization"); h != "" {
		if scheme, tok, ok := strings.Cut(h, " "); ok && strings.EqualFold(scheme, "Bearer") {
			return a.tokenMatches(strings.TrimSpace(tok))
		}
		if _, pw, ok := r.BasicAuth(); ok {
			return a.tokenMatches(pw)
		}
		return false
	}
	if c, err := r.Cookie(SessionCookie); err == nil {
		return a.sessionValid(c.Value)
	}
	return false
}

// clientCert reports whether r came with a client certificate that the
// listener verified, when those are credentials.
func (a Guard) clientCert(r *http.Request) bool {
	return a.ClientCert && r.TLS != nil && len(r.TLS.VerifiedChains) > 0
}

// failureClientsMax bounds the client addresses failureBudget
// remembers; past it the budgets start again (an attacker with that many
// addresses could guess at that many times the rate: the token's 256
// bits are the real bound).
const failureClientsMax = 4096

// failureBudget bounds the wrong credentials each client address may
// present before they are answered 429, slowly. It only counts wrong
// ones: a guesser at the operator's address (behind a proxy every client
// shares the proxy's) slows itself, never the operator's right token.
// Safe for concurrent use.
type failureBudget struct {
	every rate.Limit
	burst int
	// hold is how long a wrong credential past the budget waits for its
	// 429 (failureHold; tests shorten it).
	hold time.Duration
	// held counts the requests waiting out hold, up to
	// failureHeldMax.
	held chan struct{}
	mu   sync.Mutex
	m    map[string]*rate.Limiter
}

func newFailureBudget(every rate.Limit, burst int) *failureBudget {
	return &failureBudget{every: every, burst: burst, hold: failureHold,
		held: make(chan struct{}, failureHeldMax), m: map[string]*rate.Limiter{}}
}

func (b *failureBudget) limiter(r *http.Request) *rate.Limiter {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	l := b.m[host]
	if l == nil {
		if len(b.m) >= failureClientsMax {
			clear(b.m)
		}
		l = rate.NewLimiter(b.every, b.burst)
		b.m[host] = l
	}
	return l
}

// spend counts a wrong credential of r's client and reports whether it
// was within the budget.
func (b *failureBudget) spend(r *http.Request) bool { return b == nil || b.limiter(r).Allow() }

// tooMany answers a wrong credential past the budget: 429 after hold,
// or at once when failureHeldMax requests already wait or the
// client leaves.
func (b *failureBudget) tooMany(w http.ResponseWriter, r *http.Request) {
	if b != nil && b.hold > 0 {
		select {
		case b.held <- struct{}{}:
			t := time.NewTimer(b.hold)
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
			}
			<-b.held
		default:
		}
	}
	w.Header().Set("Retry-After", "1")
	w.Header().Set("Cache-Control", "no-store")
	http.Error(w, "429 too many wrong admin credentials: retry later", http.StatusTooManyRequests)
}

func hasCookie(r *http.Request, name string) bool {
	_, err := r.Cookie(name)
	return err == nil
}

// tokenMatches compares got with the token in constant time: both are
// hashed first, so neither the content nor the length leaks through
// timing.
func (a Guard) tokenMatches(got string) bool {
	token := a.token()
	if token == "" {
		return false
	}
	g, w := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(token))
	return subtle.ConstantTimeCompare(g[:], w[:]) == 1
}

// session returns a session cookie value that expires at exp: the expiry
// and its HMAC under a key derived from the token, so a new token ends
// every session, and the cookie never holds the token itself.
func (a Guard) session(token string, exp time.Time) string {
	e := strconv.FormatInt(exp.Unix(), 10)
	return e + "." + base64.RawURLEncoding.EncodeToString(sessionMAC(token, e))
}

func sessionMAC(token, exp string) []byte {
	key := sha256.Sum256([]byte("surgepay admin session\x00" + token))
	m := hmac.New(sha256.New, key[:])
	m.Write([]byte(exp))
	return m.Sum(nil)
}

// sessionValid checks a session cookie's MAC and expiry.
func (a Guard) sessionValid(v string) bool {
	token := a.token()
	if token == "" {
		return false
	}
	e, mac, ok := strings.Cut(v, ".")
	got, err := base64.RawURLEncoding.DecodeString(mac)
	if !ok || err != nil || !hmac.Equal(got, sessionMAC(token, e)) {
		return false
	}
	exp, err := strconv.ParseInt(e, 10, 64)
	return err == nil && a.clock().Unix() < exp
}

func (a Guard) token() string {
	if a.Token == nil {
		return ""
	}
	return a.Token()
}

func (a Guard) clock() time.Time {
	if a.now != nil {
		return a.now()
	}
	return time.Now()
}

// refuse answers a request without a valid credential: a browser asking
// for a page is sent to the login page; any other client gets 401 with
// how to authenticate.
func (a Guard) refuse(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && strings.Contains(r.Header.Get("Accept"), "text/html") {
		http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
		return
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="surgepay admin"`)
	w.Header().Set("Cache-Control", "no-store")
	http.Error(w, "401 unauthorized: send the admin token (admin_token_file, default DATA_DIR/admin-token) as "+
		"\"Authorization: Bearer TOKEN\"", http.StatusUnauthorized)
}

// loginTemplate is the dashboard's login page.
var loginTemplate = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>surgepay admin: log in</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{font:16px system-ui,sans-serif;max-width:28rem;margin:4rem auto;padding:0 1rem}
input{font:inherit;width:100%;box-sizing:border-box;margin:.5rem 0;padding:.4rem}
button{font:inherit;padding:.4rem 1.2rem}.err{color:#b00020}code{font-size:90%}</style></head>
<body><h1>surgepay admin</h1>
{{if .Failed}}<p class="err" role="alert">That is not the admin token.</p>{{end}}
<form method="post" action="/login">
<label for="token">Admin token</label>
<input id="token" name="token" type="password" autocomplete="current-password" required autofocus>
<input type="hidden" name="next" value="{{.Next}}">
<button type="submit">Log in</button>
</form>
<p>The token is in the file <code>admin_token_file</code> (default <code>DATA_DIR/admin-token</code>),
created by the first <code>surgepay serve</code>, or in <code>SURGEPAY_ADMIN_TOKEN</code>.</p>
</body></html>
`))

type loginData struct {
	Next   string
	Failed bool
}

func (a Guard) loginPage(w http.ResponseWriter, r *http.Request) {
	writeLogin(w, http.StatusOK, loginData{Next: localPath(r.URL.Query().Get("next"))})
}

func writeLogin(w http.ResponseWriter, code int, d loginData) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'")
	w.WriteHeader(code)
	_ = loginTemplate.Execute(w, d) // a client gone away is no error of ours; the status went out above
}

// login checks the token of the login form and sets the session cookie:
// HttpOnly (no script reads it), SameSite=Strict (no other site's
// request carries it), Secure over TLS.
func (a Guard) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, loginBodyBytesMax)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "400 bad request: the login form is not readable", http.StatusBadRequest)
		return
	}
	next := localPath(r.PostForm.Get("next"))
	token := a.token()
	if !a.tokenMatches(r.PostForm.Get("token")) {
		if !a.failures.spend(r) {
			a.failures.tooMany(w, r)
			return
		}
		writeLogin(w, http.StatusUnauthorized, loginData{Next: next, Failed: true})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: a.session(token, a.clock().Add(SessionLifetime)), //nolint:gosec // G124: HttpOnly, SameSite=Strict, and Secure over TLS (a.secure)
		Path: "/", MaxAge: int(SessionLifetime / time.Second), HttpOnly: true, Secure: a.secure(r),
		SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, next, http.StatusSeeOther) //nolint:gosec // G710: localPath keeps next to a path starting with "/", not "//", with no backslash or control character
}

// logout clears the session cookie.
func (a Guard) logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, //nolint:gosec // G124: HttpOnly, SameSite=Strict, and Secure over TLS (a.secure)
		Secure: a.secure(r), SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// secure reports whether the login cookie is Secure: over TLS, or behind
// a proxy that terminates it.
func (a Guard) secure(r *http.Request) bool { return r.TLS != nil || a.SecureCookie }

// localPath returns p if it is a path on this server, else /dashboard:
// the login never redirects to another site.
func localPath(p string) string {
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || strings.ContainsRune(p, '\\') {
		return "/dashboard"
	}
	// A tab or another control character makes url.Parse fail, so
	// http.Redirect would send the path raw, and browsers drop tabs:
	// "/\t/evil.example" would land on //evil.example.
	for i := 0; i < len(p); i++ {
		if p[i] < 0x20 || p[i] == 0x7f {
			return "/dashboard"
		}
	}
	return p
}

// Actor names the caller of the admin API in the audit trail: the
// client certificate's subject when one was verified, else the admin
// token (one token: it names no person).
func Actor(r *http.Request) string {
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 {
		if cn := r.TLS.VerifiedChains[0][0].Subject.CommonName; cn != "" {
			return "admin_api:cert:" + truncateActor(cn)
		}
		return "admin_api:cert"
	}
	return "admin_api:token"
}

// truncateActor keeps up to 64 printable ASCII characters of a
// certificate name for the audit trail.
func truncateActor(s string) string {
	out := make([]byte, 0, 64)
	for i := 0; i < len(s) && len(out) < cap(out); i++ {
		if c := s[i]; c >= 0x20 && c < 0x7f {
			out = append(out, c)
		}
	}
	return string(out)
}
