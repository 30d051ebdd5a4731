package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/admin"
	"github.com/surgepay/surgepay/api"
	"github.com/surgepay/surgepay/cache"
	"github.com/surgepay/surgepay/config"
	"github.com/surgepay/surgepay/console"
	"github.com/surgepay/surgepay/engine"
	"github.com/surgepay/surgepay/groupcommit"
	"github.com/surgepay/surgepay/internal/cli"
	"github.com/surgepay/surgepay/internal/datadir"
	"github.com/surgepay/surgepay/internal/memlimit"
	"github.com/surgepay/surgepay/internal/ops"
	"github.com/surgepay/surgepay/internal/upkeep"
	"github.com/surgepay/surgepay/postgres"
	"github.com/surgepay/surgepay/provider/processors"
	"github.com/surgepay/surgepay/provider/route"
	"github.com/surgepay/surgepay/provider/sim"
	"github.com/surgepay/surgepay/sqlite"
	"github.com/surgepay/surgepay/stage"
	"github.com/surgepay/surgepay/stage/jetstream"
	"github.com/surgepay/surgepay/tax"
	"github.com/surgepay/surgepay/telemetry"
	"github.com/surgepay/surgepay/tlsconfig"
	"github.com/surgepay/surgepay/vault"
)

// app is the wired engine and its dependencies.
type app struct {
	cfg   config.Config
	log   *slog.Logger
	store surgepay.Store
	keys  *vault.Keyring
	tax   surgepay.TaxTable
	eng   *engine.Engine
	tel   *telemetry.Telemetry
	hooks *appWebhooks // nil if the store has no webhooks
	// router and processors are set when [processors] are configured;
	// def is then the [provider] section, the router's "default".
	router     *route.Router
	processors *processors.Set
	def        surgepay.Provider
	// api is the API handler, set by serve: reloads change its
	// merchant_inflight_max.
	api    *api.Server
	closer []func()
	// certs is the listeners' TLS certificate (nil: plain HTTP) and
	// creds the admin listener's tokens (nil: no admin listener); both
	// are read again on SIGHUP (reloadListeners).
	certs *tlsconfig.CertReloader
	creds *admin.Credentials
}

func (a *app) Close() {
	for i := len(a.closer) - 1; i >= 0; i-- {
		a.closer[i]()
	}
}

// configFlags returns the command line of `surgepay name` with its
// --config flag.
func configFlags(name, usage string) (*cli.Command, *string) {
	c := cli.New(name, usage)
	path := c.Flags.String("config", "", "TOML config `FILE` (default: $SURGEPAY_CONFIG)")
	return c, path
}

func newLogger(cfg config.Config, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.LogLevel))
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "text" {
		return slog.New(telemetry.RedactingHandler(slog.NewTextHandler(w, opts)))
	}
	return slog.New(telemetry.RedactingHandler(slog.NewJSONHandler(w, opts)))
}

