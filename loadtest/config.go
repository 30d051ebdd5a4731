package loadtest

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"
)

// Profile names accepted by --profile.
const (
	ProfileConstant = "constant"
	ProfilePeak     = "peak"
	ProfileStress   = "stress"
	ProfileSoak     = "soak"
	ProfileFlood    = "flood"
)

// Config is one run. Start from DefaultConfig, set fields, then Validate.
type Config struct {
	// URL is the base URL of the API, e.g. http://127.0.0.1:8080.
	URL string
	// APIKey is sent as a bearer token; empty sends no Authorization header.
	APIKey string
	// PublishableKey (pk_test_… or pk_live_…, of APIKey's merchant) is
	// the bearer token of the browser's calls in the scenarios that make
	// them (browser); required by those, unused by the others.
	PublishableKey string
	// Mix lists the scenarios and their weights. One entry runs one scenario.
	Mix []MixEntry
	// Path is the path the "get" scenario requests. Default "/".
	Path string

	// Profile is one of the Profile constants. Default constant.
	Profile string
	// Rate is the arrival rate in iterations per second for constant, peak
	// and soak. Default 100.
	Rate float64
	// Duration bounds the run: the whole schedule for constant, soak and
	// stress, the steady part for peak, the drain for flood. Default 10s.
	Duration time.Duration
	// RampUp and RampDown are the peak profile's linear ramps from and to 0.
	RampUp, RampDown time.Duration
	// StartRate, StepRate and MaxRate step the stress profile; each step
	// lasts StepDuration (default 10s).
	StartRate, StepRate, MaxRate float64
	StepDuration                 time.Duration
	// VUs is how many iterations flood starts at once. Default 100.
	VUs int64
	// MaxIterations caps the iterations started. Default 1,000,000.
	MaxIterations int64
	// MaxInflight caps concurrent iterations; arrivals beyond it are dropped
	// and fail the run. Default 10,000.
	MaxInflight int64
	// Poisson spaces arrivals exponentially instead of evenly.
	Poisson bool
	// Seed makes generated data and Poisson gaps reproducible. Default 1.
	Seed uint64

	// LateThreshold is the start lag above which an iteration is late.
	// Default 10ms.
	LateThreshold time.Duration
	// Timeout bounds each request. Default 30s.
	Timeout time.Duration
	// DrainTimeout bounds the wait for in-flight iterations after the
	// schedule ends; still-running ones are cancelled. Default 30s.
	DrainTimeout time.Duration

	// SetupCustomers is how many customers with saved cards are created
	// before the measured window for scenarios that need them. Default 200.
	SetupCustomers int
	// DeclineRate is the share of purchases made with DeclineCard. Default 0.
	DeclineRate float64
	// DeclineCard names the simulator decline used; see testCards. Default
	// card_declined (4000000000000002).
	DeclineCard string

	// SLO is what a stress step must hold. Default p99<250ms and errors<1%.
	SLO []Threshold
	// Thresholds fail the run (ExitThresholds) when breached.
	Thresholds []Threshold

	// ServerPID, when positive, samples the server's CPU and RSS from /proc.
	ServerPID int
	// ServerMetricsURL, when set, samples them from Prometheus text
	// instead; with ServerPID, the process is read from /proc and the
	// scrape adds a surgepay server's writer gauges (stall, queue depth,
	// requests shed), per second and per minute.
	ServerMetricsURL string
	// ServerDataDir, when set, samples the size of the server's data
	// folder with its CPU and RSS (bytes stored per sale).
	ServerDataDir string
	// ServerMetricsToken is sent as a bearer token to ServerMetricsURL:
	// the admin token of the server's admin listener (its /metrics needs
	// it unless admin_metrics_open). Default none.
	ServerMetricsToken string
	// CAFile is a PEM file of the certificates that sign the https URL's
	// (and ServerMetricsURL's) certificate: a private CA, or a
	// self-signed certificate itself. Default none: the system's roots.
	CAFile string
}

// MixEntry is one scenario of a weighted mix.
type MixEntry struct {
	Name   string `toml:"name" json:"name"`
	Weight int    `toml:"weight" json:"weight"`
}

// DefaultConfig returns the small, safe defaults.
func DefaultConfig() Config {
	slo, err := ParseSLO(DefaultSLO)
	assert(err == nil, "default SLO parses")
	return Config{
		URL:            DefaultURL,
		Mix:            []MixEntry{{Name: "checkout", Weight: 1}},
		Path:           "/",
		Profile:        ProfileConstant,
		Rate:           DefaultRate,
		Duration:       DefaultDuration,
		StartRate:      DefaultStartRate,
		StepRate:       DefaultStepRate,
		MaxRate:        DefaultMaxRate,
		StepDuration:   DefaultStepDuration,
		VUs:            DefaultVUs,
		MaxIterations:  DefaultMaxIterations,
		MaxInflight:    DefaultMaxInflight,
		Seed:           1,
		LateThreshold:  DefaultLateThreshold,
		Timeout:        DefaultTimeout,
		DrainTimeout:   DefaultDrainTimeout,
		SetupCustomers: DefaultSetupCustomers,
		DeclineRate:    DefaultDeclineRate,
		DeclineCard:    "card_declined",
		SLO:            slo,
	}
}

