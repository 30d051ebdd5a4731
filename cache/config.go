package cache

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"
)

// Scope says where an entity's entries live.
type Scope string

// The scopes of an entity.
const (
	// ScopeProcess keeps entries in this process's memory only.
	ScopeProcess Scope = "process"
	// ScopeServer shares entries between the processes of one host through
	// the Redis at RedisConfig.ServerAddr (a unix socket, typically).
	ScopeServer Scope = "server"
	// ScopeGlobal shares entries between all hosts through the Redis at
	// RedisConfig.GlobalAddrs (standalone, Sentinel or Cluster).
	ScopeGlobal Scope = "global"
	// ScopeOff caches nothing: every Get calls its loader.
	ScopeOff Scope = "off"
)

// The entities of surgepay, named as in the config file.
const (
	APIKeys        = "api_keys"
	Customers      = "customers"
	PaymentMethods = "payment_methods"
	Idempotency    = "idempotency"
)

// EntityNames lists every entity, in the order Stats reports them.
var EntityNames = []string{APIKeys, Customers, PaymentMethods, Idempotency}

// RetiredEntities are entity names the config file accepted, and the
// sample config named, but that nothing ever cached, each with the reason.
// A config that names one still loads, so that an upgrade does not refuse
// to start over a section that never had an effect; New logs a warning
// when one is set to anything but its default. Validate checks nothing
// else in them, and no Redis client is built for their scope.
var RetiredEntities = map[string]string{
	"merchants": "no request reads a merchant (an API key carries its merchant ID); " +
		"only creating an API key does, once, before writing the key",
	"settings": "merchant settings come from the config file ([merchants]) and are held in memory; a reload replaces them",
	"tax":      "tax rates come from the tax table file and are held in memory",
}

// Limits of the configuration. Each is the largest value Validate accepts.
const (
	FallbackTimeoutMax = 100 * time.Millisecond
	EntriesMaxLimit    = 10_000_000
	BytesMaxLimit      = 64 << 30
	TTLMax             = 400 * 24 * time.Hour
	NamespaceBytesMax  = 64
	ConnsPerNodeMax    = 256
)

// Defaults of the configuration.
const (
	NamespaceDefault              = "surgepay:v1:"
	FallbackTimeoutDefault        = 50 * time.Millisecond
	BreakerOpenDurationDefault    = time.Second
	ClientSideTTLDefault          = 30 * time.Second
	ConnsPerNodeDefault           = 4
	DialTimeoutDefault            = time.Second
	ClientSideBytesPerConnDefault = 16 << 20
)

// Config is the cache's part of surgepay's config file, under [cache].
// Start from DefaultConfig, decode the file over it, then call Validate
// (New calls it too). A zero field means its default.
type Config struct {
	// Namespace prefixes every key the cache writes to Redis, so that
	// several deployments, or two encodings of the same data, can share
	// one Redis. Change its version when a cached type's encoding changes.
	// Default "surgepay:v1:".
	Namespace string `toml:"namespace"`
	// FallbackTimeout bounds one Redis call; a Get makes one (its
	// write-back is queued, not waited for). A call slower than this, or a
	// failing one, is answered by the loader (or skipped, for writes) and
	// counted in Stat.Fallbacks: the request still succeeds. Default 50ms,
	// at most 100ms.
	FallbackTimeout time.Duration `toml:"fallback_timeout"`
	// BreakerOpenDuration is how long Redis is skipped, without waiting for
	// FallbackTimeout, after 5 consecutive failed calls of one scope; then
	// one call probes it. Default 1s.
	BreakerOpenDuration time.Duration `toml:"breaker_open_duration"`
	// ClientSideTTL bounds how long a shared-scope entry is served from
	// this process's memory. Redis tells the process when the entry
	// changes (server-assisted client-side caching); the TTL bounds the
	// damage of a lost message. "0s" turns the memory layer off: every
	// shared-scope Get asks Redis. Default 30s.
	ClientSideTTL time.Duration `toml:"client_side_ttl"`
	// Redis locates the servers of the server and global scopes.
	Redis RedisConfig `toml:"redis"`
	// Entities configures each entity by name (api_keys, customers,
	// payment_methods, idempotency). An entity left out keeps its
	// default. The retired names merchants, settings and tax are accepted
	// and ignored (see RetiredEntities).
	Entities map[string]EntityConfig `toml:"entities"`
}

