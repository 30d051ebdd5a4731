package sim

import (
	"bytes"
	"errors"
	"html/template"
	"net/http"
	"strconv"
	"strings"

	"github.com/surgepay/surgepay"
)

// PageBodyBytesMax bounds the body of a challenge page's form: its one
// field, outcome=authenticate, is 20 bytes.
const PageBodyBytesMax = 1 << 10

// Challenge form outcomes (the field "outcome").
const (
	OutcomeAuthenticate = "authenticate"
	OutcomeFail         = "fail"
)

// pagesCSP is the Content-Security-Policy of every page but a challenge's,
// which adds its ReturnURL's origin to form-action (challengeCSP): no
// script at all, styles from 3ds.css only, never framed.
const pagesCSP = "default-src 'none'; style-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// challengeCSP lets the challenge's form post to the page itself and
// follow its redirects: the 303 to the ReturnURL (surgepay's return), and
// surgepay's own 303 on to the merchant's page, whose origin is in
// surgepay's signed token and unknown here. Browsers apply form-action to
// every redirect of a form's submission (a strict list stranded the
// shopper on this page: examples/checkout's Chromium test), so it allows
// any http or https target; the form itself posts only to 'self'.
func challengeCSP(string) string {
	return "default-src 'none'; style-src 'self'; form-action 'self' http: https:; frame-ancestors 'none'; base-uri 'none'"
}

// Pages returns the simulator's shopper-facing pages, served under
// surgepay.PagesPrefix (surgepay.PageServer): `surgepay serve` mounts them
// on its API listener for the simulator inside it, and NewHandler serves
// them on the HTTP simulator's listener.
//
//	GET  3ds/{id}   the challenge page: Authenticate or Fail; an ended challenge shows its state and a link back
//	POST 3ds/{id}   outcome=authenticate|fail completes the challenge (once), then 303 to its ReturnURL
//	GET  3ds.css    the pages' style sheet
//
// An ID the simulator does not hold is 404. The handler takes one shard's
// lock per request, briefly, and renders outside it.
func (p *Provider) Pages() http.Handler { return p.pages }

var _ surgepay.PageServer = (*Provider)(nil)

// HoldsPage reports whether r asks for one of this simulator's pages: a
// challenge it holds, or the style sheet. A router over several
// simulators serves a page from the one that holds it.
func (p *Provider) HoldsPage(r *http.Request) bool {
	rest, ok := strings.CutPrefix(r.URL.Path, surgepay.PagesPrefix)
	if !ok {
		return false
	}
	if rest == "3ds.css" {
		return true
	}
	id, ok := strings.CutPrefix(rest, "3ds/")
	return ok && p.HasChallenge(id)
}

type pages struct{ p *Provider }

func newPages(p *Provider) http.Handler {
	h := &pages{p: p}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+surgepay.PagesPrefix+"3ds/{id}", h.show)
	mux.HandleFunc("POST "+surgepay.PagesPrefix+"3ds/{id}", h.complete)
	mux.HandleFunc("GET "+surgepay.PagesPrefix+"3ds.css", h.css)
	mux.HandleFunc(surgepay.PagesPrefix, func(w http.ResponseWriter, _ *http.Request) { notFoundPage(w) })
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", pagesCSP)
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Referrer-Policy", "no-referrer") // the URL names the challenge: never send it on.
		hd.Set("Cache-Control", "no-store")
		mux.ServeHTTP(w, r)
	})
}

// show serves a challenge's page. A reload shows the same challenge, or
// its state once ended.
func (h *pages) show(w http.ResponseWriter, r *http.Request) {
	v, ok := h.p.challengeAt(r.PathValue("id"), false, false)
	if !ok {
		notFoundPage(w)
		return
	}
	origin, _ := returnOrigin(v.returnURL) // checked when the challenge started.
	w.Header().Set("Content-Security-Policy", challengeCSP(origin))
	writePage(w, http.StatusOK, pageData{
		Title:     "Simulated 3-D Secure",
		Pending:   v.state == challengePending,
		Amount:    formatAmount(v.amount, v.currency),
		Last4:     v.last4,
		State:     stateText(v.state),
		ReturnURL: v.returnURL,
		Outcomes:  [2]string{OutcomeAuthenticate, OutcomeFail},
	})
}

// complete reads the cardholder's choice and ends the challenge with it,
// unless it has ended already (a second post, or its time ran out): then
// nothing more happens. Either way the shopper goes back to the ReturnURL,
// exactly as the engine gave it.
func (h *pages) complete(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, PageBodyBytesMax)
	if err := r.ParseForm(); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			errorPage(w, http.StatusRequestEntityTooLarge, "The form is larger than "+strconv.Itoa(PageBodyBytesMax)+" bytes.")
			return
		}
		errorPage(w, http.StatusBadRequest, "The form could not be read.")
		return
	}
	var authenticated bool
	switch r.PostForm.Get("outcome") {
	case OutcomeAuthenticate:
		authenticated = true
	case OutcomeFail:
	default:
		errorPage(w, http.StatusBadRequest, "Choose Authenticate or Fail.")
		return
	}
	v, ok := h.p.challengeAt(r.PathValue("id"), true, authenticated)
	if !ok {
		notFoundPage(w)
		return
	}
	w.Header().Set("Location", v.returnURL)
	w.WriteHeader(http.StatusSeeOther)
}

