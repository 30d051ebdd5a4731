package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/google/go-cmp/cmp"

	"github.com/surgepay/surgepay/api"
	"github.com/surgepay/surgepay/config"
	"github.com/surgepay/surgepay/provider/processors"
	"github.com/surgepay/surgepay/provider/sim"
)

// envOf returns an environment lookup over m, so that tests never read the
// process environment.
func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

var noEnv = envOf(nil)

// defaultsFilled is the default configuration with the paths config.Load
// derives from data_dir.
func defaultsFilled() config.Config {
	c, err := config.Load("", noEnv)
	if err != nil {
		panic(err)
	}
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

// TestOpenProviderSimRecords: provider.records_max and records_retention
// reach the in-process simulator.
func TestOpenProviderSimRecords(t *testing.T) {
	c := defaultsFilled()
	c.Provider.RecordsMax, c.Provider.RecordsRetention = 5000, config.Duration{Duration: 2 * time.Hour}
	prov, err := processors.OpenProvider(c)
	if err != nil {
		t.Fatal(err)
	}
	got := prov.(*sim.Provider).Config()
	if got.RecordsMax != 5000 || got.Retention != sim.Duration(2*time.Hour) {
		t.Fatalf("simulator config: records_max %d, retention %s; want 5000 and 2h", got.RecordsMax, got.Retention)
	}
}

// TestReloadRateLimit: a reload changes the merchants' rate_limit and
// rate_burst in the running engine; a reload with a bad value keeps the
// running ones.
func TestReloadRateLimit(t *testing.T) {
	path := writeFile(t, "surgepay.toml", "[merchants.default]\nrate_limit = 100\nrate_burst = 500\n")
	cfg, err := config.Load(path, noEnv)
	if err != nil {
		t.Fatalf("config.Load: %v", err)
	}
	t.Run("Reload", func(t *testing.T) {
		eng := settingsEngine(t, &cfg)
		var current atomic.Pointer[config.Config]
		current.Store(&cfg)
		reload := func(text string) {
			t.Helper()
			if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
			reloadConfig(&app{eng: eng}, &current, slog.New(slog.DiscardHandler), "test")
		}

		reload("[merchants.default]\nrate_limit = 100\n[merchants.\"mer_own\"]\nrate_limit = 1000\nrate_burst = 2000\n")
		if s := eng.SettingsFor("mer_own"); s.RateLimit != 1000 || s.RateBurst != 2000 {
			t.Errorf("after raising it mer_own's rate_limit, rate_burst = %v, %d; want 1000, 2000", s.RateLimit, s.RateBurst)
		}
		reload("[merchants.\"mer_own\"]\nrate_limit = -5\n")
		if s := eng.SettingsFor("mer_own"); s.RateLimit != 1000 || s.RateBurst != 2000 {
			t.Errorf("after a bad reload mer_own's rate_limit, rate_burst = %v, %d; want the running 1000, 2000", s.RateLimit, s.RateBurst)
		}
		reload("")
		if s := eng.SettingsFor("mer_own"); s.RateLimit != 0 {
			t.Errorf("after removing the limits mer_own's rate_limit = %v, want 0", s.RateLimit)
		}
	})
}

// TestReloadEffectiveConfig: a reload applies the merchant settings and
// nothing else, so the configuration it leaves (what /config shows) is
// the running one with the new merchant settings; the settings the file
// changed that need a restart are named in pending_restart and in a
// warning, by key and never by value. (Before, a reload stored the whole
// file: /config showed an inflight_max and a NATS URL not in effect.)
func TestReloadEffectiveConfig(t *testing.T) {
	const secret = "reload-Pw0rd"
	path := writeFile(t, "surgepay.toml", "inflight_max = 100\n")
	cfg, err := config.Load(path, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	eng := settingsEngine(t, &cfg)
	var current atomic.Pointer[config.Config]
	current.Store(&cfg)
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	reload := func(text string) *config.Config {
		t.Helper()
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		reloadConfig(&app{eng: eng}, &current, log, "test")
		return current.Load()
	}

	got := reload("inflight_max = 200\n[stage]\nnats_url = \"nats://u:" + secret + "@n1:4222\"\n" +
		"[cache.entities.api_keys]\nttl = \"1m\"\n[merchants.default]\nrate_limit = 7\n")
	if got.InflightMax != 100 || got.Stage.NATSURL != "" || got.Cache.Entities["api_keys"].TTL != cfg.Cache.Entities["api_keys"].TTL {
		t.Errorf("after the reload inflight_max %d, stage.nats_url %q, api_keys ttl %s; want the running 100, \"\", %s",
			got.InflightMax, got.Stage.NATSURL, got.Cache.Entities["api_keys"].TTL, cfg.Cache.Entities["api_keys"].TTL)
	}
	if s := eng.SettingsFor("mer_x"); s.RateLimit != 7 || got.MerchantSettings().Default.RateLimit != 7 {
		t.Errorf("after the reload the engine's rate_limit %v, the configuration's %v; want 7 and 7",
			s.RateLimit, got.MerchantSettings().Default.RateLimit)
	}
	wantPending := []string{"cache.entities.api_keys.ttl", "inflight_max", "stage.nats_url"}
	if diff := cmp.Diff(wantPending, got.PendingRestart()); diff != "" {
		t.Errorf("pending restart (-want +got):\n%s", diff)
	}
	var view bytes.Buffer
	if err := toml.NewEncoder(&view).Encode(got.View()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`pending_restart = ["cache.entities.api_keys.ttl", "inflight_max", "stage.nats_url"]`,
		"inflight_max = 100", "rate_limit = 7.0"} {
		if !strings.Contains(view.String(), want) {
			t.Errorf("/config lacks %s:\n%s", want, view.String())
		}
	}
	if !strings.Contains(logs.String(), "stage.nats_url") || strings.Contains(logs.String()+view.String(), secret) {
		t.Errorf("the reload's log should name stage.nats_url and show no secret:\n%s", logs.String())
	}

	if got := reload("inflight_max = 100\n[merchants.default]\nrate_limit = 8\n"); len(got.PendingRestart()) != 0 ||
		got.MerchantSettings().Default.RateLimit != 8 {
		t.Errorf("with the file back at the running values: pending %v, rate_limit %v; want none, 8",
			got.PendingRestart(), got.MerchantSettings().Default.RateLimit)
	}
	before := current.Load()
	if got := reload("inflight_max = -1\n[merchants.default]\nrate_limit = 9\n"); got != before || eng.SettingsFor("mer_x").RateLimit != 8 {
		t.Errorf("a refused reload changed the configuration (rate_limit %v), want the running one kept", eng.SettingsFor("mer_x").RateLimit)
	}
}

// TestReloadMerchantInflightMax: merchant_inflight_max reaches the
// running API server on a reload, without a restart, and is shown by
// /config as running, not pending.
func TestReloadMerchantInflightMax(t *testing.T) {
	path := writeFile(t, "surgepay.toml", "inflight_max = 100\nmerchant_inflight_max = 10\n")
	cfg, err := config.Load(path, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	eng := settingsEngine(t, &cfg)
	srv := api.New(api.Config{Engine: eng, InflightMax: cfg.InflightMax, MerchantInflightMax: cfg.MerchantInflightMax})
	var current atomic.Pointer[config.Config]
	current.Store(&cfg)
	if err := os.WriteFile(path, []byte("inflight_max = 100\nmerchant_inflight_max = 20\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	reloadConfig(&app{eng: eng, api: srv}, &current, slog.New(slog.DiscardHandler), "test")
	got := current.Load()
	if got.MerchantInflightMax != 20 || len(got.PendingRestart()) != 0 {
		t.Errorf("after the reload merchant_inflight_max %d, pending %v; want 20, none", got.MerchantInflightMax, got.PendingRestart())
	}
	if n := srv.MerchantInflightMax(); n != 20 {
		t.Errorf("the API server's merchant share after the reload = %d, want 20", n)
	}
}