// openApp opens the store, keyring, tax table, provider and engine.
func openApp(ctx context.Context, cfg config.Config, log *slog.Logger) (*app, error) {
	a := &app{cfg: cfg, log: log}
	ok := false
	defer func() {
		if !ok {
			a.Close()
		}
	}()
	if err := datadir.Ensure(cfg.DataDir, log); err != nil {
		return nil, err
	}
	var err error
	if a.keys, err = openKeyring(cfg, log); err != nil {
		return nil, err
	}
	if a.tax, err = openTax(cfg); err != nil {
		return nil, err
	}
	if a.tel, err = telemetry.New(cfg.Telemetry, telemetry.Options{}); err != nil {
		return nil, err
	}
	a.closer = append(a.closer, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = a.tel.Shutdown(sctx) // at exit: an export cut short by the timeout is no reason to fail the shutdown
	})
	if f := cfg.FlightRecorder; f.Enabled {
		fr, err := telemetry.StartFlightRecorder(telemetry.FlightConfig{Dir: f.Dir, Window: f.Window.Duration,
			BytesMax: uint64(f.BytesMaxMiB) << 20, Every: f.Every.Duration, FilesMax: f.FilesMax, Logger: log}) //nolint:gosec // G115: Validate keeps BytesMaxMiB within 1..1024
		if err != nil {
			return nil, err
		}
		a.tel.SetFlightRecorder(fr)
		a.closer = append(a.closer, fr.Stop)
	}
	if a.store, err = openStoreObserved(ctx, cfg, a.tel, log); err != nil {
		return nil, err
	}
	a.closer = append(a.closer, func() { _ = a.store.Close() }) // every write was committed and answered before; Close releases connections
	if err := a.registerStore(); err != nil {
		return nil, err
	}
	prov, err := processors.OpenProvider(cfg)
	if err != nil {
		return nil, err
	}
	simulator, _ := prov.(*sim.Provider)
	prov = a.tel.WrapProvider(prov)
	if prov, err = a.openProcessors(cfg, prov); err != nil {
		return nil, err
	}
	sealer, st, err := a.openStage(ctx)
	if err != nil {
		return nil, err
	}
	c, err := cache.New(cfg.Cache, cache.WithLogger(log),
		cache.WithNotFound(func(err error) bool { return surgepay.ErrorCode(err) == surgepay.ENOTFOUND },
			func(entity, key string) error { return surgepay.NotFound("id", entity) }))
	if err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	a.closer = append(a.closer, c.Close)
	if err := a.tel.RegisterCache(func() []telemetry.CacheStat { return cacheStats(c) }); err != nil {
		return nil, err
	}
	a.openWebhooks()
	a.eng, err = engine.New(engine.Config{Store: a.tel.WrapStore(a.store), Provider: prov, Vault: a.keys,
		Sealer: sealer, Stage: st, StageFallback: cfg.Stage.Fallback,
		Tax: func() surgepay.TaxTable { return a.tax }, Logger: log,
		IdempotencyRetention: cfg.IdempotencyRetention.Duration, Cache: c,
		Webhooks: a.webhookStore(), Outbox: a.webhookOutbox(),
		OnPayment: a.tel.PaymentObserver(), PreheatPaymentMethodsMax: cfg.PreheatPaymentMethodsMax})
	if err != nil {
		return nil, err
	}
	a.eng.SetSettings(cfg.MerchantSettings())
	if simulator != nil { // its dispute webhooks (amount 9105) go straight to the engine
		simulator.OnEvent(func(ctx context.Context, payload []byte, header http.Header) bool {
			res, err := a.eng.ApplyProcessorEvent(ctx, route.DefaultName, payload, header)
			return err != nil || res == engine.EventUnknownPayment
		})
	}
	ok = true
	return a, nil
}

// storeReachableTimeout bounds the store probe of /readyz.
const storeReachableTimeout = time.Second

// storeReachable reports whether the store answers a read: one indexed
// SELECT, on the store's own probe connection where it has one (SQLite:
// not behind the API's reads), else a lookup of a merchant that does not exist.
func (a *app) storeReachable(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, storeReachableTimeout)
	defer cancel()
	if p, ok := a.store.(interface{ Probe(context.Context) error }); ok {
		return p.Probe(ctx) == nil
	}
	_, err := a.store.FindMerchant(ctx, "mer_readiness_probe")
	return err == nil || surgepay.ErrorCode(err) == surgepay.ENOTFOUND
}

// writesOverloaded returns the store's Overloaded (its writer's queue
// stands above queue_delay_target), nil for a store without one.
func writesOverloaded(store any) func() bool {
	if o, ok := store.(interface{ Overloaded() bool }); ok {
		return o.Overloaded
	}
	return nil
}

// registerStore reports the store's group commits to telemetry and, for
// the embedded stage, its staged backlog (openStage reports JetStream's).
func (a *app) registerStore() error {
	if db, ok := a.store.(*sqlite.DB); ok {
		if err := errors.Join(a.tel.RegisterIdemFilter(func() telemetry.IdemFilterStat {
			return telemetry.IdemFilterStat(db.IdempotencyFilterStats())
		}), a.tel.RegisterCommitPhases(db.CommitPhaseSeconds), a.tel.RegisterCheckpoints(func() telemetry.CheckpointStat {
			return telemetry.CheckpointStat(db.CheckpointStats())
		})); err != nil {
			return err
		}
	}
	if a.cfg.Stage.Kind != "jetstream" {
		return a.tel.RegisterStore(a.store)
	}
	if gc, ok := a.store.(interface {
		CommitStats() groupcommit.Stats
		QueueDepth() int
	}); ok {
		return a.tel.RegisterGroupCommit(telemetry.GroupCommit{Stats: gc.CommitStats, QueueDepth: gc.QueueDepth})
	}
	return nil
}

