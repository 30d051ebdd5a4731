// Package config is surgepay's configuration model: the settings, their
// defaults, the TOML file, the SURGEPAY_* environment overrides,
// validation with errors that name the setting, and redaction for
// printing. docs/configuration.md is generated from it (go generate).
package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/admin"
	"github.com/surgepay/surgepay/api"
	"github.com/surgepay/surgepay/cache"
	"github.com/surgepay/surgepay/engine"
	"github.com/surgepay/surgepay/postgres"
	"github.com/surgepay/surgepay/provider/sim"
	"github.com/surgepay/surgepay/sqlite"
	"github.com/surgepay/surgepay/stage/jetstream"
	"github.com/surgepay/surgepay/telemetry"
	"github.com/surgepay/surgepay/webhook"
)

// Config is surgepay's configuration: Default, then the TOML file
// (--config or SURGEPAY_CONFIG), then environment overrides, then Validate.
type Config struct {
	// Listen is the API's address. Default 127.0.0.1:8080.
	Listen string `toml:"listen"`
	// AdminListen is the admin listener's address: health, readiness and
	// /debug/pprof. Never expose it publicly. "" or "off" disables it
	// (SURGEPAY_ADMIN_LISTEN=off). Default 127.0.0.1:9090: a second server
	// on the same host needs another port.
	AdminListen string `toml:"admin_listen"`
	// AdminTokenFile holds the admin listener's credential: everything
	// but /healthz and /readyz (and /metrics with AdminMetricsOpen)
	// requires the token, as "Authorization: Bearer TOKEN", as the
	// password of basic auth, or through the dashboard's login page
	// (docs/observability.md). serve and settle create the file (mode
	// 0600, a random token) when it does not exist, and refuse one that
	// others can read. The environment variable SURGEPAY_ADMIN_TOKEN (at
	// least admin.TokenLenMin characters) gives the token instead, never
	// printed. Env SURGEPAY_ADMIN_TOKEN_FILE. Default DataDir/admin-token.
	AdminTokenFile string `toml:"admin_token_file"`
	// adminToken is SURGEPAY_ADMIN_TOKEN: a secret kept out of the file
	// and of /config.
	adminToken cache.Secret
	// AdminReadTokenFile holds the admin listener's read-only
	// credential: a token (prefix spadmr_) that reads everything the
	// admin token reads (GET and HEAD) and changes nothing: the admin
	// API answers any other method 403 read_only_operator, the console
	// shows no action (docs/console.md). Created, loaded, checked and
	// reloaded on SIGHUP as AdminTokenFile is; it must differ from the
	// admin token. The environment variable SURGEPAY_ADMIN_READ_TOKEN
	// gives the token instead, never printed. Env
	// SURGEPAY_ADMIN_READ_TOKEN_FILE. Default DataDir/admin-read-token.
	AdminReadTokenFile string `toml:"admin_read_token_file"`
	// adminReadToken is SURGEPAY_ADMIN_READ_TOKEN.
	adminReadToken cache.Secret
	// AdminMetricsOpen serves /metrics of the admin listener (and of
	// settle's --metrics-listen) without the token, for a scraper that
	// cannot send one. Env SURGEPAY_ADMIN_METRICS_OPEN. Default false.
	AdminMetricsOpen bool `toml:"admin_metrics_open"`
	// TLS configures TLS on the listeners (docs/tls.md).
	TLS TLSConfig `toml:"tls"`
	// DataDir holds the embedded database, the keyring and the dev API key.
	// Default ./data.
	DataDir string `toml:"data_dir"`
	// Storage is "sqlite" (embedded, default) or "postgres".
	Storage string `toml:"storage"`
	// Debug adds the Surgepay-Sql header (SQL statements per request) to
	// every response. Default false.
	Debug bool `toml:"debug"`
	// DevMerchant makes serve create a development merchant and API key on
	// its first start on an empty database, print the key and write it to
	// DataDir/dev-api-key (the README's first payment). Default true; set
	// it false in production, where merchants and keys come from the CLI
	// or the admin API and no key should reach a log.
	DevMerchant bool `toml:"dev_merchant"`
	// LogFormat is "json" (default) or "text"; LogLevel debug|info|warn|error.
	LogFormat string `toml:"log_format"`
	LogLevel  string `toml:"log_level"`
	// InflightMax bounds requests served at once; beyond it: 503 + Retry-After.
	InflightMax int `toml:"inflight_max"`
	// ConnectionsMax bounds the API listener's open connections (idle
	// keep-alive ones included); at the bound a new connection takes the
	// place of the one idle longest once that one has been idle a second
	// (api.EvictIdleMinDefault), or waits (api.LimitConnections). 0 (the default): twice InflightMax. Env
	// SURGEPAY_CONNECTIONS_MAX. Read at start.
	ConnectionsMax int `toml:"connections_max"`
	// MerchantInflightMax bounds the requests one merchant may have in
	// flight on this node, its slow bodies included; beyond it that
	// merchant alone gets 429 merchant_concurrency_limit with Retry-After
	// (api.Config.MerchantInflightMax). 0 (the default): all of
	// inflight_max while one merchant is enabled (an event's merchant
	// alone), a quarter of it once there are more (counted at start, on
	// each change through the admin API and once a minute). At most
	// inflight_max. Reloaded without a restart.
	MerchantInflightMax int `toml:"merchant_inflight_max"`
	// TrustedProxies are the addresses (192.0.2.10, 2001:db8::1) or
	// networks (10.0.0.0/8) of the proxies in front of the API listener
	// whose X-Forwarded-For is believed: a request from one of them is
	// counted, for the per-address limit of publishable keys
	// (merchants.*.checkout_client_rate), under the client address the
	// header names (api.Config.TrustedProxies). At most
	// TrustedProxiesMax. Env SURGEPAY_TRUSTED_PROXIES, comma-separated.
	// Read at start.
	TrustedProxies []string `toml:"trusted_proxies"`
	// ReadHeaderTimeout bounds reading a request's line and headers.
	// Default 5s; 100ms to 1m.
	ReadHeaderTimeout Duration `toml:"read_header_timeout"`
	// BodyReadTimeout bounds reading a request's body once its headers
	// are read and its API key checked; a slower body gets 408
	// body_timeout and its connection is closed. Default 10s (64 KiB, the
	// largest body, at 6.5 KB/s); 100ms to 5m.
	BodyReadTimeout Duration `toml:"body_read_timeout"`
	// ShutdownDelay is how long serve, on SIGTERM or SIGINT, answers
	// /readyz 503 while it goes on serving before it stops taking
	// requests and drains those in flight: the time a load balancer needs
	// to see it not ready and stop sending to it (HAProxy: inter × fall).
	// Default 0s (one node: stop at once); 0 to 5m.
	ShutdownDelay Duration `toml:"shutdown_delay"`
	// DrainTimeout bounds the drain after shutdown_delay: how long the
	// requests in flight may take to finish once serve stops taking new
	// ones, before it exits and cuts those left (their clients see the
	// connection close: an outcome they resolve by retrying with the same
	// Idempotency-Key). Above provider.timeout, so that a processor call
	// under way when the drain begins can end. Default 30s; 1s to 10m.
	DrainTimeout Duration `toml:"drain_timeout"`
	// GCPercent is the Go garbage collector's target (GOGC) for serve: a
	// collection starts when the heap has grown by this percentage of the
	// live heap, or at MemoryLimitMiB, whichever comes first. 75 (the
	// default since issue 14 session 18) keeps the heap near 1.75 times
	// the live one: a half hour at 5,000 sales/s peaked at 245 MB of RSS
	// against 269 MB at 100 (Go's default), with no CPU cost that 30 s
	// profiles could tell from the hour's noise (the collector's marking
	// is 2-3 % of the CPU since the simulator's records hold no pointer).
	// 200 halves the collector's CPU (bench/RESULTS.md, issue 4) for a
	// heap three times the live one. Issue 14 tried 200 under a tight memory limit:
	// the limit then started every collection and, at 5,000 sales/s, all
	// the time (see MemoryLimitMiBDefault). The environment variable GOGC,
	// when set, wins. 50 to 1000.
	GCPercent int `toml:"gc_percent"`
	// MemoryLimitMiB is serve's soft memory limit for the Go runtime
	// (runtime/debug.SetMemoryLimit, as GOMEMLIMIT), in MiB: the
	// collector runs as often as it takes to keep the Go heap, stacks and
	// runtime structures under it. Not counted: the embedded SQLite's page
	// cache (allocated outside the Go heap) and the pages of its mapped
	// file (sqlite.mmap_mib), which RSS adds. Soft: a live heap above it
	// is kept, and the collector then runs nearly all the time (Go caps it
	// at about half the CPU), so leave room above the caches' bounds
	// (docs/operations.md#memory). The environment variable GOMEMLIMIT,
	// when set, wins, as GOGC does. 0 turns the limit off. Default
	// MemoryLimitMiBDefault (1024); 0 or memoryLimitMiBMin (16) to
	// memoryLimitMiBMax (1 TiB).
	MemoryLimitMiB int `toml:"memory_limit_mib"`
	// IdempotencyRetention is how long idempotency keys are kept; at least 24h.
	IdempotencyRetention Duration `toml:"idempotency_retention"`
	// TaxTable is a CSV of tax rates. Default: the table imported with
	// `surgepay tax import` (DataDir/tax-rates.csv), else the built-in sample.
	TaxTable string `toml:"tax_table"`
	// KeyringFile holds the card vault keys; created on first start.
	// SURGEPAY_KEYRING (the file's JSON, base64) overrides it. Default
	// DataDir/keyring.json.
	KeyringFile string `toml:"keyring_file"`
	// ReconcileInterval is how often payments with unknown provider outcomes
	// are looked up. Default 5s.
	ReconcileInterval Duration `toml:"reconcile_interval"`
	// PreheatPaymentMethodsMax is how many saved cards are loaded into the
	// cache at start, the newest first, so that the first payments with
	// them read no card from the store. 0 (default): the payment_methods
	// cache entity's entries_max; -1: none.
	PreheatPaymentMethodsMax int `toml:"preheat_payment_methods_max"`

	// Merchants holds the per-merchant pipeline switches and request rate
	// limits: the section [merchants.default] applies to every merchant,
	// [merchants."mer_…"] overrides it for one (fields left out inherit
	// the default; rate_limit = 0 written in a merchant's section makes it
	// unlimited under a limited default). Reloaded without a restart on
	// SIGHUP or when the file changes.
	Merchants map[string]surgepay.MerchantSettings `toml:"merchants"`
	// rateWritten holds "ID.rate_limit" and "ID.rate_burst" for the
	// merchant sections of the file that write them, to tell a written 0
	// from a field left out. Empty for a Config built in code, where a 0
	// inherits like a left-out field.
	rateWritten map[string]bool
	// RateLimits says where the merchants' rate_limit is counted: across
	// the nodes through cache.redis, or on each node.
	RateLimits RateLimitsConfig `toml:"rate_limits"`
	// Stage configures the streamlined path's staged captures.
	Stage StageConfig `toml:"stage"`
	// Webhooks configures the delivery of webhooks (docs/webhooks.md); the
	// per-merchant switch is merchants.*.webhooks.
	Webhooks WebhooksConfig `toml:"webhooks"`

	// Telemetry: metrics, traces, access logs (docs/observability.md).
	Telemetry telemetry.Config `toml:"telemetry"`
	// FlightRecorder keeps the last seconds of the Go execution trace and
	// writes them to a file when the server stalls (docs/observability.md).
	FlightRecorder FlightRecorderConfig `toml:"flight_recorder"`

	SQLite SQLiteConfig `toml:"sqlite"`

	// path is the file the configuration was read from, for reloads.
	path string
	// pendingRestart names the settings (dotted TOML keys) that the file
	// changed since start but that take effect only after a restart; set
	// by reloads, shown by /config.
	pendingRestart []string
	Postgres       PostgresConfig `toml:"postgres"`
	Provider       ProviderConfig `toml:"provider"`
	// Processors are the merchants' payment processors by name
	// ([processors.stripe_eu]); merchants.*.processors routes to them.
	// See docs/processors.md. Default none: every payment goes to
	// [provider].
	Processors map[string]ProcessorConfig `toml:"processors"`
	// Cache is the scoped cache: per entity a scope (process, server,
	// global, off), a TTL and a memory bound; Redis for the shared scopes.
	// See docs/cache.md.
	Cache cache.Config `toml:"cache"`
}

