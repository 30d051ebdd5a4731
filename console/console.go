// Package console is the operators' web console on the admin listener,
// under /console/: find a payment (by its ID, a customer's ID or email,
// a card's last 4, an Idempotency-Key, a processor's reference, status,
// amount and dates, for one merchant or all), read all there is of it,
// and capture, void or refund it or resend one of its webhooks, each
// after a confirmation, through the engine as the API does, idempotent,
// and recorded in the audit trail with the operator's identity; and the
// operations views, read-only: staged captures waiting for settlement,
// unknown outcomes waiting for the reconciler, the processors' states,
// webhook endpoints whose deliveries fail, and the audit trail; and the
// merchants, with their API keys created, rolled and revoked as the
// admin API does, each confirmed, at most once per confirmation, a new
// secret shown once (docs/console.md).
//
// Pages are rendered on the server (html/template), the style sheet is
// embedded, and no page runs a script: the Content-Security-Policy
// allows none. The admin listener's guard (package admin) authenticates
// every request before it gets here; this package adds a CSRF token to
// every form, on top of the session cookie's SameSite=Strict and the
// guard's cross-origin protection.
//
// A console request holds one of ConsoleInflightMax places, so that
// operators searching during a surge cannot take more than a few of the
// store's connections. Safe for concurrent use.
package console

import (
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/engine"
	"github.com/surgepay/surgepay/telemetry"
)

// Prefix is the path of the console on the admin listener.
const Prefix = "/console/"

// Bounds of the console.
const (
	// ConsoleInflightMax bounds the console requests served at once;
	// beyond, 503 with Retry-After. Each is a few bounded statements,
	// so a handful of operators never queues.
	ConsoleInflightMax = 8
	// MerchantsScannedMax bounds the merchants one search of "all
	// merchants" scans (a scan per merchant); beyond, the operator picks
	// one. Exact lookups (a payment ID, an Idempotency-Key) probe up to
	// MerchantsProbedMax, one statement each.
	MerchantsScannedMax = 16
	MerchantsProbedMax  = 256
	// FieldBytesMax bounds a search field.
	FieldBytesMax = 200
	// EventsShownMax bounds the events a payment's page shows and whose
	// webhook deliveries it reads (one statement per event).
	EventsShownMax = 50
	// PageLimitDefault is the payments a page of results shows.
	PageLimitDefault = 25
	// formBytesMax bounds an action's form.
	formBytesMax = 4 << 10
)

// Config is what the console needs.
type Config struct {
	Engine *engine.Engine
	Logger *slog.Logger
	// Actor names the operator of a request, as the admin API's audit
	// rows do (admin.Actor: "admin_api:token", "admin_api:cert:NAME");
	// the console records "console:" and the rest. Nil: "console".
	Actor func(r *http.Request) string
	// ReadOnly reports whether the operator of a request may only read
	// (admin.ReadOnly: the read-only token or certificate): the pages
	// show no action, and the actions' confirmations and POSTs answer
	// 403 (readonly.go). Nil: every operator may act.
	ReadOnly func(r *http.Request) bool
	// SecureCookie marks the CSRF cookie Secure even in plain HTTP (a
	// proxy in front terminates TLS: tls.proxy_terminated).
	SecureCookie bool
	// ReconcileInterval is how often the reconciler looks at payments
	// whose outcome is unknown (reconcile_interval), shown on their pages;
	// 0: not shown.
	ReconcileInterval time.Duration
	// ProcessorStates returns each processor's state as telemetry keeps
	// it for /metrics and the dashboard (telemetry.Telemetry's
	// ProcessorStates); nil: the processors' page lists their names and
	// says their states are not available here.
	ProcessorStates func() []telemetry.ProcessorState
}

// Console serves the console. Create it with New.
type Console struct {
	cfg      Config
	eng      *engine.Engine
	log      *slog.Logger
	mux      *http.ServeMux
	inflight chan struct{}
}

//go:embed templates/*.html static/*
var files embed.FS

var pages = template.Must(template.New("").Funcs(funcs).ParseFS(files, "templates/*.html"))

