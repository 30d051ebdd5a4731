package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestProcessorsConfig: what a [processors] section and a merchant's
// routes must hold, and the env secret.
func TestProcessorsConfig(t *testing.T) {
	good := "[processors.stripe_eu]\nkind = \"stripe\"\nsecret_key = \"sk_test_x\"\n[merchants.default]\nprocessors = [\"stripe_eu\", \"default\"]\n"
	tests := []struct {
		name, file, want string
	}{
		{"OK", good, ""},
		{"ErrUnknownProcessor", "[merchants.default]\nprocessors = [\"nope\"]\n", "merchants.default.processors"},
		{"ErrKind", "[processors.p]\nkind = \"adyen\"\nsecret_key = \"x\"\n", "processors.p.kind"},
		{"ErrNoSecret", "[processors.p]\nkind = \"stripe\"\n", "processors.p.secret_key"},
		{"ErrName", "[processors.Bad-Name]\nkind = \"stripe\"\nsecret_key = \"x\"\n", "processors.Bad-Name"},
		{"ErrDefaultName", "[processors.default]\nkind = \"stripe\"\nsecret_key = \"x\"\n", "processors.default"},
		{"ErrBaseURL", "[processors.p]\nkind = \"stripe\"\nsecret_key = \"x\"\nbase_url = \"ftp://x\"\n", "processors.p.base_url"},
		{"ErrNegativeBudget", "[processors.p]\nkind = \"stripe\"\nsecret_key = \"x\"\ncalls_per_second = -1\n", "processors.p"},
		{"ErrRouteCurrency", good + "[[merchants.default.routes]]\ncurrency = \"xyz\"\nprocessors = [\"stripe_eu\"]\n", "merchants.default.routes[0].currency"},
		{"ErrRouteEmpty", good + "[[merchants.default.routes]]\ncurrency = \"usd\"\n", "merchants.default.routes[0].processors"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "c.toml")
			if err := os.WriteFile(file, []byte(tt.file), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Load(file, envOf(nil))
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("got %v, want it accepted", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), "config "+tt.want+":")):
				t.Fatalf("got %v, want an error naming %s", err, tt.want)
			}
		})
	}
	t.Run("EnvSecret", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "c.toml")
		if err := os.WriteFile(file, []byte("[processors.stripe_eu]\nkind = \"stripe\"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := Load(file, envOf(map[string]string{"SURGEPAY_PROCESSOR_STRIPE_EU_SECRET_KEY": "sk_test_env"}))
		if err != nil || string(cfg.Processors["stripe_eu"].SecretKey) != "sk_test_env" {
			t.Fatalf("got %v, %v; want the env secret", cfg.Processors, err)
		}
	})
}
