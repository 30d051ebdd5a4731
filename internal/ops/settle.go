package ops

import (
	"context"
	"log/slog"
	"os"
	"sync/atomic"

	"github.com/surgepay/surgepay/config"
	"github.com/surgepay/surgepay/engine"
	"github.com/surgepay/surgepay/provider/processors"
)

// WatchSettle reloads a running settle's configuration (ReloadSettle) on
// each signal from hup (SIGHUP) and when the configuration file at path
// changes, as serve does, until ctx ends.
func WatchSettle(ctx context.Context, path string, hup <-chan os.Signal, settings *atomic.Pointer[engine.Settings],
	rl *processors.SettleReloader, log *slog.Logger) {
	config.Watch(ctx, path, hup, func(why string) { ReloadSettle(path, settings, rl, log, why) })
}

// ReloadSettle reads the configuration at path again and applies what
// settle reloads: the merchant settings into settings (settle reads their
// analytics and webhooks switches) and, with rl (settle started with
// [processors]), the processors, connected anew where a secret_key was
// rolled or sealed again (the keyring file is read again first). A
// configuration that does not validate, or whose processors cannot be
// built, is refused and the running settings and processors stay. The
// rest of the configuration is read at start.
func ReloadSettle(path string, settings *atomic.Pointer[engine.Settings], rl *processors.SettleReloader, log *slog.Logger, why string) {
	cfg, err := config.Load(path, os.Getenv)
	if err == nil && rl != nil {
		err = rl.Reload(cfg)
	}
	if err != nil {
		log.Error("settle's configuration reload refused; the running settings and processors stay", "why", why, "err", err.Error())
		return
	}
	settings.Store(cfg.MerchantSettings())
	log.Info("settle's configuration reloaded (the merchant settings' analytics and webhooks switches, and the processors)", "why", why)
}