// openStage returns the sealer and the external stage of the streamlined
// path: no sealer (the path is off) without a settlement public key, and
// no external stage for the embedded one.
func (a *app) openStage(ctx context.Context) (surgepay.Sealer, surgepay.Stage, error) {
	cfg := a.cfg
	if cfg.Stage.PublicKeyFile == "" && os.Getenv(stage.EnvPublicKey) == "" {
		set := cfg.MerchantSettings()
		streamlined := set.Default.Processing == surgepay.PathStreamlined
		for _, m := range set.Merchants {
			streamlined = streamlined || m.Processing == surgepay.PathStreamlined
		}
		if streamlined {
			a.log.Warn("merchants are set to the streamlined path but no settlement public key is configured " +
				"(stage.public_key_file): they take the standard path")
		}
		return nil, nil, nil
	}
	pub, err := stage.PublicKeyFrom(cfg.Stage.PublicKeyFile, os.Getenv)
	if err != nil {
		return nil, nil, fmt.Errorf("settlement public key: %w", err)
	}
	sealer, err := stage.NewSealer(pub)
	if err != nil {
		return nil, nil, err
	}
	if cfg.Stage.Kind != "jetstream" {
		return sealer, nil, nil
	}
	js, err := jetstream.Open(ctx, cfg.Stage.JetStream())
	if err != nil {
		return nil, nil, fmt.Errorf("stage: %w", err)
	}
	a.closer = append(a.closer, func() { _ = js.Close() }) // at exit: the stage's writes were acknowledged when made
	// The backlog waiting for settlement, on the dashboard and in /metrics
	// (the embedded stage is reported by the store).
	err = a.tel.RegisterStage(func(ctx context.Context) (telemetry.StageStat, error) {
		depth, oldest, err := js.Backlog(ctx)
		st := telemetry.StageStat{Depth: depth}
		if !oldest.IsZero() {
			st.OldestAge = time.Since(oldest)
		}
		return st, err
	})
	if err != nil {
		return nil, nil, err
	}
	return sealer, js, nil
}

func openKeyring(cfg config.Config, log *slog.Logger) (*vault.Keyring, error) {
	if v := os.Getenv(vault.EnvVar); v != "" {
		return vault.FromEnv(v)
	}
	k, created, err := vault.LoadOrCreate(cfg.KeyringFile)
	if err != nil {
		return nil, err
	}
	if created {
		log.Info("created card vault keyring", "file", cfg.KeyringFile)
	}
	return k, nil
}

func openTax(cfg config.Config) (surgepay.TaxTable, error) {
	path := cfg.TaxTable
	if path == "" {
		imported := filepath.Join(cfg.DataDir, "tax-rates.csv")
		if _, err := os.Stat(imported); err == nil {
			path = imported
		}
	}
	if path == "" {
		return tax.Sample(), nil
	}
	t, err := tax.LoadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tax table %s: %w", path, err)
	}
	return t, nil
}

func openStore(ctx context.Context, cfg config.Config) (surgepay.Store, error) {
	return openStoreObserved(ctx, cfg, nil, nil)
}

// openStoreObserved opens the store with its group commits and (on
// PostgreSQL) its queries observed by tel, and (on SQLite) slow commits
// logged to log; either may be nil.
func openStoreObserved(ctx context.Context, cfg config.Config, tel *telemetry.Telemetry, log *slog.Logger) (surgepay.Store, error) {
	return openStoreWith(ctx, cfg, tel, log, 0)
}

