package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/surgepay/surgepay/config"
)

// cliSeenWait bounds how long TestCLICredentialChangesReachServe waits for
// serve to refuse a key the CLI changed: far below the api_keys TTL (5
// minutes by default, which the test keeps), far above serve's poll of the
// credentials generation (half a second), so only the watch can pass it
// and a loaded machine does not fail it.
const cliSeenWait = 10 * time.Second

// TestCLICredentialChangesReachServe: `keys revoke`, `keys expire`,
// `keys roll --grace 0` and `merchants disable`, run as separate commands
// against the database of a running serve that caches API keys in its
// own memory (the default: process scope, TTL 5 minutes), are refused by
// that serve without waiting for the TTL. They used to keep working for
// the whole TTL (issue 34: 299 s, and a write with the revoked key was
// accepted meanwhile). On SQLite, and on PostgreSQL when configured.
func TestCLICredentialChangesReachServe(t *testing.T) {
	for _, be := range backends(t) {
		t.Run(be.name, func(t *testing.T) {
			isolateEnv(t)
			for k, v := range be.env(t) {
				t.Setenv(k, v) // the CLI reads the storage from the environment, as serve below
			}
			dir := t.TempDir()
			file := filepath.Join(dir, "surgepay.toml")
			conf := fmt.Sprintf("data_dir = %q\nlisten = %q\nadmin_listen = \"off\"\nlog_level = \"warn\"\n", dir, freeAddr(t))
			if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := config.Load(file, os.Getenv)
			if err != nil {
				t.Fatal(err)
			}
			s := startServe(t, cfg)
			ctx := context.Background()
			cli := func(args ...string) string { t.Helper(); return runConfig(ctx, t, file, args...) }
			field := func(out, prefix string) string {
				t.Helper()
				for _, f := range strings.Fields(out) {
					if strings.HasPrefix(f, prefix) {
						return strings.TrimRight(f, ",.:")
					}
				}
				t.Fatalf("no %s… in %q", prefix, out)
				return ""
			}
			mid := field(cli("merchants", "create", "Second shop"), "mer_")
			// newKey makes a key with the CLI and uses it once, so serve
			// caches it.
			newKey := func() (*client, string) {
				t.Helper()
				out := cli("keys", "create", "--merchant", mid)
				c := newClient(s.url, field(out, "sk_"))
				c.must(t, "GET", "/v1/customers", "", nil, http.StatusOK, nil)
				return c, field(out, "key_")
			}
			refused := func(what string, c *client, status int) {
				t.Helper()
				deadline := time.Now().Add(cliSeenWait)
				for {
					r, err := c.do(ctx, "POST", "/v1/customers", "", map[string]any{"name": "x"})
					if err != nil {
						t.Fatal(err)
					}
					if r.status == status {
						return
					}
					if time.Now().After(deadline) {
						t.Fatalf("%s by the CLI: a write answers %d %s after %v, want %d", what, r.status, r.body, cliSeenWait, status)
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
			bystander, _ := newKey()

			c, id := newKey()
			cli("keys", "revoke", id)
			refused("keys revoke", c, http.StatusUnauthorized)

			c, id = newKey()
			cli("keys", "expire", id, "--expires-in", "1s")
			refused("keys expire", c, http.StatusUnauthorized)

			c, id = newKey()
			rolled := newClient(s.url, field(cli("keys", "roll", id, "--grace", "0"), "sk_"))
			refused("keys roll --grace 0", c, http.StatusUnauthorized)
			rolled.must(t, "GET", "/v1/customers", "", nil, http.StatusOK, nil)

			cli("merchants", "disable", mid)
			refused("merchants disable", bystander, http.StatusForbidden)
			cli("merchants", "enable", mid)
			refused("merchants enable", bystander, http.StatusOK)
		})
	}
}