// FlightRecorderConfig is [flight_recorder] (telemetry.FlightRecorder):
// off by default; it costs a few per cent of CPU and up to bytes_max_mib
// of memory while on.
type FlightRecorderConfig struct {
	Enabled bool `toml:"enabled"`
	// Dir receives the files; default DataDir/flight.
	Dir string `toml:"dir"`
	// Window is how much of the past a file holds at least (a bound under
	// BytesMaxMiB); default 10s.
	Window Duration `toml:"window"`
	// BytesMaxMiB bounds the window's memory; default 32.
	BytesMaxMiB int `toml:"bytes_max_mib"`
	// Every spaces two files; default 1m.
	Every Duration `toml:"every"`
	// FilesMax is the files kept, the oldest removed first; default 10.
	FilesMax int `toml:"files_max"`
}

// StageConfig configures where streamlined sales stage their captures.
type StageConfig struct {
	// PublicKeyFile is the settlement public key (`surgepay keys
	// settlement`); SURGEPAY_SETTLEMENT_PUBLIC_KEY holds it inline. Without
	// one the streamlined path is off: merchants set to it take the
	// standard path, and a warning says so at start.
	PublicKeyFile string `toml:"public_key_file"`
	// Kind is "embedded" (default: a table written in the payment's own
	// group commit) or "jetstream".
	Kind string `toml:"kind"`
	// NATSURL, Stream, Subject and Replicas configure JetStream.
	// NATSURL is one or more comma-separated URLs; /config shows them
	// without their user:password@ or token@.
	NATSURL  string `toml:"nats_url"`
	Stream   string `toml:"stream"`
	Subject  string `toml:"subject"`
	Replicas int    `toml:"replicas"`
	// NATSCredsFile is a NATS credentials file (user JWT and NKey seed,
	// from `nsc`). Env SURGEPAY_NATS_CREDS_FILE. Default none.
	NATSCredsFile string `toml:"nats_creds_file"`
	// NATSUser and NATSPassword, or NATSToken, authenticate to a server
	// configured with users or a token; at most one of the credentials
	// file, user and password, and token. The password and token are
	// secrets, never printed; give them by env (SURGEPAY_NATS_USER,
	// SURGEPAY_NATS_PASSWORD, SURGEPAY_NATS_TOKEN) to keep them out of
	// the file. Default none.
	NATSUser     string       `toml:"nats_user"`
	NATSPassword cache.Secret `toml:"nats_password"`
	NATSToken    cache.Secret `toml:"nats_token"`
	// NATSTLSCAFile is a PEM file of the certificates that sign the NATS
	// server's; set, the connection requires TLS and trusts only them
	// (env SURGEPAY_NATS_TLS_CA_FILE). NATSTLSCertFile and NATSTLSKeyFile
	// are a client certificate, both or neither, for servers that verify
	// clients. Default none: a tls:// URL is checked against the system's
	// roots.
	NATSTLSCAFile   string `toml:"nats_tls_ca_file"`
	NATSTLSCertFile string `toml:"nats_tls_cert_file"`
	NATSTLSKeyFile  string `toml:"nats_tls_key_file"`
	// MaxMsgs and MaxBytes bound the JetStream stream (each server of
	// its replicas reserves MaxBytes of disk); a full stream refuses
	// Puts and sales take Fallback. Defaults jetstream.MaxMsgsDefault
	// (20,000,000) and MaxBytesDefault (8 GiB); 1000 to 1e10 records,
	// 1 MiB to 1 TiB.
	MaxMsgs  int64 `toml:"max_msgs"`
	MaxBytes int64 `toml:"max_bytes"`
	// PublishTimeout bounds one record's publication to JetStream.
	// Default 5s; 100ms to 1m.
	PublishTimeout Duration `toml:"publish_timeout"`
	// HungAfter: a NATS server that leaves a ping unanswered this long is
	// hung: Puts fail at once (the fallback takes the sale) until one is
	// answered. Default jetstream.HungAfterDefault (1s); "0s": no watch.
	HungAfter Duration `toml:"hung_after"`
	// Fallback is what a sale does when the stage is unavailable:
	// "capture" (default: capture synchronously, as the standard path) or
	// "reject" (void the authorization and answer 503).
	Fallback string `toml:"fallback"`
}

