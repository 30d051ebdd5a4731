package telemetry

import (
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// samplesMax bounds the dashboard's history: five minutes at one sample a
// second, about 300 KB.
const samplesMax = 300

// sample is one reading of the registry: running totals and gauges.
type sample struct {
	at          time.Time
	requests    float64
	shed        float64
	errors      map[string]float64 // by code
	payments    map[string]float64 // by outcome
	latency     []bucket           // request durations, all routes
	inflight    float64
	backlog     float64
	backlogAge  float64
	cacheHits   float64
	cacheMisses float64
	stall       float64 // longest group commit of the last 10 s, seconds
	batches     float64 // group commits (from the committer's totals)
	writes      float64
	batchSum    float64 // group commits (from the OnBatch histogram)
	batchCount  float64
	// Per payment processor (ProcessorMetrics): calls, calls without a
	// result (not performed or unknown), refusals before a call, call
	// durations, breaker state.
	procCalls   map[string]float64
	procFails   map[string]float64
	procRefused map[string]float64
	procLatency map[string][]bucket
	procBreaker map[string]float64
}

// bucket is a cumulative histogram bucket.
type bucket struct {
	le    float64
	count float64
}

// sampler reads the registry every interval into a bounded ring, so the
// dashboard computes rates from deltas without Prometheus.
type sampler struct {
	g        prometheus.Gatherer
	mu       sync.Mutex
	ring     []sample // oldest first, at most max
	max      int
	seq      uint64 // samples taken since start
	done     chan struct{}
	stopOnce sync.Once
}

func newSampler(g prometheus.Gatherer, samplesMax int, interval time.Duration) *sampler {
	s := &sampler{g: g, max: samplesMax, done: make(chan struct{})}
	s.take()
	go s.run(interval)
	return s
}

func (s *sampler) run(interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
			s.take()
		}
	}
}

func (s *sampler) stop() { s.stopOnce.Do(func() { close(s.done) }) }

func (s *sampler) take() {
	mfs, _ := s.g.Gather() // a failing collector leaves its series out
	sm := readSample(mfs)
	sm.at = time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.ring) == s.max {
		copy(s.ring, s.ring[1:])
		s.ring = s.ring[:s.max-1]
	}
	s.ring = append(s.ring, sm)
	s.seq++
}

// snapshot returns a copy of the ring and the sequence number.
func (s *sampler) snapshot() ([]sample, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sample(nil), s.ring...), s.seq
}

func readSample(mfs []*dto.MetricFamily) sample {
	sm := sample{errors: map[string]float64{}, payments: map[string]float64{}, procCalls: map[string]float64{},
		procFails: map[string]float64{}, procRefused: map[string]float64{}, procLatency: map[string][]bucket{},
		procBreaker: map[string]float64{}}
	for _, mf := range mfs {
		name := strings.TrimPrefix(mf.GetName(), namespace+"_")
		for _, m := range mf.GetMetric() {
			switch name {
			case "http_requests_total":
				sm.requests += m.GetCounter().GetValue()
			case "http_requests_shed_total":
				sm.shed += m.GetCounter().GetValue()
			case "http_errors_total":
				sm.errors[label(m, "code")] += m.GetCounter().GetValue()
			case "payments_total":
				sm.payments[label(m, "outcome")] += m.GetCounter().GetValue()
			case "http_request_duration_seconds":
				sm.latency = addBuckets(sm.latency, m.GetHistogram())
			case "http_inflight_requests":
				sm.inflight = m.GetGauge().GetValue()
			case "stage_backlog_records":
				sm.backlog = m.GetGauge().GetValue()
			case "stage_backlog_oldest_age_seconds":
				sm.backlogAge = m.GetGauge().GetValue()
			case "cache_hits_total":
				sm.cacheHits += m.GetCounter().GetValue()
			case "cache_misses_total":
				sm.cacheMisses += m.GetCounter().GetValue()
			case "groupcommit_stall_seconds":
				sm.stall = m.GetGauge().GetValue()
			case "groupcommit_batches_total":
				sm.batches = m.GetCounter().GetValue()
			case "groupcommit_writes_total":
				sm.writes = m.GetCounter().GetValue()
			case "processor_calls_total":
				p, v := label(m, "processor"), m.GetCounter().GetValue()
				sm.procCalls[p] += v
				if o := label(m, "outcome"); o != "approved" && o != "declined" {
					sm.procFails[p] += v
				}
			case "processor_refused_total":
				sm.procRefused[label(m, "processor")] += m.GetCounter().GetValue()
			case "processor_call_duration_seconds":
				p := label(m, "processor")
				sm.procLatency[p] = addBuckets(sm.procLatency[p], m.GetHistogram())
			case "processor_breaker_state":
				sm.procBreaker[label(m, "processor")] = m.GetGauge().GetValue()
			case "groupcommit_batch_size":
				sm.batchSum, sm.batchCount = m.GetHistogram().GetSampleSum(), float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return sm
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// addBuckets adds h's cumulative buckets to bs (all series share bounds).
func addBuckets(bs []bucket, h *dto.Histogram) []bucket {
	hb := h.GetBucket()
	if bs == nil {
		bs = make([]bucket, len(hb)+1)
		for i, b := range hb {
			bs[i].le = b.GetUpperBound()
		}
		bs[len(hb)].le = math.Inf(1)
	}
	if len(bs) != len(hb)+1 {
		return bs
	}
	for i, b := range hb {
		bs[i].count += float64(b.GetCumulativeCount())
	}
	bs[len(hb)].count += float64(h.GetSampleCount())
	return bs
}

// quantile estimates the q-quantile of the observations between two
// cumulative bucket sets, interpolating linearly within a bucket as
// Prometheus's histogram_quantile does. NaN if there were none.
func quantile(q float64, prev, cur []bucket) float64 {
	if len(cur) == 0 {
		return math.NaN()
	}
	delta := func(i int) float64 {
		if len(prev) == len(cur) {
			return cur[i].count - prev[i].count
		}
		return cur[i].count
	}
	total := delta(len(cur) - 1)
	if total <= 0 {
		return math.NaN()
	}
	rank := q * total
	i := sort.Search(len(cur), func(i int) bool { return delta(i) >= rank })
	if i == len(cur)-1 { // beyond the last finite bound
		return cur[len(cur)-2].le
	}
	lo, below := 0.0, 0.0
	if i > 0 {
		lo, below = cur[i-1].le, delta(i-1)
	}
	in := delta(i) - below
	if in <= 0 {
		return cur[i].le
	}
	return lo + (cur[i].le-lo)*(rank-below)/in
}