// RedisConfig locates the Redis servers. The password and database apply
// to both scopes.
type RedisConfig struct {
	// ServerAddr is the Redis of the server scope, shared by the processes
	// of one host: "unix:///run/surgepay/redis.sock" or "host:port".
	// Required when an entity has scope "server".
	ServerAddr string `toml:"server_addr"`
	// GlobalAddrs is the Redis of the global scope, shared by all hosts:
	// one "host:port" for a standalone Redis, the sentinels when
	// SentinelMaster is set, or some nodes of a cluster when Cluster is
	// true. Required when an entity has scope "global".
	GlobalAddrs []string `toml:"global_addrs"`
	// SentinelMaster, when set, is the master set name that the sentinels
	// at GlobalAddrs monitor; the client follows failovers.
	SentinelMaster string `toml:"sentinel_master"`
	// Cluster says GlobalAddrs are Redis Cluster nodes.
	Cluster bool `toml:"cluster"`
	// Username and Password authenticate to Redis (and to the sentinels).
	// The password is a secret: it is never printed.
	Username string `toml:"username"`
	Password Secret `toml:"password"`
	// TLS encrypts the connections of the global scope (and to the
	// sentinels), checking the server's certificate against the system's
	// roots and the address's host name. The server scope is local and
	// never uses TLS. Default false.
	TLS bool `toml:"tls"`
	// TLSCAFile is a PEM file of the certificates that sign the Redis
	// servers' (and sentinels'); set, only they are trusted, instead of
	// the system's roots. TLSCertFile and TLSKeyFile are a client
	// certificate, both or neither, for servers that verify clients
	// (Redis's default tls-auth-clients yes). All need tls = true.
	// Default none.
	TLSCAFile   string `toml:"tls_ca_file"`
	TLSCertFile string `toml:"tls_cert_file"`
	TLSKeyFile  string `toml:"tls_key_file"`
	// DB is the database number (standalone and Sentinel only). Default 0.
	DB int `toml:"db"`
	// ConnsPerNode is the number of pipelined connections to each Redis
	// node: a power of two, at most 256. Default 4.
	ConnsPerNode int `toml:"conns_per_node"`
	// DialTimeout bounds connecting to a node. Default 1s.
	DialTimeout time.Duration `toml:"dial_timeout"`
	// ClientSideBytesPerConn bounds the client library's own copy of the
	// values read through each connection. Default 16 MiB.
	ClientSideBytesPerConn int `toml:"client_side_bytes_per_conn"`
}

// EntityConfig configures one entity.
type EntityConfig struct {
	// Scope is "process", "server", "global" or "off". Default "process".
	Scope Scope `toml:"scope"`
	// TTL bounds how long an entry is served after it was written: the
	// staleness a write that is not invalidated can cause. Default per
	// entity (see DefaultConfig).
	TTL time.Duration `toml:"ttl"`
	// EntriesMax bounds the entries kept in this process's memory (process
	// scope, and the memory layer of shared scopes). Redis is bounded by
	// its own maxmemory. Default per entity.
	EntriesMax int `toml:"entries_max"`
	// BytesMax bounds the heap bytes that those entries take: each counts
	// its key, its value as the entity's size function estimates it (see
	// WithSize) and EntryOverheadBytes, and at least BytesMax/EntriesMax,
	// so that both bounds hold whatever the values' sizes. An entity whose
	// values vary in size (idempotency: whole response bodies) is bounded
	// by this one; the others by EntriesMax. Default per entity (see
	// DefaultConfig), at most BytesMaxLimit.
	BytesMax int64 `toml:"bytes_max"`
	// NegativeTTL, when positive, caches a not-found answer of the loader
	// for this long. Default 0: not-found answers are not cached.
	NegativeTTL time.Duration `toml:"negative_ttl"`
}

// Secret is a string that is never printed: fmt, %v, %#v, logs and TOML
// encoding show "[redacted]" (or "" when empty).
type Secret string

func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return "[redacted]"
}

