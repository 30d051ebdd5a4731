package cache_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/surgepay/surgepay/cache"
)

func TestDefaultConfigIsValidAndProcessOnly(t *testing.T) {
	cfg := cache.DefaultConfig()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate(DefaultConfig()) = %v, want nil", err)
	}
	for _, name := range cache.EntityNames {
		e, ok := cfg.Entities[name]
		if !ok || e.Scope != cache.ScopeProcess || e.TTL <= 0 || e.EntriesMax <= 0 || e.BytesMax <= 0 || e.NegativeTTL != 0 {
			t.Errorf("default %s = %+v, want process scope, a TTL, EntriesMax, BytesMax, no negative entries", name, e)
		}
	}
	if cfg.Namespace != "surgepay:v1:" || cfg.FallbackTimeout != 50*time.Millisecond {
		t.Errorf("Namespace %q, FallbackTimeout %s; want surgepay:v1:, 50ms", cfg.Namespace, cfg.FallbackTimeout)
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*cache.Config)
		want   string // in the error
	}{
		{"ErrUnknownEntity", func(c *cache.Config) { c.Entities["api_key"] = cache.EntityConfig{} },
			`cache.entities.api_key: unknown entity "api_key"`},
		{"ErrScope", func(c *cache.Config) { setScope(c, cache.Customers, "globl") },
			`cache.entities.customers.scope: "globl" is not one of`},
		{"ErrServerScopeWithoutAddr", func(c *cache.Config) { setScope(c, cache.Idempotency, cache.ScopeServer) },
			`cache.entities.idempotency.scope: "server" needs cache.redis.server_addr`},
		{"ErrGlobalScopeWithoutAddrs", func(c *cache.Config) { setScope(c, cache.PaymentMethods, cache.ScopeGlobal) },
			`cache.entities.payment_methods.scope: "global" needs cache.redis.global_addrs`},
		{"ErrTTLNegative", func(c *cache.Config) {
			e := c.Entities[cache.Customers]
			e.TTL = -time.Second
			c.Entities[cache.Customers] = e
		},
			"cache.entities.customers.ttl"},
		{"ErrEntriesMax", func(c *cache.Config) {
			e := c.Entities[cache.PaymentMethods]
			e.EntriesMax = cache.EntriesMaxLimit + 1
			c.Entities[cache.PaymentMethods] = e
		}, "cache.entities.payment_methods.entries_max"},
		{"ErrBytesMaxNegative", func(c *cache.Config) {
			e := c.Entities[cache.Idempotency]
			e.BytesMax = -1
			c.Entities[cache.Idempotency] = e
		}, "cache.entities.idempotency.bytes_max"},
		{"ErrBytesMaxOverLimit", func(c *cache.Config) {
			e := c.Entities[cache.Customers]
			e.BytesMax = cache.BytesMaxLimit + 1
			c.Entities[cache.Customers] = e
		}, "cache.entities.customers.bytes_max"},
		{"ErrNegativeTTLAboveTTL", func(c *cache.Config) {
			e := c.Entities[cache.APIKeys]
			e.NegativeTTL = e.TTL + time.Second
			c.Entities[cache.APIKeys] = e
		}, "cache.entities.api_keys.negative_ttl"},
		{"ErrFallbackTimeoutAboveMax", func(c *cache.Config) { c.FallbackTimeout = 200 * time.Millisecond }, "cache.fallback_timeout"},
		{"ErrSentinelAndCluster", func(c *cache.Config) {
			c.Redis.GlobalAddrs, c.Redis.SentinelMaster, c.Redis.Cluster = []string{"a:1"}, "m", true
		}, "sentinel_master and cluster"},
		{"ErrManyAddrsStandalone", func(c *cache.Config) { c.Redis.GlobalAddrs = []string{"a:1", "b:1"} }, "cache.redis.global_addrs: several"},
		{"ErrAddr", func(c *cache.Config) { c.Redis.GlobalAddrs = []string{"redis"} }, `cache.redis.global_addrs: "redis": want host:port`},
		{"ErrUnixGlobal", func(c *cache.Config) { c.Redis.GlobalAddrs = []string{"unix:///tmp/r.sock"} }, "unix socket reaches one host"},
		{"ErrConnsPerNode", func(c *cache.Config) { c.Redis.ConnsPerNode = 3 }, "cache.redis.conns_per_node"},
		{"ErrNamespace", func(c *cache.Config) { c.Namespace = "has space" }, "cache.namespace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := cache.DefaultConfig()
			tc.change(&cfg)
			err := cfg.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want an error containing %q", err, tc.want)
			}
			if _, err := cache.New(cfg); err == nil {
				t.Fatalf("New accepted a config Validate refuses")
			}
		})
	}
}

