package sim

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/internal/cli"
)

// Server limits for Main.
const (
	// ShutdownTimeout bounds the graceful shutdown once ctx is cancelled.
	ShutdownTimeout = 10 * time.Second
	// ReadHeaderTimeout bounds reading a request's headers.
	ReadHeaderTimeout = 10 * time.Second
	// IdleTimeout closes keep-alive connections idle this long.
	IdleTimeout = 2 * time.Minute
)

// Exit codes of Main.
const (
	ExitOK    = 0
	ExitError = 1 // the listener or the server failed.
	ExitUsage = 2 // bad flags or configuration.
)

const mainUsage = `Usage: surgepay simulator [--listen ADDR] [flags]

Runs the card-network simulator as an HTTP server (no authentication: keep
it on loopback or a private network) until interrupted; point serve and
settle at it with provider.kind = "sim-http" and provider.url. Test cards
and amounts that trigger each outcome: docs/simulator.md.
`

// Main is the body of `surgepay simulator [flags]`: it serves NewHandler
// (the 3-D Secure pages included, which shoppers' browsers reach at
// --pages-url) on --listen until ctx is cancelled, then shuts down gracefully. Calls
// still sleeping through their latency end NotPerformed (they did nothing)
// rather than hold up the shutdown. It prints the address it listens on to
// stdout and problems to stderr, and returns an exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := cli.New("simulator", mainUsage)
	fs := c.Flags
	cfg := DefaultConfig()
	listen := fs.String("listen", "127.0.0.1:8181", "`address` to serve the simulator's HTTP API on (no authentication: keep it private)")
	fs.TextVar(&cfg.Latency, "latency", cfg.Latency, "latency of every call: 0, fixed:D, uniform:D-D or lognormal:mean=D,p99=D")
	fs.TextVar(&cfg.TimeoutLatency, "timeout-latency", cfg.TimeoutLatency, "how long a timed-out call (amount 9101, --timeout-rate) waits before it fails")
	fs.Float64Var(&cfg.DeclineRate, "decline-rate", 0, "probability in [0,1] of a random generic_decline")
	fs.Float64Var(&cfg.TimeoutRate, "timeout-rate", 0, "probability in [0,1] of a timeout before the network (not performed)")
	fs.Float64Var(&cfg.UnknownRate, "unknown-rate", 0, "probability in [0,1] that a performed operation's answer is lost (unknown)")
	fs.Float64Var(&cfg.RateLimitRate, "rate-limit-rate", 0, "probability in [0,1] of a rate-limit refusal (not performed)")
	fs.BoolVar(&cfg.Outage, "outage", false, "start in an outage: every call fails, not performed")
	fs.BoolVar(&cfg.UnknownDropsConnection, "unknown-drops-connection", false, "answer unknown outcomes by closing the connection instead of status 504")
	fs.Uint64Var(&cfg.Seed, "seed", 0, "random seed for faults and latencies; 0 picks one")
	fs.IntVar(&cfg.RecordsMax, "records-max", MainRecordsMaxDefault,
		fmt.Sprintf("operations kept for idempotency and lookup, %d to %d; the oldest are evicted beyond it", RecordsMaxMin, RecordsMaxLimit))
	fs.TextVar(&cfg.Retention, "retention", cfg.Retention,
		fmt.Sprintf("how long an operation is kept, %s to %s; older ones are forgotten", RetentionMin, RetentionMax))
	fs.StringVar(&cfg.PagesURL, "pages-url", "",
		"`URL` at which shoppers' browsers reach this simulator's 3-D Secure pages, e.g. http://127.0.0.1:8181; empty: the origin of each payment's return URL")
	fs.TextVar(&cfg.ChallengeTTL, "challenge-ttl", cfg.ChallengeTTL,
		fmt.Sprintf("how long a 3-D Secure challenge waits for the cardholder, %s to %s", ChallengeTTLMin, ChallengeTTLMax))
	if code, ok := c.Parse(args, stdout, stderr); !ok {
		return code
	}
	if cfg.RecordsMax < RecordsMaxMin {
		return c.Fail(stderr, "--records-max %d must be %d to %d", cfg.RecordsMax, RecordsMaxMin, RecordsMaxLimit)
	}
	if err := cfg.Validate(); err != nil {
		return c.Fail(stderr, "%v", err)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintf(stderr, "simulator: %v\n", err)
		return ExitError
	}
	return serve(ctx, ln, New(cfg), stdout, stderr)
}

func serve(ctx context.Context, ln net.Listener, p *Provider, stdout, stderr io.Writer) int {
	base, cancelBase := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelBase()
	srv := &http.Server{
		Handler:           NewHandler(p),
		ReadHeaderTimeout: ReadHeaderTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    BodyBytesMax,
		BaseContext:       func(net.Listener) context.Context { return base },
		ErrorLog:          log.New(stderr, "simulator: ", 0),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	cfg := p.Config()
	fmt.Fprintf(stdout, "surgepay simulator listening on http://%s (latency %v, seed %d)\n", ln.Addr(), cfg.Latency, cfg.Seed)
	if cfg.PagesURL != "" {
		fmt.Fprintf(stdout, "3-D Secure pages at %s%s\n", trimSlash(cfg.PagesURL), surgepay.PagesPrefix)
	}
	select {
	case err := <-errc:
		fmt.Fprintf(stderr, "simulator: %v\n", err)
		return ExitError
	case <-ctx.Done():
	}
	cancelBase() // sleeping calls end NotPerformed instead of delaying shutdown.
	sctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close() // Shutdown's error is the one to report
		fmt.Fprintf(stderr, "simulator: shutdown: %v\n", err)
		return ExitError
	}
	return ExitOK
}