// JetStream returns the configuration of the JetStream stage: server,
// stream, subject, replicas, and the connection's credentials and TLS.
// serve and settle both connect with it.
func (s StageConfig) JetStream() jetstream.Config {
	hung := s.HungAfter.Duration
	if hung == 0 {
		hung = -1 // "0s": no watch; jetstream's 0 is its default
	}
	return jetstream.Config{URL: s.NATSURL, Stream: s.Stream, Subject: s.Subject, Replicas: s.Replicas,
		PublishTimeout: s.PublishTimeout.Duration, HungAfter: hung, MaxMsgs: s.MaxMsgs, MaxBytes: s.MaxBytes,
		CredsFile: s.NATSCredsFile, User: s.NATSUser, Password: s.NATSPassword.Reveal(), Token: s.NATSToken.Reveal(),
		TLSCAFile: s.NATSTLSCAFile, TLSCertFile: s.NATSTLSCertFile, TLSKeyFile: s.NATSTLSKeyFile}
}

// WebhooksConfig configures the webhook dispatcher of `surgepay serve`.
type WebhooksConfig struct {
	// Workers bounds the deliveries in flight on this node. Default 16,
	// at most 256.
	Workers int `toml:"workers"`
	// EndpointInflightMax bounds the deliveries in flight to one endpoint
	// on this node, so that a slow or dead endpoint holds at most this
	// many workers (webhook.Config.EndpointInflightMax). 0 (the default)
	// is webhook.EndpointInflightDefault (4), or Workers if fewer; at
	// most Workers.
	EndpointInflightMax int `toml:"endpoint_inflight_max"`
	// Timeout bounds one delivery: connect, TLS, request and answer.
	// Default 10s, at most 1m.
	Timeout Duration `toml:"timeout"`
	// AllowPrivateNetworks lets endpoints reach loopback, private and
	// link-local addresses (a receiver on the same host, in development).
	// Default false: a merchant's URL cannot reach the operator's internal
	// services. Env SURGEPAY_WEBHOOKS_ALLOW_PRIVATE_NETWORKS.
	AllowPrivateNetworks bool `toml:"allow_private_networks"`
	// DeliveredRetention is how long succeeded deliveries are kept (listed
	// by GET /v1/webhook_deliveries, resendable); each holds its event's
	// body. Default 72h, 1m to 2160h (90 days).
	DeliveredRetention Duration `toml:"delivered_retention"`
}

// SQLiteConfig configures the embedded store.
type SQLiteConfig struct {
	Path         string `toml:"path"`           // default DataDir/surgepay.db
	BatchSizeMax int    `toml:"batch_size_max"` // writes per group commit; default sqlite.BatchSizeMaxDefault
	// ApplyBudget: once a group commit's transaction has run this long it
	// takes no more writes, commits, and the rest of its batch leads the
	// next one (sqlite.Config.ApplyBudget). Default 5ms; 0s: off; at most 1s.
	ApplyBudget   Duration `toml:"apply_budget"`
	QueueDepthMax int      `toml:"queue_depth_max"` // writes waiting; beyond: 503. Default 4096
	FlushInterval Duration `toml:"flush_interval"`  // the longest linger for a fuller batch, where it pays; default 8ms
	// QueueDelayTarget: after each window of ten times this long in
	// which every write taken from the queue had waited longer, a larger
	// share of new writes (10 %, then doubling) is refused 503
	// overloaded before any processor call; after each window with a
	// shorter wait, 5 % less (groupcommit.Config.DelayTarget). Default 0
	// (off, see QueueDelayTargetDefault); at most 10s.
	QueueDelayTarget Duration `toml:"queue_delay_target"`
	ReadConnsMax     int      `toml:"read_conns_max"` // default 4
	// CheckpointInterval is how often a background connection copies the
	// WAL into the database file, so that no commit pays for it. Default 250ms.
	CheckpointInterval Duration `toml:"checkpoint_interval"`
	// WALPagesMax is the WAL's size in pages at which the writer
	// checkpoints it itself, should the background checkpoints fall
	// behind. Default 16000 (32 MiB of 2 KiB pages); 100 to 1000000.
	WALPagesMax int `toml:"wal_pages_max"`
	// MmapMiB is how much of the database file (MiB) is read through a
	// memory map rather than read(2); 0 turns the map off. Default 0: the
	// mapped pages count in the process's resident memory (up to 2 GiB of
	// it), against issue 14's 256 MB; without the map reads come from the
	// kernel's page cache, at ~5 % more CPU per sale. Most: 2047 (SQLite's
	// ceiling).
	MmapMiB int `toml:"mmap_mib"`
	// PageSize is the page size (bytes) of a database file serve creates;
	// a file that exists keeps its own. Default 2048 (sqlite.PageSizeDefault:
	// a fifth fewer bytes written per sale than 4096); a power of two from
	// 512 to 65536.
	PageSize int `toml:"page_size"`
	// IdempotencyFilterKeys is how many idempotency keys the filter of
	// stored keys is sized for ahead (10 bits a key): past it a rebuild
	// scans every stored key in the background. Default
	// sqlite.IdempotencyFilterKeysDefault (10 M, 12 MiB: a half hour at
	// 5,000 sales/s and a tenth more); 1 to sqlite.IdempotencyFilterKeysLimit.
	IdempotencyFilterKeys int `toml:"idempotency_filter_keys"`
}

