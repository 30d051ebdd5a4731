package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/api"
	"github.com/surgepay/surgepay/cache"
	"github.com/surgepay/surgepay/provider/sim"
	"github.com/surgepay/surgepay/stage/jetstream"
)

// envOf returns an environment lookup over m, so that tests never read the
// process environment.
func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

var noEnv = envOf(nil)

// defaultsFilled is DefaultConfig with the paths LoadConfig derives from
// data_dir.
func defaultsFilled() Config {
	c := Default()
	c.fillPaths()
	return c
}

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestDefaultConfig(t *testing.T) {
	t.Run("Validates", func(t *testing.T) {
		c := defaultsFilled()
		if err := c.Validate(); err != nil {
			t.Fatalf("Default().Validate() = %v, want nil", err)
		}
	})
	t.Run("LoadWithoutFileOrEnv", func(t *testing.T) {
		got, err := Load("", noEnv)
		if err != nil {
			t.Fatalf("LoadConfig: %v", err)
		}
		if diff := cmp.Diff(defaultsFilled(), got, ignorePath); diff != "" {
			t.Errorf("Load(\"\", no env) differs from the defaults (-want +got):\n%s", diff)
		}
	})
	t.Run("PathsFollowDataDir", func(t *testing.T) {
		got, err := Load("", envOf(map[string]string{"SURGEPAY_DATA_DIR": "/srv/pay"}))
		if err != nil {
			t.Fatal(err)
		}
		if got.SQLite.Path != "/srv/pay/surgepay.db" || got.KeyringFile != "/srv/pay/keyring.json" {
			t.Errorf("sqlite.path, keyring_file = %q, %q; want both under /srv/pay", got.SQLite.Path, got.KeyringFile)
		}
	})
}

func TestLoadConfigFile(t *testing.T) {
	path := writeFile(t, "surgepay.toml", `
listen = "0.0.0.0:9090"
data_dir = "/var/lib/surgepay"
storage = "postgres"
debug = true
log_format = "text"
log_level = "debug"
inflight_max = 100
idempotency_retention = "72h"
reconcile_interval = "250ms"

[sqlite]
batch_size_max = 64
apply_budget = "3ms"
flush_interval = "2ms"

[postgres]
dsn = "postgres://u:p@db:5432/pay"
schema = "pay"
pool_conns_max = 32
writers = 8

[provider]
kind = "sim-http"
url = "http://sim:8181"
decline_rate = 0.25
timeout = "5s"
records_max = 1000
records_retention = "1m"

[cache.entities.payment_methods]
scope = "process"
ttl = "1m"
`)
	got, err := Load(path, noEnv)
	if err != nil {
		t.Fatalf("LoadConfig: %v", err)
	}
	want := Default()
	want.Listen, want.DataDir, want.Storage, want.Debug = "0.0.0.0:9090", "/var/lib/surgepay", "postgres", true
	want.LogFormat, want.LogLevel, want.InflightMax = "text", "debug", 100
	want.IdempotencyRetention, want.ReconcileInterval = Duration{72 * time.Hour}, Duration{250 * time.Millisecond}
	want.SQLite.BatchSizeMax, want.SQLite.FlushInterval = 64, Duration{2 * time.Millisecond}
	want.SQLite.ApplyBudget = Duration{3 * time.Millisecond}
	want.Postgres.DSN, want.Postgres.Schema, want.Postgres.PoolConnsMax, want.Postgres.Writers = "postgres://u:p@db:5432/pay", "pay", 32, 8
	want.Provider.Kind, want.Provider.URL, want.Provider.DeclineRate, want.Provider.Timeout = "sim-http", "http://sim:8181", 0.25, Duration{5 * time.Second}
	want.Provider.RecordsMax, want.Provider.RecordsRetention = 1000, Duration{time.Minute}
	// A field the entity's section leaves out gets the cache's default, as
	// cache.New would give it, so that /config shows the value in use: a
	// section written before bytes_max existed gets its default.
	def := cache.DefaultConfig().Entities["payment_methods"]
	want.Cache.Entities["payment_methods"] = cache.EntityConfig{Scope: cache.ScopeProcess, TTL: time.Minute,
		EntriesMax: def.EntriesMax, BytesMax: def.BytesMax}
	want.fillPaths()
	if diff := cmp.Diff(want, got, ignorePath); diff != "" {
		t.Errorf("Load(file) (-want +got):\n%s", diff)
	}

	t.Run("FromSURGEPAY_CONFIG", func(t *testing.T) {
		got, err := Load("", envOf(map[string]string{"SURGEPAY_CONFIG": path}))
		if err != nil {
			t.Fatal(err)
		}
		if got.Listen != "0.0.0.0:9090" {
			t.Errorf("listen = %q, want the file's 0.0.0.0:9090", got.Listen)
		}
	})
	t.Run("ErrFileMissing", func(t *testing.T) {
		missing := filepath.Join(t.TempDir(), "nope.toml")
		_, err := Load(missing, noEnv)
		if err == nil || !strings.Contains(err.Error(), missing) {
			t.Errorf("Load(missing file) = %v, want an error naming %s", err, missing)
		}
	})
}

