package main

import (
	"context"
	"encoding"
	"log/slog"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// configPollInterval is how often the config file's modification time is
// checked for a reload.
const configPollInterval = 2 * time.Second

// watchConfig reloads the configuration on SIGHUP and when its file
// changes. The merchant settings take effect at once; a new configuration
// that does not validate is refused and the running one stays. Settings
// that need a restart (listen addresses, storage, keys) keep their running
// values and are named in a warning and in /config's pending_restart.
// current holds the effective configuration; hup delivers SIGHUP (the
// caller's signal.Notify, which spans the process's whole run).
func watchConfig(ctx context.Context, a *app, current *atomic.Pointer[Config], hup <-chan os.Signal, log *slog.Logger) {
	watchReloads(ctx, current.Load().path, hup, func(why string) { reloadConfig(a, current, log, why) })
}

// watchReloads calls reload on each signal from hup and whenever the file
// at path changes (polled every configPollInterval), until ctx ends.
func watchReloads(ctx context.Context, path string, hup <-chan os.Signal, reload func(why string)) {
	mtime := modTime(path)
	t := time.NewTicker(configPollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			reload("SIGHUP")
		case <-t.C:
			if m := modTime(path); path != "" && !m.Equal(mtime) {
				mtime = m
				reload("file changed")
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

// reloadConfig reads the configuration again and applies its reloadable
// part, the merchant settings and, when serve started with some, the
// [processors] (adding the first needs a restart). current then holds the running
// configuration with the new merchant settings: what is in effect, not
// what the file says. The settings that differ from the running ones but
// are read only at start are kept in pendingRestart and logged by name
// (never by value: some are secrets). Not safe for concurrent use with
// itself (watchConfig is its only caller in serve).
func reloadConfig(a *app, current *atomic.Pointer[Config], log *slog.Logger, why string) {
	a.reloadListeners(log, why)
	old := current.Load()
	cfg, err := LoadConfig(old.path, envOS)
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
	eff := *old
	eff.Merchants, eff.rateWritten = cfg.Merchants, cfg.rateWritten
	eff.MerchantInflightMax = cfg.MerchantInflightMax
	if a.router != nil { // processors reload too once some ran at start
		eff.Processors = cfg.Processors
	}
	eff.pendingRestart = restartFields(&eff, &cfg)
	current.Store(&eff)
	log.Info("configuration reloaded", "why", why)
	if len(eff.pendingRestart) > 0 {
		log.Warn("the configuration file changes settings that take effect only after a restart; "+
			"they keep their running values until then", "settings", eff.pendingRestart)
	}
}

// restartFields names, as dotted TOML keys (stage.nats_url), the settings
// of cfg that differ from the running configuration old and are read only
// at start: every setting but the merchants' sections and
// merchant_inflight_max.
func restartFields(old, cfg *Config) []string {
	var out []string
	diffKeys(reflect.ValueOf(*old), reflect.ValueOf(*cfg), "", &out)
	out = slices.DeleteFunc(out, func(k string) bool {
		return k == "merchants" || strings.HasPrefix(k, "merchants.") || k == "merchant_inflight_max"
	})
	slices.Sort(out)
	return out
}

var textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()

// diffKeys appends to out the dotted TOML keys of the leaves that differ
// between a and b, values of one type. Structs are walked by their toml
// tags (exported fields without one are left out, as the file cannot set
// them); maps by key; anything else, and types that marshal themselves
// (Duration, Secret), is one leaf.
func diffKeys(a, b reflect.Value, prefix string, out *[]string) {
	leaf := func() {
		if !reflect.DeepEqual(a.Interface(), b.Interface()) {
			*out = append(*out, strings.TrimSuffix(prefix, "."))
		}
	}
	if a.Type().Implements(textMarshalerType) {
		leaf()
		return
	}
	switch a.Kind() {
	case reflect.Struct:
		for i := range a.NumField() {
			name, _, _ := strings.Cut(a.Type().Field(i).Tag.Get("toml"), ",")
			if name == "" || name == "-" || !a.Type().Field(i).IsExported() {
				continue
			}
			diffKeys(a.Field(i), b.Field(i), prefix+name+".", out)
		}
	case reflect.Map:
		keys := map[string]reflect.Value{}
		for _, m := range []reflect.Value{a, b} {
			for _, k := range m.MapKeys() {
				keys[k.String()] = k
			}
		}
		for name, k := range keys {
			av, bv := a.MapIndex(k), b.MapIndex(k)
			if !av.IsValid() || !bv.IsValid() {
				*out = append(*out, prefix+name)
				continue
			}
			diffKeys(av, bv, prefix+name+".", out)
		}
	default:
		leaf()
	}
}