// PostgresConfig configures the PostgreSQL store.
type PostgresConfig struct {
	DSN           string   `toml:"dsn"` // secret: never printed
	Schema        string   `toml:"schema"`
	PoolConnsMax  int32    `toml:"pool_conns_max"` // default 16
	Writers       int      `toml:"writers"`        // concurrent group committers; default 4
	BatchSizeMax  int      `toml:"batch_size_max"`
	QueueDepthMax int      `toml:"queue_depth_max"`
	FlushInterval Duration `toml:"flush_interval"`
	// QueueDelayTarget: as sqlite.queue_delay_target. Default 0 (off).
	QueueDelayTarget Duration `toml:"queue_delay_target"`
	// HungAfter: a database that leaves a ping unanswered this long is
	// down: statements are refused at once (503) until one is answered.
	// Default postgres.HungAfterDefault (1s); "0s" turns the watch off.
	HungAfter Duration `toml:"hung_after"`
}

// ProviderConfig selects the card network.
type ProviderConfig struct {
	// Kind is "sim" (the in-process simulator, default) or "sim-http" (a
	// `surgepay simulator` at URL).
	Kind string `toml:"kind"`
	URL  string `toml:"url"`
	// Latency of the in-process simulator: "0", "fixed:20ms",
	// "uniform:5ms-50ms", "lognormal:mean=20ms,p99=200ms".
	Latency     string  `toml:"latency"`
	DeclineRate float64 `toml:"decline_rate"`
	TimeoutRate float64 `toml:"timeout_rate"`
	UnknownRate float64 `toml:"unknown_rate"`
	// RecordsMax and RecordsRetention bound the operations the in-process
	// simulator keeps for idempotency, lookups and later captures, by
	// count and by age, whichever comes first (docs/simulator.md, Memory):
	// the count must cover the longest stay of a payment in processing at
	// the event's rate. Defaults sim.RecordsMaxDefault (200,000, about 25
	// MB) and 24h; sim.RecordsMaxMin to sim.RecordsMaxLimit, and
	// sim.RetentionMin to sim.RetentionMax.
	RecordsMax       int      `toml:"records_max"`
	RecordsRetention Duration `toml:"records_retention"`
	// Timeout bounds one provider call. Default 30s.
	Timeout Duration `toml:"timeout"`
}

// Duration is a time.Duration written as "250ms" in TOML.
type Duration struct{ time.Duration }

// UnmarshalText parses a Go duration string.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("%q is not a duration like 250ms or 24h", b)
	}
	d.Duration = v
	return nil
}

// MarshalText writes the duration.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// ReadHeaderTimeoutDefault bounds reading a request's line and headers
// (read_header_timeout).
const ReadHeaderTimeoutDefault = 5 * time.Second

// MemoryLimitMiBDefault is memory_limit_mib by default: a backstop, far
// above the live heap. Issue 14 first set 192 MiB (256 MB of RSS less
// SQLite's share); at 5,000 sales/s the live heap and the requests in
// flight then sat at the limit, the collector ran all the time, the
// server's capacity fell to ~2,600 sales/s and half the requests of a
// half-hour event were refused (bench/RESULTS.md). A limit must sit well
// above the live heap (55-70 MB at 5,000/s); gc_percent 75 keeps the heap
// near 1.75 times the live one. Session 8 raised it from 384 to 1024: under
// overload (5,000 sales/s offered to a slower 2-core machine that takes
// ~3,800) the requests in flight and the clients' connections took the
// heap to the limit, the collector took the CPU, and the server answered
// 7,000 sales in a minute where, without the limit, it answered 150,000
// in 40 s at 750 MiB of RSS; at 5,000/s on the faster machine RSS had
// reached 375 MiB by minute 26 of the half hour, against the 384 MiB
// limit. A limit only helps where the alternative is the machine's memory
// running out, so it sits near what a small VM has.
// memoryLimitMiBMin and memoryLimitMiBMax bound the setting: an idle
// serve takes about 35 MB, so a lower limit would only make the collector
// run without end.
const (
	// GCPercentDefault is gc_percent by default (see Config.GCPercent).
	GCPercentDefault      = 75
	MemoryLimitMiBDefault = 1024
	memoryLimitMiBMin     = 16
	memoryLimitMiBMax     = 1 << 20
)

// QueueDelayTargetDefault is sqlite.queue_delay_target's and
// postgres.queue_delay_target's default: off. Measured in session 8
// (bench/RESULTS.md) on a 2-core machine: offered 5,000 sales/s against
// a capacity of ~3,800, a target of 50ms answered 3,724 sales/s, 100ms
// 1,982/s, 200ms 1,897/s and none 1,248/s (thousands of requests queued
// behind the writer, 1.3 GB); but at 3,000/s, within capacity, a target
// of 50ms or 100ms refused 1.7-8 % of sales in episodes of p99 0.8-2 s
// where none refused nothing and held p99 under 275 ms. That law shed
// every new write for a window; since session 9 the share shed grows and
// shrinks window by window. Same machine, same day: at 3,000/s for 5
// minutes (within capacity) 50ms refused 0 writes (the old law 3,363,
// 0.385 %); at 6,000/s for 60 s 114,292 sales were answered (old law
// 109,773; none 91,710). But over a whole half hour at 3,000/s it refused
// 1.841 % in episodes where none refused 0.379 %: off, the operator's
// choice, 50ms where overload is likelier than a long busy peak.
const QueueDelayTargetDefault = 0

// SQLiteFlushIntervalDefault is sqlite.flush_interval's default: how long
// the writer lingers for a fuller batch once batches have company. Every
// group commit writes whole pages (the last leaf of each table, a split's
// siblings, page 1), so the bytes written and the CPU per sale fall as
// batches grow: at 5,000 sales/s for 90 s (bench/RESULTS.md, issue 14
// session 19) 2ms made batches of 18 and wrote 8,172 B a sale at 152 µs of
// server CPU; 4ms 31, 7,322 B, 143 µs; 8ms 54, 6,798 B, 130 µs, for a
// median 5.5 ms longer (4.2 → 9.8 ms) and a p99 still under 20 ms. One
// sale at a time never lingers.
const SQLiteFlushIntervalDefault = 8 * time.Millisecond