// GoString redacts s for %#v.
func (s Secret) GoString() string { return fmt.Sprintf("%q", s.String()) }

// MarshalText redacts s, so that a config written back shows no secret.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads s from the config file.
func (s *Secret) UnmarshalText(b []byte) error { *s = Secret(b); return nil }

// Reveal returns the secret itself, for the Redis client only.
func (s Secret) Reveal() string { return string(s) }

// DefaultConfig returns the default: every entity in process memory, Redis
// not used.
func DefaultConfig() Config {
	return Config{
		Namespace:           NamespaceDefault,
		FallbackTimeout:     FallbackTimeoutDefault,
		BreakerOpenDuration: BreakerOpenDurationDefault,
		ClientSideTTL:       ClientSideTTLDefault,
		Redis: RedisConfig{ConnsPerNode: ConnsPerNodeDefault, DialTimeout: DialTimeoutDefault,
			ClientSideBytesPerConn: ClientSideBytesPerConnDefault},
		Entities: defaultEntities(),
	}
}

// The memory bounds of the entities by default. The heap one entry takes
// (docs/cache.md; BenchmarkCacheEntryBytes in engine) is about 490 bytes
// for an API key, 440 for a customer (more with metadata), 610 for a card
// and 1,180 for a sale's stored answer (725 bytes of JSON). So
// EntriesMaxDefault bounds the first three (100,000 take 44 to 61 MB,
// when that many exist), and BytesMaxDefault only catches outsized values
// (a customer's metadata). The idempotency entity caches whole answers,
// one per sale: 100,000 of them take 118 MB of issue 14's 256 MB budget,
// so IdempotencyBytesMaxDefault bounds it, at about 14,000 answers (the
// last seconds of a surge at 5,000 sales/s): enough for a client's
// retries; a later replay reads its answer from the store, one indexed
// SELECT, which a new key costs anyway.
const (
	EntriesMaxDefault          = 100_000
	BytesMaxDefault            = 64 << 20
	IdempotencyBytesMaxDefault = 16 << 20
)

func defaultEntities() map[string]EntityConfig {
	p := func(ttl time.Duration, entries int, bytes int64) EntityConfig {
		return EntityConfig{Scope: ScopeProcess, TTL: ttl, EntriesMax: entries, BytesMax: bytes}
	}
	return map[string]EntityConfig{
		APIKeys:        p(5*time.Minute, EntriesMaxDefault, BytesMaxDefault),
		Customers:      p(5*time.Minute, EntriesMaxDefault, BytesMaxDefault),
		PaymentMethods: p(5*time.Minute, EntriesMaxDefault, BytesMaxDefault),
		Idempotency:    p(24*time.Hour, EntriesMaxDefault, IdempotencyBytesMaxDefault),
		// Retired (see RetiredEntities): kept at the values the sample
		// config writes, so that it still loads as the defaults.
		"merchants": p(5*time.Minute, 10_000, 0),
		"settings":  p(time.Minute, 1_000, 0),
		"tax":       p(time.Hour, 10_000, 0),
	}
}

