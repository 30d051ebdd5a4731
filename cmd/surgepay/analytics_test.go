package main

import (
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/surgepay/surgepay/config"
	"github.com/surgepay/surgepay/engine"
	"github.com/surgepay/surgepay/internal/enginetest"
)

// TestAnalyticsSetting: a merchant's analytics switch inherits the
// default section, is validated by name, and a reload flips it in the
// running engine without a restart.
func TestAnalyticsSetting(t *testing.T) {
	path := writeFile(t, "surgepay.toml", `
preheat_payment_methods_max = 5000
[merchants.default]
analytics = "off"
[merchants."mer_inherits"]
processing = "standard"
[merchants."mer_on"]
analytics = "on"
`)
	cfg, err := config.Load(path, noEnv)
	if err != nil {
		t.Fatalf("LoadConfig: %v", err)
	}
	set := cfg.MerchantSettings()
	if set.Default.Analytics != "off" || set.For("mer_inherits").Analytics != "off" || set.For("mer_on").Analytics != "on" {
		t.Errorf("analytics default %q, inherited %q, own %q; want off, off, on",
			set.Default.Analytics, set.For("mer_inherits").Analytics, set.For("mer_on").Analytics)
	}
	if cfg.PreheatPaymentMethodsMax != 5000 {
		t.Errorf("preheat_payment_methods_max = %d, want 5000", cfg.PreheatPaymentMethodsMax)
	}

	loadConfigRefused(t, []badConfig{
		{"ErrAnalyticsValue", "[merchants.\"mer_x\"]\nanalytics = \"sometimes\"\n", "merchants.mer_x.analytics"},
		{"ErrPreheatNegative", "preheat_payment_methods_max = -2\n", "preheat_payment_methods_max"},
	})

	t.Run("Reload", func(t *testing.T) {
		eng := settingsEngine(t, &cfg)
		var current atomic.Pointer[config.Config]
		current.Store(&cfg)
		if err := os.WriteFile(path, []byte("[merchants.\"mer_on\"]\nanalytics = \"off\"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		reloadConfig(&app{eng: eng}, &current, slog.New(slog.DiscardHandler), "test")
		if got := eng.SettingsFor("mer_on").Analytics; got != "off" {
			t.Errorf("after the reload mer_on's analytics = %q, want off", got)
		}
		if got := eng.SettingsFor("mer_other").Analytics; got != "on" {
			t.Errorf("after the reload the default analytics = %q, want on", got)
		}
	})
}

// badConfig is a config file LoadConfig must refuse with an error naming
// field.
type badConfig struct{ name, text, field string }

// loadConfigRefused checks that LoadConfig refuses each file, naming its
// field.
func loadConfigRefused(t *testing.T, cases []badConfig) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Load(writeFile(t, "bad.toml", tc.text), noEnv)
			if err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("LoadConfig = %v, want an error naming %s", err, tc.field)
			}
		})
	}
}

// settingsEngine returns an engine on a fresh SQLite store with the
// simulator, running cfg's merchant settings, for reload tests.
func settingsEngine(t *testing.T, cfg *config.Config) *engine.Engine {
	t.Helper()
	return enginetest.SQLite(t, cfg.MerchantSettings())
}
