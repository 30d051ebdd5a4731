// Package telemetry is surgepay's observability: Prometheus metrics on
// their own registry, OpenTelemetry traces exported over OTLP/HTTP, the
// per-request counters behind the debug headers, decorators that measure
// and trace the store and the card-network provider, a redacting log
// handler, and the live dashboard served on the admin listener.
//
// Telemetry never holds a request up: metrics are atomic counters, finished
// spans go to a bounded queue that drops (and counts) when full, and
// collectors that read the store run on scrapes, not on requests. Card
// numbers never reach a metric label (labels are route patterns and fixed
// codes), a span (no raw paths, no messages; exported spans are scrubbed of
// card-number-like digit runs), or a log (see RedactingHandler).
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Options are the parts of a Telemetry that are not configuration.
type Options struct {
	// Service is the OpenTelemetry service.name. Default "surgepay".
	Service string
	// Exporter replaces the OTLP/HTTP exporter (tests use an in-memory one).
	Exporter sdktrace.SpanExporter
}

// Telemetry holds the metrics registry, the tracer and the dashboard
// sampler of one server. A nil *Telemetry is valid and produces nothing.
// Safe for concurrent use.
type Telemetry struct {
	cfg    Config
	reg    *prometheus.Registry
	m      *metrics // nil when metrics are off
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer // nil when tracing is off
	prop   propagation.TextMapPropagator
	dash   *sampler // nil when metrics are off

	engineObservesPayments atomic.Bool
	flight                 atomic.Pointer[FlightRecorder]   // nil: off
	procs                  atomic.Pointer[ProcessorMetrics] // nil: no [processors]
}

// SetFlightRecorder makes a refusal for backpressure (Shed) trigger r.
func (t *Telemetry) SetFlightRecorder(r *FlightRecorder) { t.flight.Store(r) }

// FlightRecorder returns the flight recorder, nil if there is none.
func (t *Telemetry) FlightRecorder() *FlightRecorder {
	if t == nil {
		return nil
	}
	return t.flight.Load()
}

// New returns a Telemetry for cfg. With metrics on it starts the dashboard
// sampler (one registry read a second); with tracing on it starts the
// exporter's goroutine. Shutdown stops both.
func New(cfg Config, opts Options) (*Telemetry, error) {
	if err := cfg.Validate("telemetry."); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if opts.Service == "" {
		opts.Service = "surgepay"
	}
	t := &Telemetry{cfg: cfg, reg: prometheus.NewRegistry(), prop: propagation.TraceContext{}}
	if cfg.Metrics.Enabled {
		t.m = newMetrics(t.reg)
		t.dash = newSampler(t.reg, samplesMax, time.Second)
	}
	if cfg.Tracing.Enabled {
		exp := opts.Exporter
		if exp == nil {
			var err error
			if exp, err = newOTLPExporter(cfg.Tracing); err != nil {
				_ = t.Shutdown(context.Background()) // the exporter's error is the one to report
				return nil, fmt.Errorf("telemetry: OTLP exporter: %w", err)
			}
		}
		t.tp = newTracerProvider(cfg.Tracing, exp, t.m, opts.Service)
		t.tracer = t.tp.Tracer("github.com/surgepay/surgepay")
	}
	return t, nil
}

// Config returns the configuration in effect.
func (t *Telemetry) Config() Config {
	if t == nil {
		return Config{}
	}
	return t.cfg
}

// Shutdown stops the sampler and flushes spans waiting for export, within ctx.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	var errs []error
	if t.dash != nil {
		t.dash.stop()
	}
	if t.tp != nil {
		errs = append(errs, t.tp.Shutdown(ctx))
	}
	return errors.Join(errs...)
}

// ForceFlush exports the spans waiting in the queue, within ctx.
func (t *Telemetry) ForceFlush(ctx context.Context) error {
	if !t.TracingEnabled() {
		return nil
	}
	return t.tp.ForceFlush(ctx)
}

// Registry returns the Prometheus registry (empty when metrics are off).
func (t *Telemetry) Registry() *prometheus.Registry { return t.reg }

// MetricsEnabled reports whether metrics are recorded.
func (t *Telemetry) MetricsEnabled() bool { return t != nil && t.m != nil }

// TracingEnabled reports whether spans are made.
func (t *Telemetry) TracingEnabled() bool { return t != nil && t.tracer != nil }

// AccessLog reports whether the API writes an access line per request.
func (t *Telemetry) AccessLog() bool { return t == nil || t.cfg.AccessLog }

