package loadtest

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// ResultVersion is the schema version of the JSON result file.
const ResultVersion = 1

// Result is the JSON result of a run. Latencies are in milliseconds, rates
// in events per second, shares (error rates) as fractions of 1.
type Result struct {
	Version     int                        `json:"version"`
	StartedAt   time.Time                  `json:"started_at"`
	Config      ResultConfig               `json:"config"`
	Summary     Summary                    `json:"summary"`
	Latency     LatencyPair                `json:"latency"`
	StartLag    LatencySummary             `json:"start_lag"`
	Types       map[string]*TypeResult     `json:"request_types"`
	Scenarios   map[string]*ScenarioResult `json:"scenarios"`
	StatusCodes map[string]int64           `json:"status_codes"`
	ErrorCodes  map[string]int64           `json:"error_codes"`
	Checks      map[string]int64           `json:"checks_failed"`
	Windows     []Window                   `json:"windows"`
	Minutes     []Minute                   `json:"minutes"`
	Resources   Resources                  `json:"resources"`
	Stress      *StressResult              `json:"stress,omitempty"`
	Trend       Trend                      `json:"trend"`
	Thresholds  []ThresholdResult          `json:"thresholds"`
	Warnings    []string                   `json:"warnings"`
}

// ResultConfig records the knobs of the run that produced a result.
type ResultConfig struct {
	URL             string     `json:"url"`
	Profile         string     `json:"profile"`
	Mix             []MixEntry `json:"mix"`
	Rate            float64    `json:"rate"`
	DurationSeconds float64    `json:"duration_seconds"`
	Poisson         bool       `json:"poisson"`
	MaxInflight     int64      `json:"max_inflight"`
	MaxIterations   int64      `json:"max_iterations"`
	LateThresholdMs float64    `json:"late_threshold_ms"`
	DeclineRate     float64    `json:"decline_rate"`
	SetupCustomers  int        `json:"setup_customers"`
	SLO             []string   `json:"slo"`
	Thresholds      []string   `json:"thresholds"`
	Seed            uint64     `json:"seed"`
}

// Summary holds the top-level numbers of a run.
type Summary struct {
	// PlannedSeconds is the length of the arrival schedule; ElapsedSeconds
	// is how long the pacer ran (shorter when stopped early).
	PlannedSeconds float64 `json:"planned_seconds"`
	ElapsedSeconds float64 `json:"elapsed_seconds"`
	// TargetRate is the plan's mean arrival rate; 0 for flood.
	TargetRate float64 `json:"target_rate"`
	// AchievedRate is iterations started per elapsed second.
	AchievedRate float64 `json:"achieved_rate"`
	Scheduled    int64   `json:"scheduled"`
	Iterations   int64   `json:"iterations"`
	Failed       int64   `json:"iterations_failed"`
	LateStarts   int64   `json:"late_starts"`
	Dropped      int64   `json:"dropped"`
	Requests     int64   `json:"requests"`
	Errors       int64   `json:"errors"`
	ErrorRate    float64 `json:"error_rate"`
	Declines     int64   `json:"declines"`
	RequestRate  float64 `json:"request_rate"`
	BytesSent    int64   `json:"bytes_sent"`
	BytesRecv    int64   `json:"bytes_received"`
	Interrupted  bool    `json:"interrupted"`
}

