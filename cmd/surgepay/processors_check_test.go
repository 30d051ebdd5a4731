package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigShowsProcessorDefaults: /config showed timeout = "0s",
// conns_max = 0 and search_lag = "0s" for a processor that left them
// out, where the documented defaults apply; it now shows those in effect.
func TestConfigShowsProcessorDefaults(t *testing.T) {
	file := filepath.Join(t.TempDir(), "c.toml")
	conf := "[processors.stripe_eu]\nkind = \"stripe\"\nsecret_key = \"sk_test_x\"\ncalls_per_second = 20\n" +
		"[processors.stripe_us]\nkind = \"stripe\"\nsecret_key = \"sk_test_y\"\ntimeout = \"20m\"\nretries_max = -1\nconns_max = 8\n"
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(file, envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	admin := httptest.NewServer(newAdminHandler(adminConfig{Config: func() any { return cfg.adminView() }, Auth: testAdminAuth}))
	defer admin.Close()
	code, body := getAuth(t, admin.URL+"/config", testAdminToken)
	if code != http.StatusOK {
		t.Fatalf("GET /config: status %d, want 200: %s", code, body)
	}
	section := func(name string) string {
		_, rest, _ := strings.Cut(body, "[processors."+name+"]")
		if i := strings.Index(rest, "\n["); i >= 0 {
			rest = rest[:i]
		}
		return rest
	}
	for name, want := range map[string][]string{
		"stripe_eu": {`timeout = "30s"`, "conns_max = 64", "retries_max = 2", `search_lag = "15m0s"`, `budget_wait = "50ms"`,
			"inflight_max = 64", "settle_calls_per_second = 20.0"},
		// Set values stay; the search lag is never less than the timeout,
		// as the connector takes it.
		"stripe_us": {`timeout = "20m0s"`, "conns_max = 8", "retries_max = -1", `search_lag = "20m0s"`, "inflight_max = 8"},
	} {
		got := section(name)
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Errorf("[processors.%s] in /config: got\n%s\nwant %s", name, got, w)
			}
		}
	}
}