func TestLoadConfigEnvOverridesFile(t *testing.T) {
	path := writeFile(t, "surgepay.toml", `
listen = "127.0.0.1:1111"
data_dir = "/from/file"
inflight_max = 10
log_level = "error"
[sqlite]
queue_depth_max = 20
`)
	env := map[string]string{
		"SURGEPAY_LISTEN": "127.0.0.1:2222", "SURGEPAY_DATA_DIR": "/from/env", "SURGEPAY_STORAGE": "postgres",
		"SURGEPAY_POSTGRES_DSN": "postgres://x@y/z", "SURGEPAY_POSTGRES_SCHEMA": "s1",
		"SURGEPAY_LOG_FORMAT": "text", "SURGEPAY_LOG_LEVEL": "warn", "SURGEPAY_TAX_TABLE": "/t.csv",
		"SURGEPAY_PROVIDER": "sim-http", "SURGEPAY_PROVIDER_URL": "https://sim.example",
		"SURGEPAY_SIM_LATENCY": "fixed:5ms", "SURGEPAY_DEBUG": "true",
		"SURGEPAY_INFLIGHT_MAX": "77", "SURGEPAY_QUEUE_DEPTH_MAX": "88",
		"SURGEPAY_SIM_RECORDS_MAX": "5000", "SURGEPAY_SIM_RECORDS_RETENTION": "2h",
	}
	got, err := Load(path, envOf(env))
	if err != nil {
		t.Fatalf("LoadConfig: %v", err)
	}
	want := Default()
	want.Listen, want.DataDir, want.Storage = "127.0.0.1:2222", "/from/env", "postgres"
	want.Postgres.DSN, want.Postgres.Schema = "postgres://x@y/z", "s1"
	want.LogFormat, want.LogLevel, want.TaxTable, want.Debug = "text", "warn", "/t.csv", true
	want.Provider.Kind, want.Provider.URL, want.Provider.Latency = "sim-http", "https://sim.example", "fixed:5ms"
	want.InflightMax, want.SQLite.QueueDepthMax = 77, 88
	want.Provider.RecordsMax, want.Provider.RecordsRetention = 5000, Duration{2 * time.Hour}
	want.fillPaths() // Paths derive from the environment's data_dir.
	if diff := cmp.Diff(want, got, ignorePath); diff != "" {
		t.Errorf("Load(file, env) (-want +got):\n%s", diff)
	}

	t.Run("SQLitePath", func(t *testing.T) {
		got, err := Load(path, envOf(map[string]string{"SURGEPAY_SQLITE_PATH": "/db/x.db"}))
		if err != nil {
			t.Fatal(err)
		}
		if got.SQLite.Path != "/db/x.db" || got.DataDir != "/from/file" {
			t.Errorf("sqlite.path, data_dir = %q, %q; want /db/x.db, /from/file", got.SQLite.Path, got.DataDir)
		}
	})
	for _, tc := range []struct{ name, key, value string }{
		{"ErrDebugNotBool", "SURGEPAY_DEBUG", "maybe"},
		{"ErrInflightMaxNotInt", "SURGEPAY_INFLIGHT_MAX", "lots"},
		{"ErrQueueDepthMaxNotInt", "SURGEPAY_QUEUE_DEPTH_MAX", "1e3"},
		{"ErrSimRecordsMaxNotInt", "SURGEPAY_SIM_RECORDS_MAX", "many"},
		{"ErrSimRecordsRetentionNotDuration", "SURGEPAY_SIM_RECORDS_RETENTION", "a day"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load("", envOf(map[string]string{tc.key: tc.value}))
			if err == nil || !strings.Contains(err.Error(), tc.key) || !strings.Contains(err.Error(), tc.value) {
				t.Errorf("LoadConfig with %s=%q: err = %v, want one naming the variable and the value", tc.key, tc.value, err)
			}
		})
	}
}