// New returns the console of cfg.Engine.
func New(cfg Config) *Console {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Console{cfg: cfg, eng: cfg.Engine, log: cfg.Logger, mux: http.NewServeMux(),
		inflight: make(chan struct{}, ConsoleInflightMax)}
	static, _ := fs.Sub(files, "static") // the directory is embedded above
	c.mux.Handle("GET /console/static/", http.StripPrefix("/console/static/", http.FileServerFS(static)))
	c.mux.HandleFunc("GET /console/{$}", c.search)
	c.mux.HandleFunc("GET /console/merchants/{merchant}/payments/{id}", c.payment)
	c.mux.HandleFunc("GET /console/merchants/{merchant}/payments/{id}/{action}", c.acting(c.confirm))
	c.mux.HandleFunc("POST /console/merchants/{merchant}/payments/{id}/{action}", c.acting(c.act))
	c.mux.HandleFunc("GET /console/merchants/{merchant}/payments/{id}/webhooks/{delivery}/resend", c.acting(c.confirmResend))
	c.mux.HandleFunc("POST /console/merchants/{merchant}/payments/{id}/webhooks/{delivery}/resend", c.acting(c.resend))
	c.mux.HandleFunc("GET /console/merchants", c.merchantsList)
	c.mux.HandleFunc("GET /console/merchants/{merchant}", c.merchant)
	c.mux.HandleFunc("GET /console/merchants/{merchant}/keys/new", c.acting(c.confirmKey))
	c.mux.HandleFunc("POST /console/merchants/{merchant}/keys/new", c.acting(c.actKey))
	c.mux.HandleFunc("GET /console/merchants/{merchant}/keys/{key}/{action}", c.acting(c.confirmKey))
	c.mux.HandleFunc("POST /console/merchants/{merchant}/keys/{key}/{action}", c.acting(c.actKey))
	c.mux.HandleFunc("GET /console/staged", c.staged)
	c.mux.HandleFunc("GET /console/unknown", c.unknown)
	c.mux.HandleFunc("GET /console/processors", c.processors)
	c.mux.HandleFunc("GET /console/webhooks", c.webhooks)
	c.mux.HandleFunc("GET /console/audit", c.audit)
	c.mux.HandleFunc("GET /console/disputes", c.disputes)
	c.mux.HandleFunc("/console/", func(w http.ResponseWriter, r *http.Request) {
		c.fail(w, r, http.StatusNotFound, "No such page", "There is no console page at this address.")
	})
	return c
}

// ServeHTTP serves the console: security headers on every answer, at
// most ConsoleInflightMax requests at once, a panic answered 500 without
// its value.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "+
		"frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	select {
	case c.inflight <- struct{}{}:
		defer func() { <-c.inflight }()
	default:
		h.Set("Retry-After", "1")
		c.fail(w, r, http.StatusServiceUnavailable, "Busy", "The console is serving as many requests as it may at once; retry in a moment.")
		return
	}
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			c.log.Error("panic serving console request", "route", r.Pattern)
			c.fail(w, r, http.StatusInternalServerError, "Internal error", "The console failed; the server's log has the detail.")
		}
	}()
	c.mux.ServeHTTP(w, r)
}

// actor returns who acts, for the audit trail.
func (c *Console) actor(r *http.Request) string {
	if c.cfg.Actor == nil {
		return "console"
	}
	a := c.cfg.Actor(r)
	if _, rest, ok := strings.Cut(a, ":"); ok {
		return "console:" + rest
	}
	return "console:" + a
}

// render writes the page name with data and status code.
func (c *Console) render(w http.ResponseWriter, code int, name string, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	if err := pages.ExecuteTemplate(w, name, data); err != nil {
		c.log.Warn("console: render page", "page", name, "err", err.Error())
	}
}

// errorPage is the data of error.html.
type errorPage struct {
	Title, Message string
	Status         int
}

// fail answers a page that explains what went wrong.
func (c *Console) fail(w http.ResponseWriter, _ *http.Request, code int, title, message string) {
	c.render(w, code, "error.html", errorPage{Title: title, Message: message, Status: code})
}

// failErr answers err of the engine or store: its status, and its
// message when it is a client's error; an internal error is logged and
// said in general terms.
func (c *Console) failErr(w http.ResponseWriter, r *http.Request, err error) {
	code := statusOf(err)
	if code >= 500 {
		c.log.Error("console", "route", r.Pattern, "err", err.Error())
		if code == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", "1")
			c.fail(w, r, code, "Unavailable", "The store is unavailable or busy; retry in a moment.")
			return
		}
		c.fail(w, r, code, "Internal error", "The console failed; the server's log has the detail.")
		return
	}
	title := "Not found"
	if code != http.StatusNotFound {
		title = "Refused"
	}
	c.fail(w, r, code, title, errMessage(err))
}

// statusOf maps an engine error to the console's HTTP status.
func statusOf(err error) int {
	switch surgepay.ErrorCode(err) {
	case surgepay.EINVALID:
		return http.StatusBadRequest
	case surgepay.ENOTFOUND:
		return http.StatusNotFound
	case surgepay.ECONFLICT:
		return http.StatusConflict
	case surgepay.EUNPROCESS, surgepay.EDECLINED:
		return http.StatusUnprocessableEntity
	case surgepay.EUNAVAILABLE:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// errMessage returns the message of a domain error, which is safe to
// show (surgepay.Error), and a general one for any other error.
func errMessage(err error) string {
	var e *surgepay.Error
	if errors.As(err, &e) && e.Message != "" {
		return e.Message
	}
	return "the operation failed; the server's log has the detail"
}
