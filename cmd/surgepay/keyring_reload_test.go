//go:build unix

package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/surgepay/surgepay/vault"
)

// TestKeyringReloadOnSIGHUP: a signing key retired after a leak stops
// verifying on a running serve at its next SIGHUP, without a restart;
// until then the running keyring stays. New client secrets are signed by
// the rotated primary, and a keyring file serve cannot become (another
// API-key secret) is refused with the running keys kept.
func TestKeyringReloadOnSIGHUP(t *testing.T) {
	file, cfg, srv := serveFromFile(t, "")
	dir := cfg.DataDir
	cli := func(args ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), append(args, "--config", file), &stdout, &stderr); code != 0 {
			t.Fatalf("surgepay %s: exit %d: %s", strings.Join(args, " "), code, stderr.String())
		}
		return stdout.String()
	}
	var pk string
	for _, f := range strings.Fields(cli("keys", "create", "--publishable")) {
		if strings.HasPrefix(f, "pk_test_") {
			pk = f
		}
	}
	secretKey := newClient(srv.url, readDevKey(t, dir))
	var p struct {
		ID           string `json:"id"`
		ClientSecret string `json:"client_secret"`
	}
	secretKey.must(t, "POST", "/v1/payments", "reload-1", map[string]any{"amount": 500, "currency": "usd"}, http.StatusOK, &p)
	signedBy := func(secret string) string {
		_, rest, _ := strings.Cut(secret, "_secret_")
		id, _, _ := strings.Cut(rest, ".")
		return id
	}
	leaked := signedBy(p.ClientSecret)
	read := func(secret string) int {
		code, _, _ := doRequest(t, http.DefaultClient, "GET", srv.url+"/v1/checkout/payments/"+p.ID+"?client_secret="+secret, nil,
			map[string]string{"Authorization": "Bearer " + pk})
		return code
	}
	if code := read(p.ClientSecret); code != http.StatusOK {
		t.Fatalf("the payment read with its client secret: %d", code)
	}

	cli("keys", "rotate-signing")
	cli("keys", "retire-signing", leaked)
	if code := read(p.ClientSecret); code != http.StatusOK {
		t.Fatalf("before the SIGHUP the running keyring must stay: %d, want 200", code)
	}
	sendHUP(t)
	deadline := time.Now().Add(reloadTimeout)
	for read(p.ClientSecret) != http.StatusUnauthorized {
		if time.Now().After(deadline) {
			t.Fatalf("a client secret of the retired key %s still works %s after SIGHUP", leaked, reloadTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
	secretKey.must(t, "GET", "/v1/payments/"+p.ID, "", nil, http.StatusOK, &p)
	if id := signedBy(p.ClientSecret); id == leaked || id == "" || read(p.ClientSecret) != http.StatusOK {
		t.Fatalf("after the reload a new client secret is signed by %q (retired %s) and reads %d", id, leaked, read(p.ClientSecret))
	}

	// A new data key: keys rotate says to send SIGHUP.
	if out := cli("keys", "rotate"); !strings.Contains(out, "SIGHUP") {
		t.Errorf("keys rotate does not say to send SIGHUP: %q", out)
	}

	// Another keyring in the file (a new API-key secret) is refused.
	other, err := vault.Generate()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "keyring.json")
	if err := other.Save(path + ".other"); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".other", path); err != nil {
		t.Fatal(err)
	}
	sendHUP(t)
	for deadline := time.Now().Add(reloadTimeout); !strings.Contains(srv.logs.String(), "keyring reload refused"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("another keyring in the file: no refusal logged within %s", reloadTimeout)
		}
	}
	if code := read(p.ClientSecret); code != http.StatusOK {
		t.Errorf("after a refused reload the running keys must stay: client secret %d, want 200", code)
	}
	secretKey.must(t, "GET", "/v1/payments/"+p.ID, "", nil, http.StatusOK, nil)
}
