// Package api serves surgepay's JSON/HTTP API v1: routing, authentication,
// per-merchant request rate limits, strict request decoding, error
// mapping, idempotency keys and the embedded OpenAPI document. Only this
// package maps error codes to HTTP statuses.
package api

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/engine"
	"github.com/surgepay/surgepay/telemetry"
)

//go:embed openapi.json
var openAPI []byte

// OpenAPI returns the embedded OpenAPI 3 document.
func OpenAPI() []byte { return openAPI }

// Config configures a Server.
type Config struct {
	Engine *engine.Engine
	Logger *slog.Logger
	// Debug adds debug headers to every response: Surgepay-Sql
	// (statements per request by kind and store time), Surgepay-Cache
	// (cache hits and misses) and Surgepay-Provider-Ms.
	Debug bool
	// Telemetry records metrics and spans and says whether to write access
	// lines. Nil: no metrics, no spans, access lines on.
	Telemetry *telemetry.Telemetry
	// InflightMax bounds requests being served at once; beyond it requests
	// get 503 overloaded with Retry-After. A request takes its slot once
	// it is authenticated, before its body is read, so at most
	// InflightMax bodies are buffered at once (admission.go). Default 4096.
	InflightMax int
	// MerchantInflightMax bounds the requests one merchant may have in
	// flight (its body being read included); beyond it its requests get
	// 429 merchant_concurrency_limit with Retry-After, and the other
	// merchants' do not notice. Each processor's webhooks have one such
	// share. 0 (the default): all of InflightMax while exactly one
	// merchant is enabled (SetMerchantsEnabled), else InflightMax /
	// MerchantInflightShareDefault, at least 1 (and that for the
	// processors' webhooks always); at most InflightMax.
	// SetMerchantInflightMax changes it.
	MerchantInflightMax int
	// BodyReadTimeout bounds reading a request's body, from when the
	// request is admitted (its headers read and its key checked): a slower
	// body gets 408 body_timeout and its connection is closed. 0: the
	// default, BodyReadTimeoutDefault; negative: only the http.Server's
	// ReadTimeout bounds it.
	BodyReadTimeout time.Duration
	// Ready reports whether the server may take traffic (GET /readyz).
	Ready func() bool
	// SharedRateLimiter, if set, counts the merchants' rate limits across
	// the nodes that share it (ratelimit.Redis); when it cannot answer,
	// the node's own bucket decides. Nil: each node counts alone.
	SharedRateLimiter SharedRateLimiter
	// WritesOverloaded, if set, reports that the store's writer has a
	// standing queue (sqlite.DB.Overloaded): a request with a body (a
	// write) is then answered 503 overloaded with Retry-After once its
	// body is read, before any work (a processor call above all) that it
	// would have to undo; reads are served. Nil: never.
	WritesOverloaded func() bool
	// Now is the clock of the per-merchant request rate limit
	// (merchants.*.rate_limit). Default time.Now; tests set their own.
	Now func() time.Time
	// TrustedProxies are the proxies in front (trusted_proxies): a
	// request whose peer is one of them is counted under the client
	// address its X-Forwarded-For names (clientAddr). Empty: the peer's
	// address, and X-Forwarded-For is ignored.
	TrustedProxies []netip.Prefix
}

// Server is the API's HTTP handler. Safe for concurrent use.
type Server struct {
	cfg      Config
	eng      *engine.Engine
	log      *slog.Logger
	tel      *telemetry.Telemetry
	inflight chan struct{}
	tenants  *tenantSlots
	shares   shares
	limits   *limiters
	// clientLimits are the checkout routes' buckets by publishable key
	// and client address (checkoutClient).
	clientLimits *limiters
	mux          *http.ServeMux
	routes       []string
	scopes       map[string]string // route pattern -> scope
}

