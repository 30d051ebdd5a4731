// Package admin serves the admin listener: health and readiness probes,
// the Go profiler, metrics and the dashboard, the effective configuration
// and the admin API, all but the probes behind the admin credential (the
// admin token as a bearer token or basic-auth password, the dashboard's
// session cookie from its login page, or a verified client certificate).
// A read-only credential (the read-only token, its session, or a
// certificate named read-only) reads all of it and changes nothing
// (readonly.go). Wrong credentials are budgeted per client address.
package admin

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"html/template"
	"net"
	"net/http"
	"net/url"
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
	return AdminTokenSource(envToken, path).Load()
}

// Guard guards the admin listener. The zero value refuses every
// guarded request (no token: nothing matches).
type Guard struct {
	// Token returns the admin token (it may change on a reload); nil or
	// "" refuses every credential but a client certificate.
	Token func() string
	// ReadToken returns the read-only token (it may change on a
	// reload): it reads everything the listener serves and changes
	// nothing (ReadOnly). Nil or "": no read-only token.
	ReadToken func() string
	// ReadOnlyClients names the client certificates that are read-only,
	// by the name Actor records for them (the subject's common name, its
	// printable ASCII, at most 64 characters): tls.admin_read_only_clients.
	// Any other verified certificate may act.
	ReadOnlyClients []string
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
	// readOnlyNames is ReadOnlyClients as a set, made by Wrap.
	readOnlyNames map[string]bool
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
// pass. A read-only credential reaches next with ReadOnly(r) true, and
// only with GET or HEAD: any other method is refused 403 here (/login
// and /logout excepted), whatever next would do with it.
func (a Guard) Wrap(next http.Handler) http.Handler {
	if a.failures == nil {
		a.failures = newFailureBudget(failuresPerSecond, failuresBurst)
	}
	a.readOnlyNames = make(map[string]bool, len(a.ReadOnlyClients))
	for _, n := range a.ReadOnlyClients {
		a.readOnlyNames[n] = true
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /login", a.loginPage)
	mux.HandleFunc("POST /login", a.login)
	mux.HandleFunc("POST /logout", a.logout)
	mux.Handle("/", next)
	guarded := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if openPaths[r.URL.Path] || r.URL.Path == "/logout" {
			mux.ServeHTTP(w, r)
			return
		}
		// The credential is checked before the budget of wrong ones: a
		// right one passes whatever a guesser at the same address spent.
		if ro, ok := a.credential(r); ok {
			a.serveAs(mux, ro, w, r)
			return
		}
		if a.MetricsOpen && r.URL.Path == "/metrics" {
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

// credential reports whether r carries a valid credential, and whether
// it is read-only: a verified client certificate (read-only when its
// name is in ReadOnlyClients; a certificate is the credential whatever
// else the request carries, as it names the operator), else the admin
// or read-only token as a bearer token or basic-auth password, else a
// valid session cookie.
func (a Guard) credential(r *http.Request) (readOnly, ok bool) {
	if a.clientCert(r) {
		return a.readOnlyNames[certName(r)], true
	}
	if h := r.Header.Get("Authorization"); h != "" {
		if scheme, tok, ok := strings.Cut(h, " "); ok && strings.EqualFold(scheme, "Bearer") {
			return a.tokenRole(strings.TrimSpace(tok))
		}
		if _, pw, ok := r.BasicAuth(); ok {
			return a.tokenRole(pw)
		}
		return false, false
	}
	if c, err := r.Cookie(SessionCookie); err == nil {
		return a.sessionValid(c.Value)
	}
	return false, false
}

// tokenRole reports whether got is the admin token or the read-only
// token, and which. Both are compared, in constant time.
func (a Guard) tokenRole(got string) (readOnly, ok bool) {
	full, read := tokenMatches(got, a.token()), tokenMatches(got, a.readToken())
	return read && !full, full || read
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

// tokenMatches compares got with token in constant time: both are
// hashed first, so neither the content nor the length leaks through
// timing. An empty token matches nothing.
func tokenMatches(got, token string) bool {
	if token == "" {
		return false
	}
	g, w := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(token))
	return subtle.ConstantTimeCompare(g[:], w[:]) == 1
}

// Session roles: the first field of a session cookie.
const (
	sessionAdmin = "admin"
	sessionRead  = "read"
)

// session returns a session cookie value of role that expires at exp:
// "ROLE.EXPIRY.MAC", the MAC an HMAC of the role and the expiry under a
// key derived from the role's token. So a new token ends every session
// of its role, the cookie never holds a token, and a read-only cookie
// cannot be made a full one: its MAC binds its role, and a full one's
// key is the admin token's.
func session(role, token string, exp time.Time) string {
	e := strconv.FormatInt(exp.Unix(), 10)
	return role + "." + e + "." + base64.RawURLEncoding.EncodeToString(sessionMAC(role, token, e))
}

func sessionMAC(role, token, exp string) []byte {
	key := sha256.Sum256([]byte("surgepay admin session\x00" + role + "\x00" + token))
	m := hmac.New(sha256.New, key[:])
	m.Write([]byte(role + "." + exp))
	return m.Sum(nil)
}

// sessionValid checks a session cookie's role, MAC and expiry.
func (a Guard) sessionValid(v string) (readOnly, ok bool) {
	role, rest, _ := strings.Cut(v, ".")
	var token string
	switch role {
	case sessionAdmin:
		token = a.token()
	case sessionRead:
		token = a.readToken()
	}
	e, mac, found := strings.Cut(rest, ".")
	got, err := base64.RawURLEncoding.DecodeString(mac)
	if token == "" || !found || err != nil || !hmac.Equal(got, sessionMAC(role, token, e)) {
		return false, false
	}
	exp, err := strconv.ParseInt(e, 10, 64)
	return role == sessionRead, err == nil && a.clock().Unix() < exp
}

func (a Guard) token() string {
	if a.Token == nil {
		return ""
	}
	return a.Token()
}

func (a Guard) readToken() string {
	if a.ReadToken == nil {
		return ""
	}
	return a.ReadToken()
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
{{if .Failed}}<p class="err" role="alert">That is neither the admin token nor the read-only token.</p>{{end}}
<form method="post" action="/login">
<label for="token">Admin token, or the read-only token</label>
<input id="token" name="token" type="password" autocomplete="current-password" required autofocus>
<input type="hidden" name="next" value="{{.Next}}">
<button type="submit">Log in</button>
</form>
<p>The token is in the file <code>admin_token_file</code> (default <code>DATA_DIR/admin-token</code>),
created by the first <code>surgepay serve</code>, or in <code>SURGEPAY_ADMIN_TOKEN</code>.
The read-only token (<code>DATA_DIR/admin-read-token</code>) searches and reads, and acts on nothing.</p>
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
	readOnly, ok := a.tokenRole(r.PostForm.Get("token"))
	if !ok {
		if !a.failures.spend(r) {
			a.failures.tooMany(w, r)
			return
		}
		writeLogin(w, http.StatusUnauthorized, loginData{Next: next, Failed: true})
		return
	}
	role, token := sessionAdmin, a.token()
	if readOnly {
		role, token = sessionRead, a.readToken()
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: session(role, token, a.clock().Add(SessionLifetime)), //nolint:gosec // G124: HttpOnly, SameSite=Strict, and Secure over TLS (a.secure)
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
// client certificate's subject when one was verified ("admin_api:cert:NAME";
// tls.admin_read_only_clients says which names are read-only), else the
// token: "admin_api:token", or "admin_api:read_token" for the read-only
// one (one token each: it names no person).
func Actor(r *http.Request) string {
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 {
		if cn := certName(r); cn != "" {
			return "admin_api:cert:" + cn
		}
		return "admin_api:cert"
	}
	if ReadOnly(r) {
		return "admin_api:read_token"
	}
	return "admin_api:token"
}

// certName is the name of r's verified client certificate as Actor
// records it: its subject's common name, truncated (truncateActor); ""
// for none.
func certName(r *http.Request) string {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return ""
	}
	return truncateActor(r.TLS.VerifiedChains[0][0].Subject.CommonName)
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