func TestLoadConfigFileRefused(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       []string // substrings of the error
	}{
		{"ErrUnknownKey", "listen = \"127.0.0.1:1\"\nlisten_address = \"x\"\n", []string{"unknown setting", "listen_address"}},
		{"ErrUnknownNestedKey", "[sqlite]\nbatch_size = 3\n", []string{"unknown setting", "sqlite.batch_size"}},
		{"ErrUnknownTable", "[redis]\nurl = \"x\"\n", []string{"unknown setting", "redis"}},
		{"ErrWrongType", "inflight_max = \"lots\"\n", []string{"inflight_max"}},
		{"ErrBadDuration", "idempotency_retention = \"1 day\"\n", []string{"1 day", "not a duration"}},
		{"ErrSyntax", "listen = \n", []string{"config "}},
		{"ErrValidation", "storage = \"mysql\"\n", []string{"config storage", "mysql"}},
		{"ErrGCPercent", "gc_percent = -1\n", []string{"gc_percent", "50 to 1000"}},
		{"ErrMemoryLimitMiB", "memory_limit_mib = 8\n", []string{"config memory_limit_mib: 8 must be 0 (off) or 16 to 1048576"}},
		{"ErrMemoryLimitMiBNotInt", "memory_limit_mib = \"192MiB\"\n", []string{"memory_limit_mib"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, "bad.toml", tc.text)
			_, err := Load(path, noEnv)
			if err == nil {
				t.Fatalf("Load(%q) = nil error, want one", tc.text)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Load(%q) error = %q, want it to contain %q", tc.text, err, w)
				}
			}
		})
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(c *Config)
		field string // the name the error must carry
	}{
		{"ErrListenNoPort", func(c *Config) { c.Listen = "localhost" }, "config listen"},
		{"ErrListenEmpty", func(c *Config) { c.Listen = "" }, "config listen"},
		{"ErrDataDirEmpty", func(c *Config) { c.DataDir = "" }, "config data_dir"},
		{"ErrStorageUnknown", func(c *Config) { c.Storage = "mysql" }, "config storage"},
		{"ErrPostgresWithoutDSN", func(c *Config) { c.Storage = "postgres" }, "config postgres.dsn"},
		{"ErrLogFormat", func(c *Config) { c.LogFormat = "xml" }, "config log_format"},
		{"ErrLogLevel", func(c *Config) { c.LogLevel = "loud" }, "config log_level"},
		{"ErrInflightMaxZero", func(c *Config) { c.InflightMax = 0 }, "config inflight_max"},
		{"ErrInflightMaxHuge", func(c *Config) { c.InflightMax = 1_000_001 }, "config inflight_max"},
		{"ErrRetentionUnder24h", func(c *Config) { c.IdempotencyRetention = Duration{23 * time.Hour} }, "config idempotency_retention"},
		{"ErrReconcileIntervalShort", func(c *Config) { c.ReconcileInterval = Duration{time.Millisecond} }, "config reconcile_interval"},
		{"ErrSQLiteBatchSizeMax", func(c *Config) { c.SQLite.BatchSizeMax = 0 }, "config sqlite.batch_size_max"},
		{"ErrSQLiteApplyBudgetLong", func(c *Config) { c.SQLite.ApplyBudget = Duration{2 * time.Second} }, "config sqlite.apply_budget"},
		{"ErrSQLiteQueueDepthMax", func(c *Config) { c.SQLite.QueueDepthMax = -1 }, "config sqlite.queue_depth_max"},
		{"ErrFlightWindowShort", func(c *Config) {
			c.FlightRecorder.Enabled, c.FlightRecorder.Window = true, Duration{time.Millisecond}
		}, "config flight_recorder.window"},
		{"ErrFlightEveryZero", func(c *Config) { c.FlightRecorder.Enabled, c.FlightRecorder.Every = true, Duration{} }, "config flight_recorder.every"},
		{"ErrFlightBytesHuge", func(c *Config) { c.FlightRecorder.Enabled, c.FlightRecorder.BytesMaxMiB = true, 4096 }, "config flight_recorder.bytes_max_mib"},
		{"ErrFlightFilesNone", func(c *Config) { c.FlightRecorder.Enabled, c.FlightRecorder.FilesMax = true, 0 }, "config flight_recorder.files_max"},
		{"ErrSQLiteReadConnsMax", func(c *Config) { c.SQLite.ReadConnsMax = 0 }, "config sqlite.read_conns_max"},
		{"ErrSQLiteMmapOverCeiling", func(c *Config) { c.SQLite.MmapMiB = 2048 }, "config sqlite.mmap_mib"},
		{"ErrSQLitePageSize", func(c *Config) { c.SQLite.PageSize = 3000 }, "config sqlite.page_size"},
		{"ErrPostgresBatchSizeMax", func(c *Config) { c.Postgres.BatchSizeMax = 10_000_001 }, "config postgres.batch_size_max"},
		{"ErrPostgresQueueDepthMax", func(c *Config) { c.Postgres.QueueDepthMax = 0 }, "config postgres.queue_depth_max"},
		{"ErrPostgresWriters", func(c *Config) { c.Postgres.Writers = 0 }, "config postgres.writers"},
		{"ErrCacheScope", func(c *Config) {
			e := c.Cache.Entities["api_keys"]
			e.Scope = "galaxy"
			c.Cache.Entities = map[string]cache.EntityConfig{"api_keys": e}
		}, "config cache.entities.api_keys.scope"},
		{"ErrProviderKind", func(c *Config) { c.Provider.Kind = "stripe" }, "config provider.kind"},
		{"ErrProviderURLMissing", func(c *Config) { c.Provider.Kind = "sim-http" }, "config provider.url"},
		{"ErrProviderURLNotHTTP", func(c *Config) { c.Provider.Kind, c.Provider.URL = "sim-http", "ftp://x" }, "config provider.url"},
		{"ErrDeclineRateNegative", func(c *Config) { c.Provider.DeclineRate = -0.1 }, "config provider.decline_rate"},
		{"ErrTimeoutRateAboveOne", func(c *Config) { c.Provider.TimeoutRate = 1.5 }, "config provider.timeout_rate"},
		{"ErrUnknownRateAboveOne", func(c *Config) { c.Provider.UnknownRate = 2 }, "config provider.unknown_rate"},
		{"ErrRecordsMaxUnderMin", func(c *Config) { c.Provider.RecordsMax = sim.RecordsMaxMin - 1 }, "config provider.records_max"},
		{"ErrRecordsMaxOverLimit", func(c *Config) { c.Provider.RecordsMax = sim.RecordsMaxLimit + 1 }, "config provider.records_max"},
		{"ErrRecordsRetentionUnderMin", func(c *Config) { c.Provider.RecordsRetention = Duration{sim.RetentionMin - time.Second} },
			"config provider.records_retention"},
		{"ErrRecordsRetentionOverMax", func(c *Config) { c.Provider.RecordsRetention = Duration{sim.RetentionMax + time.Second} },
			"config provider.records_retention"},
		{"ErrMerchantInflightNegative", func(c *Config) { c.MerchantInflightMax = -1 }, "config merchant_inflight_max"},
		{"ErrConnectionsMaxNegative", func(c *Config) { c.ConnectionsMax = -1 }, "config connections_max"},
		{"ErrTrustedProxyNotAnAddress", func(c *Config) { c.TrustedProxies = []string{"10.0.0.0/8", "proxy.internal"} }, "config trusted_proxies"},
		{"ErrTrustedProxyTwice", func(c *Config) { c.TrustedProxies = []string{"10.0.0.1/8", "10.0.0.0/8"} }, "config trusted_proxies"},
		{"ErrTrustedProxiesTooMany", func(c *Config) { c.TrustedProxies = make([]string, TrustedProxiesMax+1) }, "config trusted_proxies"},
		{"ErrConnectionsMaxOverLimit", func(c *Config) { c.ConnectionsMax = api.ConnectionsMaxLimit + 1 }, "config connections_max"},
		{"ErrQueueDelayTargetNegative", func(c *Config) { c.SQLite.QueueDelayTarget.Duration = -time.Millisecond }, "config sqlite.queue_delay_target"},
		{"ErrQueueDelayTargetOverTen", func(c *Config) { c.Postgres.QueueDelayTarget.Duration = 11 * time.Second }, "config postgres.queue_delay_target"},
		{"ErrMerchantInflightOverInflight", func(c *Config) { c.MerchantInflightMax = c.InflightMax + 1 }, "config merchant_inflight_max"},
		{"ErrReadHeaderTimeoutShort", func(c *Config) { c.ReadHeaderTimeout = Duration{time.Millisecond} }, "config read_header_timeout"},
		{"ErrBodyReadTimeoutLong", func(c *Config) { c.BodyReadTimeout = Duration{time.Hour} }, "config body_read_timeout"},
		{"ErrMerchantShareNegative", func(c *Config) {
			d := c.Merchants["default"]
			d.InflightMax = -1
			c.Merchants = map[string]surgepay.MerchantSettings{"default": d}
		}, "config merchants.default"},
		{"ErrRateLimitsShared", func(c *Config) { c.RateLimits.Shared = "yes" }, "config rate_limits.shared"},
		{"ErrRateLimitsTimeout", func(c *Config) { c.RateLimits.Timeout = Duration{time.Second} }, "config rate_limits.timeout"},
		{"ErrEndpointInflightOverWorkers", func(c *Config) { c.Webhooks.EndpointInflightMax = c.Webhooks.Workers + 1 },
			"config webhooks.endpoint_inflight_max"},
		{"ErrMemoryLimitBelowMin", func(c *Config) { c.MemoryLimitMiB = memoryLimitMiBMin - 1 }, "config memory_limit_mib"},
		{"ErrMemoryLimitNegative", func(c *Config) { c.MemoryLimitMiB = -1 }, "config memory_limit_mib"},
		{"ErrMemoryLimitAboveMax", func(c *Config) { c.MemoryLimitMiB = memoryLimitMiBMax + 1 }, "config memory_limit_mib"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := defaultsFilled()
			tc.edit(&c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.field+":") {
				t.Errorf("Validate() = %v, want an error naming %q", err, tc.field)
			}
		})
	}
	t.Run("ErrAdminListen", func(t *testing.T) {
		_, err := Load("", envOf(map[string]string{"SURGEPAY_ADMIN_LISTEN": "nine-oh-nine-oh"}))
		if err == nil || !strings.Contains(err.Error(), "config admin_listen:") {
			t.Errorf("LoadConfig with a bad SURGEPAY_ADMIN_LISTEN: err = %v, want one naming admin_listen", err)
		}
	})
	t.Run("OK", func(t *testing.T) {
		for _, edit := range []func(c *Config){
			func(c *Config) { c.Storage, c.Postgres.DSN = "postgres", "postgres://x@y/z" },
			func(c *Config) { c.Provider.Kind, c.Provider.URL = "sim-http", "http://127.0.0.1:8181" },
			func(c *Config) { c.LogLevel = "WARN" },
			func(c *Config) { c.Listen = ":8080" },
			func(c *Config) { c.Provider.DeclineRate, c.Provider.UnknownRate = 1, 0 },
			func(c *Config) {
				c.Provider.RecordsMax, c.Provider.RecordsRetention = sim.RecordsMaxMin, Duration{sim.RetentionMin}
			},
			func(c *Config) {
				c.Provider.RecordsMax, c.Provider.RecordsRetention = sim.RecordsMaxLimit, Duration{sim.RetentionMax}
			},
			func(c *Config) { c.MemoryLimitMiB = 0 }, // off
			func(c *Config) { c.MemoryLimitMiB = memoryLimitMiBMin },
			func(c *Config) { c.MemoryLimitMiB = memoryLimitMiBMax },
		} {
			c := defaultsFilled()
			edit(&c)
			if err := c.Validate(); err != nil {
				t.Errorf("Validate() = %v, want nil", err)
			}
		}
	})
	t.Run("ErrEveryBadFieldNamed", func(t *testing.T) {
		c := defaultsFilled()
		var fields []string
		for _, tc := range cases {
			if tc.name == "ErrProviderURLNotHTTP" || tc.name == "ErrListenEmpty" || tc.name == "ErrInflightMaxHuge" ||
				tc.name == "ErrMerchantInflightOverInflight" || tc.name == "ErrMemoryLimitNegative" ||
				tc.name == "ErrMemoryLimitAboveMax" || tc.name == "ErrConnectionsMaxOverLimit" ||
				tc.name == "ErrStorageUnknown" || tc.name == "ErrProviderKind" ||
				tc.name == "ErrRecordsMaxOverLimit" || tc.name == "ErrRecordsRetentionOverMax" ||
				tc.name == "ErrTrustedProxyTwice" || tc.name == "ErrTrustedProxiesTooMany" {
				continue // They set fields that other cases already break.
			}
			tc.edit(&c)
			fields = append(fields, tc.field)
		}
		err := c.Validate()
		if err == nil {
			t.Fatal("Validate() = nil, want every bad field reported")
		}
		for _, f := range fields {
			if !strings.Contains(err.Error(), f+":") {
				t.Errorf("Validate() error does not name %s:\n%v", f, err)
			}
		}
		if got := len(strings.Split(err.Error(), "\n")); got != len(fields) {
			t.Errorf("Validate() reported %d problems, want %d:\n%v", got, len(fields), err)
		}
	})
}