// New returns a Server.
func New(cfg Config) *Server {
	if cfg.InflightMax <= 0 {
		cfg.InflightMax = 4096
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Ready == nil {
		cfg.Ready = func() bool { return true }
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.BodyReadTimeout == 0 {
		cfg.BodyReadTimeout = BodyReadTimeoutDefault
	}
	s := &Server{cfg: cfg, eng: cfg.Engine, log: cfg.Logger, tel: cfg.Telemetry,
		inflight: make(chan struct{}, cfg.InflightMax), limits: newLimiters(cfg.Now), clientLimits: newLimiters(cfg.Now), mux: http.NewServeMux(),
		scopes: map[string]string{}, tenants: newTenantSlots(merchantInflightMax(cfg.MerchantInflightMax, cfg.InflightMax, -1)),
		shares: shares{n: cfg.MerchantInflightMax, merchants: -1}}
	s.routesInit()
	return s
}

// Routes returns the "METHOD /path" patterns of the API, for the test that
// keeps the OpenAPI document and the router in step.
func (s *Server) Routes() []string { return append([]string(nil), s.routes...) }

type handlerFunc func(w http.ResponseWriter, r *http.Request, call *engine.Call) error

func (s *Server) routesInit() {
	s.mux.Handle("GET /v1/openapi.json", s.bounded(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(openAPI)
	}))
	s.mux.Handle("GET /healthz", s.bounded(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok\n")) }))
	// A processor's webhooks carry no API key: the processor's signature
	// authenticates them (engine.ApplyProcessorEvent verifies it). A name
	// that is no configured processor is 404 before its body is read or a
	// slot taken; each processor has its own tenant's slots, so that a
	// flood sent under one name holds no more, and no other processor's.
	s.mux.HandleFunc("POST /v1/processor_webhooks/{processor}", func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("processor")
		if !s.eng.AcceptsProcessorEvents(name) {
			s.writeError(w, r, surgepay.NotFound("processor", "processor"))
			return
		}
		s.admit(w, r, processorWebhooksTenant+":"+name, s.processorWebhooksShare(), surgepay.ProcessorEventBytesMax, nil, func() { s.processorWebhook(w, r) })
	})
	s.mux.Handle("GET /readyz", s.bounded(func(w http.ResponseWriter, r *http.Request) {
		if !s.cfg.Ready() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok\n"))
	}))
	s.handle("POST /v1/customers", surgepay.ScopeCustomersWrite, s.createCustomer)
	s.handle("GET /v1/customers", surgepay.ScopeCustomersRead, s.listCustomers)
	s.handle("GET /v1/customers/{id}", surgepay.ScopeCustomersRead, s.getCustomer)
	s.handle("POST /v1/customers/{id}", surgepay.ScopeCustomersWrite, s.updateCustomer)
	s.handle("DELETE /v1/customers/{id}", surgepay.ScopeCustomersWrite, s.deleteCustomer)
	s.handle("POST /v1/payment_methods", surgepay.ScopePaymentMethodsWrite, s.createPaymentMethod)
	s.handle("GET /v1/payment_methods", surgepay.ScopePaymentMethodsRead, s.listPaymentMethods)
	s.handle("GET /v1/payment_methods/{id}", surgepay.ScopePaymentMethodsRead, s.getPaymentMethod)
	s.handle("DELETE /v1/payment_methods/{id}", surgepay.ScopePaymentMethodsWrite, s.deletePaymentMethod)
	s.handle("POST /v1/payments", surgepay.ScopePaymentsWrite, s.createPayment)
	s.handle("GET /v1/payments", surgepay.ScopePaymentsRead, s.listPayments)
	s.handle("GET /v1/payments/{id}", surgepay.ScopePaymentsRead, s.getPayment)
	s.handle("POST /v1/payments/{id}/capture", surgepay.ScopePaymentsWrite, s.capturePayment)
	s.handle("POST /v1/payments/{id}/void", surgepay.ScopePaymentsWrite, s.voidPayment)
	s.handle("POST /v1/payments/{id}/refunds", surgepay.ScopeRefundsWrite, s.refundPayment)
	s.handle("GET /v1/payments/{id}/events", surgepay.ScopePaymentsRead, s.listEvents)
	s.handle("GET /v1/analytics", surgepay.ScopeAnalyticsRead, s.getAnalytics)
	s.checkoutRoutesInit()
	s.handle("POST /v1/webhook_endpoints", surgepay.ScopeWebhooksWrite, s.createWebhookEndpoint)
	s.handle("GET /v1/webhook_endpoints", surgepay.ScopeWebhooksRead, s.listWebhookEndpoints)
	s.handle("GET /v1/webhook_endpoints/{id}", surgepay.ScopeWebhooksRead, s.getWebhookEndpoint)
	s.handle("DELETE /v1/webhook_endpoints/{id}", surgepay.ScopeWebhooksWrite, s.deleteWebhookEndpoint)
	s.handle("POST /v1/webhook_endpoints/{id}/roll_secret", surgepay.ScopeWebhooksWrite, s.rollWebhookSecret)
	s.handle("GET /v1/webhook_deliveries", surgepay.ScopeWebhooksRead, s.listWebhookDeliveries)
	s.handle("GET /v1/webhook_deliveries/{id}", surgepay.ScopeWebhooksRead, s.getWebhookDelivery)
	s.handle("POST /v1/webhook_deliveries/{id}/resend", surgepay.ScopeWebhooksWrite, s.resendWebhookDelivery)
	s.mux.Handle("/", s.bounded(func(w http.ResponseWriter, r *http.Request) {
		if allow := s.allowed(r); len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			s.writeError(w, r, &surgepay.Error{Code: ENOTALLOWED, Reason: "method_not_allowed",
				Message: r.Method + " is not allowed on " + truncate(r.URL.Path, 200) + "; allowed: " + strings.Join(allow, ", ")})
			return
		}
		s.writeError(w, r, &surgepay.Error{Code: surgepay.ENOTFOUND, Reason: "route_not_found",
			Message: "no such route: " + r.Method + " " + truncate(r.URL.Path, 200)})
	}))
}

// bounded runs h, which reads no body and serves no merchant, in one of
// the server's inflight_max slots.
func (s *Server) bounded(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.admit(w, r, "", 0, 0, nil, func() { h(w, r) })
	})
}