// Default returns the embedded default: SQLite in ./data, the
// in-process simulator, 127.0.0.1:8080.
func Default() Config {
	return Config{
		Listen: "127.0.0.1:8080", AdminListen: "127.0.0.1:9090", DataDir: "data", Storage: "sqlite", LogFormat: "json", LogLevel: "info",
		DevMerchant: true,
		InflightMax: 4096, GCPercent: GCPercentDefault, MemoryLimitMiB: MemoryLimitMiBDefault, ReadHeaderTimeout: Duration{ReadHeaderTimeoutDefault},
		BodyReadTimeout: Duration{api.BodyReadTimeoutDefault}, DrainTimeout: Duration{DrainTimeoutDefault}, IdempotencyRetention: Duration{24 * time.Hour}, ReconcileInterval: Duration{5 * time.Second},
		SQLite: SQLiteConfig{BatchSizeMax: sqlite.BatchSizeMaxDefault, ApplyBudget: Duration{sqlite.ApplyBudgetDefault}, QueueDepthMax: 4096, ReadConnsMax: 4,
			FlushInterval: Duration{SQLiteFlushIntervalDefault}, CheckpointInterval: Duration{sqlite.CheckpointIntervalDefault}, WALPagesMax: sqlite.WALPagesMaxDefault,
			MmapMiB: 0, PageSize: sqlite.PageSizeDefault, QueueDelayTarget: Duration{QueueDelayTargetDefault},
			IdempotencyFilterKeys: sqlite.IdempotencyFilterKeysDefault},
		Postgres: PostgresConfig{PoolConnsMax: 16, Writers: 4, BatchSizeMax: 256, QueueDepthMax: 4096,
			QueueDelayTarget: Duration{QueueDelayTargetDefault}, HungAfter: Duration{postgres.HungAfterDefault}},
		Provider: ProviderConfig{Kind: "sim", Latency: "0", Timeout: Duration{30 * time.Second},
			RecordsMax: sim.RecordsMaxDefault, RecordsRetention: Duration{sim.RetentionDefault}},
		Cache:     cache.DefaultConfig(),
		Telemetry: telemetry.DefaultConfig(),
		FlightRecorder: FlightRecorderConfig{Window: Duration{telemetry.FlightWindowDefault}, BytesMaxMiB: telemetry.FlightBytesMaxDefault >> 20,
			Every: Duration{telemetry.FlightEveryDefault}, FilesMax: telemetry.FlightFilesMaxDefault},
		Merchants: map[string]surgepay.MerchantSettings{"default": surgepay.DefaultMerchantSettings()},

		RateLimits: defaultRateLimits(),
		Stage: StageConfig{Kind: "embedded", Stream: "SURGEPAY_STAGE", Subject: "surgepay.stage.captures",
			Replicas: 1, Fallback: "capture", PublishTimeout: Duration{jetstream.PublishTimeoutDefault},
			MaxMsgs: jetstream.MaxMsgsDefault, MaxBytes: jetstream.MaxBytesDefault,
			HungAfter: Duration{jetstream.HungAfterDefault}},
		Webhooks: WebhooksConfig{Workers: webhook.WorkersDefault, Timeout: Duration{webhook.TimeoutDefault},
			DeliveredRetention: Duration{webhook.DeliveredRetentionDefault}},
	}
}

// MerchantSettings returns the engine settings: the default section over
// DefaultMerchantSettings, and each merchant's section over the default.
func (c *Config) MerchantSettings() *engine.Settings {
	inherit := func(id string, s, from surgepay.MerchantSettings) surgepay.MerchantSettings {
		if s.Processing == "" {
			s.Processing = from.Processing
		}
		if s.Audit == "" {
			s.Audit = from.Audit
		}
		if s.Tax == "" {
			s.Tax = from.Tax
		}
		if s.Webhooks == "" {
			s.Webhooks = from.Webhooks
		}
		if s.Analytics == "" {
			s.Analytics = from.Analytics
		}
		if s.RateLimit == 0 && !c.rateWritten[id+".rate_limit"] {
			s.RateLimit = from.RateLimit
		}
		if s.RateBurst == 0 && !c.rateWritten[id+".rate_burst"] {
			s.RateBurst = from.RateBurst
		}
		if s.InflightMax == 0 {
			s.InflightMax = from.InflightMax
		}
		if s.Processors == nil {
			s.Processors = from.Processors
		}
		if s.Routes == nil {
			s.Routes = from.Routes
		}
		return s
	}
	out := &engine.Settings{Default: inherit("default", c.Merchants["default"], surgepay.DefaultMerchantSettings()),
		Merchants: make(map[string]surgepay.MerchantSettings)}
	for id, s := range c.Merchants {
		if id != "default" {
			out.Merchants[id] = inherit(id, s, out.Default)
		}
	}
	return out
}

// Load reads path (if not empty) over the defaults, applies the
// environment and validates.
func Load(path string, env func(string) string) (Config, error) {
	cfg := Default()
	if path == "" {
		path = env("SURGEPAY_CONFIG")
	}
	if path != "" {
		md, err := toml.DecodeFile(path, &cfg)
		if err != nil {
			return cfg, fmt.Errorf("config %s: %w", path, err)
		}
		if un := md.Undecoded(); len(un) > 0 {
			return cfg, fmt.Errorf("config %s: unknown setting %q", path, un[0].String())
		}
		cfg.rateWritten = rateWritten(md, cfg.Merchants)
	}
	cfg.path = path
	if err := cfg.applyEnv(env); err != nil {
		return cfg, err
	}
	cfg.processorEnv(env)
	cfg.fillProcessorDefaults()
	if err := cfg.Telemetry.ApplyEnv(env); err != nil {
		return cfg, fmt.Errorf("config: %w", err)
	}
	cfg.fillPaths()
	cfg.fillCacheEntities()
	return cfg, cfg.Validate()
}

// fillCacheEntities gives the cache entity sections that the file writes
// in part the rest of their defaults, as the cache does when it starts
// (the file's section replaces the default entry whole), so that /config
// shows what the cache runs and a reload compares like with like.
func (c *Config) fillCacheEntities() {
	defaults := cache.DefaultConfig().Entities
	entities := make(map[string]cache.EntityConfig, len(c.Cache.Entities))
	for name, e := range c.Cache.Entities {
		if d, ok := defaults[name]; ok {
			e = e.WithDefaults(d)
		}
		entities[name] = e
	}
	c.Cache.Entities = entities
}

// rateWritten returns "ID.rate_limit" and "ID.rate_burst" for each
// merchant section of the file that writes them.
func rateWritten(md toml.MetaData, merchants map[string]surgepay.MerchantSettings) map[string]bool {
	out := make(map[string]bool)
	for id := range merchants {
		for _, k := range []string{"rate_limit", "rate_burst"} {
			if md.IsDefined("merchants", id, k) {
				out[id+"."+k] = true
			}
		}
	}
	return out
}