func TestConfigRedacted(t *testing.T) {
	const secret = "hunter2-very-secret"
	c := defaultsFilled()
	c.Storage, c.Postgres.DSN = "postgres", "postgres://pay:"+secret+"@db:5432/pay"
	r := c.Redacted()
	for _, s := range []string{fmt.Sprintf("%+v", r), fmt.Sprintf("%#v", r), tomlOf(t, r)} {
		if strings.Contains(s, secret) {
			t.Errorf("Redacted config prints the DSN's password: %s", s)
		}
	}
	if r.Postgres.DSN == "" {
		t.Error("Redacted DSN is empty, want a placeholder that shows a DSN is set")
	}
	if !strings.Contains(c.Postgres.DSN, secret) {
		t.Error("Redacted changed the original config")
	}
	if r := defaultsFilled().Redacted(); r.Postgres.DSN != "" {
		t.Errorf("Redacted of a config without DSN has DSN %q, want empty", r.Postgres.DSN)
	}
}

// notSecretSettings are the string settings that hold no secret: names,
// kinds, paths, addresses without credentials. Every other string setting
// may carry one (a DSN, a URL with user:password@ or ?token=, a password)
// and must be redacted: TestConfigRedactedEverySetting fails for a new
// string setting until it is redacted or listed here.
var notSecretSettings = []string{"listen", "admin_listen", "data_dir", "storage", "log_format", "log_level",
	"tax_table", "keyring_file", "sqlite.path", "postgres.schema", "provider.kind", "provider.latency",
	"stage.public_key_file", "stage.kind", "stage.stream", "stage.subject", "stage.fallback",
	"stage.nats_creds_file", "stage.nats_user", "stage.nats_tls_ca_file", "stage.nats_tls_cert_file",
	"stage.nats_tls_key_file", "cache.namespace", "cache.redis.sentinel_master", "cache.redis.username",
	"admin_token_file", "admin_read_token_file", "tls.cert_file", "tls.key_file", "tls.admin_client_ca_file", "tls.admin_read_only_clients",
	"cache.redis.tls_ca_file", "cache.redis.tls_cert_file", "cache.redis.tls_key_file",
	"rate_limits.shared", "flight_recorder.dir", "trusted_proxies"}