// handle registers an authenticated route and the scope a restricted API
// key needs to call it (surgepay.Allows); every route has one.
func (s *Server) handle(pattern, scope string, h handlerFunc) {
	if !surgepay.ValidScope(scope) && scope != surgepay.ScopeCheckout {
		panic("api: route " + pattern + " has no valid scope") // a programmer error, caught by every test
	}
	s.routes = append(s.routes, pattern)
	s.scopes[pattern] = scope
	s.mux.Handle(pattern, s.authenticated(scope, h))
}

// RouteScopes returns the scope each authenticated route needs, by
// "METHOD /path" pattern.
func (s *Server) RouteScopes() map[string]string { return maps.Clone(s.scopes) }

// ServeHTTP serves the API with panic recovery, a request ID, the
// per-request SQL statement counter, metrics, a span and an access line;
// the routes admit their requests (admission.go): the merchant's share of
// in-flight requests, the body within its timeout, then the server's
// in-flight limit.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	reqID := requestID(r.Header.Get("X-Request-Id"))
	w.Header().Set("X-Request-Id", reqID)
	q, ctx := s.tel.StartRequest(r)
	if id := q.TraceID(); id != "" {
		w.Header().Set("Trace-Id", id)
	}
	st := &requestState{id: reqID}
	// The mux sets Pattern on the request it is given: keep that one.
	r = r.WithContext(context.WithValue(ctx, requestStateKey{}, st))
	rw := &statusWriter{ResponseWriter: w}
	defer func() {
		v := recover()
		if v != nil && v != http.ErrAbortHandler {
			s.recovered(rw, r, q, v)
		}
		if rw.status == 0 {
			rw.status = http.StatusOK
		}
		q.End(telemetry.RequestEnd{Route: r.Pattern, Method: r.Method, Status: rw.status, Merchant: st.merchant,
			ErrorCode: st.errorCode})
		// The line's attributes cost ~1 KB a request: built only for a
		// logger that writes info.
		if s.tel.AccessLog() && s.log.Enabled(r.Context(), slog.LevelInfo) {
			s.accessLog(r, rw.status, q, st)
		}
		if v == http.ErrAbortHandler {
			panic(v)
		}
	}()
	if why, ok := r.Header[framingConflictHeader]; ok {
		// A head GuardFraming refused, or both Content-Length and
		// Transfer-Encoding: refused, and the connection closed, since a
		// proxy in front may have framed it otherwise.
		rw.Header().Set("Connection", "close")
		s.writeError(rw, r, framingError(why[0]))
		return
	}
	if _, err := url.ParseQuery(r.URL.RawQuery); err != nil {
		// A malformed query would otherwise be dropped whole: a filter
		// silently ignored.
		s.writeError(rw, r, surgepay.Invalid("query", "invalid_query", "the query string is malformed: %v", err))
		return
	}
	if surgepay.TextHasCardNumber(r.Header.Get("X-Request-Id")) {
		// Replaced above, and refused: the client's request IDs carry card
		// numbers somewhere they are logged.
		s.writeError(rw, r, surgepay.CardNumberInText("X-Request-Id"))
		return
	}
	s.mux.ServeHTTP(rw, r)
}

