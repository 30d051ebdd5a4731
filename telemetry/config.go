package telemetry

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// Config selects what telemetry a server produces. The zero value turns
// everything off; DefaultConfig turns on what is cheap (metrics and access
// logs) and leaves tracing off.
type Config struct {
	Tracing TracingConfig `toml:"tracing"`
	Metrics MetricsConfig `toml:"metrics"`
	// AccessLog writes one structured log line per request (route, status,
	// duration, trace ID, merchant, SQL statements by kind, store time).
	// Default true.
	AccessLog bool `toml:"access_log"`
}

// TracingConfig configures OpenTelemetry traces exported over OTLP/HTTP.
type TracingConfig struct {
	// Enabled turns tracing on. Default false.
	Enabled bool `toml:"enabled"`
	// Endpoint is the OTLP/HTTP traces URL, e.g.
	// "http://127.0.0.1:4318/v1/traces" (http:// means no TLS). Default
	// "http://127.0.0.1:4318/v1/traces".
	Endpoint string `toml:"endpoint"`
	// SampleRatio is the share of new traces recorded, 0..1; a request
	// that arrives with a sampled W3C traceparent is always recorded.
	// Default 1.
	SampleRatio float64 `toml:"sample_ratio"`
	// QueueSizeMax bounds the finished spans waiting for export; beyond it
	// spans are dropped and counted in surgepay_telemetry_spans_dropped_total,
	// never waited for. Default 2048.
	QueueSizeMax int `toml:"queue_size_max"`
}

// MetricsConfig configures the Prometheus metrics served on the admin
// listener at /metrics.
type MetricsConfig struct {
	// Enabled turns metrics (and the dashboard built on them) on. Default true.
	Enabled bool `toml:"enabled"`
}

// Limits of telemetry's own resources.
const (
	// QueueSizeMaxDefault is the default bound of spans waiting for export.
	QueueSizeMaxDefault = 2048
	// QueueSizeMaxLimit is the largest queue accepted: about 30 MB of spans.
	QueueSizeMaxLimit = 1 << 16
	// ExportBatchSizeMax is the most spans sent in one OTLP request.
	ExportBatchSizeMax = 512
	// EndpointDefault is the OTLP/HTTP collector of a local agent.
	EndpointDefault = "http://127.0.0.1:4318/v1/traces"
)

// DefaultConfig returns metrics and access logs on, tracing off.
func DefaultConfig() Config {
	return Config{
		Tracing:   TracingConfig{Endpoint: EndpointDefault, SampleRatio: 1, QueueSizeMax: QueueSizeMaxDefault},
		Metrics:   MetricsConfig{Enabled: true},
		AccessLog: true,
	}
}

// Validate reports every bad field, each named by its TOML key under
// prefix (e.g. "telemetry.").
func (c Config) Validate(prefix string) error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("config %s%s: %s", prefix, field, fmt.Sprintf(format, args...)))
	}
	t := c.Tracing
	if t.SampleRatio < 0 || t.SampleRatio > 1 {
		bad("tracing.sample_ratio", "must be between 0 and 1, got %g", t.SampleRatio)
	}
	if t.QueueSizeMax < 0 || t.QueueSizeMax > QueueSizeMaxLimit {
		bad("tracing.queue_size_max", "must be between 1 and %d (0: the default), got %d", QueueSizeMaxLimit, t.QueueSizeMax)
	}
	if t.Enabled && t.Endpoint != "" {
		u, err := url.Parse(t.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("tracing.endpoint", "must be an http:// or https:// URL such as %s", EndpointDefault)
		}
	}
	return errors.Join(errs...)
}

// withDefaults fills unset tracing fields.
func (c Config) withDefaults() Config {
	if c.Tracing.Endpoint == "" {
		c.Tracing.Endpoint = EndpointDefault
	}
	if c.Tracing.QueueSizeMax <= 0 {
		c.Tracing.QueueSizeMax = QueueSizeMaxDefault
	}
	return c
}

// ApplyEnv overrides fields from environment variables read by getenv:
// SURGEPAY_TRACING_ENABLED, SURGEPAY_TRACING_ENDPOINT,
// SURGEPAY_TRACING_SAMPLE_RATIO, SURGEPAY_METRICS_ENABLED,
// SURGEPAY_ACCESS_LOG. A malformed value is an error naming the variable.
func (c *Config) ApplyEnv(getenv func(string) string) error {
	var errs []error
	boolVar := func(name string, dst *bool) {
		if v := getenv(name); v != "" {
			b, err := strconv.ParseBool(strings.TrimSpace(v))
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %q is not a boolean", name, v))
				return
			}
			*dst = b
		}
	}
	boolVar("SURGEPAY_TRACING_ENABLED", &c.Tracing.Enabled)
	boolVar("SURGEPAY_METRICS_ENABLED", &c.Metrics.Enabled)
	boolVar("SURGEPAY_ACCESS_LOG", &c.AccessLog)
	if v := getenv("SURGEPAY_TRACING_ENDPOINT"); v != "" {
		c.Tracing.Endpoint = v
	}
	if v := getenv("SURGEPAY_TRACING_SAMPLE_RATIO"); v != "" {
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("SURGEPAY_TRACING_SAMPLE_RATIO: %q is not a number", v))
		} else {
			c.Tracing.SampleRatio = f
		}
	}
	return errors.Join(errs...)
}