// fillStrings sets every string (or string list) setting under v, a
// struct, to fill(its dotted TOML key). Maps (merchants, cache entities)
// are left alone: they hold no string that can carry a secret.
func fillStrings(v reflect.Value, prefix string, fill func(key string) string) {
	for i := range v.NumField() {
		f := v.Type().Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		fv, key := v.Field(i), prefix+name
		switch {
		case fv.Kind() == reflect.String:
			fv.SetString(fill(key))
		case fv.Kind() == reflect.Slice && fv.Type().Elem().Kind() == reflect.String:
			fv.Set(reflect.ValueOf([]string{fill(key), fill(key)}).Convert(fv.Type()))
		case fv.Kind() == reflect.Struct:
			fillStrings(fv, key+".", fill)
		}
	}
}

// TestConfigRedactedEverySetting puts a recognizable password into every
// setting that may carry one, in each form it can take there (a URL's
// user:password@, a token@, a query parameter, a comma-separated second
// URL, the value itself), and checks that GET /config shows it nowhere,
// while it still shows where each URL points.
func TestConfigRedactedEverySetting(t *testing.T) {
	const secret = "Pw0rd-in-config"
	c := defaultsFilled()
	fillStrings(reflect.ValueOf(&c).Elem(), "", func(key string) string {
		if slices.Contains(notSecretSettings, key) {
			return "plain-" + key
		}
		return "nats://tok" + secret + "@h1.example:4222,redis://user:" + secret + "@h2.example:6379/0?password=" + secret
	})
	c.Provider.URL = "https://user:p@ss/" + secret + "@sim.example/v1?token=" + secret // unescaped @ and / in the password
	c.Telemetry.Tracing.Endpoint = "http://" + secret + "@otel.example:4318/v1/traces"
	globalAddrs := slices.Clone(c.Cache.Redis.GlobalAddrs)

	// GET /config answers View() as TOML.
	var text bytes.Buffer
	if err := toml.NewEncoder(&text).Encode(c.View()); err != nil {
		t.Fatal(err)
	}
	body := text.String()
	for _, line := range strings.Split(body, "\n") {
		if strings.Contains(line, secret) {
			t.Errorf("GET /config shows the password: %s", line)
		}
	}
	var got View
	if _, err := toml.Decode(body, &got); err != nil {
		t.Fatalf("GET /config is not TOML: %v\n%s", err, body)
	}
	for _, want := range []struct{ setting, got, want string }{
		{"stage.nats_url", got.Stage.NATSURL, "nats://<redacted>@h1.example:4222,redis://<redacted>@h2.example:6379/0?<redacted>"},
		{"provider.url", got.Provider.URL, "https://<redacted>@sim.example/v1?<redacted>"},
		{"telemetry.tracing.endpoint", got.Telemetry.Tracing.Endpoint, "http://<redacted>@otel.example:4318/v1/traces"},
		{"stage.nats_user", got.Stage.NATSUser, "plain-stage.nats_user"},
	} {
		if want.got != want.want {
			t.Errorf("/config %s = %q, want %q", want.setting, want.got, want.want)
		}
	}
	if !slices.Equal(c.Cache.Redis.GlobalAddrs, globalAddrs) || !strings.Contains(c.Stage.NATSURL, secret) {
		t.Error("Redacted changed the running configuration")
	}
}

