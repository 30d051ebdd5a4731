package config

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const referenceFile = "../docs/configuration.md"

// TestReferenceUpToDate keeps docs/configuration.md what the model
// generates: a setting added without its entry in settingDocs fails
// Reference, and one added with it fails here until the file is made
// again with `go generate ./config/`.
func TestReferenceUpToDate(t *testing.T) {
	want, err := Reference()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(referenceFile)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s is not what the model generates; run `go generate ./config/` (-want +got):\n%s", referenceFile, diff)
	}
}

// TestReferenceEveryKey: every setting of the model, and only those, has
// its documentation.
func TestReferenceEveryKey(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range settings(Default()) {
		seen[s.Key] = true
		if d, ok := settingDocs[s.Key]; !ok || d.Doc == "" {
			t.Errorf("setting %s has no documentation in settingDocs", s.Key)
		}
	}
	for k := range settingDocs {
		if !seen[k] {
			t.Errorf("settingDocs documents %s, which the model does not have", k)
		}
	}
}

// field returns the value at a dotted key of c ("<name>" and "[]" keys
// have none).
func field(c *Config, key string) reflect.Value {
	v := reflect.ValueOf(c).Elem()
	for _, part := range strings.Split(key, ".") {
		found := false
		for i := range v.NumField() {
			name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("toml"), ",")
			if name == part {
				v, found = v.Field(i), true
				break
			}
		}
		if !found {
			return reflect.Value{}
		}
	}
	return v
}

// sampleEnv is a value for an environment variable of a setting of type
// t that differs from def.
func sampleEnv(t reflect.Type, def reflect.Value) string {
	switch typeName(t) {
	case "bool":
		if def.Bool() {
			return "false"
		}
		return "true"
	case "integer":
		return "12345"
	case "number":
		return "0.5"
	case "duration":
		return "7s"
	}
	return "sample-value"
}

// TestReferenceEnv: each environment variable the reference names for a
// setting sets that setting.
func TestReferenceEnv(t *testing.T) {
	for _, s := range settings(Default()) {
		d := settingDocs[s.Key]
		if d.Env == "" || strings.Contains(s.Key, "<name>") {
			continue
		}
		for _, name := range strings.Split(d.Env, ", ") {
			t.Run(name, func(t *testing.T) {
				c := Default()
				value := sampleEnv(s.Type, s.Default)
				env := func(k string) string {
					if k == name {
						return value
					}
					return ""
				}
				if err := c.applyEnv(env); err != nil {
					t.Fatal(err)
				}
				if err := c.Telemetry.ApplyEnv(env); err != nil {
					t.Fatal(err)
				}
				if got := field(&c, s.Key); reflect.DeepEqual(got.Interface(), s.Default.Interface()) {
					t.Errorf("%s=%s left %s at %v", name, value, s.Key, got)
				}
			})
		}
	}
	t.Run("Sections", func(t *testing.T) {
		c := Default()
		c.Processors = map[string]ProcessorConfig{"eu": {}}
		env := envOf(map[string]string{"SURGEPAY_PROCESSING": "streamlined", "SURGEPAY_PROCESSOR_EU_SECRET_KEY": "sk",
			"SURGEPAY_PROCESSOR_EU_WEBHOOK_SECRET": "whsec"})
		if err := c.applyEnv(env); err != nil {
			t.Fatal(err)
		}
		c.processorEnv(env)
		if p := c.Processors["eu"]; c.Merchants["default"].Processing != "streamlined" || p.SecretKey != "sk" || p.WebhookSecret != "whsec" {
			t.Errorf("processing %q, secret_key set %v, webhook_secret set %v; want streamlined, true, true",
				c.Merchants["default"].Processing, p.SecretKey != "", p.WebhookSecret != "")
		}
	})
}

// TestReferenceNamesEveryEnv: every SURGEPAY_* variable the model reads
// is named in docs/configuration.md.
func TestReferenceNamesEveryEnv(t *testing.T) {
	doc, err := Reference()
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"config.go", "processors.go", "../telemetry/config.go"}
	re := regexp.MustCompile(`"(SURGEPAY_[A-Z0-9_]*)"`)
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(src), -1) {
			name := m[1]
			if name == "SURGEPAY_PROCESSOR_" {
				name = "SURGEPAY_PROCESSOR_<NAME>_"
			}
			if !strings.Contains(string(doc), name) {
				t.Errorf("%s reads %s, which docs/configuration.md does not name", f, m[1])
			}
		}
	}
}

// TestReferenceSectionDefaults: the defaults the reference states for the
// settings of named sections ([merchants.*], [processors.*],
// [cache.entities.*]) are the model's: the value a default text starts
// with is what a section left empty gets.
func TestReferenceSectionDefaults(t *testing.T) {
	c := Default()
	c.Processors = map[string]ProcessorConfig{"p": {}}
	c.fillProcessorDefaults()
	sections := map[string]reflect.Value{
		"merchants.<name>.":      reflect.ValueOf(c.MerchantSettings().Default),
		"processors.<name>.":     reflect.ValueOf(c.Processors["p"]),
		"cache.entities.<name>.": reflect.ValueOf(c.Cache.Entities["api_keys"]),
	}
	first := regexp.MustCompile("^`[\"0-9-][^`]*`") // a value, not a setting's name
	checked := 0
	for _, s := range settings(c) {
		for prefix, v := range sections {
			name, ok := strings.CutPrefix(s.Key, prefix)
			if !ok || strings.Contains(name, ".") || strings.Contains(name, "[]") {
				continue
			}
			stated := first.FindString(settingDocs[s.Key].Default)
			if stated == "" {
				continue
			}
			var value reflect.Value
			for i := range v.NumField() {
				if tag, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("toml"), ","); tag == name {
					value = v.Field(i)
				}
			}
			if got := defaultText(value); got != stated {
				t.Errorf("%s: the reference says %s, the model's default is %s", s.Key, stated, got)
			}
			checked++
		}
	}
	if checked < 15 {
		t.Errorf("checked %d section defaults, want 15 or more", checked)
	}
}