// ENOTALLOWED is the API's own code for a known path asked with a method
// it does not serve: 405 with Allow.
const ENOTALLOWED = "method_not_allowed"

// allowed returns the methods the mux serves on r's path, if r's own is
// not one of them.
func (s *Server) allowed(r *http.Request) []string {
	var out []string
	for _, m := range []string{"GET", "POST", "DELETE", "PUT", "PATCH"} {
		if m == r.Method {
			continue
		}
		c := r.Clone(r.Context())
		c.Method = m
		if _, pat := s.mux.Handler(c); pat != "" && pat != "/" {
			out = append(out, m)
		}
	}
	return out
}

// requestID returns the client's X-Request-Id if it is short, printable and
// cannot be a card number (it is logged and echoed), else a new ID. Any 13
// to 19 consecutive digits passing the Luhn check, wherever they stand,
// and any run Redact would hide, make it a card number here: replacing an
// ID costs nothing.
func requestID(id string) string {
	if id == "" || len(id) > 64 || telemetry.Redact(id) != id || surgepay.DigitsHaveCardNumber(id) ||
		surgepay.TextHasCardNumber(id) {
		return surgepay.NewID("req")
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return surgepay.NewID("req")
		}
	}
	return id
}

// recovered logs a panic and answers 500 if nothing was written yet. The
// panic value is not logged, only its type and the stack without argument
// values: a panic value may hold anything, card data included.
func (s *Server) recovered(w *statusWriter, r *http.Request, q *telemetry.Request, v any) {
	q.Panicked()
	s.log.LogAttrs(r.Context(), slog.LevelError, "panic serving request", slog.String("route", r.Pattern),
		slog.String("request_id", requestStateFrom(r.Context()).id), slog.String("panic_type", fmt.Sprintf("%T", v)),
		slog.String("stack", telemetry.Stack()))
	if !w.wrote {
		s.writeError(w, r, &surgepay.Error{Code: surgepay.EINTERNAL, Reason: "internal_error",
			Message: "an internal error occurred"})
	}
}

