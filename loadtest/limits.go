package loadtest

import "time"

// Limits on everything a run may grow. Crossing one is a usage error or, for
// in-flight iterations, a counted drop; never a silent cut.
const (
	// RateMax bounds the arrival rate in iterations per second. A single
	// injector on a 2-core machine saturates well below it.
	RateMax = 100_000.0
	// DurationMax bounds a run: one compact window summary is kept per second.
	DurationMax = 24 * time.Hour
	// IterationCountMax bounds --max-iterations.
	IterationCountMax = 100_000_000
	// InflightCountMax bounds --max-inflight; each in-flight iteration holds a
	// goroutine and usually a connection.
	InflightCountMax = 1_000_000
	// SetupCustomerCountMax bounds --setup-customers.
	SetupCustomerCountMax = 100_000
	// SetupConcurrency is how many set-up workers run at once.
	SetupConcurrency = 16
	// SetupFailureShareMax is the share of set-up customers that may fail
	// before the run is abandoned as a set-up error.
	SetupFailureShareMax = 0.01
	// StageCountMax bounds the arrival plan, chiefly the stress steps.
	StageCountMax = 1_000
	// ThresholdCountMax bounds --threshold flags.
	ThresholdCountMax = 100
	// ScenarioMixCountMax bounds the scenarios in a mix file.
	ScenarioMixCountMax = 32
	// ScenarioFileBytesMax bounds a scenario mix file.
	ScenarioFileBytesMax = 64 << 10
	// ResultFileBytesMax bounds a result file read by compare and merge.
	ResultFileBytesMax = 512 << 20
	// ResponseBytesMax bounds how much of a response body is read.
	ResponseBytesMax = 1 << 20
	// ErrorCodeCountMax bounds the distinct error codes and failed checks kept
	// per request type; further ones are counted under "other".
	ErrorCodeCountMax = 64

	// HistogramValueMin and HistogramValueMax are the recorded range in
	// microseconds; longer latencies are clamped to the maximum.
	HistogramValueMin = 1
	HistogramValueMax = 60_000_000
	// HistogramDigits is the number of significant decimal digits kept.
	HistogramDigits = 3

	// WindowDuration is the length of one reporting window.
	WindowDuration = time.Second
	// MinuteWindows is how many one-second windows make one minute of
	// the per-minute summary.
	MinuteWindows = 60
	// MinuteFoldSeconds: a last minute shorter than this is folded into
	// the minute before it.
	MinuteFoldSeconds = 5
	// dirEntriesMax bounds the walk of --server-data-dir per sample.
	dirEntriesMax = 10_000
	// ResourceSampleInterval is how often CPU and RSS are sampled.
	ResourceSampleInterval = time.Second
	// ProgressRefreshInterval is how often the live display refreshes.
	ProgressRefreshInterval = 250 * time.Millisecond
	// ProgressLineInterval is how often a plain progress line is printed
	// when stderr is not a terminal.
	ProgressLineInterval = 5 * time.Second

	// InjectorCPUShareMax is the share of the injector's usable cores
	// (GOMAXPROCS) above which the injector warns that it may be the
	// bottleneck: past it, goroutines wait for CPU and start late.
	InjectorCPUShareMax = 0.8
	// MachineCPUShareMax is the share of all cores used by injector and
	// server together above which the run warns the machine is saturated.
	MachineCPUShareMax = 0.9
	// PacerLagWarnShare is the share of iterations the pacer itself launched
	// later than --late-threshold above which the injector is blamed, once
	// at least PacerLagWarnCountMin were: a lone scheduler hiccup (seen at
	// start-up on a 2-core machine) is not a bottleneck.
	PacerLagWarnShare    = 0.01
	PacerLagWarnCountMin = 20
	// TrendWindowCountMin is how many one-second windows a run needs before
	// its trend slopes are computed; over a few seconds they are noise.
	TrendWindowCountMin = 60

	// ErrorRateSlack is the absolute error-rate increase compare ignores,
	// so that 0 → 0.01% is not a regression at any tolerance.
	ErrorRateSlack = 0.001
)

// Defaults are small and safe: a mistyped command cannot flood a server.
const (
	DefaultURL            = "http://127.0.0.1:8080"
	DefaultRate           = 100.0
	DefaultDuration       = 10 * time.Second
	DefaultMaxIterations  = 1_000_000
	DefaultMaxInflight    = 10_000
	DefaultLateThreshold  = 10 * time.Millisecond
	DefaultTimeout        = 30 * time.Second
	DefaultDrainTimeout   = 30 * time.Second
	DefaultSetupCustomers = 200
	DefaultDeclineRate    = 0.0
	DefaultVUs            = 100
	DefaultStepDuration   = 10 * time.Second
	DefaultStartRate      = 10.0
	DefaultStepRate       = 10.0
	DefaultMaxRate        = 100.0
	DefaultSLO            = "p99<250ms,errors<1%"
	DefaultTolerance      = 0.10
)