// LatencySummary is a compact summary of a histogram, in milliseconds.
type LatencySummary struct {
	Count int64   `json:"count"`
	Min   float64 `json:"min_ms"`
	Mean  float64 `json:"mean_ms"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P95   float64 `json:"p95_ms"`
	P99   float64 `json:"p99_ms"`
	P999  float64 `json:"p999_ms"`
	Max   float64 `json:"max_ms"`
}

// LatencyPair holds corrected latency (from the intended start) and service
// time (from the actual send).
type LatencyPair struct {
	Corrected LatencySummary `json:"corrected"`
	Service   LatencySummary `json:"service"`
}

// TypeResult holds the whole-run numbers of one request type.
type TypeResult struct {
	Requests  int64            `json:"requests"`
	Errors    int64            `json:"errors"`
	Declines  int64            `json:"declines"`
	ErrorRate float64          `json:"error_rate"`
	Rate      float64          `json:"rate"`
	Corrected LatencySummary   `json:"corrected"`
	Service   LatencySummary   `json:"service"`
	Status    map[string]int64 `json:"status_codes"`
	Codes     map[string]int64 `json:"error_codes"`
	Checks    map[string]int64 `json:"checks_failed"`
	BytesSent int64            `json:"bytes_sent"`
	BytesRecv int64            `json:"bytes_received"`
	// HDR holds the whole-run histograms, base64 HDR V2 compressed, so that
	// results of several injectors can be merged exactly.
	HDR HDRPair `json:"hdr"`
}

// HDRPair holds encoded corrected and service histograms.
type HDRPair struct {
	Corrected string `json:"corrected"`
	Service   string `json:"service"`
}

// ScenarioResult holds whole-iteration numbers of one scenario.
type ScenarioResult struct {
	Iterations int64          `json:"iterations"`
	Failed     int64          `json:"failed"`
	ErrorRate  float64        `json:"error_rate"`
	Rate       float64        `json:"rate"`
	Corrected  LatencySummary `json:"corrected"`
	HDR        string         `json:"hdr"`
}

// Window is the compact summary of one second of the run. Requests are
// grouped by the second in which they completed; Started and Dropped by the
// second in which the pacer handled them.
type Window struct {
	Second          int                   `json:"second"`
	DurationSeconds float64               `json:"duration_seconds"`
	TargetRate      float64               `json:"target_rate"`
	Started         int64                 `json:"started"`
	Dropped         int64                 `json:"dropped"`
	Late            int64                 `json:"late"`
	Requests        int64                 `json:"requests"`
	Errors          int64                 `json:"errors"`
	Refused         int64                 `json:"refused"` // 503 and 429 answers
	Status          map[string]int64      `json:"status"`
	Corrected       LatencySummary        `json:"corrected"`
	Service         LatencySummary        `json:"service"`
	Types           map[string]TypeWindow `json:"types"`
	Server          *ResourceSample       `json:"server,omitempty"`
	Injector        *ResourceSample       `json:"injector,omitempty"`
	Host            *HostSample           `json:"host,omitempty"`
}

// Minute summarises one minute of the run (MinuteWindows windows): the
// shape of a long event at a glance.
type Minute struct {
	Minute   int     `json:"minute"`
	Seconds  float64 `json:"seconds"`
	Requests int64   `json:"requests"`
	Errors   int64   `json:"errors"`
	// Refused counts 503 and 429 answers.
	Refused int64 `json:"refused"`
	// Sales counts payment.create and checkout.confirm requests answered
	// without error.
	Sales     int64          `json:"sales"`
	Corrected LatencySummary `json:"corrected"`
	// WorstSecondP99 is the highest p99 of the minute's one-second windows.
	WorstSecondP99 float64          `json:"worst_second_p99_ms"`
	Server         *MinuteResources `json:"server,omitempty"`
	Host           *HostSummary     `json:"host,omitempty"`
}

// MinuteResources are the server's resources over one minute.
type MinuteResources struct {
	CPUPercentAvg float64 `json:"cpu_percent_avg"`
	// CPUMicrosPerRequest is the server's CPU time over the minute's
	// requests: CPUPercentAvg of one core over their rate.
	CPUMicrosPerRequest float64 `json:"cpu_us_per_request,omitempty"`
	// Allocs is the heap objects the server allocated in the minute (the
	// growth of go_memstats_mallocs_total from the last scrape before the
	// minute to its last; --server-metrics), and AllocsPerRequest that
	// over the minute's requests. Unlike CPU time it does not depend on
	// how fast or how shared the machine is, so it compares across
	// machines and days. 0 when not scraped.
	Allocs           int64   `json:"allocs,omitempty"`
	AllocsPerRequest float64 `json:"allocs_per_request,omitempty"`
	RSSBytesMax      int64   `json:"rss_bytes_max"`
	// WriteBytes were written to storage during the minute; -1 unknown.
	WriteBytes        int64   `json:"write_bytes"`
	WriteBytesPerSale float64 `json:"write_bytes_per_sale"`
	// DataDirBytes is the data folder's size at the minute's end, and
	// DataDirBytesPerSale that size over every sale of the run so far.
	DataDirBytes        int64   `json:"data_dir_bytes,omitempty"`
	DataDirBytesPerSale float64 `json:"data_dir_bytes_per_sale,omitempty"`
	// Writer is the minute's writer, from the seconds scraped (nil if
	// none was).
	Writer *MinuteWriter `json:"writer,omitempty"`
}

// MinuteWriter is a surgepay server's group-commit writer over a minute.
type MinuteWriter struct {
	// StallMaxSeconds is the highest stall gauge scraped: the longest
	// group commit of the minute (and of up to 10 s before it).
	StallMaxSeconds float64 `json:"stall_max_seconds"`
	// StallMaxSecond is the run's second at which it was scraped.
	StallMaxSecond int   `json:"stall_max_second"`
	QueueDepthMax  int64 `json:"queue_depth_max"`
	// Shed is the requests the server shed in the minute, by reason
	// (the growth of surgepay_http_requests_shed_total since the last
	// scrape before it).
	Shed map[string]int64 `json:"shed,omitempty"`
	// Scrapes is how many seconds were scraped; fewer than the minute's
	// seconds when the server did not answer in half a second.
	Scrapes int `json:"scrapes"`
}

// TypeWindow is the per-request-type part of a window.
type TypeWindow struct {
	Requests int64   `json:"requests"`
	Errors   int64   `json:"errors"`
	P50      float64 `json:"p50_ms"`
	P99      float64 `json:"p99_ms"`
}

// ResourceSample is one CPU and RSS sample. CPUPercent is of one core.
type ResourceSample struct {
	Second     int     `json:"second"`
	CPUPercent float64 `json:"cpu_percent"`
	RSSBytes   int64   `json:"rss_bytes"`
	// WriteBytes is the server's cumulative write_bytes from /proc/PID/io
	// (what it caused to reach storage: WAL, checkpoints, everything);
	// -1 when unknown (Prometheus sampling, or no permission).
	WriteBytes int64 `json:"write_bytes"`
	// DataDirBytes is the size of the files under --server-data-dir; 0
	// when not set.
	DataDirBytes int64 `json:"data_dir_bytes,omitempty"`
	// Allocs is the server's cumulative go_memstats_mallocs_total (heap
	// objects allocated), from --server-metrics; 0 when not scraped.
	Allocs int64 `json:"allocs,omitempty"`
	// Writer is the server's group-commit writer, from --server-metrics;
	// nil when not scraped (or the scrape failed).
	Writer *WriterSample `json:"writer,omitempty"`
}

// WriterSample is one scrape of a surgepay server's writer gauges.
type WriterSample struct {
	// StallSeconds is surgepay_groupcommit_stall_seconds: the longest
	// group commit of the last 10 s, or the one in progress if longer.
	StallSeconds float64 `json:"stall_seconds"`
	// QueueDepth is the writes waiting for the writer.
	QueueDepth int64 `json:"queue_depth"`
	// Shed is surgepay_http_requests_shed_total by reason, cumulative.
	Shed map[string]int64 `json:"shed,omitempty"`
}

// Resources summarises CPU and RSS of the server and the injector, and
// the machine's CPU (nil where /proc/stat cannot be read).
type Resources struct {
	Server   ResourceSummary `json:"server"`
	Injector ResourceSummary `json:"injector"`
	Host     *HostSummary    `json:"host,omitempty"`
	Cores    int             `json:"cores"`
}

// HostSample is the injector's machine's CPU over one second, from
// /proc/stat, in percent of all its cores: Steal is the time the
// hypervisor ran other machines while this one had work (on a shared
// virtual machine, a stall that neither the server nor the injector
// caused), Busy the time spent running anything here.
type HostSample struct {
	Second       int     `json:"second"`
	StealPercent float64 `json:"steal_percent"`
	BusyPercent  float64 `json:"busy_percent"`
}

// HostSummary summarises HostSamples over a minute or the run.
type HostSummary struct {
	Samples         int     `json:"samples"`
	StealPercentAvg float64 `json:"steal_percent_avg"`
	StealPercentMax float64 `json:"steal_percent_max"`
	// StealMaxSecond is the run's second of StealPercentMax.
	StealMaxSecond int     `json:"steal_max_second"`
	BusyPercentAvg float64 `json:"busy_percent_avg"`
}

// ResourceSummary summarises a process's samples; Source says where they
// came from ("", "proc", "prometheus").
type ResourceSummary struct {
	Source        string  `json:"source"`
	Samples       int     `json:"samples"`
	CPUPercentAvg float64 `json:"cpu_percent_avg"`
	CPUPercentMax float64 `json:"cpu_percent_max"`
	RSSBytesMax   int64   `json:"rss_bytes_max"`
	RSSBytesLast  int64   `json:"rss_bytes_last"`
}

// StressResult reports the stress steps and the capacity found.
type StressResult struct {
	Steps []StressStep `json:"steps"`
	// CapacityRate is the highest step rate that held the SLO; 0 when
	// even the first step broke it.
	CapacityRate float64 `json:"capacity_rate"`
	// Broken says whether the SLO broke before the steps ran out.
	Broken bool `json:"broken"`
}

// StressStep is one step of a stress run.
type StressStep struct {
	Rate         float64 `json:"rate"`
	AchievedRate float64 `json:"achieved_rate"`
	Requests     int64   `json:"requests"`
	ErrorRate    float64 `json:"error_rate"`
	P99          float64 `json:"p99_ms"`
	Dropped      int64   `json:"dropped"`
	Held         bool    `json:"held"`
	Evaluated    bool    `json:"evaluated"`
	Reason       string  `json:"reason,omitempty"`
}

// Trend reports how the run drifted: least-squares slopes per minute.
type Trend struct {
	P99MsPerMinute            float64 `json:"p99_ms_per_minute"`
	ServerRSSBytesPerMinute   float64 `json:"server_rss_bytes_per_minute"`
	InjectorRSSBytesPerMinute float64 `json:"injector_rss_bytes_per_minute"`
}

// ReadResult reads a JSON result file.
func ReadResult(path string) (*Result, error) {
	f, err := os.Open(path) //nolint:gosec // G304: the operator names the result file
	if err != nil {
		return nil, err
	}
	defer f.Close() //nolint:errcheck // read-only: closing loses nothing
	var r Result
	dec := json.NewDecoder(io.LimitReader(f, ResultFileBytesMax))
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("read result %s: %w", path, err)
	}
	if r.Version != ResultVersion {
		return nil, fmt.Errorf("read result %s: version %d, want %d", path, r.Version, ResultVersion)
	}
	return &r, nil
}

// WriteResult writes r as indented JSON to path.
func WriteResult(path string, r *Result) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode result: %w", err)
	}
	return os.WriteFile(path, append(b, '\n'), 0o644) //nolint:gosec // G306: a result to share, no secrets in it
}

// newHistogram returns a histogram with the harness's range and precision.
func newHistogram() *hdr.Histogram {
	return hdr.New(HistogramValueMin, HistogramValueMax, HistogramDigits)
}

// summaryQuantiles are the percentiles of LatencySummary, in order.
var summaryQuantiles = []float64{50, 90, 95, 99, 99.9}

// summarize computes the compact summary of h.
func summarize(h *hdr.Histogram) LatencySummary {
	if h == nil || h.TotalCount() == 0 {
		return LatencySummary{}
	}
	q := h.ValueAtPercentilesSlice(summaryQuantiles)
	return LatencySummary{
		Count: h.TotalCount(),
		Min:   usToMs(h.Min()),
		Mean:  h.Mean() / 1000,
		P50:   usToMs(q[0]),
		P90:   usToMs(q[1]),
		P95:   usToMs(q[2]),
		P99:   usToMs(q[3]),
		P999:  usToMs(q[4]),
		Max:   usToMs(h.Max()),
	}
}

func usToMs(us int64) float64 { return float64(us) / 1000 }

// encodeHistogram encodes h for the result file; empty for nil.
func encodeHistogram(h *hdr.Histogram) string {
	if h == nil || h.TotalCount() == 0 {
		return ""
	}
	b, err := h.Encode(hdr.V2CompressedEncodingCookieBase)
	assert(err == nil, "encoding a histogram with the V2 cookie cannot fail")
	return string(b)
}

// decodeHistogram decodes an encoded histogram; "" decodes to an empty one.
func decodeHistogram(s string) (*hdr.Histogram, error) {
	if s == "" {
		return newHistogram(), nil
	}
	h, err := hdr.Decode([]byte(s))
	if err != nil {
		return nil, fmt.Errorf("decode histogram: %w", err)
	}
	return h, nil
}
