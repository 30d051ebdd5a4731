package main

import (
	"context"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/admin"
	"github.com/surgepay/surgepay/config"
	"github.com/surgepay/surgepay/engine"
	"github.com/surgepay/surgepay/internal/cli"
	"github.com/surgepay/surgepay/internal/ops"
	"github.com/surgepay/surgepay/provider/processors"
	"github.com/surgepay/surgepay/settle"
	"github.com/surgepay/surgepay/sqlite"
	"github.com/surgepay/surgepay/stage"
	"github.com/surgepay/surgepay/stage/jetstream"
	"github.com/surgepay/surgepay/telemetry"
	"github.com/surgepay/surgepay/tlsconfig"
)

// Exit codes of `surgepay settle`.
const (
	exitSettleOK    = 0
	exitSettleError = 1
	exitSettleUsage = 2
	// exitSettleLeft: an --until-empty run ended with records left at the
	// stage: not yet capturable (the network refused, outcomes unknown,
	// payments not yet stored): run it again later; or needing an operator
	// (tampered, mismatch, wrong_key, key_reused: see the report and the
	// log, by record ID); or it found streamlined payments whose capture
	// is pending with no staged record (pending_without_record: the log
	// names them by payment ID), or was interrupted during that check.
	exitSettleLeft = 3
)

// settleOptions are the flags of `surgepay settle`.
type settleOptions struct {
	configPath string
	untilEmpty bool
	reportJSON string
	reportText string // "" or "-": stdout
	privateKey string // default DataDir/settlement.key
	stage      string // "embedded" or "jetstream"
	natsURL    string
	batchSize  int
	workers    int
	maxRate    float64
	// ackWait is the stage's AckWait: the JetStream consumer's, or the
	// embedded consumer's in this process.
	ackWait     time.Duration
	orphanGrace time.Duration
	authLife    time.Duration
	// pendingCheck is settle.Config.PendingCheckWindow (--until-empty only).
	pendingCheck time.Duration
	// batchInterval is settle.Config.BatchIntervalMin; batchIntervalSet
	// tells a --batch-interval given from the stage's default.
	batchInterval    time.Duration
	batchIntervalSet bool
	// metricsListen is the address of the Prometheus /metrics listener;
	// "": none.
	metricsListen string
}

// pendingCheckDefault is the default --pending-check-window: events of a
// few days back. The check reads every succeeded payment in the window
// once, after the stage is drained.
const pendingCheckDefault = 72 * time.Hour

// batchIntervalEmbedded is the default --batch-interval with the embedded
// stage, where each batch's results are transactions on the database file
// `surgepay serve` writes: at most four partial batches a second while
// settle keeps up with an event (bench/RESULTS.md, "Settle beside the
// API"). JetStream's settle writes where serve's group commits do not
// wait on it (PostgreSQL): no interval.
const batchIntervalEmbedded = 250 * time.Millisecond

const settleUsage = `Usage: surgepay settle [--until-empty] [--max-rate N] [--batch-interval D] [--ack-wait D]
                       [--orphan-grace D] [--pending-check-window D] [--metrics-listen ADDR] [flags]

Captures the staged streamlined sales in batches and writes a report
(docs/streamlined.md). Exit codes: 0 done, 1 error, 2 usage, 3 records left
at the stage (--until-empty; see the report).
`