// applyEnv applies SURGEPAY_* overrides.
func (c *Config) applyEnv(env func(string) string) error {
	str := map[string]*string{
		"SURGEPAY_LISTEN": &c.Listen, "SURGEPAY_ADMIN_LISTEN": &c.AdminListen, "SURGEPAY_DATA_DIR": &c.DataDir, "SURGEPAY_STORAGE": &c.Storage,
		"SURGEPAY_POSTGRES_DSN": &c.Postgres.DSN, "SURGEPAY_POSTGRES_SCHEMA": &c.Postgres.Schema,
		"SURGEPAY_LOG_FORMAT": &c.LogFormat, "SURGEPAY_LOG_LEVEL": &c.LogLevel, "SURGEPAY_TAX_TABLE": &c.TaxTable,
		"SURGEPAY_PROVIDER": &c.Provider.Kind, "SURGEPAY_PROVIDER_URL": &c.Provider.URL,
		"SURGEPAY_SIM_LATENCY": &c.Provider.Latency, "SURGEPAY_SQLITE_PATH": &c.SQLite.Path,
		"SURGEPAY_STAGE": &c.Stage.Kind, "SURGEPAY_NATS_URL": &c.Stage.NATSURL,
		"SURGEPAY_SETTLEMENT_PUBLIC_KEY_FILE": &c.Stage.PublicKeyFile, "SURGEPAY_NATS_CREDS_FILE": &c.Stage.NATSCredsFile,
		"SURGEPAY_NATS_USER": &c.Stage.NATSUser, "SURGEPAY_NATS_TLS_CA_FILE": &c.Stage.NATSTLSCAFile,
		"SURGEPAY_ADMIN_TOKEN_FILE": &c.AdminTokenFile, "SURGEPAY_ADMIN_READ_TOKEN_FILE": &c.AdminReadTokenFile, "SURGEPAY_TLS_CERT_FILE": &c.TLS.CertFile, "SURGEPAY_TLS_KEY_FILE": &c.TLS.KeyFile,
	}
	for k, p := range str {
		if v := env(k); v != "" {
			*p = v
		}
	}
	for k, p := range map[string]*cache.Secret{"SURGEPAY_NATS_PASSWORD": &c.Stage.NATSPassword,
		"SURGEPAY_NATS_TOKEN": &c.Stage.NATSToken, "SURGEPAY_ADMIN_TOKEN": &c.adminToken, "SURGEPAY_ADMIN_READ_TOKEN": &c.adminReadToken,
		"SURGEPAY_REDIS_PASSWORD": &c.Cache.Redis.Password} {
		if v := env(k); v != "" {
			*p = cache.Secret(v)
		}
	}
	if v := env("SURGEPAY_PROCESSING"); v != "" {
		if c.Merchants == nil {
			c.Merchants = make(map[string]surgepay.MerchantSettings)
		}
		d := c.Merchants["default"]
		d.Processing = v
		c.Merchants["default"] = d
	}
	if v := env("SURGEPAY_WEBHOOKS_ALLOW_PRIVATE_NETWORKS"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("SURGEPAY_WEBHOOKS_ALLOW_PRIVATE_NETWORKS: %q is not true or false", v)
		}
		c.Webhooks.AllowPrivateNetworks = b
	}
	for k, p := range map[string]*bool{"SURGEPAY_ADMIN_METRICS_OPEN": &c.AdminMetricsOpen, "SURGEPAY_DEV_MERCHANT": &c.DevMerchant,
		"SURGEPAY_TLS_PROXY_TERMINATED": &c.TLS.ProxyTerminated} {
		if v := env(k); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("%s: %q is not true or false", k, v)
			}
			*p = b
		}
	}
	if v := env("SURGEPAY_DEBUG"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("SURGEPAY_DEBUG: %q is not true or false", v)
		}
		c.Debug = b
	}
	for k, p := range map[string]*int{"SURGEPAY_INFLIGHT_MAX": &c.InflightMax, "SURGEPAY_CONNECTIONS_MAX": &c.ConnectionsMax,
		"SURGEPAY_QUEUE_DEPTH_MAX": &c.SQLite.QueueDepthMax, "SURGEPAY_SIM_RECORDS_MAX": &c.Provider.RecordsMax} {
		if v := env(k); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				return fmt.Errorf("%s: %q is not an integer", k, v)
			}
			*p = n
		}
	}
	if v := env("SURGEPAY_TRUSTED_PROXIES"); v != "" {
		c.TrustedProxies = strings.Split(v, ",")
	}
	if v := env("SURGEPAY_SIM_RECORDS_RETENTION"); v != "" {
		if err := c.Provider.RecordsRetention.UnmarshalText([]byte(v)); err != nil {
			return fmt.Errorf("SURGEPAY_SIM_RECORDS_RETENTION: %w", err)
		}
	}
	return nil
}

func (c *Config) fillPaths() {
	if c.SQLite.Path == "" {
		c.SQLite.Path = filepath.Join(c.DataDir, "surgepay.db")
	}
	if c.KeyringFile == "" {
		c.KeyringFile = filepath.Join(c.DataDir, "keyring.json")
	}
	if c.AdminTokenFile == "" {
		c.AdminTokenFile = filepath.Join(c.DataDir, admin.TokenFileName)
	}
	if c.AdminReadTokenFile == "" {
		c.AdminReadTokenFile = filepath.Join(c.DataDir, admin.ReadTokenFileName)
	}
	if c.FlightRecorder.Dir == "" {
		c.FlightRecorder.Dir = filepath.Join(c.DataDir, "flight")
	}
}

