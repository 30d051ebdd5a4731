package main

import (
	"bytes"
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

// TestKeysListRevoke: `keys list` shows the keys without their secrets;
// `keys revoke` stops a key on a running server within the api_keys
// cache's TTL (here 300 ms; process scope), while the other key works.
func TestKeysListRevoke(t *testing.T) {
	isolateEnv(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "surgepay.toml")
	conf := fmt.Sprintf("data_dir = %q\nlisten = %q\nadmin_listen = \"off\"\nlog_level = \"warn\"\n"+
		"[cache.entities.api_keys]\nscope = \"process\"\nttl = \"300ms\"\nentries_max = 1000\n", dir, freeAddr(t))
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(file, envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	s := startServe(t, cfg)
	dev := readDevKey(t, dir)
	ctx := context.Background()
	cli := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := run(ctx, append(args, "--config", file), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	code, out, errs := cli("keys", "create")
	if code != 0 {
		t.Fatalf("keys create: %d %s", code, errs)
	}
	var second, secondID string
	for _, f := range strings.Fields(out) {
		if strings.HasPrefix(f, "sk_") {
			second = f
		}
		if strings.HasPrefix(f, "key_") {
			secondID = f
		}
	}
	code, out, errs = cli("keys", "list")
	if code != 0 || strings.Count(out, "key_") != 2 || !strings.Contains(out, secondID) {
		t.Fatalf("keys list: %d %q %s", code, out, errs)
	}
	if strings.Contains(out, dev) || strings.Contains(out, second) {
		t.Fatalf("keys list shows a secret: %q", out)
	}
	c := newClient(s.url, second)
	c.must(t, "GET", "/v1/customers", "", nil, http.StatusOK, nil) // cached in serve now
	if code, out, errs = cli("keys", "revoke", secondID); code != 0 || !strings.Contains(out, "revoked") {
		t.Fatalf("keys revoke: %d %q %s", code, out, errs)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := c.do(ctx, "GET", "/v1/customers", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.status == http.StatusUnauthorized {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the revoked key still answers %d", r.status)
		}
		time.Sleep(50 * time.Millisecond)
	}
	newClient(s.url, dev).must(t, "GET", "/v1/customers", "", nil, http.StatusOK, nil)
	if code, out, _ = cli("keys", "list"); code != 0 || !strings.Contains(out, "true") {
		t.Fatalf("keys list after the revoke: %d %q", code, out)
	}
	if code, _, errs = cli("keys", "revoke", "key_unknown"); code == 0 || !strings.Contains(errs, "API key") {
		t.Fatalf("revoking an unknown key: %d %s", code, errs)
	}
}