// settleFlags parses the flags of `surgepay settle`. ok is false when the
// command must stop with code: 0 after --help, exitSettleUsage after a
// usage error reported on stderr.
func settleFlags(args []string, stdout, stderr io.Writer) (o *settleOptions, code int, ok bool) {
	c := cli.New("settle", settleUsage)
	fs := c.Flags
	o = &settleOptions{}
	fs.StringVar(&o.configPath, "config", "", "TOML config file (default: $SURGEPAY_CONFIG)")
	fs.BoolVar(&o.untilEmpty, "until-empty", false, "stop once the stage is drained (default: run until interrupted)")
	fs.StringVar(&o.reportJSON, "report-json", "", "write the JSON report to `FILE`")
	fs.StringVar(&o.reportText, "report-text", "-", "write the text report to `FILE` (- for stdout)")
	fs.StringVar(&o.privateKey, "private-key", "", "settlement private key `FILE` (default: DATA_DIR/settlement.key; $"+stage.EnvPrivateKey+" overrides)")
	fs.StringVar(&o.stage, "stage", "", "where staged captures are: embedded (the database) or jetstream (default: config stage.kind)")
	fs.StringVar(&o.natsURL, "nats-url", "", "NATS server `URL` for --stage jetstream (default: config stage.nats_url)")
	fs.IntVar(&o.batchSize, "batch-size", settle.BatchSizeMaxDefault, "records per batch")
	fs.IntVar(&o.workers, "workers", settle.WorkersDefault, "concurrent provider calls")
	fs.Float64Var(&o.maxRate, "max-rate", 0, "at most this many captures started per second (0: no cap); on the embedded\n"+
		"default settle shares the machine and the database file with the API: a cap leaves the API its\n"+
		"share while settle runs during an event")
	fs.DurationVar(&o.pendingCheck, "pending-check-window", pendingCheckDefault, "with --until-empty, once the stage is drained: report streamlined\n"+
		"payments created this far back whose capture is still pending with no staged record (their record\n"+
		"was lost; nothing would capture them); 0: no check; at most "+settle.PendingCheckWindowMax.String())
	fs.DurationVar(&o.batchInterval, "batch-interval", 0, "after a batch that was not full, wait this long from its fetch before the\n"+
		"next: a shallow backlog is settled in fewer, larger batches (default "+batchIntervalEmbedded.String()+" with the embedded\n"+
		"stage, whose results are written to the file the API writes; 0 with jetstream); at most "+settle.BatchIntervalMax.String())
	fs.DurationVar(&o.ackWait, "ack-wait", jetstream.AckWaitDefault, "how long a fetched record may stay unacknowledged before the stage\n"+
		"delivers it again; the records of a crashed settle come back after it. JetStream: the durable\n"+
		"consumer's AckWait, set by the settle that starts last; embedded: within this process. Each\n"+
		"batch is planned to end within it: at least provider.timeout + "+(settle.BatchWorkMin+settle.ResultReserve).String()+
		", at most "+settle.AckWaitMax.String())
	fs.DurationVar(&o.authLife, "authorization-lifetime", settle.AuthorizationLifetimeDefault,
		"how long the processor keeps an uncaptured authorization (Stripe: 7 days); captures within a day\n"+
			"of it, or past it, are logged and counted in the report (near_expiry, past_expiry)")
	fs.DurationVar(&o.orphanGrace, "orphan-grace", settle.OrphanGraceDefault, "how long a record whose payment is not stored waits before it is\n"+
		"acknowledged as an orphan, never captured ("+settle.OrphanGraceMin.String()+" to "+settle.OrphanGraceMax.String()+"). It must exceed the\n"+
		"longest a sale takes from its stage publish to its commit: shorten it only while no API host\n"+
		"takes sales")
	fs.StringVar(&o.metricsListen, "metrics-listen", "", "serve Prometheus /metrics on `ADDR` (host:port, e.g. 127.0.0.1:9464; default: off):\n"+
		"backlog, oldest age, last batch size, captures per second, totals. Bind it to loopback or a\n"+
		"private network")
	if code, ok := c.Parse(args, stdout, stderr); !ok {
		return nil, code, false
	}
	if err := o.check(); err != nil {
		return nil, c.Fail(stderr, "%v", err), false
	}
	fs.Visit(func(f *flag.Flag) { o.batchIntervalSet = o.batchIntervalSet || f.Name == "batch-interval" })
	return o, exitSettleOK, true
}