// Tracer returns the tracer, a no-op one when tracing is off.
func (t *Telemetry) Tracer() trace.Tracer {
	if !t.TracingEnabled() {
		return noop.NewTracerProvider().Tracer("")
	}
	return t.tracer
}

// TracerProvider returns the tracer provider, a no-op one when tracing is off.
func (t *Telemetry) TracerProvider() trace.TracerProvider {
	if !t.TracingEnabled() {
		return noop.NewTracerProvider()
	}
	return t.tp
}

// MetricsHandler serves the registry in the Prometheus text format (404
// when metrics are off). A scrape is bounded: at most 2 at once, 10 s each.
func (t *Telemetry) MetricsHandler() http.Handler {
	if !t.MetricsEnabled() {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "metrics are off (telemetry.metrics.enabled = false)", http.StatusNotFound)
		})
	}
	return promhttp.HandlerFor(t.reg, promhttp.HandlerOpts{MaxRequestsInFlight: 2, Timeout: 10 * time.Second,
		ErrorHandling: promhttp.ContinueOnError})
}

// RegisterCache adds cache counters per entity and scope, read from stats
// at every scrape. stats must be cheap and safe for concurrent use.
func (t *Telemetry) RegisterCache(stats func() []CacheStat) error {
	if !t.MetricsEnabled() {
		return nil
	}
	return t.reg.Register(newCacheCollector(stats))
}

// RegisterIdemFilter adds the counters and gauges of the embedded store's
// filter of stored idempotency keys. stats must be cheap and safe for
// concurrent use (sqlite.DB.IdempotencyFilterStats is: atomic loads).
func (t *Telemetry) RegisterIdemFilter(stats func() IdemFilterStat) error {
	if !t.MetricsEnabled() {
		return nil
	}
	return t.reg.Register(newIdemFilterCollector(stats))
}

// RegisterCommitPhases adds the embedded store's wall time per phase of
// its group commits (lock, apply, merge, commit), read from seconds at
// every scrape: where a writer stall goes. seconds must be cheap and safe
// for concurrent use (sqlite.DB.CommitPhaseSeconds is). The writer's CPU
// per phase is in a CPU profile, by its label surgepay_writer_phase.
func (t *Telemetry) RegisterCommitPhases(seconds func() map[string]float64) error {
	if !t.MetricsEnabled() {
		return nil
	}
	return t.reg.Register(&commitPhasesCollector{seconds: seconds,
		wall: desc("sqlite", "commit_phase_seconds_total", "Time the embedded store's writer spent in each phase of its group commits: "+
			"lock (BEGIN, waiting for another process), apply (the statements), merge (the deferred indexes), "+
			"commit (COMMIT: WAL write and sync, and the writer's own checkpoint).", "phase")})
}

type commitPhasesCollector struct {
	seconds func() map[string]float64
	wall    *prometheus.Desc
}

func (c *commitPhasesCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.wall }

func (c *commitPhasesCollector) Collect(ch chan<- prometheus.Metric) {
	for phase, s := range c.seconds() {
		ch <- prometheus.MustNewConstMetric(c.wall, prometheus.CounterValue, s, phase)
	}
}

// CheckpointStat is what the embedded store's background checkpoints did
// since it opened (sqlite.CheckpointStats).
type CheckpointStat struct {
	Outcomes                        map[string]uint64
	Seconds                         float64
	WALFrames, WALFramesMax, Behind int64
	Restarts, RestartsBusy          uint64
}

// RegisterCheckpoints adds the embedded store's checkpoint counters and
// WAL gauges, read from stats at every scrape: a WAL that grows is the
// checkpoints falling behind, and at wal_pages_max the writer checkpoints
// inside a COMMIT. stats must be cheap and safe for concurrent use.
func (t *Telemetry) RegisterCheckpoints(stats func() CheckpointStat) error {
	if !t.MetricsEnabled() {
		return nil
	}
	return t.reg.Register(&checkpointCollector{stats: stats,
		outcomes: desc("sqlite", "checkpoints_total", "Background WAL checkpoints of the embedded store, by outcome: complete "+
			"(the whole WAL copied), partial (a reader's snapshot kept frames), busy (another checkpoint held the lock: "+
			"the writer's own, at wal_pages_max), error.", "outcome"),
		seconds: desc("sqlite", "checkpoint_seconds_total", "Time the embedded store's background checkpoints took."),
		frames:  desc("sqlite", "wal_frames", "The WAL's length in pages at the last background checkpoint (0 once it restarted)."),
		max:     desc("sqlite", "wal_frames_max", "The longest WAL a background checkpoint has seen since the store opened."),
		behind:  desc("sqlite", "wal_frames_behind", "Pages the last background checkpoint left in the WAL only (a reader needed them)."),
		restarts: desc("sqlite", "wal_restarts_total", "WAL restarts the writer ran between transactions once a background checkpoint "+
			"had copied a long WAL: restarted, or busy (a reader still read the WAL; it grows on).", "result"),
	})
}