// hungAfter maps postgres.hung_after ("0s": no watch) to
// postgres.Config.HungAfter (negative: no watch; 0 would be its default).
func hungAfter(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// openStoreWith is openStoreObserved with the SQLite writer's
// sqlite.Config.WriteLockRetryMax (0: the default, which serve keeps;
// settle passes sqlite.WriteLockRetryYield).
func openStoreWith(ctx context.Context, cfg config.Config, tel *telemetry.Telemetry, log *slog.Logger, lockRetryMax time.Duration) (surgepay.Store, error) {
	var onBatch func(int, time.Duration)
	var onSlow func()
	var tracer pgx.QueryTracer
	if tel != nil {
		onBatch = tel.ObserveBatch
		// Read at each slow commit: serve starts its recorder after the store.
		onSlow = func() { tel.FlightRecorder().Trigger(telemetry.FlightSlowCommit) }
		if t := tel.PgxTracer(); t != nil {
			tracer = t
		}
	}
	if cfg.Storage == "postgres" {
		return postgres.Open(ctx, postgres.Config{DSN: cfg.Postgres.DSN, Schema: cfg.Postgres.Schema,
			PoolConnsMax: cfg.Postgres.PoolConnsMax, Writers: cfg.Postgres.Writers, BatchSizeMax: cfg.Postgres.BatchSizeMax,
			QueueDepthMax: cfg.Postgres.QueueDepthMax, FlushInterval: cfg.Postgres.FlushInterval.Duration,
			QueueDelayTarget: cfg.Postgres.QueueDelayTarget.Duration, OnBatch: onBatch, Tracer: tracer,
			HungAfter: hungAfter(cfg.Postgres.HungAfter.Duration), Log: log})
	}
	applyBudget := cfg.SQLite.ApplyBudget.Duration
	if applyBudget == 0 {
		applyBudget = -1 // off: sqlite's zero is its default
	}
	return sqlite.Open(ctx, sqlite.Config{Path: cfg.SQLite.Path, BatchSizeMax: cfg.SQLite.BatchSizeMax, ApplyBudget: applyBudget,
		QueueDepthMax: cfg.SQLite.QueueDepthMax, FlushInterval: cfg.SQLite.FlushInterval.Duration,
		ReadConnsMax: cfg.SQLite.ReadConnsMax, CheckpointInterval: cfg.SQLite.CheckpointInterval.Duration,
		WALPagesMax: cfg.SQLite.WALPagesMax, MmapSize: sqliteMmapSize(cfg.SQLite.MmapMiB), PageSize: cfg.SQLite.PageSize,
		IdempotencyFilterKeys: cfg.SQLite.IdempotencyFilterKeys,
		QueueDelayTarget:      cfg.SQLite.QueueDelayTarget.Duration, WriteLockRetryMax: lockRetryMax, OnBatch: onBatch,
		Logger: log, OnSlowCommit: onSlow})
}

// sqliteMmapSize turns sqlite.mmap_mib into sqlite.Config.MmapSize, where
// 0 would mean the default rather than off.
func sqliteMmapSize(mib int) int64 {
	if mib == 0 {
		return -1
	}
	return int64(mib) << 20
}

// openProcessors puts the configured [processors] in front of def, the
// [provider] section; without any, def is the provider alone. Routes are
// read from the engine's merchant settings at each payment, so a reload
// of the settings reroutes at once.
func (a *app) openProcessors(cfg config.Config, def surgepay.Provider) (surgepay.Provider, error) {
	if len(cfg.Processors) == 0 {
		return def, nil
	}
	obs, err := a.tel.ProcessorMetrics(append(slices.Sorted(maps.Keys(cfg.Processors)), route.DefaultName), a.log)
	if err != nil {
		return nil, err
	}
	routes := func(merchantID string) route.Route { return processors.Routes(a.eng.SettingsFor)(merchantID) }
	a.router, a.processors, err = processors.OpenRouter(cfg, a.keys, def, a.tel.WrapProvider, obs, routes, false)
	if err != nil {
		return nil, err
	}
	// Authorizations of merchants routed to several processors record
	// where they go before each call (route.Router.SetAttempts).
	if err := a.router.SetAttempts(a.store); err != nil {
		return nil, err
	}
	a.def = def
	return a.router, nil
}

// reloadProcessors rebuilds the processors from cfg (a connector whose
// section did not change is kept, with its connections, breaker and
// budget). It reports whether they were applied.
func (a *app) reloadProcessors(cfg config.Config) error {
	if a.router == nil {
		return nil
	}
	procs, err := a.processors.Build(cfg, a.keys, a.def, a.tel.WrapProvider)
	if err != nil {
		return err
	}
	return a.router.Set(procs, processors.Routes(a.eng.SettingsFor))
}

// cacheStats maps the cache's counters to telemetry's.
func cacheStats(c *cache.Cache) []telemetry.CacheStat {
	st := c.Stats()
	out := make([]telemetry.CacheStat, len(st))
	for i, s := range st {
		out[i] = telemetry.CacheStat{Entity: s.Entity, Scope: string(s.Scope), Hits: s.Hits, Misses: s.Misses,
			Loads: s.Loads, Evictions: s.Evictions, Fallbacks: s.Fallbacks, Entries: s.Entries, Bytes: s.Bytes}
	}
	return out
}

const serveUsage = `Usage: surgepay serve [--config FILE]

Runs the payments API (listen, default 127.0.0.1:8080) and the admin
listener (admin_listen, default 127.0.0.1:9090: metrics, dashboard, pprof)
until interrupted. It checks that it can listen on both before it creates
anything. The first start creates the data folder, a development merchant
and an API key (printed, and written to DATA_DIR/dev-api-key), and the
admin listener's token (DATA_DIR/admin-token). Beyond loopback it needs
TLS (tls.cert_file, tls.key_file; SIGHUP reloads them) or
tls.proxy_terminated. Configuration: README.md, etc/surgepay.toml,
docs/tls.md.
`

func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c, path := configFlags("serve", serveUsage)
	if code, ok := c.Parse(args, stdout, stderr); !ok {
		return code
	}
	cfg, err := config.Load(*path, os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "surgepay: %v\n", err)
		return 2
	}
	log := newLogger(cfg, stderr)
	defer memlimit.Apply(cfg.GCPercent, cfg.MemoryLimitMiB, os.Getenv, log)()
	if err := serve(ctx, cfg, log, stdout); err != nil {
		log.Error("serve", "err", err.Error())
		// The log line is for machines; this one is for the operator.
		fmt.Fprintf(stderr, "surgepay: %v\n", err)
		return 1
	}
	return 0
}

