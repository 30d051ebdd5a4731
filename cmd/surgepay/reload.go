package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"reflect"
	"sync/atomic"
	"syscall"
	"time"
)

// configPollInterval is how often the config file's modification time is
// checked for a reload.
const configPollInterval = 2 * time.Second

// watchConfig reloads the configuration on SIGHUP and when its file
// changes. The merchant settings take effect at once; a new configuration
// that does not validate is refused and the running one stays. Settings
// that need a restart (listen addresses, storage, keys) are named in a
// warning. current holds the effective configuration.
func watchConfig(ctx context.Context, a *app, current *atomic.Pointer[Config], log *slog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	path := current.Load().path
	mtime := modTime(path)
	t := time.NewTicker(configPollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			reloadConfig(a, current, log, "SIGHUP")
		case <-t.C:
			if m := modTime(path); path != "" && !m.Equal(mtime) {
				mtime = m
				reloadConfig(a, current, log, "file changed")
			}
		}
	}
}

func modTime(path string) time.Time {
	if path == "" {
		return time.Time{}
	}
	fi, err := os.Stat(path)
	if err != nil {
		return time.Time{}
	}
	return fi.ModTime()
}

func reloadConfig(a *app, current *atomic.Pointer[Config], log *slog.Logger, why string) {
	old := current.Load()
	cfg, err := LoadConfig(old.path, envOS)
	if err != nil {
		log.Error("configuration reload refused; the running configuration stays", "why", why, "err", err.Error())
		return
	}
	a.eng.SetSettings(cfg.MerchantSettings())
	current.Store(&cfg)
	log.Info("configuration reloaded", "why", why)
	if restart := restartFields(old, &cfg); len(restart) > 0 {
		log.Warn("changed settings that take effect only after a restart", "settings", restart)
	}
}

// restartFields names the top-level settings that changed but are read
// only at start.
func restartFields(old, cfg *Config) []string {
	var out []string
	ov, nv := reflect.ValueOf(*old), reflect.ValueOf(*cfg)
	for i := 0; i < ov.NumField(); i++ {
		f := ov.Type().Field(i)
		if !f.IsExported() || f.Name == "Merchants" {
			continue
		}
		if !reflect.DeepEqual(ov.Field(i).Interface(), nv.Field(i).Interface()) {
			out = append(out, f.Tag.Get("toml"))
		}
	}
	return out
}
