package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/surgepay/surgepay/config"
	"github.com/surgepay/surgepay/internal/cli"
	"github.com/surgepay/surgepay/internal/ops"
	"github.com/surgepay/surgepay/provider/processors"
	"github.com/surgepay/surgepay/provider/route"
	"github.com/surgepay/surgepay/vault"
)

// stdin is what `surgepay processors seal` reads (a test replaces it).
var stdin io.Reader = os.Stdin

// cmdProcessors is `surgepay processors seal|reseal|check`.
func cmdProcessors(args []string, stdout, stderr io.Writer) int {
	sub, code, ok := cli.Subcommand(args, "processors", processorsUsage, []string{"seal", "reseal", "check"}, stdout, stderr)
	if !ok {
		return code
	}
	if sub == "reseal" {
		return ops.ProcessorsResealMain(args[1:], stdout, stderr)
	}
	if sub == "check" {
		return cmdProcessorsCheck(args[1:], stdout, stderr)
	}
	return cmdProcessorsSeal(args[1:], stdout, stderr)
}

// cmdProcessorsSeal is `surgepay processors seal --name NAME`: it reads a
// processor's secret key from standard input and prints it sealed under
// the card vault's keyring, for secret_key in [processors.NAME]. The
// keyring is the one serve reads with the same configuration and
// environment; its place is said on stderr, and a keyring serve would
// not read is refused rather than made (keyringForSeal).
func cmdProcessorsSeal(args []string, stdout, stderr io.Writer) int {
	c, path := configFlags("processors seal", processorsSealUsage)
	name := c.Flags.String("name", "", "the processor's `NAME`, as in [processors.NAME] (required)")
	if code, ok := c.Parse(args, stdout, stderr); !ok {
		return code
	}
	if !config.ProcessorName.MatchString(*name) || *name == route.DefaultName {
		return c.Fail(stderr, "--name must be a processor's name: 1-32 of a-z, 0-9 and _, not %q", route.DefaultName)
	}
	cfg, err := config.Load(*path, os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "surgepay: %v\n", err)
		return cli.ExitUsage
	}
	secret, err := bufio.NewReader(stdin).ReadString('\n')
	if secret = strings.TrimSpace(secret); secret == "" {
		if err == nil || errors.Is(err, io.EOF) {
			err = errors.New("no secret key on standard input")
		}
		fmt.Fprintf(stderr, "surgepay processors seal: %v\n", err)
		return 1
	}
	if _, err := os.Stat("surgepay.toml"); cfg.Path() == "" && err == nil {
		fmt.Fprintln(stderr, "surgepay processors seal: ./surgepay.toml is not read without --config (nor by serve): the defaults apply")
	}
	keys, where, err := processors.KeyringForSeal(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "surgepay processors seal: %v\n", err)
		return 1
	}
	sealed, err := processors.Seal(keys, *name, secret)
	if err != nil {
		fmt.Fprintf(stderr, "surgepay: %v\n", err)
		return 1
	}
	fmt.Fprintf(stderr, "surgepay processors seal: sealed with %s\n", where)
	fmt.Fprintf(stdout, "secret_key = %q\n", sealed)
	return cli.ExitOK
}

const processorsUsage = `Usage: surgepay processors seal --name NAME [--config FILE]
       surgepay processors reseal --config FILE
       surgepay processors check [NAME] [--config FILE]

seal prints a processor's secret key sealed under the card vault's
keyring, for its [processors.NAME] section; reseal seals the file's
sealed secrets again under the primary key; check verifies each
configured processor's credentials with a harmless read.

See docs/processors.md.
`

const processorsSealUsage = `Usage: surgepay processors seal --name NAME [--config FILE]

Reads a processor's secret key (sk_… or rk_…) from standard input and
prints the line to put in its [processors.NAME] section: the key sealed
under the card vault's keyring (AES-256-GCM, bound to NAME), so that the
file never holds it in the clear. The keyring is the one serve uses with
the same configuration and environment (SURGEPAY_KEYRING, else
keyring_file, by default data_dir/keyring.json); stderr says which. It is
made when missing only if serve has not run with that data_dir yet;
rotating it keeps old seals readable; seal again before retiring the key
that sealed one.

  echo "$STRIPE_SECRET_KEY" | surgepay processors seal --name stripe_eu

See docs/processors.md.
`

const processorsCheckUsage = `Usage: surgepay processors check [NAME] [--config FILE] [--timeout D]

Verifies each configured processor (or NAME; "default" is [provider])
with a harmless read and prints one line each: ok, or what is wrong
(authentication failed 401: the key is wrong or revoked; permission
denied 403; unreachable: connection refused; …). Stripe: lists one
PaymentIntent with the configured key; the simulator over HTTP: its
/healthz. Nothing is created or changed. Exits 1 if any check fails.

See docs/processors.md.
`

// ProcessorCheckTimeoutDefault bounds each check of `processors check`.
const ProcessorCheckTimeoutDefault = 10 * time.Second

// cmdProcessorsCheck is `surgepay processors check [NAME]`.
func cmdProcessorsCheck(args []string, stdout, stderr io.Writer) int {
	c, path := configFlags("processors check", processorsCheckUsage)
	timeout := c.Flags.Duration("timeout", ProcessorCheckTimeoutDefault, "bound on each processor's check")
	names, code, ok := c.ParseInterleaved(args, stdout, stderr)
	if !ok {
		return code
	}
	if len(names) > 1 {
		return c.Fail(stderr, "at most one processor NAME")
	}
	cfg, err := config.Load(*path, os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "surgepay: %v\n", err)
		return cli.ExitUsage
	}
	all := append([]string{route.DefaultName}, slices.Sorted(maps.Keys(cfg.Processors))...)
	if len(names) == 1 {
		if _, ok := cfg.Processors[names[0]]; !ok && names[0] != route.DefaultName {
			return c.Fail(stderr, "no processor %q in the configuration (configured: %s)", names[0], strings.Join(all, ", "))
		}
		all = names
	}
	var keys *vault.Keyring // opened once, only if a secret is sealed; never made here
	failed := 0
	for _, name := range all {
		ctx, cancel := context.WithTimeout(context.Background(), *timeout)
		line, err := processors.Check(ctx, cfg, name, &keys)
		cancel()
		if err != nil {
			failed++
			fmt.Fprintf(stdout, "%s: %s\n", name, err)
			continue
		}
		fmt.Fprintf(stdout, "%s: ok%s\n", name, line)
	}
	if failed > 0 {
		fmt.Fprintf(stderr, "surgepay processors check: %d of %d failed\n", failed, len(all))
		return 1
	}
	return cli.ExitOK
}