func TestRedactURLs(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"nats://127.0.0.1:4222", "nats://127.0.0.1:4222"},
		{"127.0.0.1:6379", "127.0.0.1:6379"},
		{"unix:///run/redis.sock", "unix:///run/redis.sock"},
		{"u:pw@10.0.0.1:6379", "<redacted>@10.0.0.1:6379"},
		{"nats://a:b@n1:4222,nats://n2:4222", "nats://<redacted>@n1:4222,nats://n2:4222"},
		{"https://h/p?k=v", "https://h/p?<redacted>"},
	} {
		if got := redactURLs(tc.in); got != tc.want {
			t.Errorf("redactURLs(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func tomlOf(t *testing.T, c Config) string {
	t.Helper()
	var b strings.Builder
	if err := toml.NewEncoder(&b).Encode(c); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

const exampleConfig = "../etc/surgepay.toml"

// TestExampleConfig keeps etc/surgepay.toml loadable, at the defaults, and
// complete: a setting added to Config without a line there fails it.
func TestExampleConfig(t *testing.T) {
	got, err := Load(exampleConfig, noEnv)
	if err != nil {
		t.Fatalf("Load(%s): %v", exampleConfig, err)
	}
	if diff := cmp.Diff(defaultsFilled(), got, ignorePath); diff != "" {
		t.Errorf("%s differs from DefaultConfig (-want +got):\n%s", exampleConfig, diff)
	}

	t.Run("NamesEverySetting", func(t *testing.T) {
		text, err := os.ReadFile(exampleConfig)
		if err != nil {
			t.Fatal(err)
		}
		// Uncomment the "# key = value" lines: the settings without a fixed
		// default are there as examples.
		uncommented := regexp.MustCompile(`(?m)^# ?([a-z_]+ = )`).ReplaceAll(text, []byte("$1"))
		// and the example tables: "# [processors.stripe_eu]".
		uncommented = regexp.MustCompile(`(?m)^# (\[[a-z_.]+\])$`).ReplaceAll(uncommented, []byte("$1"))
		var c Config
		md, err := toml.Decode(string(uncommented), &c)
		if err != nil {
			t.Fatalf("%s with its examples uncommented: %v", exampleConfig, err)
		}
		if un := md.Undecoded(); len(un) > 0 {
			t.Errorf("%s names unknown settings %v", exampleConfig, un)
		}
		var named []string
		for _, k := range md.Keys() {
			named = append(named, k.String())
		}
		// "# or key = value" lines name the alternatives of the setting
		// above them (stage.nats_token to stage.nats_user): named, but not
		// uncommented with the others, which they contradict.
		alternatives := regexp.MustCompile(`(?m)^# or ([a-z_]+ = )`).ReplaceAll(uncommented, []byte("$1"))
		mdAlt, err := toml.Decode(string(alternatives), new(Config))
		if err != nil {
			t.Fatalf("%s with its alternatives uncommented: %v", exampleConfig, err)
		}
		for _, k := range mdAlt.Keys() {
			named = append(named, k.String())
		}
		for _, k := range tomlKeys(reflect.TypeFor[Config](), "") {
			inTable := slices.ContainsFunc(named, func(n string) bool { return strings.HasPrefix(n, k+".") })
			if !slices.Contains(named, k) && !inTable {
				t.Errorf("%s does not name setting %s", exampleConfig, k)
			}
		}
		if err := c.Validate(); err != nil {
			t.Errorf("%s with its examples uncommented does not validate: %v", exampleConfig, err)
		}
	})
}

// tomlKeys lists the dotted TOML keys of the leaf fields of struct type t.
func tomlKeys(t reflect.Type, prefix string) []string {
	var keys []string
	durationType := reflect.TypeFor[Duration]()
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if name == "" || name == "-" {
			continue
		}
		if f.Type.Kind() == reflect.Struct && f.Type != durationType {
			keys = append(keys, tomlKeys(f.Type, prefix+name+".")...)
			continue
		}
		keys = append(keys, prefix+name)
	}
	return keys
}

// ignorePath leaves out Config.path, the file a configuration was read
// from, which only reloads use.
var ignorePath = cmpopts.IgnoreUnexported(Config{})

// TestRateLimitSetting: a merchant's rate_limit and rate_burst inherit the
// default section unless its own section writes them (0 included), are
// validated by name, and a reload changes them in the running engine; a
// reload with a bad value keeps the running ones.
func TestRateLimitSetting(t *testing.T) {
	path := writeFile(t, "surgepay.toml", `
[merchants.default]
rate_limit = 100
rate_burst = 500
[merchants."mer_inherits"]
processing = "standard"
[merchants."mer_own"]
rate_limit = 2.5
[merchants."mer_unlimited"]
rate_limit = 0
[merchants."mer_auto_burst"]
rate_limit = 10
rate_burst = 0
`)
	cfg, err := Load(path, noEnv)
	if err != nil {
		t.Fatalf("LoadConfig: %v", err)
	}
	set := cfg.MerchantSettings()
	for _, tc := range []struct {
		merchant      string
		limit         float64
		burst, bucket int
	}{
		{"mer_not_in_file", 100, 500, 500},
		{"mer_inherits", 100, 500, 500},
		{"mer_own", 2.5, 500, 500},
		{"mer_unlimited", 0, 500, 500},
		{"mer_auto_burst", 10, 0, 10},
	} {
		s := set.For(tc.merchant)
		if s.RateLimit != tc.limit || s.RateBurst != tc.burst || s.Burst() != tc.bucket {
			t.Errorf("%s: rate_limit %v, rate_burst %d, bucket %d; want %v, %d, %d",
				tc.merchant, s.RateLimit, s.RateBurst, s.Burst(), tc.limit, tc.burst, tc.bucket)
		}
	}
	t.Run("InCodeZeroInherits", func(t *testing.T) {
		c := defaultsFilled()
		c.Merchants = map[string]surgepay.MerchantSettings{"default": {RateLimit: 5}, "mer_x": {Processing: "standard"}}
		if got := c.MerchantSettings().For("mer_x").RateLimit; got != 5 {
			t.Errorf("mer_x rate_limit = %v, want the default's 5", got)
		}
	})

	loadConfigRefused(t, []badConfig{
		{"ErrRateLimitNegative", "[merchants.\"mer_x\"]\nrate_limit = -1\n", "merchants.mer_x.rate_limit"},
		{"ErrRateLimitTiny", "[merchants.default]\nrate_limit = 0.001\n", "merchants.default.rate_limit"},
		{"ErrRateLimitNaN", "[merchants.\"mer_x\"]\nrate_limit = nan\n", "merchants.mer_x.rate_limit"},
		{"ErrRateBurstNegative", "[merchants.\"mer_x\"]\nrate_limit = 1\nrate_burst = -3\n", "merchants.mer_x.rate_burst"},
		{"ErrRateBurstHuge", "[merchants.default]\nrate_burst = 1000001\n", "merchants.default.rate_burst"},
		{"ErrRateLimitString", "[merchants.default]\nrate_limit = \"fast\"\n", "rate_limit"},
	})
}

// TestSharedRateScope: the shared rate limits use the global Redis when
// there is one, else the server's, and none when off or without Redis.
func TestSharedRateScope(t *testing.T) {
	for _, tc := range []struct {
		name           string
		shared, server string
		global         []string
		want           cache.Scope
	}{
		{"NoRedis", "auto", "", nil, ""},
		{"Global", "auto", "unix:///run/redis.sock", []string{"10.0.0.1:6379"}, cache.ScopeGlobal},
		{"Server", "auto", "unix:///run/redis.sock", nil, cache.ScopeServer},
		{"Off", "off", "", []string{"10.0.0.1:6379"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Default()
			c.RateLimits.Shared, c.Cache.Redis.ServerAddr, c.Cache.Redis.GlobalAddrs = tc.shared, tc.server, tc.global
			if got := c.SharedRateScope(); got != tc.want {
				t.Errorf("scope %q, want %q", got, tc.want)
			}
		})
	}
}

// TestNATSAuthSettings: the stage's NATS credentials and TLS files come
// from the file or the environment, reach the JetStream stage's
// configuration, and contradicting ones are refused by name.
func TestNATSAuthSettings(t *testing.T) {
	path := writeFile(t, "surgepay.toml", `
[stage]
kind = "jetstream"
nats_url = "nats://127.0.0.1:4222"
nats_user = "surgepay"
nats_password = "in-file"
nats_tls_ca_file = "/etc/nats/ca.pem"
nats_tls_cert_file = "/etc/nats/client.pem"
nats_tls_key_file = "/etc/nats/client-key.pem"
`)
	cfg, err := Load(path, envOf(map[string]string{"SURGEPAY_NATS_PASSWORD": "from-env"}))
	if err != nil {
		t.Fatalf("LoadConfig: %v", err)
	}
	want := jetstream.Config{URL: "nats://127.0.0.1:4222", Stream: "SURGEPAY_STAGE", Subject: "surgepay.stage.captures",
		Replicas: 1, User: "surgepay", Password: "from-env", TLSCAFile: "/etc/nats/ca.pem",
		TLSCertFile: "/etc/nats/client.pem", TLSKeyFile: "/etc/nats/client-key.pem",
		PublishTimeout: jetstream.PublishTimeoutDefault, HungAfter: jetstream.HungAfterDefault,
		MaxMsgs: jetstream.MaxMsgsDefault, MaxBytes: jetstream.MaxBytesDefault}
	if diff := cmp.Diff(want, cfg.Stage.JetStream(), cmpopts.IgnoreFields(jetstream.Config{}, "Options")); diff != "" {
		t.Errorf("JetStream() (-want +got):\n%s", diff)
	}
	cfg, err = Load("", envOf(map[string]string{"SURGEPAY_NATS_TOKEN": "tok", "SURGEPAY_NATS_CREDS_FILE": "",
		"SURGEPAY_NATS_TLS_CA_FILE": "/ca.pem"}))
	if err != nil || cfg.Stage.JetStream().Token != "tok" || cfg.Stage.NATSTLSCAFile != "/ca.pem" {
		t.Errorf("SURGEPAY_NATS_TOKEN, SURGEPAY_NATS_TLS_CA_FILE: token %q, CA %q, err %v; want tok, /ca.pem, nil",
			cfg.Stage.JetStream().Token, cfg.Stage.NATSTLSCAFile, err)
	}

	loadConfigRefused(t, []badConfig{
		{"ErrTokenAndUser", "[stage]\nnats_token = \"t\"\nnats_user = \"u\"\nnats_password = \"p\"\n", "stage.nats_token"},
		{"ErrCredsAndToken", "[stage]\nnats_token = \"t\"\nnats_creds_file = \"/x.creds\"\n", "stage.nats_creds_file"},
		{"ErrUserWithoutPassword", "[stage]\nnats_user = \"u\"\n", "stage.nats_password"},
		{"ErrPasswordWithoutUser", "[stage]\nnats_password = \"p\"\n", "stage.nats_user"},
		{"ErrCertWithoutKey", "[stage]\nnats_tls_cert_file = \"/c.pem\"\n", "stage.nats_tls_key_file"},
	})
}

// badConfig is a config file Load must refuse with an error naming field.
type badConfig struct{ name, text, field string }

// loadConfigRefused checks that Load refuses each file, naming its field.
func loadConfigRefused(t *testing.T, cases []badConfig) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(writeFile(t, "bad.toml", tc.text), noEnv)
			if err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("Load = %v, want an error naming %s", err, tc.field)
			}
		})
	}
}