func setScope(c *cache.Config, name string, s cache.Scope) {
	e := c.Entities[name]
	e.Scope = s
	c.Entities[name] = e
}

// TestConfigTOML decodes the [cache] section over the defaults: an entity
// given only a scope keeps its default TTL, EntriesMax and BytesMax.
func TestConfigTOML(t *testing.T) {
	const file = `
namespace = "shop:v2:"
fallback_timeout = "80ms"
client_side_ttl = "10s"

[redis]
global_addrs = ["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"] # closed ports: New must not need them
sentinel_master = "surgepay"
password = "s3cret"

[entities.api_keys]
scope = "global"
negative_ttl = "30s"
`
	cfg := cache.DefaultConfig()
	if _, err := toml.Decode(file, &cfg); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if cfg.Namespace != "shop:v2:" || cfg.FallbackTimeout != 80*time.Millisecond || cfg.Redis.Password.Reveal() != "s3cret" {
		t.Errorf("decoded %+v", cfg)
	}
	c, err := cache.New(cfg) // sentinels unreachable: New still succeeds
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got := c.Config().Entities[cache.APIKeys]
	want := cache.EntityConfig{Scope: cache.ScopeGlobal, TTL: 5 * time.Minute, EntriesMax: 100_000, BytesMax: 64 << 20,
		NegativeTTL: 30 * time.Second}
	if got != want {
		t.Errorf("api_keys = %+v, want %+v", got, want)
	}
	if got := c.Config().Entities[cache.Customers]; got.Scope != cache.ScopeProcess {
		t.Errorf("customers scope = %q, want process (untouched)", got.Scope)
	}
}

func TestPasswordNeverPrinted(t *testing.T) {
	cfg := cache.DefaultConfig()
	cfg.Redis.Password = "hunter2"
	var buf bytes.Buffer
	if err := toml.NewEncoder(&buf).Encode(cfg); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{fmt.Sprint(cfg), fmt.Sprintf("%+v", cfg), fmt.Sprintf("%#v", cfg), buf.String()} {
		if strings.Contains(s, "hunter2") {
			t.Fatalf("password printed: %s", s)
		}
	}
	if !strings.Contains(buf.String(), "[redacted]") {
		t.Errorf("TOML encoding shows no [redacted] password:\n%s", buf.String())
	}
}

// TestRetiredEntities: merchants, settings and tax were accepted by the
// config but never cached. A config naming them still loads (the sample
// config does), whatever it sets; set to anything but the defaults, New
// logs that the section is ignored. No table, stats or Redis client
// exists for them.
func TestRetiredEntities(t *testing.T) {
	const file = `
[entities.merchants]
scope = "global" # without global_addrs: refused if it were used
ttl = "1m"

[entities.tax]
scope = "process"
ttl = "1h"
entries_max = 10000
`
	cfg := cache.DefaultConfig()
	if _, err := toml.Decode(file, &cfg); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate: %v, want nil (retired entities are ignored)", err)
	}
	var logs bytes.Buffer
	c, err := cache.New(cfg, cache.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !strings.Contains(logs.String(), "cache.entities.merchants is ignored") {
		t.Errorf("logs = %q, want a warning naming cache.entities.merchants", logs.String())
	}
	if strings.Contains(logs.String(), "cache.entities.tax") {
		t.Errorf("logs = %q, want no warning for tax, which is at its defaults (as in the sample config)", logs.String())
	}
	for name := range cache.RetiredEntities {
		if slices.Contains(cache.EntityNames, name) {
			t.Errorf("EntityNames has retired %s", name)
		}
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Entity(%s) did not panic, want a panic: nothing caches it", name)
				}
			}()
			cache.Entity[string](c, name, nil)
		}()
	}
}
