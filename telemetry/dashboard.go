package telemetry

import (
	"embed"
	"encoding/json"
	"io/fs"
	"math"
	"net/http"
	"sort"
	"strconv"
)

//go:embed dashboard
var dashboardFS embed.FS

// DashboardHandler serves the live dashboard under /dashboard: the page,
// its embedded assets (uPlot, MIT) and /dashboard/data, the last five
// minutes computed from the registry's samples. No external network is
// used. 404 when metrics are off.
func (t *Telemetry) DashboardHandler() http.Handler {
	mux := http.NewServeMux()
	if !t.MetricsEnabled() {
		mux.HandleFunc("/dashboard", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "the dashboard needs metrics (telemetry.metrics.enabled = true)", http.StatusNotFound)
		})
		return mux
	}
	sub, _ := fs.Sub(dashboardFS, "dashboard")
	mux.HandleFunc("GET /dashboard", func(w http.ResponseWriter, r *http.Request) {
		b, _ := fs.ReadFile(sub, "index.html")
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.Write(b)
	})
	mux.Handle("GET /dashboard/assets/", http.StripPrefix("/dashboard/", http.FileServerFS(sub)))
	mux.HandleFunc("GET /dashboard/data", func(w http.ResponseWriter, r *http.Request) {
		ring, seq := t.dash.snapshot()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		d := dashboardData(ring, seq)
		d.Processors = t.ProcessorStates()
		_ = json.NewEncoder(w).Encode(d) // a client gone away is no error of ours
	})
	return mux
}

// series is a chart line; NaN encodes as null (a gap).
type series []float64

func (s series) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 8*len(s)+2)
	b = append(b, '[')
	for i, v := range s {
		if i > 0 {
			b = append(b, ',')
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			b = append(b, "null"...)
		} else {
			b = strconv.AppendFloat(b, v, 'f', 3, 64)
		}
	}
	return append(b, ']'), nil
}

// data is the JSON of /dashboard/data: one point per sample interval,
// columnar for uPlot. Rates are per second.
type data struct {
	Seq          uint64            `json:"seq"`     // samples taken since start
	Samples      int               `json:"samples"` // samples in the ring
	Time         series            `json:"t"`       // unix seconds
	RPS          series            `json:"rps"`
	ShedPS       series            `json:"shed_ps"`
	P50          series            `json:"p50_ms"`
	P95          series            `json:"p95_ms"`
	P99          series            `json:"p99_ms"`
	ErrorsPS     map[string]series `json:"errors_ps"`   // by code
	PaymentsPS   map[string]series `json:"payments_ps"` // by outcome
	Inflight     series            `json:"inflight"`
	Backlog      series            `json:"backlog"`
	BacklogAge   series            `json:"backlog_age_s"`
	CacheHitRate series            `json:"cache_hit_pct"`
	BatchSize    series            `json:"batch_size_avg"`
	CommitsPS    series            `json:"commits_ps"`
	StallMs      series            `json:"stall_ms"`
	// Per payment processor, by its name: calls/s, calls without a
	// result /s (not performed, unknown), refusals before a call /s
	// (budget, breaker), p99 of call durations, breaker state (0 closed,
	// 1 half-open, 2 open). Empty without [processors].
	ProcCallsPS   map[string]series `json:"processor_calls_ps"`
	ProcFailsPS   map[string]series `json:"processor_failures_ps"`
	ProcRefusedPS map[string]series `json:"processor_refused_ps"`
	ProcP99       map[string]series `json:"processor_p99_ms"`
	ProcBreaker   map[string]series `json:"processor_breaker"`
	// Processors is each processor's state now, with its last error.
	Processors []ProcessorState `json:"processors"`
}

