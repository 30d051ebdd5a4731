package main

import (
	"bytes"
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/surgepay/surgepay/config"
	"github.com/surgepay/surgepay/vault"
)

// TestKeysReencryptBesideServe: a card saved under the first data key, a
// rotation, then `keys reencrypt` and `keys retire` run beside a serving
// process on the same SQLite file; once serve has reloaded the keyring
// without the old key, a sale on the card (which serve cached under the
// old key) still succeeds.
func TestKeysReencryptBesideServe(t *testing.T) {
	file, cfg, srv := serveFromFile(t, "")
	cli := func(args ...string) string { t.Helper(); return runConfig(context.Background(), t, file, args...) }
	c := newClient(srv.url, readDevKey(t, cfg.DataDir))
	var cus, pm object
	c.must(t, "POST", "/v1/customers", "cus", map[string]any{"name": "Ada"}, http.StatusOK, &cus)
	c.must(t, "POST", "/v1/payment_methods", "pm", map[string]any{"customer": cus.ID,
		"card": map[string]any{"number": "4242424242424242", "exp_month": 12, "exp_year": time.Now().Year() + 2, "cvc": "123"}},
		http.StatusOK, &pm)
	keys, err := vault.Load(filepath.Join(cfg.DataDir, "keyring.json"))
	if err != nil {
		t.Fatal(err)
	}
	old := keys.PrimaryID()

	cli("keys", "rotate")
	if keys, err = vault.Load(filepath.Join(cfg.DataDir, "keyring.json")); err != nil {
		t.Fatal(err)
	}
	if out := cli("keys", "reencrypt"); !strings.Contains(out, "found card_number: "+old+" 1\n") ||
		!strings.Contains(out, "sealed again under "+keys.PrimaryID()+": 1") {
		t.Fatalf("keys reencrypt printed %q; want the card found under %s and sealed again", out, old)
	}
	if out := cli("keys", "retire", old); !strings.Contains(out, "retired") {
		t.Fatalf("keys retire printed %q", out)
	}
	time.Sleep(2 * config.PollInterval) // serve reloads the keyring file
	var p struct {
		Status string `json:"status"`
	}
	c.must(t, "POST", "/v1/payments", "sale", map[string]any{"amount": 1500, "currency": "usd", "customer": cus.ID,
		"payment_method": pm.ID}, http.StatusOK, &p)
	if p.Status != "succeeded" {
		t.Fatalf("a sale on the re-encrypted card after the old key was retired: %s, want succeeded", p.Status)
	}
}

// runConfig runs the command line args with --config file and returns
// its stdout; a non-zero exit fails t.
func runConfig(ctx context.Context, t *testing.T, file string, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := run(ctx, append(args, "--config", file), &stdout, &stderr); code != 0 {
		t.Fatalf("surgepay %s: exit %d: %s%s", strings.Join(args, " "), code, stdout.String(), stderr.String())
	}
	return stdout.String()
}
