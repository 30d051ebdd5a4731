package admin

import (
	"context"
	"fmt"
	"html/template"
	"net/http"
	"strings"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/api"
)

// A read-only credential (the read-only token, a login with it, or a
// client certificate named in tls.admin_read_only_clients) reads
// everything the admin listener serves and changes nothing: the guard
// lets it through with GET and HEAD only, marked in the request's
// context (ReadOnly), so that the console can leave out its actions.

// ReasonReadOnly is the code of the admin API's 403 to a read-only
// credential: {"error":{"type":"permission_error","code":"read_only_operator",…}}.
const ReasonReadOnly = "read_only_operator"

// ReadOnlyMessage says why a read-only credential is refused.
const ReadOnlyMessage = "this admin credential is read-only: it may read (GET) but not change anything; " +
	"use the admin token, or a client certificate not named in tls.admin_read_only_clients, to act"

type readOnlyKey struct{}

// ReadOnly reports whether r came with a read-only admin credential, as
// the guard found it (Guard.Wrap). False for a request the guard did not
// pass, or passed with a credential that may act.
func ReadOnly(r *http.Request) bool {
	ro, _ := r.Context().Value(readOnlyKey{}).(bool)
	return ro
}

// WithReadOnly returns ctx marked as the context of a read-only
// credential's request, as the guard marks it (for handlers mounted
// behind another guard, and tests).
func WithReadOnly(ctx context.Context) context.Context {
	return context.WithValue(ctx, readOnlyKey{}, true)
}

// serveAs serves r, authenticated, with next: a read-only credential
// marked in the context, and refused unless its method reads.
func (a Guard) serveAs(next http.Handler, readOnly bool, w http.ResponseWriter, r *http.Request) {
	if !readOnly {
		next.ServeHTTP(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		refuseReadOnly(w, r)
		return
	}
	next.ServeHTTP(w, r.WithContext(WithReadOnly(r.Context())))
}

// refuseReadOnly answers 403 to a read-only credential's request that
// would change something: in the admin API's error format under its
// prefix, a page to a browser, else a line of text.
func refuseReadOnly(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, api.AdminPrefix) {
		api.WriteAdminError(w, &surgepay.Error{Code: surgepay.EFORBIDDEN, Reason: ReasonReadOnly, Message: ReadOnlyMessage})
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	if strings.Contains(r.Header.Get("Accept"), "text/html") {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("X-Frame-Options", "DENY")
		w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'")
		w.WriteHeader(http.StatusForbidden)
		_ = readOnlyTemplate.Execute(w, nil) // a client gone away is no error of ours; the status went out above
		return
	}
	http.Error(w, "403 forbidden: "+ReadOnlyMessage, http.StatusForbidden)
}

// readOnlyTemplate is the page a browser gets for a refused change.
var readOnlyTemplate = template.Must(template.New("readonly").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>surgepay admin: read-only</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{font:16px system-ui,sans-serif;max-width:36rem;margin:4rem auto;padding:0 1rem}.err{color:#b00020}
button{font:inherit;padding:.4rem 1.2rem}</style></head>
<body><h1>403: read-only</h1>
<p class="err" role="alert" id="error">read-only: you can search but not act. This login (the read-only token, or a
client certificate named in <code>tls.admin_read_only_clients</code>) reads everything and changes nothing.</p>
<p><a href="/console/">Back to the console</a></p>
<form method="post" action="/logout"><button type="submit">Log out</button> to log in with the admin token.</form>
</body></html>
`))

// certNameBytesMax is the longest certificate name Actor records
// (truncateActor).
const certNameBytesMax = 64

// CheckCertName reports whether name can be a certificate's name as
// Actor records it (printable ASCII, 1 to 64 characters), so that a
// name in tls.admin_read_only_clients can match.
func CheckCertName(name string) error {
	if name == "" || len(name) > certNameBytesMax || truncateActor(name) != name {
		return fmt.Errorf("%q is not a certificate name as the audit trail records it: 1 to %d printable ASCII characters",
			name, certNameBytesMax)
	}
	return nil
}
