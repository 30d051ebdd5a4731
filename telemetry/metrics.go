package telemetry

import (
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/surgepay/surgepay"
)

const namespace = "surgepay"

// Histogram buckets.
var (
	// durationBuckets span 0.5 ms (a cached read) to 10 s (a slow provider).
	durationBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
	// statementBuckets: the fast paths issue 1-4 statements; the legacy
	// stack of the brief issued 177.
	statementBuckets = []float64{0, 1, 2, 3, 4, 5, 8, 13, 21, 34, 55, 89, 144, 233}
	// batchBuckets go to the largest BatchSizeMax worth configuring.
	batchBuckets = []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}
)

// Shed reasons.
const (
	ShedOverloaded     = "overloaded"       // inflight_max requests in flight
	ShedWriteQueueFull = "write_queue_full" // the group-commit queue is full
	// ShedWritesBehind: the writer's queue stands above
	// queue_delay_target; a write refused before any work.
	ShedWritesBehind = "write_delay"
	// ShedMerchantConcurrency: the merchant has its share of the node's
	// requests in flight (merchant_inflight_max); a 429.
	ShedMerchantConcurrency = "merchant_concurrency_limit"
)

// metrics are the Prometheus instruments. Every one is a lock-free
// counter, gauge or histogram once its label values are resolved.
type metrics struct {
	requests        *prometheus.CounterVec   // route, method, status
	requestSeconds  *prometheus.HistogramVec // route, method
	errors          *prometheus.CounterVec   // route, code
	inflight        prometheus.Gauge
	shed            *prometheus.CounterVec // reason
	rateLimited     rateLimitedCounter     // merchant
	rateFallbacks   prometheus.Counter
	idemPurged      prometheus.Counter
	payments        *prometheus.CounterVec // operation, outcome, decline_code, path
	providerSeconds *prometheus.HistogramVec
	providerCalls   *prometheus.CounterVec // op, outcome
	sqlStatements   *prometheus.CounterVec // route, kind
	sqlPerRequest   *prometheus.HistogramVec
	storeSeconds    *prometheus.HistogramVec
	batchSize       prometheus.Histogram
	commitSeconds   prometheus.Histogram
	spansDropped    prometheus.Counter
	spansExported   prometheus.Counter
	spanExportFails prometheus.Counter
	spansRedacted   prometheus.Counter

	// routes holds each route's and method's series (routeKey →
	// *routeSeries), resolved once: WithLabelValues hashes every label
	// value and takes its vector's lock, five times a request.
	routes sync.Map
}

type routeKey struct{ route, method string }

// routeSeries are a route's and method's series, each resolved on its
// first use (so that what is exported is what was observed, as before).
type routeSeries struct {
	seconds, sqlPer, store prometheus.Observer
	byStatus               sync.Map // status label → prometheus.Counter
	stmts                  [len(stmtKindNames)]atomic.Pointer[prometheus.Counter]
}

// series returns route's and method's series.
func (m *metrics) series(route, method string) *routeSeries {
	k := routeKey{route, method}
	if v, ok := m.routes.Load(k); ok {
		return v.(*routeSeries)
	}
	v, _ := m.routes.LoadOrStore(k, &routeSeries{seconds: m.requestSeconds.WithLabelValues(route, method),
		sqlPer: m.sqlPerRequest.WithLabelValues(route), store: m.storeSeconds.WithLabelValues(route)})
	return v.(*routeSeries)
}

