package telemetry

import (
	"context"
	"encoding/hex"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/surgepay/surgepay"
)

// Request is the telemetry of one API request: its span, its SQL statement
// counter and its RequestStats. Made by StartRequest, finished by End, used
// by one request at a time (the counters themselves are concurrency-safe).
type Request struct {
	t     *Telemetry
	start time.Time
	span  trace.Span // nil when tracing is off
	SQL   surgepay.StatementCounter
	Stats RequestStats
}

// StartRequest begins the telemetry of r: a server span (continuing a W3C
// traceparent if r has one), the in-flight gauge, and a context carrying
// the span, the SQL counter and the RequestStats for the handlers. The
// span's only attribute so far is the method; End names it by route. Raw
// paths and query strings are never recorded: a client may put anything
// in them, a card number included.
func (t *Telemetry) StartRequest(r *http.Request) (*Request, context.Context) {
	q := &Request{t: t, start: time.Now()}
	ctx := r.Context()
	if t.TracingEnabled() {
		method := methodLabel(r.Method)
		ctx = t.extract(ctx, r.Header)
		ctx, q.span = t.tracer.Start(ctx, method, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(semconv.HTTPRequestMethodKey.String(method)))
	}
	if t.MetricsEnabled() {
		t.m.inflight.Inc()
	}
	ctx = surgepay.WithStatementCounter(ctx, &q.SQL)
	ctx = WithRequestStats(ctx, &q.Stats)
	return q, ctx
}

// extract continues the caller's trace from a W3C traceparent, unless its
// trace ID or parent span ID holds 13 to 19 consecutive digits passing the
// Luhn check, or its tracestate holds what Redact would hide: a card
// number put in a traceparent would otherwise reach the access log, the
// Trace-Id header and every exported span. Such a request starts a new
// trace instead (as one without a traceparent, or with a malformed one,
// does). A random traceparent holds such a run in about 1 case of 130
// (trace ID 1 in 160, span ID 1 in 850), which then starts a new trace
// too: nothing is lost but the link to the caller's trace.
func (t *Telemetry) extract(ctx context.Context, h http.Header) context.Context {
	out := t.prop.Extract(ctx, propagation.HeaderCarrier(h))
	sc := trace.SpanContextFromContext(out)
	if !sc.IsValid() {
		return ctx
	}
	tid, sid := sc.TraceID(), sc.SpanID()
	if surgepay.DigitsHaveCardNumber(hex.EncodeToString(tid[:])) || surgepay.DigitsHaveCardNumber(hex.EncodeToString(sid[:])) ||
		mayHoldPAN(sc.TraceState().String()) {
		return ctx
	}
	return out
}

// TraceID returns the request's trace ID in hex, "" when tracing is off.
func (q *Request) TraceID() string {
	if q.span == nil {
		return ""
	}
	return q.span.SpanContext().TraceID().String()
}

// Elapsed returns the time since StartRequest.
func (q *Request) Elapsed() time.Duration { return time.Since(q.start) }

// Panicked marks the span failed by a panic. The panic value is not
// recorded: it may hold anything.
func (q *Request) Panicked() {
	if q.span != nil {
		q.span.AddEvent("panic recovered")
		q.span.SetStatus(codes.Error, "panic")
	}
}

// RequestEnd describes how a request was answered.
type RequestEnd struct {
	Route     string // the ServeMux pattern, "" if the request was not routed
	Method    string
	Status    int
	Merchant  string // the authenticated merchant's ID, if any
	ErrorCode string // the surgepay error code of an error response
}

// End records the request's metrics and ends its span.
func (q *Request) End(e RequestEnd) {
	t := q.t
	d := time.Since(q.start)
	route := routeLabel(e.Route)
	if t.MetricsEnabled() {
		t.m.inflight.Dec()
		t.m.observeRequest(route, methodLabel(e.Method), e.Status, d, &q.SQL)
	}
	if q.span == nil {
		return
	}
	sp := q.span
	sp.SetName(route)
	sp.SetAttributes(semconv.HTTPRoute(route), semconv.HTTPResponseStatusCode(e.Status),
		attribute.Int64("surgepay.sql.statements", q.SQL.Total()),
		attribute.Float64("surgepay.store_ms", float64(q.SQL.StoreTime().Microseconds())/1000))
	if e.Merchant != "" {
		sp.SetAttributes(attribute.String("surgepay.merchant", e.Merchant))
	}
	if e.ErrorCode != "" {
		sp.SetAttributes(attribute.String("surgepay.error_code", e.ErrorCode))
	}
	if e.Status >= 500 {
		spanError(sp, e.ErrorCode)
	}
	sp.End()
}

// ObserveShed counts a request refused before it was routed (the
// in-flight limit): the shed counter and the request counters.
func (t *Telemetry) ObserveShed(method, reason string, status int) {
	if t.MetricsEnabled() {
		t.m.shed.WithLabelValues(reason).Inc()
		t.m.requests.WithLabelValues("none", methodLabel(method), statusLabel(status)).Inc()
		t.m.errors.WithLabelValues("none", surgepay.EUNAVAILABLE).Inc()
	}
}

// PaymentObserver is called once for every payment operation the engine
// completes (op: "authorize", "capture", "void", "refund"), with the
// payment as stored. It must be cheap and safe for concurrent use.
type PaymentObserver func(op string, p *surgepay.Payment)

// PaymentObserver returns the observer to hand to the engine. Once it is
// taken, the API no longer derives payment metrics from its responses, so
// nothing is counted twice.
func (t *Telemetry) PaymentObserver() PaymentObserver {
	if t == nil {
		return func(string, *surgepay.Payment) {}
	}
	t.engineObservesPayments.Store(true)
	return t.observePayment
}

// ObservePaymentResponse is the API's view of a payment operation: the
// payment it answered with, or, for a decline, the decline code alone (the
// path is then "unknown"). It does nothing once the engine observes
// payments itself (see PaymentObserver).
func (t *Telemetry) ObservePaymentResponse(op string, p *surgepay.Payment, declineCode string) {
	if !t.MetricsEnabled() || t.engineObservesPayments.Load() {
		return
	}
	if p != nil {
		t.observePayment(op, p)
		return
	}
	t.m.payments.WithLabelValues(op, string(surgepay.StatusFailed), declineLabel(declineCode), "unknown").Inc()
}

func (t *Telemetry) observePayment(op string, p *surgepay.Payment) {
	if !t.MetricsEnabled() || p == nil {
		return
	}
	path := p.Path
	if path != surgepay.PathStreamlined {
		path = surgepay.PathStandard
	}
	t.m.payments.WithLabelValues(op, statusOutcome(p.Status), declineLabel(p.DeclineCode), path).Inc()
}

func statusOutcome(s surgepay.Status) string {
	if s.Valid() {
		return string(s)
	}
	return "other"
}

// declineLabel bounds the decline_code label to the known codes.
func declineLabel(code string) string {
	switch code {
	case "":
		return "none"
	case surgepay.DeclineGeneric, surgepay.DeclineInsufficientFunds, surgepay.DeclineExpiredCard,
		surgepay.DeclineIncorrectCVC, surgepay.DeclineProcessingError:
		return code
	}
	return "other"
}
