package main

import (
	"context"
	"log/slog"
	"os"
	"sync/atomic"

	"github.com/surgepay/surgepay/config"
	"github.com/surgepay/surgepay/internal/ops"
)

// watchConfig reloads the configuration on SIGHUP and when its file
// changes. The merchant settings take effect at once; a new configuration
// that does not validate is refused and the running one stays. Settings
// that need a restart (listen addresses, storage, keys) keep their running
// values and are named in a warning and in /config's pending_restart.
// current holds the effective configuration; hup delivers SIGHUP (the
// caller's signal.Notify, which spans the process's whole run).
func watchConfig(ctx context.Context, a *app, current *atomic.Pointer[config.Config], hup <-chan os.Signal, log *slog.Logger) {
	go ops.WatchKeyring(ctx, log, a.keys, current.Load().KeyringFile) // and the keyring file when it changes; ends with ctx
	config.Watch(ctx, current.Load().Path(), hup, func(why string) { reloadConfig(a, current, log, why) })
}

// reloadConfig reads the keyring file and the configuration again and
// applies their reloadable part: the keyring's keys, the merchant settings and, when serve started with some, the
// [processors] (adding the first needs a restart). current then holds the running
// configuration with the new merchant settings: what is in effect, not
// what the file says. The settings that differ from the running ones but
// are read only at start are kept in PendingRestart and logged by name
// (never by value: some are secrets). Not safe for concurrent use with
// itself (watchConfig is its only caller in serve).
func reloadConfig(a *app, current *atomic.Pointer[config.Config], log *slog.Logger, why string) {
	a.reloadListeners(log, why)
	old := current.Load()
	ops.ReloadKeyring(log, a.keys, old.KeyringFile, why) // before the processors, whose secrets it may seal
	cfg, err := config.Load(old.Path(), os.Getenv)
	if err != nil {
		log.Error("configuration reload refused; the running configuration stays", "why", why, "err", err.Error())
		return
	}
	if err := a.reloadProcessors(cfg); err != nil {
		log.Error("configuration reload refused; the running configuration stays", "why", why, "err", err.Error())
		return
	}
	a.eng.SetSettings(cfg.MerchantSettings())
	if a.api != nil {
		a.api.SetMerchantInflightMax(cfg.MerchantInflightMax)
	}
	eff := old.Reloaded(&cfg, a.router != nil) // processors reload too once some ran at start
	current.Store(&eff)
	log.Info("configuration reloaded", "why", why)
	if len(eff.PendingRestart()) > 0 {
		log.Warn("the configuration file changes settings that take effect only after a restart; "+
			"they keep their running values until then", "settings", eff.PendingRestart())
	}
}