// listenError is a listener serve could not open, with the settings that
// choose its address.
type listenError struct {
	addr     string
	env, key string // the environment variable and the config file setting
	err      error
}

func (e *listenError) Error() string {
	what := fmt.Sprintf("cannot listen on %s: %v", e.addr, e.err)
	if errors.Is(e.err, syscall.EADDRINUSE) {
		what = e.addr + " is already in use"
	}
	return fmt.Sprintf("%s; set %s or %s in the config file", what, e.env, e.key)
}

func (e *listenError) Unwrap() error { return e.err }

// listen opens the API listener and, unless admin_listen is off, the
// admin listener (aln nil), or neither. An address beyond loopback needs
// TLS, or tls.proxy_terminated.
func listen(cfg config.Config) (ln, aln net.Listener, err error) {
	if err := tlsconfig.CheckPlainListen(cfg.TLS, "listen", cfg.Listen); err != nil {
		return nil, nil, err
	}
	if err := tlsconfig.CheckPlainListen(cfg.TLS, "admin_listen", cfg.AdminListen); err != nil {
		return nil, nil, err
	}
	ln, err = net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, nil, &listenError{addr: cfg.Listen, env: "SURGEPAY_LISTEN", key: "listen", err: err}
	}
	if cfg.AdminListen == "" {
		return ln, nil, nil
	}
	aln, err = net.Listen("tcp", cfg.AdminListen)
	if err != nil {
		_ = ln.Close() // the admin listener's error is the one to report
		return nil, nil, &listenError{addr: cfg.AdminListen, env: "SURGEPAY_ADMIN_LISTEN",
			key: `admin_listen (or "off")`, err: err}
	}
	return ln, aln, nil
}

