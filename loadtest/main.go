package loadtest

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"

	"github.com/mattn/go-isatty"

	"github.com/surgepay/surgepay/internal/cli"
	"github.com/surgepay/surgepay/loadtest/report"
)

// Main runs the load harness command line with args (without the program
// and "loadtest" words) and returns the process exit code; see the package
// documentation for the codes.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	name := "" // or "run", as typed: usage errors name it
	if len(args) > 0 {
		switch args[0] {
		case "compare":
			return mainCompare(args[1:], stdout, stderr)
		case "merge":
			return mainMerge(args[1:], stdout, stderr)
		case "table":
			return mainTable(args[1:], stdout, stderr)
		case "run":
			name, args = "run", args[1:]
		}
	}
	cfg, co, code, ok := parseFlags(name, args, stdout, stderr)
	if !ok {
		return code
	}
	opts := Options{Log: stderr, Live: isTerminal(stderr)}
	if co.quiet {
		opts.Log = nil
	}
	if co.cpuProfile != "" {
		stop, err := startCPUProfile(co.cpuProfile)
		if err != nil {
			fmt.Fprintf(stderr, "loadtest: %v\n", err)
			return ExitUsage
		}
		defer stop()
	}
	res, err := Run(ctx, cfg, opts)
	if err != nil {
		fmt.Fprintf(stderr, "loadtest: %v\n", err)
		return ExitUsage
	}
	for _, w := range res.Warnings {
		fmt.Fprintf(stderr, "WARNING: %s\n", w)
	}
	if err := writeOutputs(res, co); err != nil {
		fmt.Fprintf(stderr, "loadtest: %v\n", err)
		return ExitUsage
	}
	printSummary(stdout, res)
	return exitCode(res)
}

// exitCode maps a finished run to its exit code.
func exitCode(res *Result) int {
	switch {
	case res.Summary.Interrupted:
		return ExitInterrupted
	case !res.Passed():
		return ExitThresholds
	}
	return ExitOK
}

// Passed reports whether every threshold held and nothing was dropped.
func (r *Result) Passed() bool {
	for _, t := range r.Thresholds {
		if !t.OK {
			return false
		}
	}
	return r.Summary.Dropped == 0
}

// cliOptions are the flags that are not part of Config.
type cliOptions struct {
	out, html  string
	quiet      bool
	cpuProfile string
}

// listFlag collects a repeatable flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, " ") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

// newCommand returns the command line of `surgepay loadtest name`, whose
// usage errors exit ExitUsage, the harness's documented code.
func newCommand(name, usage string) *cli.Command {
	c := cli.New(strings.TrimSpace("loadtest "+name), usage)
	c.ExitUsage = ExitUsage
	return c
}

// parseFlags parses the run flags into a validated Config. ok is false when
// the command must stop with code: ExitOK after --help, ExitUsage after a
// usage error reported on stderr.
func parseFlags(name string, args []string, stdout, stderr io.Writer) (cfg Config, co cliOptions, code int, ok bool) {
	cfg = DefaultConfig()
	var scenarioName, scenarioFile, slo string
	var thresholds listFlag
	c := newCommand(name, runUsage)
	fs := c.Flags
	defineFlags(fs, &cfg, &co)
	fs.StringVar(&cfg.APIKey, "api-key", os.Getenv("SURGEPAY_API_KEY"), "API key sent as a bearer token (default $SURGEPAY_API_KEY)")
	fs.StringVar(&cfg.PublishableKey, "publishable-key", os.Getenv("SURGEPAY_PUBLISHABLE_KEY"),
		"publishable key (pk_…) of the browser scenario's card-frame calls (default $SURGEPAY_PUBLISHABLE_KEY)")
	fs.StringVar(&scenarioName, "scenario", "checkout", "scenario: "+scenarioNames())
	fs.StringVar(&scenarioFile, "scenario-file", "", "TOML file with a weighted scenario mix ([[scenario]] name, weight); overrides --scenario")
	fs.StringVar(&slo, "slo", DefaultSLO, "stress SLO, comma-separated global terms")
	fs.Var(&thresholds, "threshold", "`[target:]metric<value`, repeatable; breaching one exits 2")
	if code, ok := c.Parse(args, stdout, stderr); !ok {
		return cfg, co, code, false
	}
	if err := cfg.fromFlags(scenarioName, scenarioFile, slo, thresholds); err != nil {
		return cfg, co, c.Fail(stderr, "%v", err), false
	}
	return cfg, co, ExitOK, true
}

// fromFlags sets the mix, the SLO and the thresholds and validates cfg.
func (cfg *Config) fromFlags(scenarioName, scenarioFile, slo string, thresholds []string) error {
	var err error
	if cfg.Mix, err = readMix(scenarioName, scenarioFile); err != nil {
		return err
	}
	if cfg.SLO, err = ParseSLO(slo); err != nil {
		return err
	}
	for _, text := range thresholds {
		t, err := ParseThreshold(text)
		if err != nil {
			return err
		}
		cfg.Thresholds = append(cfg.Thresholds, t)
	}
	return cfg.Validate()
}

