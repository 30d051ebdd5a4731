package ops

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/surgepay/surgepay/config"
	"github.com/surgepay/surgepay/engine"
	"github.com/surgepay/surgepay/provider/processors"
)

// TestReloadSettle: a continuous settle follows a merchant's analytics
// switch changed in the configuration file (serve reloads it on SIGHUP
// and file changes), and keeps its running settings when the new file
// does not validate, or when its processors cannot be rebuilt (a settle
// that started with [processors] keeps them).
func TestReloadSettle(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "surgepay.toml")
	write := func(conf string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(fmt.Sprintf("data_dir = %q\n", dir)+conf), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("[merchants.mer_a]\nanalytics = \"off\"\n")
	cfg, err := config.Load(path, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	var settings atomic.Pointer[engine.Settings]
	settings.Store(cfg.MerchantSettings())
	log := slog.New(slog.DiscardHandler)
	if got := settings.Load().For("mer_a").Analytics; got != "off" {
		t.Fatalf("at start: analytics %q, want off", got)
	}
	write("[merchants.mer_a]\nanalytics = \"on\"\n")
	ReloadSettle(cfg.Path(), &settings, nil, log, "test")
	if got := settings.Load().For("mer_a").Analytics; got != "on" {
		t.Errorf("after reload: analytics %q, want on", got)
	}
	write("[merchants.mer_a]\nanalytics = \"sometimes\"\n")
	ReloadSettle(cfg.Path(), &settings, nil, log, "test")
	if got := settings.Load().For("mer_a").Analytics; got != "on" {
		t.Errorf("after a refused reload: analytics %q, want on (the running settings)", got)
	}
	// With [processors] at start, a file without them is refused whole.
	write("[processors.eu]\nkind = \"stripe\"\nsecret_key = \"sk_test_x\"\n[merchants.mer_a]\nanalytics = \"on\"\n")
	withProcs, err := config.Load(path, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	_, rl, err := processors.OpenForSettle(withProcs)
	if err != nil || rl == nil {
		t.Fatalf("open the processors: %v", err)
	}
	write("[merchants.mer_a]\nanalytics = \"off\"\n")
	ReloadSettle(cfg.Path(), &settings, rl, log, "test")
	if got := settings.Load().For("mer_a").Analytics; got != "on" {
		t.Errorf("after a reload refused for its processors: analytics %q, want on (the running settings)", got)
	}
}