func (h *pages) css(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/css; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(pagesCSS)))
	_, _ = w.Write([]byte(pagesCSS)) // a client gone away is no error of ours
}

func stateText(s challengeState) string {
	switch s {
	case challengeAuthenticated:
		return "You authenticated this payment. The merchant now has its result."
	case challengeFailed:
		return "Authentication failed: the payment was not made."
	case challengeAbandoned:
		return "The time to authenticate ran out: the payment was not made."
	case challengeCancelled:
		return "This authentication was cancelled: the payment was not made with it."
	}
	return ""
}

// formatAmount writes minor units in the currency's major units:
// "1,234.56 USD", "500 JPY".
func formatAmount(amount int64, currency string) string {
	exp := 2
	if c, ok := surgepay.LookupCurrency(currency); ok {
		exp = c.Exponent
	}
	digits := strconv.FormatInt(amount, 10)
	for len(digits) <= exp {
		digits = "0" + digits
	}
	whole, frac := digits[:len(digits)-exp], digits[len(digits)-exp:]
	var b strings.Builder
	for i := range len(whole) {
		if i > 0 && (len(whole)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteByte(whole[i])
	}
	if exp > 0 {
		b.WriteByte('.')
		b.WriteString(frac)
	}
	b.WriteByte(' ')
	b.WriteString(strings.ToUpper(currency))
	return b.String()
}

type pageData struct {
	Title     string
	Pending   bool
	Amount    string
	Last4     string
	State     string
	ReturnURL string
	Message   string
	Outcomes  [2]string
}

func notFoundPage(w http.ResponseWriter) {
	errorPage(w, http.StatusNotFound, "No such 3-D Secure challenge: it never existed here, or ended long ago.")
}

func errorPage(w http.ResponseWriter, status int, msg string) {
	writePage(w, status, pageData{Title: "Simulated 3-D Secure", Message: msg})
}

// writePage renders data in full before writing, so a failure is a 500
// rather than half a page.
func writePage(w http.ResponseWriter, status int, data pageData) {
	var b bytes.Buffer
	if err := pageTemplate.Execute(&b, data); err != nil {
		http.Error(w, "render page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(b.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes()) // a client gone away is no error of ours
}

// pageTemplate is every page: a challenge (pending or ended), or a
// message. No script and no inline style (the CSP allows neither); the
// style sheet is relative, so the pages work under any PagesURL path.
var pageTemplate = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>{{.Title}}</title>
<link rel="stylesheet" href="../3ds.css">
</head>
<body>
<main aria-labelledby="title">
<h1 id="title">{{.Title}}</h1>
<p class="note">A test page of surgepay's card-network simulator, standing in for the card issuer's. No real card is involved.</p>
{{- if .Message}}
<p role="alert">{{.Message}}</p>
{{- else}}
<dl>
<dt>Amount</dt><dd>{{.Amount}}</dd>
<dt>Card</dt><dd><span aria-hidden="true">•••• </span><span class="visually-hidden">ending in </span>{{.Last4}}</dd>
</dl>
{{- if .Pending}}
<form method="post" aria-describedby="prompt">
<p id="prompt">Confirm this payment as the cardholder would in their bank's app.</p>
<div class="actions">
<button type="submit" name="outcome" value="{{index .Outcomes 0}}">Authenticate</button>
<button type="submit" name="outcome" value="{{index .Outcomes 1}}" class="secondary">Fail</button>
</div>
</form>
{{- else}}
<p role="status">{{.State}}</p>
<p><a href="{{.ReturnURL}}">Return to the merchant</a></p>
{{- end}}
{{- end}}
</main>
</body>
</html>
`))

// pagesCSS is served as 3ds.css.
const pagesCSS = `:root { color-scheme: light dark; font-family: system-ui, sans-serif; line-height: 1.5; }
body { margin: 0; padding: 2rem 1rem; }
main { max-width: 28rem; margin: 0 auto; padding: 1.5rem; border: 1px solid #8886; border-radius: 0.75rem; }
h1 { font-size: 1.4rem; margin-top: 0; }
.note { font-size: 0.9rem; opacity: 0.8; }
dl { display: grid; grid-template-columns: auto 1fr; gap: 0.25rem 1rem; }
dt { font-weight: 600; }
dd { margin: 0; font-variant-numeric: tabular-nums; }
.actions { display: flex; gap: 0.75rem; flex-wrap: wrap; }
button { font: inherit; padding: 0.6rem 1.2rem; border-radius: 0.5rem; border: 1px solid #1a56db; background: #1a56db; color: #fff; cursor: pointer; }
button.secondary { background: transparent; color: inherit; border-color: #888; }
button:focus-visible, a:focus-visible { outline: 3px solid #f59e0b; outline-offset: 2px; }
.visually-hidden { position: absolute; width: 1px; height: 1px; overflow: hidden; clip-path: inset(50%); white-space: nowrap; }
`