// Validate checks every field and the fields that depend on each other.
func (c *Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("config %s: %s", field, fmt.Sprintf(format, args...)))
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		bad("listen", "%q is not host:port", c.Listen)
	}
	if c.AdminListen == "off" {
		c.AdminListen = ""
	}
	if _, _, err := net.SplitHostPort(c.AdminListen); c.AdminListen != "" && err != nil {
		bad("admin_listen", "%q is not host:port", c.AdminListen)
	}
	if c.DataDir == "" {
		bad("data_dir", "must not be empty")
	}
	c.validateAdminToken(bad)
	c.TLS.Validate(bad)
	switch c.Storage {
	case "sqlite":
	case "postgres":
		if c.Postgres.DSN == "" {
			bad("postgres.dsn", "is required when storage = \"postgres\" (or set SURGEPAY_POSTGRES_DSN)")
		}
	default:
		bad("storage", "%q must be \"sqlite\" or \"postgres\"", c.Storage)
	}
	if c.LogFormat != "json" && c.LogFormat != "text" {
		bad("log_format", "%q must be \"json\" or \"text\"", c.LogFormat)
	}
	switch strings.ToLower(c.LogLevel) {
	case "debug", "info", "warn", "error":
	default:
		bad("log_level", "%q must be debug, info, warn or error", c.LogLevel)
	}
	if c.InflightMax < 1 || c.InflightMax > 1_000_000 {
		bad("inflight_max", "%d must be 1 to 1000000", c.InflightMax)
	}
	if n := c.ConnectionsMax; n < 0 || n > api.ConnectionsMaxLimit {
		bad("connections_max", "%d must be 0 (twice inflight_max) to %d", n, api.ConnectionsMaxLimit)
	}
	if _, err := c.TrustedProxyPrefixes(); err != nil {
		bad("trusted_proxies", "%v", err)
	}
	if n := c.MerchantInflightMax; n < 0 || n > max(c.InflightMax, 1) {
		bad("merchant_inflight_max", "%d must be 0 (all of inflight_max for a lone merchant, else a quarter) to inflight_max (%d)", n, c.InflightMax)
	}
	if d := c.DrainTimeout.Duration; d < time.Second || d > 10*time.Minute {
		bad("drain_timeout", "%s must be 1s to 10m", d)
	}
	if d := c.ShutdownDelay.Duration; d < 0 || d > 5*time.Minute {
		bad("shutdown_delay", "%s must be 0s to 5m", d)
	}
	if d := c.ReadHeaderTimeout.Duration; d < 100*time.Millisecond || d > time.Minute {
		bad("read_header_timeout", "%s must be between 100ms and 1m", d)
	}
	if d := c.BodyReadTimeout.Duration; d < 100*time.Millisecond || d > 5*time.Minute {
		bad("body_read_timeout", "%s must be between 100ms and 5m", d)
	}
	if c.GCPercent < 50 || c.GCPercent > 1000 {
		bad("gc_percent", "%d must be 50 to 1000", c.GCPercent)
	}
	if m := c.MemoryLimitMiB; m != 0 && (m < memoryLimitMiBMin || m > memoryLimitMiBMax) {
		bad("memory_limit_mib", "%d must be 0 (off) or %d to %d", m, memoryLimitMiBMin, memoryLimitMiBMax)
	}
	if c.IdempotencyRetention.Duration < 24*time.Hour {
		bad("idempotency_retention", "%s must be at least 24h", c.IdempotencyRetention.Duration)
	}
	for name, d := range map[string]time.Duration{"sqlite.queue_delay_target": c.SQLite.QueueDelayTarget.Duration,
		"postgres.queue_delay_target": c.Postgres.QueueDelayTarget.Duration} {
		if d < 0 || d > 10*time.Second {
			bad(name, "%s must be 0 (off) to 10s", d)
		}
	}
	if d := c.Postgres.HungAfter.Duration; d != 0 && (d < 100*time.Millisecond || d > time.Minute) {
		bad("postgres.hung_after", "%s must be 0s (no watch) or 100ms to 1m", d)
	}
	if c.ReconcileInterval.Duration < 100*time.Millisecond {
		bad("reconcile_interval", "%s must be at least 100ms", c.ReconcileInterval.Duration)
	}
	if n := c.PreheatPaymentMethodsMax; n < -1 || n > cache.EntriesMaxLimit {
		bad("preheat_payment_methods_max", "%d must be -1 (none), 0 (the cache's entries_max) or up to %d", n, cache.EntriesMaxLimit)
	}
	for name, v := range map[string]int{"sqlite.batch_size_max": c.SQLite.BatchSizeMax, "sqlite.queue_depth_max": c.SQLite.QueueDepthMax,
		"postgres.batch_size_max": c.Postgres.BatchSizeMax, "postgres.queue_depth_max": c.Postgres.QueueDepthMax,
		"postgres.writers": c.Postgres.Writers, "sqlite.read_conns_max": c.SQLite.ReadConnsMax} {
		if v < 1 || v > 10_000_000 {
			bad(name, "%d must be 1 to 10000000", v)
		}
	}
	if err := c.Cache.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Telemetry.Validate("telemetry."); err != nil {
		errs = append(errs, err)
	}
	if f := c.FlightRecorder; f.Enabled {
		if d := f.Window.Duration; d < time.Second || d > 5*time.Minute {
			bad("flight_recorder.window", "%s must be between 1s and 5m", d)
		}
		if d := f.Every.Duration; d < time.Second || d > 24*time.Hour {
			bad("flight_recorder.every", "%s must be between 1s and 24h", d)
		}
		if n := f.BytesMaxMiB; n < 1 || n > 1024 {
			bad("flight_recorder.bytes_max_mib", "%d must be 1 to 1024", n)
		}
		if n := f.FilesMax; n < 1 || n > 1000 {
			bad("flight_recorder.files_max", "%d must be 1 to 1000", n)
		}
	}
	for name, d := range map[string]time.Duration{"provider.timeout": c.Provider.Timeout.Duration} {
		if d <= 0 {
			bad(name, "%s must be positive", d)
		}
	}
	for name, d := range map[string]time.Duration{"sqlite.flush_interval": c.SQLite.FlushInterval.Duration,
		"postgres.flush_interval": c.Postgres.FlushInterval.Duration, "sqlite.apply_budget": c.SQLite.ApplyBudget.Duration} {
		if d < 0 || d > time.Second {
			bad(name, "%s must be between 0 and 1s", d)
		}
	}
	if n := c.SQLite.WALPagesMax; n != 0 && (n < 100 || n > 1_000_000) {
		bad("sqlite.wal_pages_max", "%d must be 100 to 1000000", n)
	}
	if n := c.SQLite.PageSize; n != 0 && !sqlite.ValidPageSize(n) {
		bad("sqlite.page_size", "%d must be a power of two from 512 to 65536", n)
	}
	if n := c.SQLite.IdempotencyFilterKeys; n < 1 || n > sqlite.IdempotencyFilterKeysLimit {
		bad("sqlite.idempotency_filter_keys", "%d must be 1 to %d", n, sqlite.IdempotencyFilterKeysLimit)
	}
	if m := c.SQLite.MmapMiB; m < 0 || m > sqlite.MmapSizeDefault>>20 {
		bad("sqlite.mmap_mib", "%d must be 0 (off) to %d", m, sqlite.MmapSizeDefault>>20)
	}
	if c.Postgres.PoolConnsMax < 0 || c.Postgres.PoolConnsMax > 10_000 {
		bad("postgres.pool_conns_max", "%d must be 0 (default) to 10000", c.Postgres.PoolConnsMax)
	}
	switch c.Provider.Kind {
	case "sim":
		if _, err := sim.ParseLatency(c.Provider.Latency); err != nil {
			bad("provider.latency", "%v", err)
		}
	case "sim-http":
		if !strings.HasPrefix(c.Provider.URL, "http://") && !strings.HasPrefix(c.Provider.URL, "https://") {
			bad("provider.url", "%q must be an http(s) URL when provider.kind = \"sim-http\"", c.Provider.URL)
		}
	default:
		bad("provider.kind", "%q must be \"sim\" or \"sim-http\"", c.Provider.Kind)
	}
	c.validateProcessors(bad)
	set := c.MerchantSettings()
	if err := set.Default.Validate("merchants.default"); err != nil {
		bad("merchants.default", "%s", err.(*surgepay.Error).Message)
	}
	for id, m := range set.Merchants {
		if err := m.Validate("merchants." + id); err != nil {
			bad("merchants."+id, "%s", err.(*surgepay.Error).Message)
		}
	}
	switch c.Stage.Kind {
	case "embedded":
	case "jetstream":
		if c.Stage.NATSURL == "" {
			bad("stage.nats_url", "is required when stage.kind = \"jetstream\"")
		}
		if c.Stage.Replicas < 1 || c.Stage.Replicas > 5 {
			bad("stage.replicas", "%d must be 1 to 5", c.Stage.Replicas)
		}
		if n := c.Stage.MaxMsgs; n < 1000 || n > 10_000_000_000 {
			bad("stage.max_msgs", "%d must be 1000 to 10000000000", n)
		}
		if n := c.Stage.MaxBytes; n < 1<<20 || n > 1<<40 {
			bad("stage.max_bytes", "%d must be 1 MiB (1048576) to 1 TiB (1099511627776)", n)
		}
		if d := c.Stage.PublishTimeout.Duration; d < 100*time.Millisecond || d > time.Minute {
			bad("stage.publish_timeout", "%s must be 100ms to 1m", d)
		}
		if d := c.Stage.HungAfter.Duration; d != 0 && (d < 100*time.Millisecond || d > time.Minute) {
			bad("stage.hung_after", "%s must be 0s (no watch) or 100ms to 1m", d)
		}
	default:
		bad("stage.kind", "%q must be \"embedded\" or \"jetstream\"", c.Stage.Kind)
	}
	c.validateNATSAuth(bad)
	c.RateLimits.validate(bad)
	if c.Webhooks.Workers < 1 || c.Webhooks.Workers > webhook.WorkersMax {
		bad("webhooks.workers", "%d must be 1 to %d", c.Webhooks.Workers, webhook.WorkersMax)
	}
	if n := c.Webhooks.EndpointInflightMax; n < 0 || n > c.Webhooks.Workers {
		bad("webhooks.endpoint_inflight_max", "%d must be 0 (the default: %d, or webhooks.workers if fewer) to webhooks.workers (%d)",
			n, webhook.EndpointInflightDefault, c.Webhooks.Workers)
	}
	if d := c.Webhooks.Timeout.Duration; d < 100*time.Millisecond || d > webhook.TimeoutMax {
		bad("webhooks.timeout", "%s must be between 100ms and %s", d, webhook.TimeoutMax)
	}
	if d := c.Webhooks.DeliveredRetention.Duration; d < webhook.DeliveredRetentionMin || d > webhook.DeliveredRetentionMax {
		bad("webhooks.delivered_retention", "%s must be between %s and %s", d, webhook.DeliveredRetentionMin,
			webhook.DeliveredRetentionMax)
	}
	if c.Stage.Fallback != "capture" && c.Stage.Fallback != "reject" {
		bad("stage.fallback", "%q must be \"capture\" or \"reject\"", c.Stage.Fallback)
	}
	for name, v := range map[string]float64{"provider.decline_rate": c.Provider.DeclineRate,
		"provider.timeout_rate": c.Provider.TimeoutRate, "provider.unknown_rate": c.Provider.UnknownRate} {
		if v < 0 || v > 1 {
			bad(name, "%v must be between 0 and 1", v)
		}
	}
	if n := c.Provider.RecordsMax; n < sim.RecordsMaxMin || n > sim.RecordsMaxLimit {
		bad("provider.records_max", "%d must be %d to %d", n, sim.RecordsMaxMin, sim.RecordsMaxLimit)
	}
	if d := c.Provider.RecordsRetention.Duration; d < sim.RetentionMin || d > sim.RetentionMax {
		bad("provider.records_retention", "%s must be between %s and %s", d, sim.RetentionMin, sim.RetentionMax)
	}
	return errors.Join(errs...)
}

