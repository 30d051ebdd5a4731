package telemetry

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ProcessorMetrics records what a router of processors does, per
// processor: calls by operation and outcome with their duration, breaker
// state, refusals before a call (budget, breaker) and failovers, and each
// processor's state (healthy, failing with the processor's last status
// and code, breaker open), logged once per change. It implements
// route.Observer and route.ResultObserver. Safe for concurrent use; a nil
// *ProcessorMetrics records nothing. With metrics off it still keeps and
// logs the states.
type ProcessorMetrics struct {
	calls     *prometheus.CounterVec // nil when metrics are off, as the rest
	seconds   *prometheus.HistogramVec
	breaker   *prometheus.GaugeVec
	refused   *prometheus.CounterVec
	failovers *prometheus.CounterVec
	state     *prometheus.GaugeVec
	lastError *prometheus.GaugeVec

	log    *slog.Logger
	mu     sync.Mutex
	states map[string]ProcessorState
}

// Processor states.
const (
	ProcessorHealthy     = "healthy"      // its last call got an answer
	ProcessorFailing     = "failing"      // its last call got none (not performed, unknown)
	ProcessorBreakerOpen = "breaker_open" // calls are refused before they are sent
)

var processorStates = []string{ProcessorHealthy, ProcessorFailing, ProcessorBreakerOpen}

// Bounds of what a processor's error puts in a label or a log line.
const (
	processorCodeBytesMax    = 64
	processorMessageBytesMax = 300
)

// ProcessorState is a processor's state as the dashboard shows it. Status
// and Code are those of its last failed call (0 and a surgepay word such
// as connection_refused when no HTTP answer came); Message is the
// processor's message, never a secret (the connectors redact theirs).
type ProcessorState struct {
	Processor string    `json:"processor"`
	State     string    `json:"state"`
	Since     time.Time `json:"since"`
	Status    int       `json:"status,omitempty"`
	Code      string    `json:"code,omitempty"`
	Message   string    `json:"message,omitempty"`
	Op        string    `json:"op,omitempty"`
}

// breakerStates are gobreaker's state names, in the gauge's order.
var breakerStates = map[string]float64{"closed": 0, "half-open": 1, "open": 2}

// ProcessorMetrics registers the per-processor metrics for names (none
// when metrics are off) and returns their recorder, which logs each
// change of a processor's state to log (nil: no log).
func (t *Telemetry) ProcessorMetrics(names []string, log *slog.Logger) (*ProcessorMetrics, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &ProcessorMetrics{log: log, states: map[string]ProcessorState{}}
	now := time.Now()
	for _, n := range names {
		m.states[n] = ProcessorState{Processor: n, State: ProcessorHealthy, Since: now}
	}
	if t != nil {
		t.procs.Store(m)
	}
	if !t.MetricsEnabled() {
		return m, nil
	}
	m.calls = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: "processor",
		Name: "calls_total", Help: "Calls to each payment processor, by operation and outcome (approved, declined, not_performed, unknown)."},
		[]string{"processor", "op", "outcome"})
	m.seconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Subsystem: "processor",
		Name: "call_duration_seconds", Help: "Duration of calls to each payment processor, by operation.",
		Buckets: durationBuckets}, []string{"processor", "op"})
	m.breaker = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Subsystem: "processor",
		Name: "breaker_state", Help: "Each processor's circuit breaker: 0 closed, 1 half-open, 2 open."},
		[]string{"processor"})
	m.refused = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: "processor",
		Name: "refused_total", Help: "Calls refused before reaching a processor, by reason (budget, breaker_open)."},
		[]string{"processor", "reason"})
	m.failovers = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: "processor",
		Name: "failovers_total", Help: "Authorizations passed from one processor to the next in a merchant's route."},
		[]string{"from", "to"})
	m.state = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Subsystem: "processor",
		Name: "state", Help: "Each processor's state: 1 for the one it is in (healthy, failing, breaker_open), 0 for the others."},
		[]string{"processor", "state"})
	m.lastError = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Subsystem: "processor",
		Name: "last_error_info", Help: "The processor's last failed call: its HTTP status (0: no answer) and error code; the value is the unix time it happened. One series per processor."},
		[]string{"processor", "status", "code"})
	for _, c := range []prometheus.Collector{m.calls, m.seconds, m.breaker, m.refused, m.failovers, m.state, m.lastError} {
		if err := t.reg.Register(c); err != nil {
			return nil, err
		}
	}
	for _, n := range names {
		m.breaker.WithLabelValues(n).Set(0)
		for _, r := range []string{"budget", "breaker_open"} {
			m.refused.WithLabelValues(n, r)
		}
		m.setStateGauge(n, ProcessorHealthy)
	}
	return m, nil
}

// ProcessorStates returns every processor's state, by name; nil without
// processors.
func (t *Telemetry) ProcessorStates() []ProcessorState {
	if t == nil {
		return nil
	}
	return t.procs.Load().States()
}