// check returns an error naming the first flag out of its range.
func (o *settleOptions) check() error {
	if o.pendingCheck < 0 || o.pendingCheck > settle.PendingCheckWindowMax {
		return fmt.Errorf("--pending-check-window %s must be 0 to %s", o.pendingCheck, settle.PendingCheckWindowMax)
	}
	if o.batchInterval < 0 || o.batchInterval > settle.BatchIntervalMax {
		return fmt.Errorf("--batch-interval %s must be 0 to %s", o.batchInterval, settle.BatchIntervalMax)
	}
	if o.stage != "" && o.stage != "embedded" && o.stage != "jetstream" {
		return fmt.Errorf("--stage %q must be embedded or jetstream", o.stage)
	}
	if o.batchSize < 1 || o.batchSize > settle.BatchSizeMaxLimit {
		return fmt.Errorf("--batch-size %d must be 1 to %d", o.batchSize, settle.BatchSizeMaxLimit)
	}
	if o.maxRate < 0 || o.maxRate > settle.RateMaxLimit {
		return fmt.Errorf("--max-rate %g must be 0 (no cap) to %d captures per second", o.maxRate, settle.RateMaxLimit)
	}
	if o.workers < 1 || o.workers > settle.WorkersMax {
		return fmt.Errorf("--workers %d must be 1 to %d", o.workers, settle.WorkersMax)
	}
	if err := settle.CheckOrphanGrace(o.orphanGrace); err != nil {
		return fmt.Errorf("--orphan-grace %w", err)
	}
	if err := checkListenAddr(o.metricsListen); o.metricsListen != "" && err != nil {
		return fmt.Errorf("--metrics-listen %w", err)
	}
	return nil
}

// checkListenAddr returns an error, meant to follow the setting's name, if
// addr is not host:port with a port number (0: any free port).
func checkListenAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err == nil {
		var n int
		if n, err = strconv.Atoi(port); err == nil && (n < 0 || n > 65535) {
			err = errors.New("port out of range")
		}
	}
	if err != nil {
		return fmt.Errorf("%q is not host:port with a port number, e.g. 127.0.0.1:9464", addr)
	}
	return nil
}

// fill sets the options not given on the command line from cfg.
func (o *settleOptions) fill(cfg config.Config) {
	if o.stage == "" {
		o.stage = cfg.Stage.Kind
	}
	if o.natsURL == "" {
		o.natsURL = cfg.Stage.NATSURL
	}
	if !o.batchIntervalSet && o.stage != "jetstream" {
		o.batchInterval = batchIntervalEmbedded
	}
}

// cmdSettle runs `surgepay settle`: the batch settlement processor.
func cmdSettle(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, code, ok := settleFlags(args, stdout, stderr)
	if !ok {
		return code
	}
	cfg, err := config.Load(o.configPath, os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "surgepay: %v\n", err)
		return exitSettleUsage
	}
	o.fill(cfg)
	if o.stage == "jetstream" && o.natsURL == "" {
		fmt.Fprintln(stderr, "surgepay settle: --stage jetstream needs --nats-url or stage.nats_url")
		return exitSettleUsage
	}
	if err := settle.CheckAckWait(o.ackWait, cfg.Provider.Timeout.Duration); err != nil {
		fmt.Fprintf(stderr, "surgepay settle: --ack-wait %v\n", err)
		return exitSettleUsage
	}
	if cfg.Provider.Kind == "sim" && len(cfg.Processors) == 0 {
		fmt.Fprintln(stderr, "surgepay settle: provider.kind = \"sim\" is a simulator inside this process, which knows none of "+
			"the authorizations made by `surgepay serve`. Run `surgepay simulator` and set provider.kind = \"sim-http\" "+
			"(SURGEPAY_PROVIDER=sim-http SURGEPAY_PROVIDER_URL=...) for both.")
		return exitSettleUsage
	}
	log := newLogger(cfg, stderr)
	prov, rl, err := processors.OpenForSettle(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "surgepay settle: %v\n", err)
		return exitSettleError
	}
	return runSettle(ctx, cfg, o, prov, rl, log, stdout, stderr)
}

