// Package processors opens the processors a configuration names: the
// [provider] simulator, a connector per [processors.NAME] with its secrets
// sealed under the card vault's keyring, and the router in front of them
// that follows the merchants' routes; and checks each one's credentials
// with a harmless call.
package processors

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/cache"
	"github.com/surgepay/surgepay/config"
	"github.com/surgepay/surgepay/provider/route"
	"github.com/surgepay/surgepay/provider/sim"
	"github.com/surgepay/surgepay/provider/stripe"
	"github.com/surgepay/surgepay/vault"
)

// Unseal returns a processor's secret key in the clear: sealed ones
// are opened with the keyring (the processor's name is bound to it).
func Unseal(keys *vault.Keyring, name string, s cache.Secret) (string, error) {
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

// Seal seals a processor's secret key for the configuration file.
func Seal(keys *vault.Keyring, name, secret string) (string, error) {
	b, err := keys.Encrypt([]byte(secret), []byte("processor/"+name))
	if err != nil {
		return "", err
	}
	return config.SealedPrefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// Set builds the router's processors from the configuration,
// reusing a connector whose configuration did not change (its pooled
// connections), and the merchants' routes.
type Set struct {
	built     map[string]builtProcessor
	forSettle bool
}

type builtProcessor struct {
	cfg config.ProcessorConfig
	p   surgepay.Provider
}

func (ps *Set) Build(cfg config.Config, keys *vault.Keyring, def surgepay.Provider, wrap func(surgepay.Provider) surgepay.Provider) ([]route.Processor, error) {
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
			secret, err := Unseal(keys, name, pc.SecretKey)
			if err != nil {
				return nil, err
			}
			whsec, err := Unseal(keys, name, pc.WebhookSecret)
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

// Routes returns the merchants' routes from their settings.
func Routes(settingsFor func(string) surgepay.MerchantSettings) func(string) route.Route {
	return func(merchantID string) route.Route {
		s := settingsFor(merchantID)
		r := route.Route{Processors: s.Processors}
		for _, pr := range s.Routes {
			r.Rules = append(r.Rules, route.Rule{Currency: strings.ToLower(pr.Currency), Brand: pr.Brand, Processors: pr.Processors})
		}
		return r
	}
}

// OpenRouter puts the configured processors in front of def (the
// [provider] section, as "default"): each connector is wrapped by wrap
// (telemetry), the router reports to obs. forSettle gives each processor
// its settle budget instead of the API's.
func OpenRouter(cfg config.Config, keys *vault.Keyring, def surgepay.Provider, wrap func(surgepay.Provider) surgepay.Provider,
	obs route.Observer, routes func(string) route.Route, forSettle bool) (*route.Router, *Set, error) {
	ps := &Set{forSettle: forSettle}
	procs, err := ps.Build(cfg, keys, def, wrap)
	if err != nil {
		return nil, nil, err
	}
	r := route.New(obs)
	if err := r.Set(procs, routes); err != nil {
		return nil, nil, err
	}
	return r, ps, nil
}

// Check checks one processor; the error says what is wrong.
func Check(ctx context.Context, cfg config.Config, name string, keys **vault.Keyring) (string, error) {
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
			k, err := KeyringNoCreate(cfg)
			if err != nil {
				return "", err
			}
			*keys = k
		}
		var err error
		if secret, err = Unseal(*keys, name, pc.SecretKey); err != nil {
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

// KeyringNoCreate opens serve's keyring; a missing one is an error
// (a sealed secret needs the keyring that sealed it).
func KeyringNoCreate(cfg config.Config) (*vault.Keyring, error) {
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
	defer res.Body.Close() //nolint:errcheck // read-only: closing loses nothing
	// Drained only so the connection can be reused; the status decides.
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 1<<10))
	if res.StatusCode != http.StatusOK {
		return "", fmt.Errorf("the simulator at %s answered %s to /healthz", base, res.Status)
	}
	return " (the simulator at " + base + ")", nil
}

// KeyringForSeal opens the keyring serve reads with cfg and the same
// environment, and says where it is. SURGEPAY_KEYRING is serve's when
// set. Otherwise keyring_file: made there when missing only while serve
// has not run with this data_dir yet (no embedded database), since serve
// would then make it in the same place; a missing keyring beside serve's
// database means serve reads another one (SURGEPAY_KEYRING, another
// keyring_file or working folder), and seals made now would not open:
// refused, with where to look. A relative data_dir is resolved against
// the working folder, which is said, since serve resolves it against its
// own.
func KeyringForSeal(cfg config.Config) (*vault.Keyring, string, error) {
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

// UnknownToSettle is settle's default processor when [provider] is the
// in-process simulator: it knows no authorization serve made, so every
// call is refused as not performed (the record stays staged) rather than
// declined by a simulator that never saw it.
type UnknownToSettle struct{}

func (UnknownToSettle) refuse(op string) error {
	return &surgepay.ProviderError{Outcome: surgepay.NotPerformed, Op: op,
		Err: errors.New("provider.kind = \"sim\" runs inside serve; settle cannot reach it (use sim-http)")}
}
func (u UnknownToSettle) Authorize(context.Context, *surgepay.AuthorizeRequest) (*surgepay.ProviderResult, error) {
	return nil, u.refuse("authorize")
}
func (u UnknownToSettle) Capture(context.Context, *surgepay.CaptureRequest) (*surgepay.ProviderResult, error) {
	return nil, u.refuse("capture")
}
func (u UnknownToSettle) Void(context.Context, *surgepay.VoidRequest) (*surgepay.ProviderResult, error) {
	return nil, u.refuse("void")
}
func (u UnknownToSettle) Refund(context.Context, *surgepay.RefundRequest) (*surgepay.ProviderResult, error) {
	return nil, u.refuse("refund")
}
func (u UnknownToSettle) Lookup(context.Context, string) (*surgepay.ProviderResult, error) {
	return nil, &surgepay.ProviderError{Outcome: surgepay.Unknown, Op: "lookup", Err: u.refuse("lookup")}
}

// OpenProvider opens [provider]: the card-network simulator, in process
// or over HTTP.
func OpenProvider(cfg config.Config) (surgepay.Provider, error) {
	pc := cfg.Provider
	if pc.Kind == "sim-http" {
		return sim.NewClient(pc.URL, sim.NewHTTPClient(pc.Timeout.Duration))
	}
	sc := sim.DefaultConfig()
	lat, err := sim.ParseLatency(pc.Latency)
	if err != nil {
		return nil, fmt.Errorf("config provider.latency: %w", err)
	}
	sc.Latency, sc.DeclineRate, sc.TimeoutRate, sc.UnknownRate = lat, pc.DeclineRate, pc.TimeoutRate, pc.UnknownRate
	sc.RecordsMax, sc.Retention = pc.RecordsMax, sim.Duration(pc.RecordsRetention.Duration)
	if err := sc.Validate(); err != nil {
		return nil, fmt.Errorf("config provider: %w", err)
	}
	return sim.New(sc), nil
}

// OpenForSettle is [provider], behind the [processors] when some are
// configured: a staged capture goes to the processor its authorization
// names, within the processor's settle budget. A sealed secret needs the
// card vault's keyring (SURGEPAY_KEYRING or keyring_file); give settle
// its processors' keys by env instead to keep the keyring off the
// settlement host. The SettleReloader rebuilds the [processors] when the
// configuration changes (nil without [processors] at start).
func OpenForSettle(cfg config.Config) (surgepay.Provider, *SettleReloader, error) {
	if len(cfg.Processors) == 0 {
		p, err := OpenProvider(cfg)
		return p, nil, err
	}
	var def surgepay.Provider = UnknownToSettle{}
	if cfg.Provider.Kind != "sim" {
		p, err := OpenProvider(cfg)
		if err != nil {
			return nil, nil, err
		}
		def = p
	}
	rl := &SettleReloader{def: def}
	if err := rl.openKeyring(cfg); err != nil {
		return nil, nil, err
	}
	r, set, err := OpenRouter(cfg, rl.keys, def, noWrap, nil, noRoutes, true)
	if err != nil {
		return nil, nil, err
	}
	rl.router, rl.set = r, set
	return r, rl, nil
}

func noWrap(p surgepay.Provider) surgepay.Provider { return p }

// noRoutes: settle routes nothing new; every capture goes where its
// authorization was made.
func noRoutes(string) route.Route { return route.Route{} }

// SettleReloader rebuilds settle's [processors] (OpenForSettle) from a
// new configuration, as serve does on a reload, so that a continuous
// settle follows a processor's rolled or re-sealed secret_key without a
// restart. Not safe for concurrent use with itself.
type SettleReloader struct {
	router *route.Router
	set    *Set
	def    surgepay.Provider
	keys   *vault.Keyring // nil until a sealed secret needs it.
}

// openKeyring reads the keyring the first time a sealed secret needs it
// (SURGEPAY_KEYRING, else keyring_file), and reads its file again after.
func (rl *SettleReloader) openKeyring(cfg config.Config) error {
	fromEnv := os.Getenv(vault.EnvVar)
	switch {
	case !cfg.NeedsKeyring():
		return nil
	case rl.keys == nil && fromEnv != "":
		keys, err := vault.FromEnv(fromEnv)
		if err != nil {
			return fmt.Errorf("a processor's secret_key is sealed and the keyring cannot be read: %w", err)
		}
		rl.keys = keys
	case rl.keys == nil:
		keys, err := vault.Load(cfg.KeyringFile)
		if err != nil {
			return fmt.Errorf("a processor's secret_key is sealed and the keyring cannot be read: %w", err)
		}
		rl.keys = keys
	case fromEnv == "":
		if _, err := rl.keys.Reload(cfg.KeyringFile); err != nil {
			return fmt.Errorf("the keyring cannot be read again: %w", err)
		}
	}
	return nil
}

// Reload builds the [processors] of cfg again: a processor whose settings
// did not change keeps its connections and breaker; one whose secret_key
// changed (rolled at the processor, or sealed again under a rotated
// keyring, whose file is read again first) is connected anew. On an error
// the running processors stay. Adding the first [processors], or changing
// [provider], takes a restart.
func (rl *SettleReloader) Reload(cfg config.Config) error {
	if len(cfg.Processors) == 0 {
		return errors.New("settle started with [processors] and runs with them until restarted")
	}
	if err := rl.openKeyring(cfg); err != nil {
		return err
	}
	procs, err := rl.set.Build(cfg, rl.keys, rl.def, noWrap)
	if err != nil {
		return err
	}
	return rl.router.Set(procs, noRoutes)
}