// serve runs the API until ctx ends, then drains requests and flushes
// pending writes.
func serve(ctx context.Context, cfg config.Config, log *slog.Logger, out io.Writer) error {
	started := time.Now() // for the listening line's startup_seconds
	// SIGHUP means reload, from the start (opening, preheat) to the end of
	// the drain: never the default action, which ends the process. One
	// that arrives before the watcher runs is reloaded when it starts.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	// Listen first: a port in use (or a certificate that does not load)
	// must not leave a data folder, a merchant and an API key behind.
	tlsAPI, tlsAdmin, certs, err := tlsconfig.Listeners(cfg.TLS)
	if err != nil {
		return err
	}
	ln, aln, err := listen(cfg)
	if err != nil {
		return err
	}
	defer func() {
		_ = ln.Close() // after Serve, already closed
		if aln != nil {
			_ = aln.Close() // likewise
		}
	}()
	// The admin tokens are read (or made) before anything else: a token
	// file that others can read must stop serve before it creates and
	// prints a development merchant and key.
	var creds *admin.Credentials
	if aln != nil {
		if err := datadir.Ensure(cfg.DataDir, log); err != nil {
			return err
		}
		if creds, err = cfg.AdminCredentials(); err != nil {
			return err
		}
	}
	a, err := openApp(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer a.Close()
	a.certs, a.creds = certs, creds
	if cfg.DevMerchant {
		if err := (ops.Ops{Engine: a.eng, Store: a.store, Out: out}).EnsureDevMerchant(ctx, cfg.DataDir,
			tlsconfig.Scheme(a.certs != nil)+"://"+cfg.Listen); err != nil {
			return fmt.Errorf("development merchant: %w", err)
		}
	}
	if aln != nil {
		creds.Announce(out, tlsconfig.Scheme(tlsAdmin != nil)+"://"+aln.Addr().String())
	}
	if err := a.eng.Preheat(ctx); err != nil {
		return fmt.Errorf("preheat: %w", err)
	}
	shared, closeShared, err := openSharedRateLimiter(cfg, log)
	if err != nil {
		return err
	}
	defer closeShared()
	var sharedLimits api.SharedRateLimiter // nil, not a nil *ratelimit.Redis, when each node counts alone
	if shared != nil {
		sharedLimits = shared
		if a.router != nil {
			a.router.SetSharedBudget(shared) // processors' budgets: across the nodes too
		}
	}
	// Ready: serve takes traffic (set once listening, cleared on the
	// signal) and the store answers. /readyz on both listeners says it.
	var ready atomic.Bool
	isReady := func() bool { return ready.Load() && a.storeReachable(context.WithoutCancel(ctx)) }
	a.api = api.New(api.Config{Engine: a.eng, Logger: log, Debug: cfg.Debug, InflightMax: cfg.InflightMax,
		MerchantInflightMax: cfg.MerchantInflightMax, BodyReadTimeout: cfg.BodyReadTimeout.Duration, Telemetry: a.tel,
		SharedRateLimiter: sharedLimits, WritesOverloaded: writesOverloaded(a.store), Ready: isReady, TrustedProxies: cfg.TrustedProxyNets()})
	merchants := upkeep.NewMerchantCounter(a.eng, a.api.SetMerchantsEnabled, log)
	merchants.Count(ctx)
	conns := api.LimitConnections(ln, cfg.ConnectionsMaxEffective())
	if err := a.tel.RegisterConnections(conns); err != nil {
		return fmt.Errorf("connection metrics: %w", err)
	}
	srv := &http.Server{
		Handler: a.api,
		// The API sets each body's own read deadline (body_read_timeout)
		// once the request is admitted, and clears it once the body is
		// read; ReadTimeout bounds the other requests as before (also
		// their handlers: net/http's background read meets it and cancels
		// the request's context), at least readTimeoutMin.
		ReadHeaderTimeout: cfg.ReadHeaderTimeout.Duration,
		ReadTimeout:       max(readTimeoutMin, cfg.ReadHeaderTimeout.Duration+cfg.BodyReadTimeout.Duration),
		WriteTimeout:      60 * time.Second, IdleTimeout: 120 * time.Second, MaxHeaderBytes: 64 << 10,
		ErrorLog: tlsconfig.ErrorLog(log), TLSConfig: tlsAPI,
		ConnState: conns.ConnState, // which connections are idle, for connections_max
		// which connections are held for a refusal (api.ConnLimiter)
		ConnContext: conns.ConnContext,
	}
	var wg sync.WaitGroup
	// Background work and the admin listener outlive the signal: they stop
	// after the API has drained (see below), so that /readyz can say "not
	// ready" to a load balancer while the API still serves.
	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBG()
	var current atomic.Pointer[config.Config] // the effective configuration, replaced by reloads
	current.Store(&cfg)
	if aln != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := admin.Serve(bg, aln, admin.Config{Ready: isReady, Telemetry: a.tel,
				Config: func() any { return current.Load().View() }, Auth: cfg.AdminGuard(a.creds), TLS: tlsAdmin,
				AdminAPI: api.NewAdmin(api.AdminConfig{Engine: a.eng, Logger: log, Actor: admin.Actor,
					OnMerchantsChanged: merchants.Changed}), Console: console.New(console.Config{Engine: a.eng, Logger: log,
					Actor: admin.Actor, ReadOnly: admin.ReadOnly, SecureCookie: cfg.TLS.ProxyTerminated, ReconcileInterval: cfg.ReconcileInterval.Duration, ProcessorStates: a.tel.ProcessorStates})}, log); err != nil {
				log.Error("admin listener", "err", err.Error())
			}
		}()
	}
	wg.Add(5)
	go func() { defer wg.Done(); merchants.Run(bg, upkeep.MerchantCountInterval) }()
	go func() { defer wg.Done(); a.eng.RunKeyUseFlusher(bg, engine.KeyUseFlushIntervalDefault) }()
	go func() { defer wg.Done(); watchConfig(bg, a, &current, hup, log) }()
	go func() { defer wg.Done(); a.eng.RunReconciler(bg, cfg.ReconcileInterval.Duration) }()
	go func() { defer wg.Done(); upkeep.NewPurger(a.eng, a.tel, log).Run(bg, upkeep.PurgeInterval) }()
	// Keys revoked or expired, and merchants disabled, by the CLI or
	// another server: refused here within a second (docs/api-keys.md).
	wg.Add(1)
	go func() { defer wg.Done(); a.eng.RunCredentialsWatch(bg, 0) }()
	a.startWebhooks(bg, &wg)
	fmt.Fprintf(out, "surgepay listening on %s://%s (storage %s)\n", tlsconfig.Scheme(tlsAPI != nil), ln.Addr(), cfg.Storage)
	log.Info("listening", "addr", ln.Addr().String(), "storage", cfg.Storage, "provider", cfg.Provider.Kind, "tls", tlsAPI != nil,
		"startup_seconds", time.Since(started).Seconds())
	errc := make(chan error, 1)
	go func() { errc <- tlsconfig.ServeAPI(srv, conns) }()
	ready.Store(true)
	select {
	case err := <-errc:
		stopBG()
		wg.Wait()
		return err
	case <-ctx.Done():
	}
	// Not ready first: a load balancer stops sending here within
	// shutdown_delay, while the requests it still sends are served; then
	// the listener closes and the requests in flight finish.
	ready.Store(false)
	if d := cfg.ShutdownDelay.Duration; d > 0 {
		log.Info("not ready; serving for shutdown_delay before shutting down", "shutdown_delay", d)
		select {
		case <-time.After(d):
		case err := <-errc:
			stopBG()
			wg.Wait()
			return err
		}
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), cfg.DrainTimeout.Duration)
	defer cancel()
	if err = srv.Shutdown(sctx); errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("drain_timeout (%s) passed with requests still in flight, which were cut: %w", cfg.DrainTimeout.Duration, err)
	}
	stopBG()
	wg.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// readTimeoutMin is the http.Server's ReadTimeout unless