// retiredSet returns the retired entities that cfg sets to anything but
// their defaults (zero fields count as defaults), sorted.
func (c Config) retiredSet() []string {
	d := defaultEntities()
	var out []string
	for name := range RetiredEntities {
		e, ok := c.Entities[name]
		if !ok {
			continue
		}
		def := d[name]
		if (e.Scope != "" && e.Scope != def.Scope) || (e.TTL != 0 && e.TTL != def.TTL) ||
			(e.EntriesMax != 0 && e.EntriesMax != def.EntriesMax) || e.BytesMax != 0 || e.NegativeTTL != 0 {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// withDefaults returns c with every zero field set to its default. The
// entities map is copied: c is not changed.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.Namespace == "" {
		c.Namespace = d.Namespace
	}
	if c.FallbackTimeout == 0 {
		c.FallbackTimeout = d.FallbackTimeout
	}
	if c.BreakerOpenDuration == 0 {
		c.BreakerOpenDuration = d.BreakerOpenDuration
	}
	r := &c.Redis
	if r.ConnsPerNode == 0 {
		r.ConnsPerNode = d.Redis.ConnsPerNode
	}
	if r.DialTimeout == 0 {
		r.DialTimeout = d.Redis.DialTimeout
	}
	if r.ClientSideBytesPerConn == 0 {
		r.ClientSideBytesPerConn = d.Redis.ClientSideBytesPerConn
	}
	r.GlobalAddrs = slices.Clone(r.GlobalAddrs)
	entities := make(map[string]EntityConfig, len(d.Entities))
	for name, e := range c.Entities {
		entities[name] = e
	}
	for name, def := range d.Entities {
		entities[name] = entities[name].WithDefaults(def)
	}
	c.Entities = entities
	return c
}

// WithDefaults returns e with its zero fields taken from d (an entity's
// entry in DefaultConfig).
func (e EntityConfig) WithDefaults(d EntityConfig) EntityConfig {
	if e.Scope == "" {
		e.Scope = d.Scope
	}
	if e.TTL == 0 {
		e.TTL = d.TTL
	}
	if e.EntriesMax == 0 {
		e.EntriesMax = d.EntriesMax
	}
	if e.BytesMax == 0 {
		e.BytesMax = d.BytesMax
	}
	return e
}

// Validate reports the first invalid field of c, named as in the config
// file (cache.entities.api_keys.scope). Zero fields mean their defaults.
func (c Config) Validate() error {
	c = c.withDefaults()
	if err := c.validateGeneral(); err != nil {
		return err
	}
	if err := c.Redis.validate(); err != nil {
		return err
	}
	names := make([]string, 0, len(c.Entities))
	for name := range c.Entities {
		names = append(names, name)
	}
	slices.Sort(names) // the same error every time
	for _, name := range names {
		if _, ok := RetiredEntities[name]; ok {
			continue // ignored, see RetiredEntities
		}
		if err := c.validateEntity(name, c.Entities[name]); err != nil {
			return err
		}
	}
	return nil
}

func (c Config) validateGeneral() error {
	if len(c.Namespace) > NamespaceBytesMax || strings.ContainsAny(c.Namespace, " \t\r\n") {
		return fmt.Errorf("config cache.namespace: %q must be at most %d bytes with no spaces", c.Namespace, NamespaceBytesMax)
	}
	if c.FallbackTimeout < 0 || c.FallbackTimeout > FallbackTimeoutMax {
		return fmt.Errorf("config cache.fallback_timeout: %s must be between 0 (default %s) and %s: a slow Redis must not slow down payments",
			c.FallbackTimeout, FallbackTimeoutDefault, FallbackTimeoutMax)
	}
	if c.BreakerOpenDuration < 0 || c.BreakerOpenDuration > time.Minute {
		return fmt.Errorf("config cache.breaker_open_duration: %s must be between 0 (default %s) and 1m", c.BreakerOpenDuration, BreakerOpenDurationDefault)
	}
	if c.ClientSideTTL < 0 || c.ClientSideTTL > TTLMax {
		return fmt.Errorf("config cache.client_side_ttl: %s must be between 0 (off) and %s", c.ClientSideTTL, TTLMax)
	}
	return nil
}

func (r RedisConfig) validate() error {
	if r.ServerAddr != "" {
		if err := validateAddr(r.ServerAddr, true); err != nil {
			return fmt.Errorf("config cache.redis.server_addr: %w", err)
		}
	}
	for _, a := range r.GlobalAddrs {
		if err := validateAddr(a, false); err != nil {
			return fmt.Errorf("config cache.redis.global_addrs: %w", err)
		}
	}
	switch {
	case r.SentinelMaster != "" && r.Cluster:
		return errors.New("config cache.redis: sentinel_master and cluster exclude each other: a cluster fails over by itself")
	case len(r.GlobalAddrs) > 1 && r.SentinelMaster == "" && !r.Cluster:
		return errors.New("config cache.redis.global_addrs: several addresses need sentinel_master (they are sentinels) or cluster = true")
	case r.Cluster && r.DB != 0:
		return errors.New("config cache.redis.db: a Redis Cluster has only database 0")
	case r.DB < 0 || r.DB > 15:
		return fmt.Errorf("config cache.redis.db: %d must be between 0 and 15", r.DB)
	case r.ConnsPerNode < 1 || r.ConnsPerNode > ConnsPerNodeMax || r.ConnsPerNode&(r.ConnsPerNode-1) != 0:
		return fmt.Errorf("config cache.redis.conns_per_node: %d must be a power of two from 1 to %d", r.ConnsPerNode, ConnsPerNodeMax)
	case r.DialTimeout < 0 || r.DialTimeout > time.Minute:
		return fmt.Errorf("config cache.redis.dial_timeout: %s must be between 0 (default %s) and 1m", r.DialTimeout, DialTimeoutDefault)
	case !r.TLS && (r.TLSCAFile != "" || r.TLSCertFile != "" || r.TLSKeyFile != ""):
		return errors.New("config cache.redis.tls_ca_file, tls_cert_file, tls_key_file: need cache.redis.tls = true")
	case (r.TLSCertFile == "") != (r.TLSKeyFile == ""):
		return errors.New("config cache.redis.tls_cert_file and tls_key_file go together: set both or neither")
	case r.ClientSideBytesPerConn < 0 || r.ClientSideBytesPerConn > 1<<30:
		return fmt.Errorf("config cache.redis.client_side_bytes_per_conn: %d must be between 0 (default %d) and 1 GiB", r.ClientSideBytesPerConn, ClientSideBytesPerConnDefault)
	}
	return nil
}

// validateAddr accepts "host:port" and, if unix, "unix:///path".
func validateAddr(a string, unix bool) error {
	if path, ok := strings.CutPrefix(a, "unix://"); ok {
		if !unix {
			return fmt.Errorf("%q: a unix socket reaches one host only; use it for server_addr", a)
		}
		if !strings.HasPrefix(path, "/") {
			return fmt.Errorf("%q: want unix:///absolute/path.sock", a)
		}
		return nil
	}
	if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
		return fmt.Errorf("%q: want host:port (or unix:///path.sock for server_addr)", a)
	}
	return nil
}