// accessLog writes the request's access line.
func (s *Server) accessLog(r *http.Request, status int, q *telemetry.Request, st *requestState) {
	attrs := []slog.Attr{
		slog.String("method", telemetry.Method(r.Method)), slog.String("route", r.Pattern),
		slog.Int("status", status), slog.Float64("duration_ms", ms(q.Elapsed())),
		slog.String("request_id", st.id),
	}
	if id := q.TraceID(); id != "" {
		attrs = append(attrs, slog.String("trace_id", id))
	}
	if st.merchant != "" {
		attrs = append(attrs, slog.String("merchant", st.merchant))
	}
	c := &q.SQL
	attrs = append(attrs, slog.Int64("sql_statements", c.Total()), slog.Int64("sql_select", c.Kind(surgepay.StmtSelect)),
		slog.Int64("sql_insert", c.Kind(surgepay.StmtInsert)), slog.Int64("sql_update", c.Kind(surgepay.StmtUpdate)),
		slog.Int64("sql_delete", c.Kind(surgepay.StmtDelete)), slog.Float64("store_ms", ms(c.StoreTime())))
	if n := q.Stats.ProviderCalls(); n > 0 {
		attrs = append(attrs, slog.Float64("provider_ms", ms(q.Stats.ProviderTime())))
	}
	if h, m := q.Stats.CacheHits(), q.Stats.CacheMisses(); h+m > 0 {
		attrs = append(attrs, slog.Int64("cache_hits", h), slog.Int64("cache_misses", m))
	}
	if st.errorCode != "" {
		attrs = append(attrs, slog.String("error_code", st.errorCode))
	}
	s.log.LogAttrs(r.Context(), slog.LevelInfo, "request", attrs...)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// requestState is what the middleware learns from the handlers.
type requestState struct {
	id        string
	merchant  string
	errorCode string
	// body and bodyErr are the body admit read, if bodyRead.
	body     []byte
	bodyErr  error
	bodyRead bool
}

type requestStateKey struct{}

// requestStateFrom returns the request's state, or an empty one for a
// request the middleware did not start (shed before routing).
func requestStateFrom(ctx context.Context) *requestState {
	if st, ok := ctx.Value(requestStateKey{}).(*requestState); ok {
		return st
	}
	return &requestState{}
}

type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap returns the connection's ResponseWriter, for
// http.ResponseController (the body's read deadline).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// authenticated checks the Bearer key and the key's scopes (403
// insufficient_scope naming the scope needed), admits the request in the
// merchant's share of in-flight requests, checks the merchant's request
// rate limit, reads a POST's body, then builds the engine call (see
// admit). A request refused for its scope, the rate limit or the share is
// refused before its handler runs: it stores nothing, not even an
// idempotency record, and an idempotent replay counts like any request.
func (s *Server) authenticated(scope string, h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		secret, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok {
			s.writeError(w, r, &surgepay.Error{Code: surgepay.EUNAUTH, Reason: "missing_api_key",
				Message: "send your API key as Authorization: Bearer <key>"})
			return
		}
		key, err := s.eng.Authenticate(r.Context(), strings.TrimSpace(secret))
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		st := requestStateFrom(r.Context())
		st.merchant = key.MerchantID
		if !surgepay.Allows(key.Scopes, scope) {
			s.writeError(w, r, &surgepay.Error{Code: surgepay.EFORBIDDEN, Reason: "insufficient_scope", Param: scope,
				Message: "this API key lacks the scope " + scope + " that " + r.Pattern + " needs"})
			return
		}
		if scope == surgepay.ScopeCheckout {
			if err := s.checkoutOrigin(w, r, key.MerchantID); err != nil {
				s.writeError(w, r, err)
				return
			}
			if key.Publishable() {
				if err := s.checkoutClient(r, key.MerchantID, key.ID); err != nil {
					s.writeError(w, r, err)
					return
				}
			}
		}
		var readMax int64
		if r.Method == http.MethodPost || r.Method == http.MethodDelete {
			// DELETE takes an empty body or {}: read under the same
			// timeout, in the merchant's slot, not the server's.
			readMax = surgepay.RequestBodyBytesMax
		}
		share := s.eng.SettingsFor(key.MerchantID).InflightMax
		s.admit(w, r, key.MerchantID, share, readMax, func() error { return s.rateLimit(r.Context(), key.MerchantID) }, func() {
			call := &engine.Call{MerchantID: key.MerchantID, KeyID: key.ID, RequestID: st.id, Render: render}
			if err := h(w, r, call); err != nil {
				s.writeError(w, r, err)
			}
		})
	})
}