func newMetrics(reg *prometheus.Registry) *metrics {
	f := func(c prometheus.Collector) { reg.MustRegister(c) }
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: "http",
			Name: "requests_total", Help: "API requests answered, by route pattern, method and HTTP status."},
			[]string{"route", "method", "status"}),
		requestSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Subsystem: "http",
			Name: "request_duration_seconds", Help: "API request duration, by route pattern and method.",
			Buckets: durationBuckets}, []string{"route", "method"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: "http",
			Name: "errors_total", Help: "API error responses, by route pattern and error code (invalid, declined, unavailable, ...)."},
			[]string{"route", "code"}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Subsystem: "http",
			Name: "inflight_requests", Help: "API requests being served."}),
		shed: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: "http",
			Name: "requests_shed_total", Help: "Requests refused for backpressure, by reason: 503 overloaded, write_queue_full; 429 merchant_concurrency_limit."},
			[]string{"reason"}),
		rateLimited: rateLimitedCounter{vec: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: "http",
			Name: "requests_rate_limited_total", Help: "Requests refused with 429 by the merchant's rate limit on this node, by merchant " +
				"(the first 1000 merchants limited since start; the others count as \"other\")."}, []string{"merchant"})},
		rateFallbacks: prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Subsystem: "http",
			Name: "rate_limit_fallbacks_total", Help: "Rate-limited requests decided by this node's own bucket because the shared " +
				"count in Redis did not answer in time (rate_limits.timeout) or was being skipped after failures."}),
		idemPurged: prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "idempotency_purged_total",
			Help: "Idempotency records deleted by this node's purge for being older than idempotency_retention."}),
		payments: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "payments_total",
			Help: "Payment operations answered, by operation (authorize, capture, void, refund), resulting payment status, decline code and path (standard, streamlined)."},
			[]string{"operation", "outcome", "decline_code", "path"}),
		providerSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Subsystem: "provider",
			Name: "call_duration_seconds", Help: "Card-network provider call duration, by operation and outcome.",
			Buckets: durationBuckets}, []string{"op", "outcome"}),
		providerCalls: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: "provider",
			Name: "calls_total", Help: "Card-network provider calls, by operation and outcome (approved, declined, not_performed, unknown)."},
			[]string{"op", "outcome"}),
		sqlStatements: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: "sql",
			Name: "statements_total", Help: "SQL statements issued for API requests, by route pattern and kind."},
			[]string{"route", "kind"}),
		sqlPerRequest: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Subsystem: "sql",
			Name: "statements_per_request", Help: "SQL statements issued by one API request, by route pattern.",
			Buckets: statementBuckets}, []string{"route"}),
		storeSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Subsystem: "store",
			Name: "seconds_per_request", Help: "Time one API request spent waiting on the store, by route pattern.",
			Buckets: durationBuckets}, []string{"route"}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Subsystem: "groupcommit",
			Name: "batch_size", Help: "Writes committed in one group-commit transaction.", Buckets: batchBuckets}),
		commitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Subsystem: "groupcommit",
			Name: "commit_seconds", Help: "Duration of one group-commit transaction.", Buckets: durationBuckets}),
		spansDropped: prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Subsystem: "telemetry",
			Name: "spans_dropped_total", Help: "Finished spans dropped because the export queue was full."}),
		spansExported: prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Subsystem: "telemetry",
			Name: "spans_exported_total", Help: "Spans handed to the OTLP exporter."}),
		spanExportFails: prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Subsystem: "telemetry",
			Name: "span_export_failures_total", Help: "OTLP export requests that failed (their spans are lost)."}),
		spansRedacted: prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Subsystem: "telemetry",
			Name: "spans_redacted_total", Help: "Exported spans in which a card-number-like digit run was redacted: should stay 0."}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.requestSeconds, m.errors, m.inflight, m.shed, m.rateLimited.vec, m.rateFallbacks, m.idemPurged, m.payments,
		m.providerSeconds, m.providerCalls, m.sqlStatements, m.sqlPerRequest, m.storeSeconds, m.batchSize,
		m.commitSeconds, m.spansDropped, m.spansExported, m.spanExportFails, m.spansRedacted} {
		f(c)
	}
	f(newGoCollector())
	f(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Series that exist before their first event, so dashboards and
	// alerts see zeros rather than nothing.
	for _, r := range []string{ShedOverloaded, ShedWriteQueueFull, ShedWritesBehind, ShedMerchantConcurrency} {
		m.shed.WithLabelValues(r)
	}
	for _, op := range providerOps {
		for _, o := range providerOutcomes {
			m.providerCalls.WithLabelValues(op, o)
		}
	}
	return m
}

var (
	providerOps      = []string{"authorize", "capture", "void", "refund", "lookup"}
	providerOutcomes = []string{"approved", "declined", "requires_action", surgepay.NotPerformed, surgepay.Unknown}
	stmtKindNames    = [...]string{surgepay.StmtSelect: "select", surgepay.StmtInsert: "insert",
		surgepay.StmtUpdate: "update", surgepay.StmtDelete: "delete"}
)

// methodLabel bounds the method label: a client can send any method.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodPost, http.MethodDelete, http.MethodPut, http.MethodPatch, http.MethodHead, http.MethodOptions:
		return m
	}
	return "OTHER"
}

// routeLabel bounds the route label: the ServeMux pattern, never the path.
func routeLabel(pattern string) string {
	switch pattern {
	case "":
		return "none"
	case "/":
		return "unmatched"
	}
	return pattern
}