// States returns every processor's state, by name.
func (m *ProcessorMetrics) States() []ProcessorState {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]ProcessorState, 0, len(m.states))
	for _, s := range m.states {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b ProcessorState) int {
		if a.Processor < b.Processor {
			return -1
		}
		return 1
	})
	return out
}

// Call records one call.
func (m *ProcessorMetrics) Call(processor, op, outcome string, d time.Duration) {
	if m == nil || m.calls == nil {
		return
	}
	m.calls.WithLabelValues(processor, op, outcome).Inc()
	m.seconds.WithLabelValues(processor, op).Observe(d.Seconds())
}

// Result moves a processor between healthy and failing by how its call
// ended (nil: it answered). While its breaker is open the breaker's
// state stands (a lookup still goes through); the last error is kept.
func (m *ProcessorMetrics) Result(processor, op string, err error) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.state0(processor)
	next := s
	if err == nil {
		next.State = ProcessorHealthy
	} else {
		next.State = ProcessorFailing
		next.Status, next.Code, next.Message = describeProcessorError(err)
		next.Op = op
		if m.lastError != nil {
			m.lastError.DeletePartialMatch(prometheus.Labels{"processor": processor})
			m.lastError.WithLabelValues(processor, strconv.Itoa(next.Status), next.Code).SetToCurrentTime()
		}
	}
	if s.State == ProcessorBreakerOpen {
		next.State = ProcessorBreakerOpen
	}
	m.change(s, next)
}

// Breaker records a breaker's new state.
func (m *ProcessorMetrics) Breaker(processor, state string) {
	if m == nil {
		return
	}
	if m.breaker != nil {
		m.breaker.WithLabelValues(processor).Set(breakerStates[state])
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.state0(processor)
	next := s
	switch state {
	case "open":
		next.State = ProcessorBreakerOpen
	case "closed":
		next.State = ProcessorHealthy
	default: // half-open: one trial call decides; until then it stays open
		return
	}
	m.change(s, next)
}

// state0 is processor's state; one added by a reload starts healthy.
func (m *ProcessorMetrics) state0(processor string) ProcessorState {
	s, ok := m.states[processor]
	if !ok {
		s = ProcessorState{Processor: processor, State: ProcessorHealthy, Since: time.Now()}
		m.states[processor] = s
		m.setStateGauge(processor, ProcessorHealthy)
	}
	return s
}

// change installs next and, when it differs from s in state, status or
// code, logs it once and moves the gauge. The message alone is no change:
// it can carry a request id that differs on every call.
func (m *ProcessorMetrics) change(s, next ProcessorState) {
	if s.State == next.State && (next.State == ProcessorHealthy || s.Status == next.Status && s.Code == next.Code) {
		next.Since = s.Since
		m.states[next.Processor] = next
		return
	}
	next.Since = time.Now()
	m.states[next.Processor] = next
	m.setStateGauge(next.Processor, next.State)
	switch next.State {
	case ProcessorHealthy:
		m.log.Info("processor healthy", "processor", next.Processor, "was", s.State)
	default:
		m.log.Warn("processor "+next.State, "processor", next.Processor, "status", next.Status, "code", next.Code,
			"message", next.Message, "op", next.Op, "was", s.State)
	}
}

func (m *ProcessorMetrics) setStateGauge(processor, state string) {
	if m.state == nil {
		return
	}
	for _, st := range processorStates {
		v := 0.0
		if st == state {
			v = 1
		}
		m.state.WithLabelValues(processor, st).Set(v)
	}
}

// processorError is how a connector's error shows the processor's answer
// (stripe.CallError) without telemetry importing the connector.
type processorError interface {
	ProcessorStatus() int
	ProcessorCode() string
	ProcessorMessage() string
}

// describeProcessorError returns the HTTP status, error code and message
// of a failed call; without an HTTP answer, status 0 and a code saying
// why (connection_refused, timeout, unreachable, error).
func describeProcessorError(err error) (status int, code, message string) {
	var pe processorError
	if errors.As(err, &pe) {
		code = pe.ProcessorCode()
		if code == "" {
			code = "none"
		}
		return pe.ProcessorStatus(), clip(code, processorCodeBytesMax), clip(pe.ProcessorMessage(), processorMessageBytesMax)
	}
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		code = "connection_refused"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		code = "timeout"
	case errors.As(err, &ne):
		code = "unreachable"
	default:
		code = "error"
	}
	return 0, code, clip(err.Error(), processorMessageBytesMax)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// Refused records a call refused before the processor.
func (m *ProcessorMetrics) Refused(processor, reason string) {
	if m != nil && m.refused != nil {
		m.refused.WithLabelValues(processor, reason).Inc()
	}
}

// Failover records a payment passed to the next processor.
func (m *ProcessorMetrics) Failover(from, to string) {
	if m != nil && m.failovers != nil {
		m.failovers.WithLabelValues(from, to).Inc()
	}
}