// read_header_timeout + body_read_timeout is longer: the 30 s it always
// was, before the body got its own deadline.
const readTimeoutMin = 30 * time.Second

// commandConfig loads and validates the configuration of a command whose
// flags are parsed, and makes its data folder. A code of 0 or more is the
// exit code of a failure, already reported on stderr; -1 means go on.
func commandConfig(path string, stderr io.Writer) (config.Config, int) {
	cfg, err := config.Load(path, os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "surgepay: %v\n", err)
		return config.Config{}, 2
	}
	if err := datadir.Ensure(cfg.DataDir, slog.New(slog.NewTextHandler(stderr, nil))); err != nil {
		fmt.Fprintf(stderr, "surgepay: %v\n", err)
		return config.Config{}, 1
	}
	return cfg, -1
}

const migrateUsage = `Usage: surgepay migrate [--config FILE]

Applies the database migrations of the configured store (SQLite in the data
folder, or PostgreSQL) and exits. serve applies them too.
`

func cmdMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c, path := configFlags("migrate", migrateUsage)
	if code, ok := c.Parse(args, stdout, stderr); !ok {
		return code
	}
	cfg, code := commandConfig(*path, stderr)
	if code >= 0 {
		return code
	}
	st, err := openStore(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "surgepay: %v\n", err)
		return 1
	}
	_ = st.Close() // the migrations are committed; Close releases connections
	fmt.Fprintf(stdout, "migrations applied (%s)\n", cfg.Storage)
	return 0
}