// write sends the response for (v, err), or the stored bytes of a replay or
// of a response the engine rendered for idempotency.
func (s *Server) write(w http.ResponseWriter, r *http.Request, call *engine.Call, v any, err error) error {
	rp, replay := engine.IsReplay(err)
	if !replay {
		s.observe(r, v, err)
	}
	if replay {
		w.Header().Set("Idempotent-Replayed", "true")
		s.writeRaw(w, r, rp.Status, rp.Body)
		return nil
	}
	if call != nil && call.RenderedBody != nil {
		s.writeRaw(w, r, call.RenderedStatus, call.RenderedBody)
		return nil
	}
	status, body := render(v, err)
	if err != nil {
		s.logError(r, status, err)
		setRetryAfter(w, err)
		closeIfBodyUnread(w, r)
	}
	s.writeRaw(w, r, status, body)
	return nil
}

// paymentOps are the routes that run a payment operation, by operation.
var paymentOps = map[string]string{
	"POST /v1/payments":              "authorize",
	"POST /v1/payments/{id}/capture": "capture",
	"POST /v1/payments/{id}/void":    "void",
	"POST /v1/payments/{id}/refunds": "refund",
}

// observe counts an answer (not a replay) in the metrics: errors by code,
// backpressure, and payment operations.
func (s *Server) observe(r *http.Request, v any, err error) {
	st, ok := r.Context().Value(requestStateKey{}).(*requestState)
	if !ok {
		return // shed before routing: counted by ObserveShed
	}
	op := paymentOps[r.Pattern]
	if err != nil {
		var e *surgepay.Error
		errors.As(err, &e)
		st.errorCode = surgepay.ErrorCode(err)
		s.tel.ObserveError(r.Pattern, st.errorCode)
		if e != nil && e.Reason == telemetry.ShedWriteQueueFull {
			s.tel.Shed(telemetry.ShedWriteQueueFull)
		}
		if op != "" && e != nil && e.Code == surgepay.EDECLINED {
			s.tel.ObservePaymentResponse(op, nil, e.DeclineCode)
		}
		return
	}
	if p, ok := v.(*surgepay.Payment); ok && op != "" {
		s.tel.ObservePaymentResponse(op, p, "")
	}
}

func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	_ = s.write(w, r, nil, nil, err)
}

func (s *Server) logError(r *http.Request, status int, err error) {
	var se *surgepay.Error
	if errors.As(err, &se) && se.Reason == "store_unavailable" {
		// The store logs the database's changes of state once each way,
		// with a count; a line a refused request would flood the log
		// (thousands a second during an outage).
		s.log.Debug("request refused: store unavailable", "route", r.Pattern, "status", status)
		return
	}
	if status >= 500 {
		s.log.Error("request failed", "route", r.Pattern, "status", status, "err", telemetry.Redact(err.Error()))
	}
}

// refusedBodyWait bounds how long an answer given before the body was
// read waits for the body, draining it as it comes, before it is sent and
// the connection closed. A client that sent its body with its headers
// (every client that is not stalled) has it in the socket's buffer
// already and waits for nothing; for a stalled one the wait is the
// Retry-After of such a refusal (1 s), which a client that honours it
// waits anyway. The wait holds no slot of its merchant's or of the node's,
// only its connection, which the connection bound counts but may not make
// the others wait for long (ConnLimiter). Answered at once, a slow body's
// refusal let a client that reconnects as soon as it is answered open
// connections as fast as the server's CPU could refuse them (issue 34
// item 10: 1,300 a second from 192 connections, another merchant's p99
// from 33 ms to 579 ms); held, it opens at most one connection each half
// refusedBodyWait for each it holds.
//
// Each refusal waits a time drawn between half refusedBodyWait and all
// of it (refusalWait). A fixed wait kept a flood's connections in step:
// opened together, refused together, answered together a second later,
// they reconnected in one wave a second, and each wave (176 connections
// accepted, read and refused within a few milliseconds of two cores)
// delayed the other merchant's sales caught in it by 3-10 ms, its p99
// 2.9-5.0x its own without the flood (issue 34 item 10). Drawn apart,
// the waves spread over the second within a few rounds.
const refusedBodyWait = time.Second

