package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/cache"
	"github.com/surgepay/surgepay/config"
	"github.com/surgepay/surgepay/internal/cli"
	"github.com/surgepay/surgepay/provider/route"
	"github.com/surgepay/surgepay/provider/stripe"
	"github.com/surgepay/surgepay/vault"
)

// unsealSecret returns a processor's secret key in the clear: sealed ones
// are opened with the keyring (the processor's name is bound to it).
func unsealSecret(keys *vault.Keyring, name string, s cache.Secret) (string, error) {
	v := string(s)
	if !strings.HasPrefix(v, config.SealedPrefix) {
		return v, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(v, config.SealedPrefix))
	if err != nil {
		return "", fmt.Errorf("processors.%s.secret_key: not a sealed secret", name)
	}
	plain, err := keys.Decrypt(b, []byte("processor/"+name))
	if err != nil {
		return "", fmt.Errorf("processors.%s.secret_key: cannot be opened with this keyring (sealed for another processor name or keyring?)", name)
	}
	return string(plain), nil
}

// sealSecret seals a processor's secret key for the configuration file.
func sealSecret(keys *vault.Keyring, name, secret string) (string, error) {
	b, err := keys.Encrypt([]byte(secret), []byte("processor/"+name))
	if err != nil {
		return "", err
	}
	return config.SealedPrefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// processorSet builds the router's processors from the configuration,
// reusing a connector whose configuration did not change (its pooled
// connections), and the merchants' routes.
type processorSet struct {
	built     map[string]builtProcessor
	forSettle bool
}

type builtProcessor struct {
	cfg config.ProcessorConfig
	p   surgepay.Provider
}

func (ps *processorSet) processors(cfg config.Config, keys *vault.Keyring, def surgepay.Provider, wrap func(surgepay.Provider) surgepay.Provider) ([]route.Processor, error) {
	out := []route.Processor{{Name: route.DefaultName, Provider: def}}
	next := make(map[string]builtProcessor, len(cfg.Processors))
	names := make([]string, 0, len(cfg.Processors))
	for n := range cfg.Processors {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, name := range names {
		pc := cfg.Processors[name]
		b, ok := ps.built[name]
		if !ok || b.cfg != pc {
			secret, err := unsealSecret(keys, name, pc.SecretKey)
			if err != nil {
				return nil, err
			}
			whsec, err := unsealSecret(keys, name, pc.WebhookSecret)
			if err != nil {
				return nil, err
			}
			conn, err := stripe.New(stripe.Config{SecretKey: secret, BaseURL: pc.BaseURL, CallTimeout: pc.Timeout.Duration,
				ConnsPerHostMax: pc.ConnsMax, RetriesMax: pc.RetriesMax, SearchLag: pc.SearchLag.Duration, Name: name,
				WebhookSecret: whsec})
			if err != nil {
				return nil, fmt.Errorf("processors.%s: %w", name, err)
			}
			b = builtProcessor{cfg: pc, p: wrap(conn)}
		}
		next[name] = b
		inflight := pc.InflightMax
		if inflight == 0 {
			inflight = pc.ConnsMax
		}
		rate := pc.CallsPerSecond
		if ps.forSettle && pc.SettleCallsPerSecond > 0 {
			rate = pc.SettleCallsPerSecond
		}
		out = append(out, route.Processor{Name: name, Provider: b.p, CallsPerSecond: rate, Burst: pc.Burst,
			InflightMax: inflight, BudgetWait: pc.BudgetWait.Duration, AuthorizeCalls: stripe.AuthorizeCalls})
	}
	ps.built = next
	return out, nil
}

// routesOf returns the merchants' routes from their settings.
func routesOf(settingsFor func(string) surgepay.MerchantSettings) func(string) route.Route {
	return func(merchantID string) route.Route {
		s := settingsFor(merchantID)
		r := route.Route{Processors: s.Processors}
		for _, pr := range s.Routes {
			r.Rules = append(r.Rules, route.Rule{Currency: strings.ToLower(pr.Currency), Brand: pr.Brand, Processors: pr.Processors})
		}
		return r
	}
}

// stdin is what `surgepay processors seal` reads (a test replaces it).
var stdin io.Reader = os.Stdin

// cmdProcessors is `surgepay processors seal|check`.
func cmdProcessors(args []string, stdout, stderr io.Writer) int {
	sub, code, ok := cli.Subcommand(args, "processors", processorsUsage, []string{"seal", "check"}, stdout, stderr)
	if !ok {
		return code
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
	if cfg.Path() == "" && fileExists("surgepay.toml") {
		fmt.Fprintln(stderr, "surgepay processors seal: ./surgepay.toml is not read without --config (nor by serve): the defaults apply")
	}
	keys, where, err := keyringForSeal(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "surgepay processors seal: %v\n", err)
		return 1
	}
	sealed, err := sealSecret(keys, *name, secret)
	if err != nil {
		fmt.Fprintf(stderr, "surgepay: %v\n", err)
		return 1
	}
	fmt.Fprintf(stderr, "surgepay processors seal: sealed with %s\n", where)
	fmt.Fprintf(stdout, "secret_key = %q\n", sealed)
	return cli.ExitOK
}

// keyringForSeal opens the keyring serve reads with cfg and the same
// environment, and says where it is. SURGEPAY_KEYRING is serve's when
// set. Otherwise keyring_file: made there when missing only while serve
// has not run with this data_dir yet (no embedded database), since serve
// would then make it in the same place; a missing keyring beside serve's
// database means serve reads another one (SURGEPAY_KEYRING, another
// keyring_file or working folder), and seals made now would not open:
// refused, with where to look. A relative data_dir is resolved against
// the working folder, which is said, since serve resolves it against its
// own.
func keyringForSeal(cfg config.Config) (*vault.Keyring, string, error) {
	if v := os.Getenv(vault.EnvVar); v != "" {
		k, err := vault.FromEnv(v)
		return k, "the keyring in $" + vault.EnvVar, err
	}
	file, err := filepath.Abs(cfg.KeyringFile)
	if err != nil {
		return nil, "", err
	}
	relative := ""
	if !filepath.IsAbs(cfg.KeyringFile) {
		relative = " (keyring_file, data_dir are relative: serve must run from this folder)"
	}
	if _, err := os.Stat(file); err == nil {
		k, err := vault.Load(file)
		return k, "the keyring " + file + relative, err
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, "", err
	}
	if cfg.Storage != "postgres" {
		if db, _ := filepath.Abs(cfg.SQLite.Path); fileExists(db) {
			return nil, "", fmt.Errorf("no keyring at %s%s, though serve's database %s is there: serve reads its keyring "+
				"elsewhere ($%s, or keyring_file in its configuration); run seal with serve's --config and environment",
				file, relative, db, vault.EnvVar)
		}
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return nil, "", fmt.Errorf("keyring folder: %w", err)
	}
	k, _, err := vault.LoadOrCreate(file)
	return k, "a new keyring " + file + relative + ", which serve with this configuration will use", err
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

const processorsUsage = `Usage: surgepay processors seal --name NAME [--config FILE]
       surgepay processors check [NAME] [--config FILE]

seal prints a processor's secret key sealed under the card vault's
keyring, for its [processors.NAME] section; check verifies each
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
		line, err := checkProcessor(ctx, cfg, name, &keys)
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

// checkProcessor checks one processor; the error says what is wrong.
func checkProcessor(ctx context.Context, cfg config.Config, name string, keys **vault.Keyring) (string, error) {
	if name == route.DefaultName {
		if cfg.Provider.Kind != "sim-http" {
			return " (the in-process simulator, [provider] kind = \"" + cfg.Provider.Kind + "\")", nil
		}
		return checkSimulator(ctx, cfg.Provider.URL)
	}
	pc := cfg.Processors[name]
	secret := string(pc.SecretKey)
	if strings.HasPrefix(secret, config.SealedPrefix) {
		if *keys == nil {
			k, err := openKeyringNoCreate(cfg)
			if err != nil {
				return "", err
			}
			*keys = k
		}
		var err error
		if secret, err = unsealSecret(*keys, name, pc.SecretKey); err != nil {
			return "", err
		}
	}
	conn, err := stripe.New(stripe.Config{SecretKey: secret, BaseURL: pc.BaseURL, CallTimeout: pc.Timeout.Duration,
		ConnsPerHostMax: 1, RetriesMax: -1, Name: name})
	if err != nil {
		return "", err
	}
	if err := conn.Check(ctx); err != nil {
		return "", errors.New(stripe.CheckProblem(err))
	}
	where := "Stripe"
	if pc.BaseURL != "" {
		where = pc.BaseURL
	}
	if mode := conn.Mode(); mode != "" {
		return fmt.Sprintf(" (%s mode key, %s)", mode, where), nil
	}
	return " (" + where + ")", nil
}

// openKeyringNoCreate opens serve's keyring; a missing one is an error
// (a sealed secret needs the keyring that sealed it).
func openKeyringNoCreate(cfg config.Config) (*vault.Keyring, error) {
	if v := os.Getenv(vault.EnvVar); v != "" {
		return vault.FromEnv(v)
	}
	k, err := vault.Load(cfg.KeyringFile)
	if errors.Is(err, fs.ErrNotExist) {
		abs, _ := filepath.Abs(cfg.KeyringFile)
		return nil, fmt.Errorf("secret_key is sealed, but there is no keyring at %s (nor $%s): run check with serve's --config and environment", abs, vault.EnvVar)
	}
	return k, err
}

// checkSimulator asks the simulator over HTTP for its /healthz.
func checkSimulator(ctx context.Context, base string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+"/healthz", nil)
	if err != nil {
		return "", err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", errors.New(stripe.CheckProblem(err))
	}
	defer res.Body.Close()
	io.Copy(io.Discard, io.LimitReader(res.Body, 1<<10))
	if res.StatusCode != http.StatusOK {
		return "", fmt.Errorf("the simulator at %s answered %s to /healthz", base, res.Status)
	}
	return " (the simulator at " + base + ")", nil
}

// openRouter puts the configured processors in front of def (the
// [provider] section, as "default"): each connector is wrapped by wrap
// (telemetry), the router reports to obs. forSettle gives each processor
// its settle budget instead of the API's.
func openRouter(cfg config.Config, keys *vault.Keyring, def surgepay.Provider, wrap func(surgepay.Provider) surgepay.Provider,
	obs route.Observer, routes func(string) route.Route, forSettle bool) (*route.Router, *processorSet, error) {
	ps := &processorSet{forSettle: forSettle}
	procs, err := ps.processors(cfg, keys, def, wrap)
	if err != nil {
		return nil, nil, err
	}
	r := route.New(obs)
	if err := r.Set(procs, routes); err != nil {
		return nil, nil, err
	}
	return r, ps, nil
}

// unknownToSettle is settle's default processor when [provider] is the
// in-process simulator: it knows no authorization serve made, so every
// call is refused as not performed (the record stays staged) rather than
// declined by a simulator that never saw it.
type unknownToSettle struct{}

func (unknownToSettle) refuse(op string) error {
	return &surgepay.ProviderError{Outcome: surgepay.NotPerformed, Op: op,
		Err: errors.New("provider.kind = \"sim\" runs inside serve; settle cannot reach it (use sim-http)")}
}
func (u unknownToSettle) Authorize(context.Context, *surgepay.AuthorizeRequest) (*surgepay.ProviderResult, error) {
	return nil, u.refuse("authorize")
}
func (u unknownToSettle) Capture(context.Context, *surgepay.CaptureRequest) (*surgepay.ProviderResult, error) {
	return nil, u.refuse("capture")
}
func (u unknownToSettle) Void(context.Context, *surgepay.VoidRequest) (*surgepay.ProviderResult, error) {
	return nil, u.refuse("void")
}
func (u unknownToSettle) Refund(context.Context, *surgepay.RefundRequest) (*surgepay.ProviderResult, error) {
	return nil, u.refuse("refund")
}
func (u unknownToSettle) Lookup(context.Context, string) (*surgepay.ProviderResult, error) {
	return nil, &surgepay.ProviderError{Outcome: surgepay.Unknown, Op: "lookup", Err: u.refuse("lookup")}
}