// TestValidateAdminToken: a SURGEPAY_ADMIN_TOKEN of the wrong length is
// refused by name, without its value.
func TestValidateAdminToken(t *testing.T) {
	if _, err := Load("", envOf(map[string]string{"SURGEPAY_ADMIN_TOKEN": "short"})); err == nil ||
		!strings.Contains(err.Error(), "SURGEPAY_ADMIN_TOKEN") || strings.Contains(err.Error(), "short") {
		t.Errorf("a 5-character SURGEPAY_ADMIN_TOKEN: %v; want refused by name, without the value", err)
	}
}

// TestValidateAdminReadToken: SURGEPAY_ADMIN_READ_TOKEN of the wrong
// length, or the admin token again, is refused by name without its
// value; tls.admin_read_only_clients needs the client CA and names that
// a certificate's recorded name can be.
func TestValidateAdminReadToken(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
	}{
		{"ErrShort", map[string]string{"SURGEPAY_ADMIN_READ_TOKEN": "short"}},
		{"ErrSameAsAdmin", map[string]string{"SURGEPAY_ADMIN_TOKEN": "same-token-0123456789", "SURGEPAY_ADMIN_READ_TOKEN": "same-token-0123456789"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load("", envOf(tc.env))
			if err == nil || !strings.Contains(err.Error(), "SURGEPAY_ADMIN_READ_TOKEN") ||
				strings.Contains(err.Error(), "short") || strings.Contains(err.Error(), "same-token") {
				t.Errorf("Load = %v; want refused naming SURGEPAY_ADMIN_READ_TOKEN, without the value", err)
			}
		})
	}
	cfg, err := Load("", envOf(map[string]string{"SURGEPAY_ADMIN_READ_TOKEN": "read-token-0123456789", "SURGEPAY_DATA_DIR": "d"}))
	if err != nil || cfg.AdminReadToken().Reveal() != "read-token-0123456789" || cfg.AdminReadTokenFile != filepath.Join("d", "admin-read-token") {
		t.Errorf("Load: %v, read token set %t, file %q; want the variable's token and d/admin-read-token", err,
			cfg.AdminReadToken() != "", cfg.AdminReadTokenFile)
	}
	tlsOK := "[tls]\ncert_file = \"c.pem\"\nkey_file = \"k.pem\"\nadmin_client_ca_file = \"ca.pem\"\n"
	cfg, err = Load(writeFile(t, "ok.toml", tlsOK+"admin_read_only_clients = [\"support-alice\", \"CN with spaces\"]\n"), noEnv)
	if err != nil || len(cfg.TLS.AdminReadOnlyClients) != 2 || len(cfg.AdminGuard(nil).ReadOnlyClients) != 2 {
		t.Errorf("two read-only client names: %v, %v", err, cfg.TLS.AdminReadOnlyClients)
	}
	loadConfigRefused(t, []badConfig{
		{"ErrReadOnlyClientsWithoutCA", "[tls]\nadmin_read_only_clients = [\"support-alice\"]\n", "tls.admin_read_only_clients"},
		{"ErrReadOnlyClientEmpty", tlsOK + "admin_read_only_clients = [\"\"]\n", "tls.admin_read_only_clients"},
		{"ErrReadOnlyClientTooLong", tlsOK + "admin_read_only_clients = [\"" + strings.Repeat("a", 65) + "\"]\n", "tls.admin_read_only_clients"},
		{"ErrReadOnlyClientControl", tlsOK + "admin_read_only_clients = [\"alice\\u0007\"]\n", "tls.admin_read_only_clients"},
		{"ErrReadOnlyClientTwice", tlsOK + "admin_read_only_clients = [\"a\", \"a\"]\n", "tls.admin_read_only_clients"},
	})
}

