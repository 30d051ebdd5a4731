package telemetry

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ProcessorMetrics records what a router of processors does, per
// processor: calls by operation and outcome with their duration, breaker
// state, refusals before a call (budget, breaker) and failovers. It
// implements route.Observer. Safe for concurrent use; a nil
// *ProcessorMetrics records nothing.
type ProcessorMetrics struct {
	calls     *prometheus.CounterVec
	seconds   *prometheus.HistogramVec
	breaker   *prometheus.GaugeVec
	refused   *prometheus.CounterVec
	failovers *prometheus.CounterVec
}

// breakerStates are gobreaker's state names, in the gauge's order.
var breakerStates = map[string]float64{"closed": 0, "half-open": 1, "open": 2}

// ProcessorMetrics registers the per-processor metrics for names and
// returns their recorder; nil when metrics are off.
func (t *Telemetry) ProcessorMetrics(names []string) (*ProcessorMetrics, error) {
	if !t.MetricsEnabled() {
		return nil, nil
	}
	m := &ProcessorMetrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: "processor",
			Name: "calls_total", Help: "Calls to each payment processor, by operation and outcome (approved, declined, not_performed, unknown)."},
			[]string{"processor", "op", "outcome"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Subsystem: "processor",
			Name: "call_duration_seconds", Help: "Duration of calls to each payment processor, by operation.",
			Buckets: durationBuckets}, []string{"processor", "op"}),
		breaker: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Subsystem: "processor",
			Name: "breaker_state", Help: "Each processor's circuit breaker: 0 closed, 1 half-open, 2 open."},
			[]string{"processor"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: "processor",
			Name: "refused_total", Help: "Calls refused before reaching a processor, by reason (budget, breaker_open)."},
			[]string{"processor", "reason"}),
		failovers: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: "processor",
			Name: "failovers_total", Help: "Authorizations passed from one processor to the next in a merchant's route."},
			[]string{"from", "to"}),
	}
	for _, c := range []prometheus.Collector{m.calls, m.seconds, m.breaker, m.refused, m.failovers} {
		if err := t.reg.Register(c); err != nil {
			return nil, err
		}
	}
	for _, n := range names {
		m.breaker.WithLabelValues(n).Set(0)
		for _, r := range []string{"budget", "breaker_open"} {
			m.refused.WithLabelValues(n, r)
		}
	}
	return m, nil
}

// Call records one call.
func (m *ProcessorMetrics) Call(processor, op, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	m.calls.WithLabelValues(processor, op, outcome).Inc()
	m.seconds.WithLabelValues(processor, op).Observe(d.Seconds())
}

// Breaker records a breaker's new state.
func (m *ProcessorMetrics) Breaker(processor, state string) {
	if m != nil {
		m.breaker.WithLabelValues(processor).Set(breakerStates[state])
	}
}

// Refused records a call refused before the processor.
func (m *ProcessorMetrics) Refused(processor, reason string) {
	if m != nil {
		m.refused.WithLabelValues(processor, reason).Inc()
	}
}

// Failover records a payment passed to the next processor.
func (m *ProcessorMetrics) Failover(from, to string) {
	if m != nil {
		m.failovers.WithLabelValues(from, to).Inc()
	}
}