var statusLabels = func() map[int]string {
	m := make(map[int]string)
	for c := 100; c < 600; c++ {
		m[c] = strconv.Itoa(c)
	}
	return m
}()

func statusLabel(code int) string {
	if s, ok := statusLabels[code]; ok {
		return s
	}
	return "other"
}

// observeRequest records one answered request. route and method are
// bounded labels (routeLabel, methodLabel), and so are the series
// routes holds.
func (m *metrics) observeRequest(route, method string, status int, d time.Duration, sql *surgepay.StatementCounter) {
	r := m.series(route, method)
	code := statusLabel(status)
	requests, ok := r.byStatus.Load(code)
	if !ok {
		requests, _ = r.byStatus.LoadOrStore(code, m.requests.WithLabelValues(route, method, code))
	}
	requests.(prometheus.Counter).Inc()
	r.seconds.Observe(d.Seconds())
	if sql == nil {
		return
	}
	total := sql.Total()
	r.sqlPer.Observe(float64(total))
	if total > 0 {
		for kind, name := range stmtKindNames {
			n := sql.Kind(kind)
			if n == 0 {
				continue
			}
			c := r.stmts[kind].Load()
			if c == nil {
				v := m.sqlStatements.WithLabelValues(route, name)
				c = &v
				r.stmts[kind].Store(c)
			}
			(*c).Add(float64(n))
		}
	}
	r.store.Observe(sql.StoreTime().Seconds())
}

// RateLimitedMerchantsMax bounds the merchant label of
// surgepay_http_requests_rate_limited_total: merchants are created by the
// operator, so the label is bounded anyway, but a node limiting every
// merchant through [merchants.default] could meet many. Past it,
// merchants count as "other".
const RateLimitedMerchantsMax = 1000

// rateLimitedCounter is the counter of rate-limited requests by merchant,
// with at most RateLimitedMerchantsMax merchant labels.
type rateLimitedCounter struct {
	vec  *prometheus.CounterVec
	by   sync.Map // merchant ID → prometheus.Counter
	full atomic.Bool
	mu   sync.Mutex // serialises adding a merchant
	n    int        // merchants in by; guarded by mu
}

// counter returns the merchant's counter: after its first time, one
// lock-free map read.
func (c *rateLimitedCounter) counter(merchantID string) prometheus.Counter {
	if v, ok := c.by.Load(merchantID); ok {
		return v.(prometheus.Counter)
	}
	if c.full.Load() {
		return c.vec.WithLabelValues("other")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.by.Load(merchantID); ok {
		return v.(prometheus.Counter)
	}
	if c.n >= RateLimitedMerchantsMax {
		c.full.Store(true)
		return c.vec.WithLabelValues("other")
	}
	ctr := c.vec.WithLabelValues(merchantID)
	c.by.Store(merchantID, ctr)
	c.n++
	return ctr
}

// ObserveRateLimited counts a request refused with 429 by the merchant's
// rate limit. Safe for concurrent use.
func (t *Telemetry) ObserveRateLimited(merchantID string) {
	if t.MetricsEnabled() {
		t.m.rateLimited.counter(merchantID).Inc()
	}
}

// ObserveRateLimitFallback counts a rate-limited request decided by the
// node's own bucket because the shared count did not answer.
func (t *Telemetry) ObserveRateLimitFallback() {
	if t.MetricsEnabled() {
		t.m.rateFallbacks.Inc()
	}
}

// ObserveIdempotencyPurged counts n idempotency records deleted for
// being older than the retention. Safe for concurrent use.
func (t *Telemetry) ObserveIdempotencyPurged(n int) {
	if t.MetricsEnabled() {
		t.m.idemPurged.Add(float64(n))
	}
}

// Method returns m if it is a standard HTTP method, else "OTHER": a
// client may send any token as a method, so only a bounded set is ever
// logged or used as a label.
func Method(m string) string { return methodLabel(m) }

// newGoCollector is the Go runtime's collector with, besides its
// defaults, how long goroutines waited to run once runnable
// (go_sched_latencies_seconds) and the stop-the-world pauses of the GC
// (go_sched_pauses_total_gc_seconds): on a busy 2-core server a request's
// time answered from memory is mostly the first.
func newGoCollector() prometheus.Collector {
	return collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(collectors.GoRuntimeMetricsRule{
		Matcher: regexp.MustCompile(`^/sched/(latencies|pauses/total/gc):seconds$`)}))
}
