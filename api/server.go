// Package api serves surgepay's JSON/HTTP API v1: routing, authentication,
// strict request decoding, error mapping, idempotency keys and the
// embedded OpenAPI document. Only this package maps error codes to HTTP
// statuses.
package api

import (
	"context"
	_ "embed"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/engine"
)

//go:embed openapi.json
var openAPI []byte

// OpenAPI returns the embedded OpenAPI 3 document.
func OpenAPI() []byte { return openAPI }

// Config configures a Server.
type Config struct {
	Engine *engine.Engine
	Logger *slog.Logger
	// Debug adds the Surgepay-Sql header (statements per request by kind
	// and store time) to every response.
	Debug bool
	// InflightMax bounds requests being served at once; beyond it requests
	// get 503 with Retry-After. Default 4096.
	InflightMax int
	// Ready reports whether the server may take traffic (GET /readyz).
	Ready func() bool
}

// Server is the API's HTTP handler. Safe for concurrent use.
type Server struct {
	cfg      Config
	eng      *engine.Engine
	log      *slog.Logger
	inflight chan struct{}
	mux      *http.ServeMux
	routes   []string
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
	s := &Server{cfg: cfg, eng: cfg.Engine, log: cfg.Logger, inflight: make(chan struct{}, cfg.InflightMax),
		mux: http.NewServeMux()}
	s.routesInit()
	return s
}

// Routes returns the "METHOD /path" patterns of the API, for the test that
// keeps the OpenAPI document and the router in step.
func (s *Server) Routes() []string { return append([]string(nil), s.routes...) }

type handlerFunc func(w http.ResponseWriter, r *http.Request, call *engine.Call) error

func (s *Server) routesInit() {
	s.mux.HandleFunc("GET /v1/openapi.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(openAPI)
	})
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok\n")) })
	s.mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if !s.cfg.Ready() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok\n"))
	})
	s.handle("POST /v1/customers", s.createCustomer)
	s.handle("GET /v1/customers", s.listCustomers)
	s.handle("GET /v1/customers/{id}", s.getCustomer)
	s.handle("POST /v1/customers/{id}", s.updateCustomer)
	s.handle("DELETE /v1/customers/{id}", s.deleteCustomer)
	s.handle("POST /v1/payment_methods", s.createPaymentMethod)
	s.handle("GET /v1/payment_methods", s.listPaymentMethods)
	s.handle("GET /v1/payment_methods/{id}", s.getPaymentMethod)
	s.handle("DELETE /v1/payment_methods/{id}", s.deletePaymentMethod)
	s.handle("POST /v1/payments", s.createPayment)
	s.handle("GET /v1/payments", s.listPayments)
	s.handle("GET /v1/payments/{id}", s.getPayment)
	s.handle("POST /v1/payments/{id}/capture", s.capturePayment)
	s.handle("POST /v1/payments/{id}/void", s.voidPayment)
	s.handle("POST /v1/payments/{id}/refunds", s.refundPayment)
	s.handle("GET /v1/payments/{id}/events", s.listEvents)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, &surgepay.Error{Code: surgepay.ENOTFOUND, Reason: "route_not_found",
			Message: "no such route: " + r.Method + " " + truncate(r.URL.Path, 200)})
	})
}

func (s *Server) handle(pattern string, h handlerFunc) {
	s.routes = append(s.routes, pattern)
	s.mux.Handle(pattern, s.authenticated(h))
}

// ServeHTTP serves the API with panic recovery, a request ID, the
// in-flight limit and the per-request SQL statement counter.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	reqID := r.Header.Get("X-Request-Id")
	if reqID == "" || len(reqID) > 64 {
		reqID = surgepay.NewID("req")
	}
	w.Header().Set("X-Request-Id", reqID)
	select {
	case s.inflight <- struct{}{}:
		defer func() { <-s.inflight }()
	default:
		s.writeError(w, r, &surgepay.Error{Code: surgepay.EUNAVAILABLE, Reason: "overloaded", RetryAfter: 1,
			Message: "the server is at its limit of requests in flight; retry shortly"})
		return
	}
	counter := &surgepay.StatementCounter{}
	ctx := surgepay.WithStatementCounter(r.Context(), counter)
	ctx = context.WithValue(ctx, requestIDKey{}, reqID)
	rw := &statusWriter{ResponseWriter: w}
	defer func() {
		if v := recover(); v != nil {
			s.log.Error("panic serving request", "route", r.Pattern, "request_id", reqID, "panic", fmt.Sprint(v))
			if !rw.wrote {
				s.writeError(rw, r, fmt.Errorf("panic"))
			}
		}
		s.log.Info("request", "method", r.Method, "route", r.Pattern, "status", rw.status,
			"duration_ms", float64(time.Since(start).Microseconds())/1000, "request_id", reqID,
			"sql_statements", counter.Total())
	}()
	s.mux.ServeHTTP(rw, r.WithContext(ctx))
}

type requestIDKey struct{}

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

func (w *statusWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// authenticated checks the Bearer key and builds the engine call.
func (s *Server) authenticated(h handlerFunc) http.Handler {
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
		reqID, _ := r.Context().Value(requestIDKey{}).(string)
		call := &engine.Call{MerchantID: key.MerchantID, KeyID: key.ID, RequestID: reqID, Render: render}
		if err := h(w, r, call); err != nil {
			s.writeError(w, r, err)
		}
	})
}

// write sends the response for (v, err), or the stored bytes of a replay or
// of a response the engine rendered for idempotency.
func (s *Server) write(w http.ResponseWriter, r *http.Request, call *engine.Call, v any, err error) error {
	if rp, ok := engine.IsReplay(err); ok {
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
	}
	s.writeRaw(w, r, status, body)
	return nil
}

func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	_ = s.write(w, r, nil, nil, err)
}

func (s *Server) logError(r *http.Request, status int, err error) {
	if status >= 500 {
		s.log.Error("request failed", "route", r.Pattern, "status", status, "err", err.Error())
	}
}

func setRetryAfter(w http.ResponseWriter, err error) {
	if e, ok := err.(*surgepay.Error); ok && e.RetryAfter > 0 {
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
	}
	w.WriteHeader(status)
	w.Write(body)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
