package config

import (
	"bytes"
	"encoding"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/surgepay/surgepay/cache"
)

//go:generate go run ./gendoc ../docs/configuration.md

// setting is one leaf of the configuration model: a dotted TOML key
// ("sqlite.batch_size_max"; "<name>" stands for a section's name in a
// table of sections, "[]" for an array of tables), its Go type and its
// default (invalid where the default depends on the section's name).
type setting struct {
	Key     string
	Type    reflect.Type
	Default reflect.Value
}

var (
	textMarshaler   = reflect.TypeFor[encoding.TextMarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
	durationType    = reflect.TypeFor[time.Duration]()
)

// settings lists every leaf of the model under Config, in the order of
// its fields, with its default from def.
func settings(def Config) []setting {
	var out []setting
	walk(reflect.ValueOf(def), reflect.TypeFor[Config](), "", &out)
	return out
}

func walk(v reflect.Value, t reflect.Type, prefix string, out *[]setting) {
	leaf := t.Implements(textMarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler) || t == durationType
	switch {
	case !leaf && t.Kind() == reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
			if name == "" || name == "-" || !f.IsExported() {
				continue
			}
			var fv reflect.Value
			if v.IsValid() {
				fv = v.Field(i)
			}
			walk(fv, f.Type, prefix+name+".", out)
		}
	case !leaf && t.Kind() == reflect.Map && t.Elem().Kind() == reflect.Struct:
		walk(reflect.Value{}, t.Elem(), prefix+"<name>.", out)
	case !leaf && t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct:
		walk(reflect.Value{}, t.Elem(), strings.TrimSuffix(prefix, ".")+"[].", out)
	default:
		*out = append(*out, setting{Key: strings.TrimSuffix(prefix, "."), Type: t, Default: v})
	}
}

// typeName names a setting's type for a reader of the file.
func typeName(t reflect.Type) string {
	switch {
	case t == reflect.TypeFor[Duration]() || t == durationType:
		return "duration"
	case t == reflect.TypeFor[cache.Secret]():
		return "secret string"
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "bool"
	case reflect.Int, reflect.Int32, reflect.Int64:
		return "integer"
	case reflect.Float64:
		return "number"
	case reflect.Slice:
		return "list of " + typeName(t.Elem()) + "s"
	}
	return t.String()
}

// defaultText writes a default value as it would be written in the file.
func defaultText(v reflect.Value) string {
	if !v.IsValid() {
		return ""
	}
	if v.Type() == durationType {
		return fmt.Sprintf("`%q`", durationText(time.Duration(v.Int())))
	}
	if d, ok := v.Interface().(Duration); ok {
		return fmt.Sprintf("`%q`", durationText(d.Duration))
	}
	if m, ok := v.Interface().(encoding.TextMarshaler); ok {
		b, _ := m.MarshalText()
		if len(b) == 0 {
			return "none"
		}
		return fmt.Sprintf("`%q`", b)
	}
	switch v.Kind() {
	case reflect.String:
		if v.String() == "" {
			return "none"
		}
		return fmt.Sprintf("`%q`", v.String())
	case reflect.Slice:
		if v.Len() == 0 {
			return "none"
		}
		var parts []string
		for i := range v.Len() {
			parts = append(parts, fmt.Sprintf("%q", v.Index(i).Interface()))
		}
		return "`[" + strings.Join(parts, ", ") + "]`"
	}
	return fmt.Sprintf("`%v`", v.Interface())
}

// Reference returns docs/configuration.md: every setting of the model,
// by section, with its environment variable, type, default and meaning
// (settingDocs). It fails when a setting has no entry there, or an
// entry names no setting: a setting cannot be added undocumented.
func Reference() ([]byte, error) {
	def, err := Load("", func(string) string { return "" })
	if err != nil {
		return nil, err
	}
	all := settings(def)
	var missing []string
	seen := map[string]bool{}
	for _, s := range all {
		seen[s.Key] = true
		if _, ok := settingDocs[s.Key]; !ok {
			missing = append(missing, s.Key)
		}
	}
	for k := range settingDocs {
		if !seen[k] {
			missing = append(missing, k+" (documented, but no such setting)")
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return nil, fmt.Errorf("config: settings without documentation in settingDocs: %s", strings.Join(missing, ", "))
	}
	var b bytes.Buffer
	b.WriteString(referenceIntro)
	var order []string
	bySection := map[string][]setting{}
	for _, s := range all {
		sec, _, nested := strings.Cut(s.Key, ".")
		if !nested {
			sec = ""
		}
		if _, ok := bySection[sec]; !ok {
			order = append(order, sec)
		}
		bySection[sec] = append(bySection[sec], s)
	}
	for _, sec := range order {
		title, intro := sectionDocs[sec][0], sectionDocs[sec][1]
		fmt.Fprintf(&b, "\n## %s\n\n%s\n\n| setting | env | type | default | meaning |\n|---|---|---|---|---|\n", title, intro)
		for _, s := range bySection[sec] {
			d := settingDocs[s.Key]
			dflt := d.Default
			if dflt == "" {
				dflt = defaultText(s.Default)
			}
			env := ""
			if d.Env != "" {
				env = "`" + strings.ReplaceAll(d.Env, ", ", "`, `") + "`"
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", s.Key, env, typeName(s.Type), dflt, d.Doc)
		}
	}
	return b.Bytes(), nil
}

// durationText writes d as the file would: "24h", "1m", "250ms".
func durationText(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