// TestRedisPasswordFromEnv: SURGEPAY_REDIS_PASSWORD sets the Redis
// password (over the file's), which /config never shows.
func TestRedisPasswordFromEnv(t *testing.T) {
	path := writeFile(t, "surgepay.toml", "[cache.redis]\nglobal_addrs = [\"127.0.0.1:6379\"]\npassword = \"in-file\"\n")
	cfg, err := Load(path, envOf(map[string]string{"SURGEPAY_REDIS_PASSWORD": "from-env"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Cache.Redis.Password.Reveal(); got != "from-env" {
		t.Errorf("password %q, want from-env", got)
	}
	b, err := json.Marshal(cfg.View())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "from-env") || strings.Contains(string(b), "in-file") {
		t.Errorf("the view shows the Redis password: %s", b)
	}
}

// trusted_proxies from the environment, comma-separated: addresses are
// networks of one, IPv4-mapped addresses and networks their IPv4 form,
// host bits masked.
func TestTrustedProxies(t *testing.T) {
	cfg, err := Load("", envOf(map[string]string{"SURGEPAY_TRUSTED_PROXIES": "10.1.2.3/8, 192.0.2.10,::ffff:198.51.100.7,2001:db8::/32,::ffff:0:0/104"}))
	if err != nil {
		t.Fatal(err)
	}
	got, err := cfg.TrustedProxyPrefixes()
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.10/32"),
		netip.MustParsePrefix("198.51.100.7/32"), netip.MustParsePrefix("2001:db8::/32"), netip.MustParsePrefix("0.0.0.0/8")}
	if !slices.Equal(got, want) {
		t.Errorf("trusted proxies %v, want %v", got, want)
	}
	if def := Default(); len(def.TrustedProxies) != 0 {
		t.Errorf("default trusted_proxies %v, want none", def.TrustedProxies)
	}
}