// runSettle opens the store, the key and the stage, runs settlement with
// prov (whose [processors] rl reloads; nil if none) and writes the reports.
func runSettle(ctx context.Context, cfg config.Config, o *settleOptions, prov surgepay.Provider, rl *processors.SettleReloader,
	log *slog.Logger, stdout, stderr io.Writer) int {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	fail := func(err error) int {
		fmt.Fprintf(stderr, "surgepay settle: %v\n", err)
		return exitSettleError
	}
	keyPath := o.privateKey
	if keyPath == "" {
		keyPath = filepath.Join(cfg.DataDir, stage.PrivateKeyFile)
	}
	priv, err := stage.PrivateKeyFrom(keyPath, os.Getenv)
	if err != nil {
		return fail(fmt.Errorf("%w\n(make a key pair with `surgepay keys settlement --out DIR`; API hosts get settlement.pub only)", err))
	}
	opener, err := stage.NewOpener(priv)
	if err != nil {
		return fail(err)
	}
	onStats := settle.LogProgress(log, 10*time.Second)
	if o.metricsListen != "" {
		m := &settle.Latest{}
		stop, err := serveSettleMetrics(cfg, o.metricsListen, m, log)
		if err != nil {
			return fail(err)
		}
		defer stop()
		logStats := onStats
		onStats = func(s settle.Stats) { m.Observe(s); logStats(s) }
	}
	// On the embedded default settle usually writes the file serve is
	// writing: serve's writer, answering clients, takes the lock first.
	store, err := openStoreWith(ctx, cfg, nil, log, sqlite.WriteLockRetryYield)
	if err != nil {
		return fail(err)
	}
	defer store.Close()         //nolint:errcheck // every capture was committed by Apply; Close releases connections
	jc := cfg.Stage.JetStream() // the credentials and TLS files of [stage]
	jc.URL, jc.AckWait = o.natsURL, o.ackWait
	consumer, closeStage, err := settle.OpenConsumer(ctx, o.stage, jc, store)
	if err != nil {
		return fail(err)
	}
	defer closeStage()
	log.Info("settlement starting", "stage", o.stage, "key_id", opener.KeyID(), "until_empty", o.untilEmpty,
		"batch_size", o.batchSize, "batch_interval", o.batchInterval.String(), "workers", o.workers, "max_rate", o.maxRate, "ack_wait", o.ackWait.String(), "orphan_grace", o.orphanGrace.String())
	// Capture results write audit events: their webhooks are queued in
	// the same Writes, for `surgepay serve` to deliver.
	// A capture declined at settlement counts as failed in its merchant's
	// analytics if its switch is on: reloaded as serve reloads it, so that
	// a continuous settle follows a merchant switched during an event.
	// Its webhooks switch is reloaded the same way, and the [processors]
	// (a rolled or re-sealed secret_key).
	var settings atomic.Pointer[engine.Settings]
	settings.Store(cfg.MerchantSettings())
	// SIGHUP is caught from the start of runSettle until the reports are
	// written (the deferred Stop): never the default action, which ends
	// the process. One that came before the watcher runs is a reload.
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go ops.WatchSettle(watchCtx, cfg.Path(), hup, &settings, rl, log)
	// The outbox's refresh runs until runSettle returns (watchCtx), not
	// until the caller's ctx ends: it read the store after it was closed,
	// and a test's two settles wrote one log buffer from two leaked
	// goroutines (a race TestSettleCommandEmbedded caught under -race).
	rep, err := settle.Run(ctx, settle.Config{Store: withWebhooks(watchCtx, store, &settings, log), Provider: prov,
		Opener: opener, Consumer: consumer,
		BatchSizeMax: o.batchSize, Workers: o.workers, RateMax: o.maxRate, UntilEmpty: o.untilEmpty, Logger: log,
		OnStats: onStats, AckWait: o.ackWait, CallTimeout: cfg.Provider.Timeout.Duration,
		OrphanGrace: o.orphanGrace, BatchIntervalMin: o.batchInterval, PendingCheckWindow: o.pendingCheck,
		AuthorizationLifetime: o.authLife,
		Analytics:             func(merchantID string) bool { return settings.Load().For(merchantID).Analytics == "on" }})
	if rep != nil {
		if werr := rep.WriteFiles(o.reportJSON, o.reportText, stdout); werr != nil {
			log.Error("settlement report", "err", werr.Error())
			if err == nil {
				err = werr
			}
		}
	}
	if err != nil {
		return fail(err)
	}
	if o.untilEmpty && (rep.Left > 0 || rep.PendingWithoutRecord > 0 || rep.PendingCheckInterrupted) {
		log.Warn("settlement left records at the stage, or found captures pending with no record; see the report",
			"left", rep.Left, "pending_without_record", rep.PendingWithoutRecord, "failures", rep.Failures)
		return exitSettleLeft
	}
	return exitSettleOK
}

