package cache_test

import (
	"strings"
	"testing"
	"time"

	"github.com/surgepay/surgepay/cache"
	"github.com/surgepay/surgepay/cache/redistest"
	"github.com/surgepay/surgepay/internal/tlstest"
)

// TestRedisTLS: the global scope reaches a redis-server that speaks only
// TLS on its port and verifies clients, with tls = true, the CA file that
// signs the server's certificate and a client certificate: a miss is
// written back through it. Without the CA file (the system's roots) or
// without the client certificate, nothing reaches Redis and Gets fall
// back to the loader.
func TestRedisTLS(t *testing.T) {
	serverCA, clientCA := tlstest.NewCA(t, "redis-server-ca"), tlstest.NewCA(t, "redis-client-ca")
	cert := serverCA.Server("redis")
	srv := redistest.StartTLS(t, redistest.TLSOptions{CertFile: cert.CertFile, KeyFile: cert.KeyFile,
		CAFile: clientCA.CertFile, AuthClients: true})
	client := clientCA.Client("surgepay")
	tlsConfig := func(ca bool, clientCert bool) cache.Config {
		cfg := sharedConfig(cache.ScopeGlobal, srv)
		cfg.Redis.GlobalAddrs = []string{srv.TLSAddr}
		cfg.Redis.TLS = true
		if ca {
			cfg.Redis.TLSCAFile = serverCA.CertFile
		}
		if clientCert {
			cfg.Redis.TLSCertFile, cfg.Redis.TLSKeyFile = client.CertFile, client.KeyFile
		}
		return cfg
	}
	src := newSource()
	for _, k := range []string{"ok", "no-ca", "no-client-cert"} {
		src.put(k, "v-"+k)
	}
	t.Run("OK", func(t *testing.T) {
		c := newCache(t, tlsConfig(true, true))
		tab := cache.Entity[string](c, cache.Customers, nil)
		if v := mustGet(t, tab, "ok", src.loader("ok")); v != "v-ok" {
			t.Fatalf("Get = %q, want v-ok", v)
		}
		waitWrittenBack(t, srv, cache.Customers, "ok")
	})
	for _, tc := range []struct {
		name           string
		ca, clientCert bool
	}{{"ErrNoCAFile", false, true}, {"ErrNoClientCert", true, false}} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCache(t, tlsConfig(tc.ca, tc.clientCert))
			tab := cache.Entity[string](c, cache.Customers, nil)
			key := map[bool]string{false: "no-ca", true: "no-client-cert"}[tc.ca]
			if v := mustGet(t, tab, key, src.loader(key)); v != "v-"+key {
				t.Fatalf("Get = %q, want the loader's v-%s", v, key)
			}
			if fallbacks(c) == 0 {
				t.Error("no fallback counted: the Get did not try Redis")
			}
			time.Sleep(200 * time.Millisecond) // a write-back, if any, would land within it
			if r, _ := srv.Do("EXISTS", "test:v1:"+cache.Customers+":"+key); r != ":0" {
				t.Errorf("EXISTS %s = %s, want :0: nothing reaches Redis over an unverified TLS connection", key, r)
			}
		})
	}
	t.Run("ErrSettings", func(t *testing.T) {
		for _, tc := range []struct {
			change func(*cache.RedisConfig)
			want   string
		}{
			{func(r *cache.RedisConfig) { r.TLS = false }, "need cache.redis.tls = true"},
			{func(r *cache.RedisConfig) { r.TLSKeyFile = "" }, "go together"},
		} {
			cfg := tlsConfig(true, true)
			tc.change(&cfg.Redis)
			if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate: %v, want an error with %q", err, tc.want)
			}
		}
	})
}