// refusalWait is how long one refusal waits for its body: uniform within
// [refusedBodyWait/2, refusedBodyWait].
func refusalWait() time.Duration {
	return refusedBodyWait/2 + rand.N(refusedBodyWait/2+1) //nolint:gosec // G404: jitter spreads reconnections; nothing depends on it being unpredictable
}

// closeIfBodyUnread, for an error answered before the request's body was
// read (a bad key, a merchant over its share or rate), drains the body
// (at most surgepay.RequestBodyBytesMax) so the connection is kept, if it
// arrives within refusalWait, holding only its connection
// (holdForRefusal); else it closes the
// connection: net/http would otherwise read the rest of the body before
// sending the answer, and a slow body would hold the answer back (and the
// connection) until the read deadline. Closing every such connection,
// even those whose body had come, turned an overload into a storm of
// reconnections: at 5,000 sales/s offered to a server that could take
// ~3,000, the refusals' new connections took the CPU and the server
// answered ~800 sales/s.
func closeIfBodyUnread(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
		return
	}
	st, ok := r.Context().Value(requestStateKey{}).(*requestState)
	if ok && st.bodyRead {
		return
	}
	if r.ContentLength <= surgepay.RequestBodyBytesMax {
		// A body of unknown length (chunked) is drained up to the largest
		// body; one byte more is a body too large, and the connection
		// closes.
		body := &io.LimitedReader{R: r.Body, N: surgepay.RequestBodyBytesMax + 1}
		rc := http.NewResponseController(w)
		done := holdForRefusal(r.Context())
		drained := drainWithin(rc, body, refusalWait())
		done()
		if drained && body.N > 0 && rc.SetReadDeadline(time.Time{}) == nil {
			if ok {
				st.bodyRead, st.bodyErr = true, errBodyDrained
			}
			return
		}
	}
	w.Header().Set("Connection", "close")
}

// drainWithin reads body to its end within d; false if it did not end (or
// the deadline could not be set).
func drainWithin(rc *http.ResponseController, body io.Reader, d time.Duration) bool {
	if rc.SetReadDeadline(time.Now().Add(d)) != nil {
		return false
	}
	_, err := io.Copy(io.Discard, body) // a short body is ErrUnexpectedEOF
	return err == nil
}

// errBodyDrained is the body of a request answered before its body was
// read, then drained (closeIfBodyUnread): nothing may read it again.
var errBodyDrained = errors.New("api: the request body was drained after an early answer")

func setRetryAfter(w http.ResponseWriter, err error) {
	// errors.As: a store wraps its *Error around the cause.
	var e *surgepay.Error
	if errors.As(err, &e) && e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
}

func (s *Server) writeRaw(w http.ResponseWriter, r *http.Request, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	if s.cfg.Debug {
		if c := surgepay.StatementCounterFrom(r.Context()); c != nil {
			h.Set("Surgepay-Sql", fmt.Sprintf("total=%d select=%d insert=%d update=%d delete=%d store_ms=%.3f",
				c.Total(), c.Kind(surgepay.StmtSelect), c.Kind(surgepay.StmtInsert), c.Kind(surgepay.StmtUpdate),
				c.Kind(surgepay.StmtDelete), float64(c.StoreTime().Microseconds())/1000))
		}
		if rs := telemetry.RequestStatsFrom(r.Context()); rs != nil {
			h.Set("Surgepay-Cache", fmt.Sprintf("hits=%d misses=%d", rs.CacheHits(), rs.CacheMisses()))
			h.Set("Surgepay-Provider-Ms", strconv.FormatFloat(ms(rs.ProviderTime()), 'f', 3, 64))
		}
	}
	w.WriteHeader(status)
	w.Write(body) //nolint:gosec // G705: body is the API's own JSON rendering, served as application/json (set above), not HTML
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
