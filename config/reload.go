package config

import (
	"encoding"
	"reflect"
	"slices"
	"strings"
)

// Reloaded returns the running configuration c with the settings of next
// (the file read again) that a reload applies without a restart: the
// merchants' sections, merchant_inflight_max and, when withProcessors,
// the [processors]. Its PendingRestart names the other settings in which
// next differs: they take effect at the next start.
func (c *Config) Reloaded(next *Config, withProcessors bool) Config {
	eff := *c
	eff.Merchants, eff.rateWritten = next.Merchants, next.rateWritten
	eff.MerchantInflightMax = next.MerchantInflightMax
	if withProcessors {
		eff.Processors = next.Processors
	}
	eff.pendingRestart = restartFields(&eff, next)
	return eff
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