type checkpointCollector struct {
	stats                                            func() CheckpointStat
	outcomes, seconds, frames, max, behind, restarts *prometheus.Desc
}

func (c *checkpointCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.outcomes, c.seconds, c.frames, c.max, c.behind, c.restarts} {
		ch <- d
	}
}

func (c *checkpointCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	for outcome, n := range s.Outcomes {
		ch <- prometheus.MustNewConstMetric(c.outcomes, prometheus.CounterValue, float64(n), outcome)
	}
	ch <- prometheus.MustNewConstMetric(c.seconds, prometheus.CounterValue, s.Seconds)
	ch <- prometheus.MustNewConstMetric(c.frames, prometheus.GaugeValue, float64(s.WALFrames))
	ch <- prometheus.MustNewConstMetric(c.max, prometheus.GaugeValue, float64(s.WALFramesMax))
	ch <- prometheus.MustNewConstMetric(c.behind, prometheus.GaugeValue, float64(s.Behind))
	ch <- prometheus.MustNewConstMetric(c.restarts, prometheus.CounterValue, float64(s.Restarts), "restarted")
	ch <- prometheus.MustNewConstMetric(c.restarts, prometheus.CounterValue, float64(s.RestartsBusy), "busy")
}

// RegisterStage adds the staged-capture backlog gauges (settlement's own
// metrics are on `surgepay settle --metrics-listen`).
func (t *Telemetry) RegisterStage(stats StageStats) error {
	if !t.MetricsEnabled() {
		return nil
	}
	return t.reg.Register(newStageCollector(stats))
}

// Connections reports the API listener's connections (api.ConnLimiter):
// open now, the bound, the accepts that waited at the bound, and the idle
// connections closed to make room.
type Connections interface {
	Open() int
	Max() int
	Waits() uint64
	Evictions() uint64
}

// RegisterConnections adds the API listener's connection gauges.
func (t *Telemetry) RegisterConnections(c Connections) error {
	if !t.MetricsEnabled() {
		return nil
	}
	var errs []error
	for _, col := range []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: namespace, Subsystem: "http", Name: "connections_open",
			Help: "API connections open (accepted and not closed), TLS or not."}, func() float64 { return float64(c.Open()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: namespace, Subsystem: "http", Name: "connections_max",
			Help: "The most API connections open at once (connections_max)."}, func() float64 { return float64(c.Max()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: namespace, Subsystem: "http", Name: "connection_waits_total",
			Help: "Connections that arrived with connections_max busy connections open and waited for one to close or fall idle."},
			func() float64 { return float64(c.Waits()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: namespace, Subsystem: "http", Name: "connection_evictions_total",
			Help: "Idle keep-alive connections closed to make room for a new one at connections_max."},
			func() float64 { return float64(c.Evictions()) }),
	} {
		errs = append(errs, t.reg.Register(col))
	}
	return errors.Join(errs...)
}

// RegisterGroupCommit adds the group-commit totals and queue depth.
func (t *Telemetry) RegisterGroupCommit(gc GroupCommit) error {
	if !t.MetricsEnabled() {
		return nil
	}
	return t.reg.Register(newGroupCommitCollector(gc))
}

// ObserveBatch records one group commit of size writes that took d. Its
// signature is groupcommit.Committer.OnBatch's; safe for concurrent use
// (PostgreSQL commits from several writers).
func (t *Telemetry) ObserveBatch(size int, d time.Duration) {
	if t.MetricsEnabled() {
		t.m.batchSize.Observe(float64(size))
		t.m.commitSeconds.Observe(d.Seconds())
	}
}

// Shed counts a request refused for backpressure (ShedOverloaded,
// ShedWriteQueueFull).
func (t *Telemetry) Shed(reason string) {
	if t.MetricsEnabled() {
		t.m.shed.WithLabelValues(reason).Inc()
	}
	if reason != ShedMerchantConcurrency { // one merchant's share, not a stall
		t.FlightRecorder().Trigger(FlightShed)
	}
}

// ObserveError counts an error response of the route by error code.
func (t *Telemetry) ObserveError(route, code string) {
	if t.MetricsEnabled() {
		t.m.errors.WithLabelValues(routeLabel(route), code).Inc()
	}
}