// validateNATSAuth checks that the stage's NATS credentials name one way
// to authenticate and that the TLS client certificate has its key.
func (c *Config) validateNATSAuth(bad func(field, format string, args ...any)) {
	s := c.Stage
	var ways []string
	if s.NATSCredsFile != "" {
		ways = append(ways, "stage.nats_creds_file")
	}
	if s.NATSUser != "" || s.NATSPassword != "" {
		ways = append(ways, "stage.nats_user/nats_password")
	}
	if s.NATSToken != "" {
		ways = append(ways, "stage.nats_token")
	}
	if len(ways) > 1 {
		bad("stage.nats_*", "%s are set: give one way to authenticate to NATS", strings.Join(ways, " and "))
	}
	if s.NATSUser != "" && s.NATSPassword == "" {
		bad("stage.nats_password", "is required with stage.nats_user (or set SURGEPAY_NATS_PASSWORD)")
	}
	if s.NATSPassword != "" && s.NATSUser == "" {
		bad("stage.nats_user", "is required with stage.nats_password")
	}
	if (s.NATSTLSCertFile == "") != (s.NATSTLSKeyFile == "") {
		bad("stage.nats_tls_cert_file", "and stage.nats_tls_key_file go together")
	}
}

// redactedPlaceholder replaces a secret in Redacted's answer.
const redactedPlaceholder = "<redacted>"

// Redacted returns the configuration with secrets replaced, for printing:
// the PostgreSQL DSN whole, the passwords and tokens, and in every URL or
// address setting the user:password@ (or token@) and the query. c is not
// changed.
func (c Config) Redacted() Config {
	if c.Postgres.DSN != "" {
		c.Postgres.DSN = redactedPlaceholder
	}
	for _, p := range []*cache.Secret{&c.Stage.NATSPassword, &c.Stage.NATSToken, &c.Cache.Redis.Password} {
		if *p != "" {
			*p = redactedPlaceholder
		}
	}
	for _, p := range []*string{&c.Stage.NATSURL, &c.Provider.URL, &c.Telemetry.Tracing.Endpoint, &c.Cache.Redis.ServerAddr} {
		*p = redactURLs(*p)
	}
	addrs := make([]string, len(c.Cache.Redis.GlobalAddrs)) // shared with c's caller: copy before changing
	for i, a := range c.Cache.Redis.GlobalAddrs {
		addrs[i] = redactURLs(a)
	}
	if c.Cache.Redis.GlobalAddrs != nil {
		c.Cache.Redis.GlobalAddrs = addrs
	}
	return c
}

// redactURLs returns the comma-separated URLs or addresses of s with the
// user information (everything up to the last "@" after the scheme: a
// password may hold an unescaped "@" or "/") and the query (which may hold
// a password or token) replaced by redactedPlaceholder.
func redactURLs(s string) string {
	parts := strings.Split(s, ",")
	for i, u := range parts {
		scheme, rest := "", u
		if j := strings.Index(u, "://"); j >= 0 {
			scheme, rest = u[:j+3], u[j+3:]
		}
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			rest = redactedPlaceholder + rest[at:]
		}
		if q := strings.Index(rest, "?"); q >= 0 {
			rest = rest[:q+1] + redactedPlaceholder
		}
		parts[i] = scheme + rest
	}
	return strings.Join(parts, ",")
}

// View is what GET /config answers: the effective configuration,
// redacted, and the settings changed in the file that wait for a restart.
type View struct {
	// PendingRestart names (dotted TOML keys) the settings whose value in
	// the file differs from the running one shown here; they take effect
	// at the next start. Empty when the file and the running
	// configuration agree on them.
	PendingRestart []string `toml:"pending_restart"`
	Config
}

// DrainTimeoutDefault is drain_timeout's default: above the default
// provider.timeout (30s) by nothing, the drain serve always had.
const DrainTimeoutDefault = 30 * time.Second

// TrustedProxiesMax bounds trusted_proxies.
const TrustedProxiesMax = 256

// TrustedProxyPrefixes parses TrustedProxies: an address is a network of
// one, an IPv4-mapped IPv6 one its IPv4 form. An error names the first
// entry that is neither, or one given twice, or too many entries.
func (c *Config) TrustedProxyPrefixes() ([]netip.Prefix, error) {
	if len(c.TrustedProxies) > TrustedProxiesMax {
		return nil, fmt.Errorf("holds %d entries; at most %d", len(c.TrustedProxies), TrustedProxiesMax)
	}
	var out []netip.Prefix
	seen := map[netip.Prefix]bool{}
	for i, s := range c.TrustedProxies {
		s = strings.TrimSpace(s)
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil || a.Zone() != "" {
				return nil, fmt.Errorf("entry %d, %q, is not an IP address or a network such as 10.0.0.0/8", i+1, s)
			}
			a = a.Unmap()
			p = netip.PrefixFrom(a, a.BitLen())
		}
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		p = p.Masked()
		if seen[p] {
			return nil, fmt.Errorf("entry %d, %q, is given twice", i+1, s)
		}
		seen[p] = true
		out = append(out, p)
	}
	return out, nil
}

// TrustedProxyNets is TrustedProxyPrefixes of a validated configuration
// (Validate refuses one it cannot parse): nil if it does not parse.
func (c *Config) TrustedProxyNets() []netip.Prefix {
	p, err := c.TrustedProxyPrefixes()
	if err != nil {
		return nil
	}
	return p
}

// ConnectionsMaxEffective is the effective connections_max: ConnectionsMax,
// or twice InflightMax (within api.ConnectionsMaxLimit) when 0.
func (c *Config) ConnectionsMaxEffective() int {
	if c.ConnectionsMax == 0 {
		return min(2*c.InflightMax, api.ConnectionsMaxLimit)
	}
	return c.ConnectionsMax
}

// View returns the effective configuration for GET /config: secrets
// redacted, and what waits for a restart.
func (c *Config) View() View {
	return View{PendingRestart: append([]string{}, c.pendingRestart...), Config: c.Redacted()}
}

// Path is the file the configuration was read from ("" for none): reloads
// read it again.
func (c *Config) Path() string { return c.path }

// PendingRestart names (dotted TOML keys) the settings that the file
// changed since start but that take effect only after a restart, as
// Reloaded found them.
func (c *Config) PendingRestart() []string { return c.pendingRestart }

// AdminToken is SURGEPAY_ADMIN_TOKEN, "" when not set: the admin token
// given by the environment instead of admin_token_file.
func (c *Config) AdminToken() cache.Secret { return c.adminToken }

// AdminReadToken is SURGEPAY_ADMIN_READ_TOKEN, "" when not set: the
// read-only token given by the environment instead of
// admin_read_token_file.
func (c *Config) AdminReadToken() cache.Secret { return c.adminReadToken }
