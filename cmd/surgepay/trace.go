package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/surgepay/surgepay/internal/cli"
	"github.com/surgepay/surgepay/loadtest"
)

const traceUsage = `Usage: surgepay trace --scenario checkout|returning|refund --url URL --api-key KEY

Runs one payment flow against a server started with debug = true and prints,
per request: route, status, time, SQL statements by kind, store time, cache
hits and misses, provider time and trace ID (from the Surgepay-* debug
headers). Like dbitrace: know what each request costs before load-testing it.
`

// cmdTrace runs `surgepay trace`.
func cmdTrace(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := cli.New("trace", traceUsage)
	fs := c.Flags
	scenario := fs.String("scenario", "checkout", "flow to run: checkout, returning or refund")
	url := fs.String("url", "http://127.0.0.1:8080", "the API's base URL")
	key := fs.String("api-key", "", "API key (default: $SURGEPAY_API_KEY)")
	card := fs.String("card", "4242424242424242", "card number (a simulator test card)")
	amount := fs.Int64("amount", 2000, "amount in minor units")
	if code, ok := c.Parse(args, stdout, stderr); !ok {
		return code
	}
	if *key == "" {
		*key = os.Getenv("SURGEPAY_API_KEY")
	}
	if _, ok := loadtest.TraceScenarios[*scenario]; !ok {
		return c.Fail(stderr, "unknown --scenario %q: checkout, returning or refund", *scenario)
	}
	if *key == "" {
		return c.Fail(stderr, "--api-key or SURGEPAY_API_KEY is required")
	}
	t := loadtest.NewTracer(*url, *key, *card, *amount)
	err := t.Run(ctx, *scenario)
	t.Print(stdout, *scenario)
	if err != nil {
		fmt.Fprintf(stderr, "surgepay trace: %v\n", err)
		return 1
	}
	return 0
}