// serveSettleMetrics serves GET /metrics with m's metrics on addr until
// stop is called, under the admin listener's rules (cfg): the admin
// token unless admin_metrics_open, TLS with tls.cert_file, and plain
// HTTP beyond loopback refused. The listener is open when it returns: a
// port in use is an error now, not after settlement started.
func serveSettleMetrics(cfg config.Config, addr string, m *settle.Latest, log *slog.Logger) (stop func(), err error) {
	if err := tlsconfig.CheckPlainListen(cfg.TLS, "--metrics-listen", addr); err != nil {
		return nil, err
	}
	_, tc, _, err := tlsconfig.Listeners(cfg.TLS)
	if err != nil {
		return nil, err
	}
	var creds *admin.Credentials // the tokens, read once: settle's runs are short
	if !cfg.AdminMetricsOpen {
		if creds, err = cfg.AdminCredentials(); err != nil {
			return nil, fmt.Errorf("--metrics-listen: %w", err)
		}
	}
	stop, err = admin.ListenMetrics(addr, cfg.AdminGuard(creds), tc, telemetry.SettleMetricsHandler(m.Stat), log)
	if err != nil {
		return nil, fmt.Errorf("--metrics-listen: %w (choose another port, or leave it off)", err)
	}
	return stop, nil
}

const keysSettlementUsage = `Usage: surgepay keys settlement --out DIR

Makes a settlement key pair in DIR: settlement.pub for the API hosts (they
seal staged captures to it) and settlement.key for the settlement processor
only (docs/streamlined.md).
`

// cmdKeysSettlement runs `surgepay keys settlement --out DIR`: a new
// settlement key pair. The public key goes to API hosts; the private key
// only to the settlement processor.
func cmdKeysSettlement(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := cli.New("keys settlement", keysSettlementUsage)
	out := c.Flags.String("out", "", "`DIR` for settlement.pub and settlement.key (required)")
	if code, ok := c.Parse(args, stdout, stderr); !ok {
		return code
	}
	if *out == "" {
		return c.Fail(stderr, "--out DIR is required")
	}
	id, err := stage.WriteKeyFiles(*out)
	if err != nil {
		fmt.Fprintf(stderr, "surgepay: %v\n", err)
		return exitSettleError
	}
	pub, err := stage.LoadPublicKey(filepath.Join(*out, stage.PublicKeyFile))
	if err != nil {
		fmt.Fprintf(stderr, "surgepay: %v\n", err)
		return exitSettleError
	}
	fmt.Fprintf(stdout, "settlement key %s\n  public  %s  (API hosts; or %s=%s)\n  private %s  (the settlement processor only; never on API hosts)\n",
		id, filepath.Join(*out, stage.PublicKeyFile), stage.EnvPublicKey, base64.StdEncoding.EncodeToString(pub),
		filepath.Join(*out, stage.PrivateKeyFile))
	return exitSettleOK
}
