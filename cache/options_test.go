package cache

import (
	"crypto/tls"
	"slices"
	"testing"
	"time"
)

// TestClientOptions checks the Redis client options each deployment
// builds, without running a Sentinel or a Cluster.
func TestClientOptions(t *testing.T) {
	base := func() Config {
		c := DefaultConfig()
		c.Redis.Username, c.Redis.Password, c.Redis.DB = "surgepay", "pw", 2
		return c.withDefaults()
	}
	t.Run("Sentinel", func(t *testing.T) {
		cfg := base()
		cfg.Redis.GlobalAddrs = []string{"s1:26379", "s2:26379", "s3:26379"}
		cfg.Redis.SentinelMaster = "surgepay-master"
		opt, err := clientOptions(ScopeGlobal, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if opt.Sentinel.MasterSet != "surgepay-master" {
			t.Errorf("Sentinel.MasterSet = %q, want surgepay-master", opt.Sentinel.MasterSet)
		}
		if !slices.Equal(opt.InitAddress, cfg.Redis.GlobalAddrs) {
			t.Errorf("InitAddress = %v, want the sentinels %v", opt.InitAddress, cfg.Redis.GlobalAddrs)
		}
		if opt.ForceSingleClient {
			t.Error("ForceSingleClient = true, want false: the client must follow the sentinels")
		}
		if opt.Password != "pw" || opt.Sentinel.Password != "pw" || opt.Username != "surgepay" || opt.Sentinel.Username != "surgepay" {
			t.Errorf("auth = %q/%q, sentinel %q/%q; want surgepay/pw for both", opt.Username, opt.Password, opt.Sentinel.Username, opt.Sentinel.Password)
		}
		if opt.SelectDB != 2 {
			t.Errorf("SelectDB = %d, want 2", opt.SelectDB)
		}
		if opt.TLSConfig != nil || opt.Sentinel.TLSConfig != nil {
			t.Error("TLS configured, want none: tls = false")
		}
		if opt.Sentinel.Dialer.Timeout != DialTimeoutDefault {
			t.Errorf("Sentinel.Dialer.Timeout = %s, want %s", opt.Sentinel.Dialer.Timeout, DialTimeoutDefault)
		}
	})
	t.Run("SentinelTLS", func(t *testing.T) {
		cfg := base()
		cfg.Redis.GlobalAddrs, cfg.Redis.SentinelMaster, cfg.Redis.TLS = []string{"s1:26379"}, "m", true
		opt, _ := clientOptions(ScopeGlobal, cfg)
		if opt.TLSConfig == nil || opt.Sentinel.TLSConfig == nil || opt.TLSConfig.MinVersion != tls.VersionTLS12 {
			t.Errorf("TLSConfig %v, Sentinel.TLSConfig %v; want TLS 1.2+ for both", opt.TLSConfig, opt.Sentinel.TLSConfig)
		}
		srv := cfg
		srv.Redis.ServerAddr = "unix:///run/r.sock"
		if opt, _ := clientOptions(ScopeServer, srv); opt.TLSConfig != nil {
			t.Error("server scope uses TLS, want plain: it is local")
		}
	})
	t.Run("Cluster", func(t *testing.T) {
		cfg := base()
		cfg.Redis.DB = 0
		cfg.Redis.GlobalAddrs = []string{"n1:6379", "n2:6379"}
		cfg.Redis.Cluster = true
		opt, err := clientOptions(ScopeGlobal, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if opt.ForceSingleClient || opt.Sentinel.MasterSet != "" || !opt.ShuffleInit {
			t.Errorf("ForceSingleClient %v, MasterSet %q, ShuffleInit %v; want false, empty, true", opt.ForceSingleClient, opt.Sentinel.MasterSet, opt.ShuffleInit)
		}
	})
	t.Run("Standalone", func(t *testing.T) {
		cfg := base()
		cfg.Redis.GlobalAddrs = []string{"redis:6379"}
		opt, _ := clientOptions(ScopeGlobal, cfg)
		if !opt.ForceSingleClient || opt.DialCtxFn != nil || !slices.Equal(opt.InitAddress, []string{"redis:6379"}) {
			t.Errorf("ForceSingleClient %v, DialCtxFn set %v, InitAddress %v", opt.ForceSingleClient, opt.DialCtxFn != nil, opt.InitAddress)
		}
	})
	t.Run("ServerUnixSocket", func(t *testing.T) {
		cfg := base()
		cfg.Redis.ServerAddr = "unix:///run/surgepay/redis.sock"
		opt, _ := clientOptions(ScopeServer, cfg)
		if opt.DialCtxFn == nil || !slices.Equal(opt.InitAddress, []string{"/run/surgepay/redis.sock"}) || !opt.ForceSingleClient {
			t.Errorf("DialCtxFn set %v, InitAddress %v, ForceSingleClient %v; want a unix dialer to /run/surgepay/redis.sock",
				opt.DialCtxFn != nil, opt.InitAddress, opt.ForceSingleClient)
		}
	})
	t.Run("Bounds", func(t *testing.T) {
		cfg := base()
		cfg.Redis.GlobalAddrs = []string{"redis:6379"}
		cfg.ClientSideTTL = 0
		opt, _ := clientOptions(ScopeGlobal, cfg)
		if !opt.DisableCache || !opt.DisableRetry || opt.PipelineMultiplex != 2 || opt.CacheSizeEachConn != ClientSideBytesPerConnDefault {
			t.Errorf("DisableCache %v, DisableRetry %v, PipelineMultiplex %d, CacheSizeEachConn %d",
				opt.DisableCache, opt.DisableRetry, opt.PipelineMultiplex, opt.CacheSizeEachConn)
		}
		if opt.ConnWriteTimeout < time.Second {
			t.Errorf("ConnWriteTimeout = %s, want at least 1s", opt.ConnWriteTimeout)
		}
	})
}

func TestMultiplex(t *testing.T) {
	for conns, want := range map[int]int{1: -1, 2: 1, 4: 2, 8: 3, 256: 8} {
		if got := multiplex(conns); got != want {
			t.Errorf("multiplex(%d) = %d, want %d", conns, got, want)
		}
	}
}