func (c Config) validateEntity(name string, e EntityConfig) error {
	p := "config cache.entities." + name
	if !slices.Contains(EntityNames, name) {
		return fmt.Errorf("%s: unknown entity %q; the entities are %s", p, name, strings.Join(EntityNames, ", "))
	}
	switch e.Scope {
	case ScopeProcess, ScopeOff:
	case ScopeServer:
		if c.Redis.ServerAddr == "" {
			return fmt.Errorf("%s.scope: \"server\" needs cache.redis.server_addr", p)
		}
	case ScopeGlobal:
		if len(c.Redis.GlobalAddrs) == 0 {
			return fmt.Errorf("%s.scope: \"global\" needs cache.redis.global_addrs", p)
		}
	default:
		return fmt.Errorf("%s.scope: %q is not one of process, server, global, off", p, e.Scope)
	}
	if e.TTL < 0 || e.TTL > TTLMax {
		return fmt.Errorf("%s.ttl: %s must be between 0 (default) and %s", p, e.TTL, TTLMax)
	}
	if e.Scope != ScopeProcess && e.Scope != ScopeOff && e.TTL < time.Millisecond {
		return fmt.Errorf("%s.ttl: %s is below Redis's resolution of 1ms", p, e.TTL)
	}
	if e.EntriesMax < 0 || e.EntriesMax > EntriesMaxLimit {
		return fmt.Errorf("%s.entries_max: %d must be between 0 (default) and %d", p, e.EntriesMax, EntriesMaxLimit)
	}
	if e.BytesMax < 0 || e.BytesMax > BytesMaxLimit {
		return fmt.Errorf("%s.bytes_max: %d must be between 0 (default) and %d", p, e.BytesMax, int64(BytesMaxLimit))
	}
	if e.NegativeTTL < 0 || e.NegativeTTL > e.TTL {
		return fmt.Errorf("%s.negative_ttl: %s must be between 0 (off) and the entity's ttl %s", p, e.NegativeTTL, e.TTL)
	}
	if e.NegativeTTL > 0 && e.NegativeTTL < time.Millisecond && e.Scope != ScopeProcess {
		return fmt.Errorf("%s.negative_ttl: %s is below Redis's resolution of 1ms", p, e.NegativeTTL)
	}
	return nil
}