// Validate checks every field and the cross-field rules.
func (c *Config) Validate() error {
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--url %q: want http(s)://host:port", c.URL)
	}
	if _, err := c.clientTLS(); err != nil {
		return err
	}
	if err := validateMix(c.Mix); err != nil {
		return err
	}
	if err := c.validatePublishableKey(); err != nil {
		return err
	}
	if err := c.validateNumbers(); err != nil {
		return err
	}
	if _, ok := testCards[c.DeclineCard]; !ok || c.DeclineCard == "success" {
		return fmt.Errorf("--decline-card %q: want one of %s", c.DeclineCard, declineCardNames())
	}
	if len(c.Thresholds) > ThresholdCountMax {
		return fmt.Errorf("%d thresholds, at most %d", len(c.Thresholds), ThresholdCountMax)
	}
	if err := checkThresholdNames(c.Thresholds, c.Mix); err != nil {
		return err
	}
	plan, err := c.Plan()
	if err != nil {
		return err
	}
	return plan.validate()
}

// validatePublishableKey requires a publishable key when a scenario of the
// mix makes the browser's calls. A secret key would be let through by the
// server (a full-access one may call the checkout routes) and measure
// something else, so it is refused here.
func (c *Config) validatePublishableKey() error {
	for _, m := range c.Mix {
		if sc, _ := scenarioByName(m.Name); sc.publishable && !strings.HasPrefix(c.PublishableKey, "pk_") {
			return fmt.Errorf("scenario %q needs --publishable-key: a pk_test_… or pk_live_… key of the --api-key's merchant (docs/checkout.md)", m.Name)
		}
	}
	return nil
}

func (c *Config) validateNumbers() error {
	switch {
	case c.Rate <= 0 || c.Rate > RateMax:
		return fmt.Errorf("--rate %g: want 0 < rate <= %g", c.Rate, RateMax)
	case c.Duration <= 0 || c.Duration > DurationMax:
		return fmt.Errorf("--duration %v: want 0 < duration <= %v", c.Duration, DurationMax)
	case c.MaxIterations <= 0 || c.MaxIterations > IterationCountMax:
		return fmt.Errorf("--max-iterations %d: want 1..%d", c.MaxIterations, IterationCountMax)
	case c.MaxInflight <= 0 || c.MaxInflight > InflightCountMax:
		return fmt.Errorf("--max-inflight %d: want 1..%d", c.MaxInflight, InflightCountMax)
	case c.SetupCustomers < 0 || c.SetupCustomers > SetupCustomerCountMax:
		return fmt.Errorf("--setup-customers %d: want 0..%d", c.SetupCustomers, SetupCustomerCountMax)
	case c.DeclineRate < 0 || c.DeclineRate > 1:
		return fmt.Errorf("--decline-rate %g: want 0..1", c.DeclineRate)
	case c.Timeout <= 0 || c.DrainTimeout < 0 || c.LateThreshold <= 0:
		return errors.New("--timeout and --late-threshold must be positive, --drain-timeout not negative")
	case c.RampUp < 0 || c.RampDown < 0:
		return errors.New("--ramp-up and --ramp-down must not be negative")
	}
	return nil
}

// Plan builds the arrival plan of the configured profile.
func (c *Config) Plan() (Plan, error) {
	switch c.Profile {
	case ProfileConstant, ProfileSoak:
		return Plan{Stages: []Stage{{c.Duration, c.Rate, c.Rate}}}, nil
	case ProfilePeak:
		return c.peakPlan(), nil
	case ProfileStress:
		return c.stressPlan()
	case ProfileFlood:
		if c.VUs <= 0 || c.VUs > c.MaxIterations {
			return Plan{}, fmt.Errorf("--vus %d: want 1..--max-iterations (%d)", c.VUs, c.MaxIterations)
		}
		return Plan{FloodCount: c.VUs}, nil
	}
	return Plan{}, fmt.Errorf("--profile %q: want constant, peak, stress, soak or flood", c.Profile)
}

func (c *Config) peakPlan() Plan {
	var stages []Stage
	if c.RampUp > 0 {
		stages = append(stages, Stage{c.RampUp, 0, c.Rate})
	}
	stages = append(stages, Stage{c.Duration, c.Rate, c.Rate})
	if c.RampDown > 0 {
		stages = append(stages, Stage{c.RampDown, c.Rate, 0})
	}
	return Plan{Stages: stages}
}

// stressPlan steps from StartRate by StepRate up to MaxRate, each step
// StepDuration long, cut at Duration.
func (c *Config) stressPlan() (Plan, error) {
	switch {
	case c.StartRate <= 0 || c.StepRate <= 0 || c.MaxRate < c.StartRate || c.MaxRate > RateMax:
		return Plan{}, fmt.Errorf("stress: want 0 < --start-rate <= --max-rate <= %g and --step-rate > 0", RateMax)
	case c.StepDuration <= 0:
		return Plan{}, errors.New("stress: --step-duration must be positive")
	}
	var stages []Stage
	var total time.Duration
	for rate := c.StartRate; rate <= c.MaxRate*(1+1e-9) && total < c.Duration; rate += c.StepRate {
		d := min(c.StepDuration, c.Duration-total)
		stages = append(stages, Stage{d, rate, rate})
		total += d
		if len(stages) > StageCountMax {
			return Plan{}, fmt.Errorf("stress: more than %d steps; raise --step-rate", StageCountMax)
		}
	}
	return Plan{Stages: stages}, nil
}

// assert panics on a programmer error; operating errors are returned.
func assert(ok bool, what string) {
	if !ok {
		panic("loadtest: assertion failed: " + what)
	}
}

// clientTLS returns the TLS configuration of the injector's connections:
// TLS 1.2 or newer, the roots of CAFile or the system's.
func (c *Config) clientTLS() (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.CAFile == "" {
		return tc, nil
	}
	b, err := os.ReadFile(c.CAFile)
	if err != nil {
		return nil, fmt.Errorf("--ca-file: %w", err)
	}
	tc.RootCAs = x509.NewCertPool()
	if !tc.RootCAs.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("--ca-file %s: no PEM certificate in it", c.CAFile)
	}
	return tc, nil
}
