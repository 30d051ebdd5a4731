//go:build unix

package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/surgepay/surgepay/config"
	"github.com/surgepay/surgepay/vault"
)

// TestKeyringReload: a signing key retired after a leak stops verifying
// on a running serve as soon as it sees the keyring file change, without
// a restart or a signal; new client secrets are signed by the rotated
// primary. A keyring file serve cannot become (another API-key secret),
// put in place with the old file's modification time so that only
// SIGHUP reloads it, is refused with the running keys kept.
func TestKeyringReload(t *testing.T) {
	file, cfg, srv := serveFromFile(t, "[merchants.default]\ncheckout_client_rate = 1000 # the test polls a client secret from one address\n")
	dir := cfg.DataDir
	cli := func(args ...string) string { t.Helper(); return runConfig(context.Background(), t, file, args...) }
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
	deadline := time.Now().Add(reloadTimeout)
	for read(p.ClientSecret) != http.StatusUnauthorized {
		if time.Now().After(deadline) {
			t.Fatalf("a client secret of the retired key %s still works %s after the file changed", leaked, reloadTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
	secretKey.must(t, "GET", "/v1/payments/"+p.ID, "", nil, http.StatusOK, &p)
	if id := signedBy(p.ClientSecret); id == leaked || id == "" || read(p.ClientSecret) != http.StatusOK {
		t.Fatalf("after the reload a new client secret is signed by %q (retired %s) and reads %d", id, leaked, read(p.ClientSecret))
	}

	// A new data key: keys rotate says how it takes effect.
	if out := cli("keys", "rotate"); !strings.Contains(out, "reloads the keyring file") {
		t.Errorf("keys rotate does not say how servers take the new key: %q", out)
	}

	// Another keyring in the file (a new API-key secret), with the old
	// file's modification time: only SIGHUP reloads it, and it is refused.
	other, err := vault.Generate()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "keyring.json")
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * config.PollInterval) // the watcher has seen the last change
	if err := other.Save(path + ".other"); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path+".other", fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".other", path); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * config.PollInterval)
	if strings.Contains(srv.logs.String(), "keyring reload refused") {
		t.Fatal("the keyring was reloaded though its modification time did not change")
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
