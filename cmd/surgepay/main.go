// Command surgepay is the payment engine: serve, keys, tax, simulator,
// loadtest. Run `surgepay help` for usage.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/surgepay/surgepay/internal/cli"
	"github.com/surgepay/surgepay/internal/probe"
)

const usage = `surgepay — a self-hosted payment transaction engine

Usage:
  surgepay serve [--config FILE]          run the payments API (embedded default: SQLite in ./data)
  surgepay merchants create NAME          make a merchant; also list, show ID, disable ID, enable ID
  surgepay keys create [--merchant ID]    make a new API key (for the first merchant by default; --scopes, --expires-in)
  surgepay keys list [--merchant ID]      list API keys (never their secrets)
  surgepay keys roll KEY_ID --grace D     make a new secret; the old one works for D more (0: stops at once)
  surgepay keys expire KEY_ID --expires-in D   set or bring forward a key's expiry
  surgepay keys revoke KEY_ID             revoke an API key for good
  surgepay audit list                     the audit trail of merchant and key changes
  surgepay keys rotate                    add a new card-vault key and make it primary
  surgepay keys reencrypt | retire KEY_ID   move stored cards to the primary key; then remove the old one
  surgepay keys rotate-signing | retire-signing KEY_ID   client-secret signing keys (docs/vault.md)
  surgepay keys settlement --out DIR      make the settlement key pair (public: API hosts; private: settle only)
  surgepay webhooks endpoints             list webhook endpoints with their health (docs/webhooks.md)
  surgepay webhooks deliveries --endpoint ID   list deliveries with their status; resend, roll-secret
  surgepay processors seal --name NAME    seal a processor's secret key (stdin) for [processors.NAME]
  surgepay settle [--until-empty]         capture staged streamlined sales in batches (docs/streamlined.md)
  surgepay trace --scenario checkout      run one flow and show where each request's time goes
  surgepay tax import FILE                validate a tax-rate CSV and install it in the data folder
  surgepay migrate                        apply database migrations and exit
  surgepay healthcheck [--live]           exit 0 if the running serve is ready (a container's HEALTHCHECK)
  surgepay backup --out FILE              copy the embedded database while it serves (checked, 0600)
  surgepay simulator [flags]              run the card-network simulator as an HTTP server
  surgepay loadtest [flags]               run a load test (see docs/loadtest.md)
  surgepay loadtest compare BASE NEW      compare two load-test results
  surgepay version                        print the version, VCS commit and Go version
  surgepay help [COMMAND]                 print this, or a command's usage and flags

Every command takes -h or --help. A usage error exits 2 (loadtest: 1, see
docs/loadtest.md) with one line on stderr.

Configuration: --config FILE or SURGEPAY_CONFIG, then SURGEPAY_* environment
variables (see docs/configuration.md).
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		cli.Fail(stderr, "", "no command")
		return cli.ExitUsage
	}
	switch args[0] {
	case "serve":
		return cmdServe(ctx, args[1:], stdout, stderr)
	case "settle":
		return cmdSettle(ctx, args[1:], stdout, stderr)
	case "trace":
		return cmdTrace(ctx, args[1:], stdout, stderr)
	case "keys":
		return cmdKeys(ctx, args[1:], stdout, stderr)
	case "merchants":
		return cmdMerchants(ctx, args[1:], stdout, stderr)
	case "audit":
		return cmdAudit(ctx, args[1:], stdout, stderr)
	case "tax":
		return cmdTax(ctx, args[1:], stdout, stderr)
	case "migrate":
		return cmdMigrate(ctx, args[1:], stdout, stderr)
	case "backup":
		return cmdBackup(ctx, args[1:], stdout, stderr)
	case "simulator":
		return cmdSimulator(ctx, args[1:], stdout, stderr)
	case "healthcheck":
		return probe.Main(ctx, args[1:], stdout, stderr)
	case "loadtest":
		return cmdLoadtest(ctx, args[1:], stdout, stderr)
	case "processors":
		return cmdProcessors(args[1:], stdout, stderr)
	case "webhooks":
		return cmdWebhooks(ctx, args[1:], stdout, stderr)
	case "version", "-version", "--version":
		return cmdVersion(args[1:], stdout, stderr)
	case "help":
		if len(args) > 1 && !cli.IsHelp(args[1]) {
			// `surgepay help keys create` is `surgepay keys create --help`.
			return run(ctx, append(append([]string{}, args[1:]...), "--help"), stdout, stderr)
		}
		fmt.Fprint(stdout, usage)
		return cli.ExitOK
	case "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return cli.ExitOK
	}
	cli.Fail(stderr, "", "unknown command %q", args[0])
	return cli.ExitUsage
}