func defineFlags(fs *flag.FlagSet, cfg *Config, cli *cliOptions) {
	fs.StringVar(&cfg.URL, "url", cfg.URL, "base URL of the API")
	fs.StringVar(&cfg.Path, "path", cfg.Path, "path requested by the get scenario")
	fs.StringVar(&cfg.Profile, "profile", cfg.Profile, "constant, peak, stress, soak or flood")
	fs.Float64Var(&cfg.Rate, "rate", cfg.Rate, "arrival rate, iterations per second")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "run length (peak: the steady part)")
	fs.DurationVar(&cfg.RampUp, "ramp-up", cfg.RampUp, "peak: ramp from 0 to --rate")
	fs.DurationVar(&cfg.RampDown, "ramp-down", cfg.RampDown, "peak: ramp from --rate to 0")
	fs.Float64Var(&cfg.StartRate, "start-rate", cfg.StartRate, "stress: first step rate")
	fs.Float64Var(&cfg.StepRate, "step-rate", cfg.StepRate, "stress: rate added per step")
	fs.DurationVar(&cfg.StepDuration, "step-duration", cfg.StepDuration, "stress: step length")
	fs.Float64Var(&cfg.MaxRate, "max-rate", cfg.MaxRate, "stress: last step rate")
	fs.Int64Var(&cfg.VUs, "vus", cfg.VUs, "flood: iterations started at once")
	fs.Int64Var(&cfg.MaxIterations, "max-iterations", cfg.MaxIterations, "cap on iterations started")
	fs.Int64Var(&cfg.MaxInflight, "max-inflight", cfg.MaxInflight, "cap on concurrent iterations; arrivals beyond are dropped and fail the run")
	fs.BoolVar(&cfg.Poisson, "poisson", cfg.Poisson, "space arrivals exponentially (Poisson process)")
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed for generated data and Poisson gaps")
	fs.DurationVar(&cfg.LateThreshold, "late-threshold", cfg.LateThreshold, "start lag above which an iteration counts as late")
	fs.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "per-request timeout")
	fs.DurationVar(&cfg.DrainTimeout, "drain-timeout", cfg.DrainTimeout, "wait for in-flight iterations after the schedule")
	fs.IntVar(&cfg.SetupCustomers, "setup-customers", cfg.SetupCustomers, "customers with saved cards created before the run")
	fs.Float64Var(&cfg.DeclineRate, "decline-rate", cfg.DeclineRate, "share of purchases made with --decline-card")
	fs.StringVar(&cfg.DeclineCard, "decline-card", cfg.DeclineCard, "decline test card: "+declineCardNames())
	fs.IntVar(&cfg.ServerPID, "server-pid", 0, "sample the server's CPU and RSS from /proc/PID")
	fs.StringVar(&cfg.ServerMetricsURL, "server-metrics", "", "sample the server's CPU and RSS from this Prometheus URL; with --server-pid, only a surgepay server's writer gauges (stall, queue, shed)")
	fs.StringVar(&cfg.ServerDataDir, "server-data-dir", "", "sample the size of the server's data folder `DIR` too (with --server-pid or --server-metrics)")
	fs.StringVar(&cfg.ServerMetricsToken, "server-metrics-token", os.Getenv("SURGEPAY_ADMIN_TOKEN"),
		"bearer token for --server-metrics: the server's admin token (default $SURGEPAY_ADMIN_TOKEN)")
	fs.StringVar(&cfg.CAFile, "ca-file", "", "PEM `FILE` of the CA (or the self-signed certificate) of an https --url; default: the system's roots")
	fs.StringVar(&cli.out, "out", "", "write the JSON result to this file")
	fs.StringVar(&cli.html, "html", "", "write the HTML report to this file")
	fs.BoolVar(&cli.quiet, "quiet", false, "no progress output")
	fs.StringVar(&cli.cpuProfile, "cpuprofile", "", "write the injector's own CPU profile to this file (is the load generator the bottleneck?)")
}

// readMix returns the mix of the scenario file, or the one scenario.
func readMix(name, file string) ([]MixEntry, error) {
	if file == "" {
		return []MixEntry{{Name: name, Weight: 1}}, nil
	}
	f, err := os.Open(file) //nolint:gosec // G304: the operator names the scenario file
	if err != nil {
		return nil, err
	}
	defer f.Close() //nolint:errcheck // read-only: closing loses nothing
	return ParseMix(f)
}

const runUsage = `Usage: surgepay loadtest [flags]
       surgepay loadtest run [flags]   (the same)
       surgepay loadtest compare base.json new.json [--tolerance 10%]
       surgepay loadtest merge a.json b.json... --out merged.json
       surgepay loadtest table [--header] [--label NAME] a.json...

Runs a load test against the API (docs/loadtest.md). Run 'surgepay help
loadtest compare' (merge, table) for those commands' flags.

Exit codes: 0 ok, 1 usage or set-up error, 2 thresholds breached or
iterations dropped, 3 compare regression, 4 interrupted.
`

// writeOutputs writes the JSON result and the HTML report.
func writeOutputs(res *Result, cli cliOptions) error {
	if cli.out == "" && cli.html == "" {
		return nil
	}
	data, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return fmt.Errorf("encode result: %w", err)
	}
	if cli.out != "" {
		if err := os.WriteFile(cli.out, append(data, '\n'), 0o644); err != nil { //nolint:gosec // G306: a result to share, no secrets in it
			return err
		}
	}
	if cli.html != "" {
		return writeReport(cli.html, data)
	}
	return nil
}

func writeReport(path string, data []byte) error {
	f, err := os.Create(path) //nolint:gosec // G304: the operator names the report file
	if err != nil {
		return err
	}
	if err := report.Write(f, data); err != nil {
		_ = f.Close() // the write's error is the one to report
		return err
	}
	return f.Close()
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// startCPUProfile profiles this process into path until stop is called.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path) //nolint:gosec // G304: the operator names the profile file
	if err != nil {
		return nil, fmt.Errorf("cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close() // StartCPUProfile's error is the one to report
		return nil, fmt.Errorf("cpuprofile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "cpuprofile: %v\n", err)
		}
	}, nil
}