const keysUsage = `Usage:
  surgepay keys create [--merchant ID]    make a new API key (--scopes, --expires-in)
  surgepay keys list [--merchant ID]      list API keys: prefix, scopes, created, last used, expiry, revoked
  surgepay keys roll KEY_ID --grace D     make a new secret; the old one works for D more
  surgepay keys expire KEY_ID --expires-in D   set or bring forward a key's expiry
  surgepay keys revoke KEY_ID             revoke an API key for good
  surgepay keys rotate                    add a new card-vault key and make it primary
  surgepay keys reencrypt | retire KEY_ID   move stored cards to the primary key; then remove the old one
  surgepay keys rotate-signing | retire-signing KEY_ID   client-secret signing keys (docs/vault.md)
  surgepay keys make-primary KEY_ID       the second phase of a rotation across servers (rotate --add-only first)
  surgepay keys settlement --out DIR      make the settlement key pair

Run 'surgepay help keys COMMAND' for a command's flags.
`

func cmdKeys(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	sub, code, ok := cli.Subcommand(args, "keys", keysUsage,
		[]string{"create", "list", "roll", "expire", "revoke", "rotate", "rotate-signing", "retire-signing", "make-primary", "settlement",
			"reencrypt", "retire"}, stdout, stderr)
	switch {
	case !ok:
		return code
	case sub == "settlement":
		return cmdKeysSettlement(ctx, args[1:], stdout, stderr)
	case sub == "reencrypt" || sub == "retire": // beside running servers, which take the write lock first
		return ops.VaultKeysMain(ctx, sub, args[1:], stdout, stderr, func(ctx context.Context, cfg config.Config) (surgepay.Store, error) {
			return openStoreWith(ctx, cfg, nil, nil, sqlite.WriteLockRetryYield)
		})
	case sub == "rotate" || sub == "rotate-signing" || sub == "retire-signing" || sub == "make-primary":
		return cmdKeysKeyring(sub, args[1:], stdout, stderr)
	}
	return cmdKeysAdmin(ctx, sub, args[1:], stdout, stderr)
}

const taxUsage = `Usage:
  surgepay tax import FILE                validate a tax-rate CSV and install it in the data folder

Run 'surgepay help tax import' for its flags.
`

const taxImportUsage = `Usage: surgepay tax import FILE [--config FILE]

Validates the tax-rate CSV FILE (every bad line is named) and installs it as
DATA_DIR/tax-rates.csv; restart the servers to use it (docs/tax.md).
`

func cmdTax(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if _, code, ok := cli.Subcommand(args, "tax", taxUsage, []string{"import"}, stdout, stderr); !ok {
		return code
	}
	c, path := configFlags("tax import", taxImportUsage)
	files, code, ok := c.ParseInterleaved(args[1:], stdout, stderr)
	if !ok {
		return code
	}
	if len(files) != 1 {
		return c.Fail(stderr, "want one FILE, got %d arguments", len(files))
	}
	file := files[0]
	cfg, code := commandConfig(*path, stderr)
	if code >= 0 {
		return code
	}
	dst := filepath.Join(cfg.DataDir, "tax-rates.csv")
	t, err := tax.Import(file, dst)
	if err != nil {
		fmt.Fprintf(stderr, "surgepay: tax table %s refused: %v\n", file, err)
		return 1
	}
	fmt.Fprintf(stdout, "imported %d tax rates into %s; restart the server to use them\n", t.Len(), dst)
	return 0
}

func cmdSimulator(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return sim.Main(ctx, args, stdout, stderr)
}