func dashboardData(ring []sample, seq uint64) *data {
	n := max(len(ring)-1, 0)
	d := &data{Seq: seq, Samples: len(ring), ErrorsPS: map[string]series{}, PaymentsPS: map[string]series{},
		ProcCallsPS: map[string]series{}, ProcFailsPS: map[string]series{}, ProcRefusedPS: map[string]series{},
		ProcP99: map[string]series{}, ProcBreaker: map[string]series{}}
	for _, p := range []*series{&d.Time, &d.RPS, &d.ShedPS, &d.P50, &d.P95, &d.P99, &d.Inflight, &d.Backlog,
		&d.BacklogAge, &d.CacheHitRate, &d.BatchSize, &d.CommitsPS, &d.StallMs} {
		*p = make(series, n)
	}
	codes, outcomes := keys(ring, func(s sample) map[string]float64 { return s.errors }),
		keys(ring, func(s sample) map[string]float64 { return s.payments })
	for _, c := range codes {
		d.ErrorsPS[c] = make(series, n)
	}
	for _, o := range outcomes {
		d.PaymentsPS[o] = make(series, n)
	}
	procs := keys(ring, func(s sample) map[string]float64 { return s.procCalls })
	for _, p := range procs {
		for _, m := range []map[string]series{d.ProcCallsPS, d.ProcFailsPS, d.ProcRefusedPS, d.ProcP99, d.ProcBreaker} {
			m[p] = make(series, n)
		}
	}
	for i := 0; i < n; i++ {
		a, b := ring[i], ring[i+1] //nolint:gosec // G602: n is len(ring)-1, so i+1 < len(ring)
		secs := b.at.Sub(a.at).Seconds()
		rate := func(x, y float64) float64 { return max(y-x, 0) / secs }
		d.Time[i] = float64(b.at.UnixMilli()) / 1000
		d.RPS[i] = rate(a.requests, b.requests)
		d.ShedPS[i] = rate(a.shed, b.shed)
		d.P50[i] = 1000 * quantile(.50, a.latency, b.latency)
		d.P95[i] = 1000 * quantile(.95, a.latency, b.latency)
		d.P99[i] = 1000 * quantile(.99, a.latency, b.latency)
		for _, c := range codes {
			d.ErrorsPS[c][i] = rate(a.errors[c], b.errors[c])
		}
		for _, o := range outcomes {
			d.PaymentsPS[o][i] = rate(a.payments[o], b.payments[o])
		}
		for _, p := range procs {
			d.ProcCallsPS[p][i] = rate(a.procCalls[p], b.procCalls[p])
			d.ProcFailsPS[p][i] = rate(a.procFails[p], b.procFails[p])
			d.ProcRefusedPS[p][i] = rate(a.procRefused[p], b.procRefused[p])
			d.ProcP99[p][i] = 1000 * quantile(.99, a.procLatency[p], b.procLatency[p])
			d.ProcBreaker[p][i] = b.procBreaker[p]
		}
		d.Inflight[i], d.Backlog[i], d.BacklogAge[i] = b.inflight, b.backlog, b.backlogAge
		d.CacheHitRate[i] = ratio(100*(b.cacheHits-a.cacheHits), (b.cacheHits-a.cacheHits)+(b.cacheMisses-a.cacheMisses))
		d.BatchSize[i] = ratio(b.batchSum-a.batchSum, b.batchCount-a.batchCount)
		d.CommitsPS[i] = rate(a.batchCount, b.batchCount)
		d.StallMs[i] = 1000 * b.stall
		if b.batchCount == 0 { // no OnBatch histogram: the committer's totals
			d.BatchSize[i] = ratio(b.writes-a.writes, b.batches-a.batches)
			d.CommitsPS[i] = rate(a.batches, b.batches)
		}
	}
	return d
}

func ratio(x, y float64) float64 {
	if y <= 0 {
		return math.NaN()
	}
	return x / y
}

func keys(ring []sample, m func(sample) map[string]float64) []string {
	set := map[string]bool{}
	for _, s := range ring {
		for k := range m(s) {
			set[k] = true
		}
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
