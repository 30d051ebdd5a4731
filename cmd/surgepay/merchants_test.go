package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestMerchantsCLIAndAdminAPI runs a real serve with its admin listener:
// `merchants create` and `keys create --scopes read_only --expires-in`
// make a merchant and a restricted key that serve accepts for reads and
// refuses 403 for writes; the admin API of that serve disables the
// merchant and serve refuses its key at once (the key was cached); `merchants
// enable` through the CLI, then `keys roll --grace 0`, `merchants
// show`, `keys list` and `audit list` show every change with the CLI
// user as actor, and never a secret.
func TestMerchantsCLIAndAdminAPI(t *testing.T) {
	// A short TTL: the CLI's changes reach serve's own cache within it.
	file, cfg, s := serveFromFile(t, "[cache.entities.api_keys]\nscope = \"process\"\nttl = \"200ms\"\nentries_max = 1000\n")
	dir := cfg.DataDir
	ctx := context.Background()
	cli := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := run(ctx, append(args, "--config", file), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	field := func(out, prefix string) string {
		for _, f := range strings.Fields(out) {
			if strings.HasPrefix(f, prefix) {
				return strings.TrimRight(f, ",.:")
			}
		}
		t.Fatalf("no %s… in %q", prefix, out)
		return ""
	}
	code, out, errs := cli("merchants", "create", "Second shop")
	if code != 0 {
		t.Fatalf("merchants create: %d %s", code, errs)
	}
	mid := field(out, "mer_")
	code, out, errs = cli("keys", "create", "--merchant", mid, "--scopes", "read_only", "--expires-in", "720h")
	if code != 0 {
		t.Fatalf("keys create: %d %s", code, errs)
	}
	secret, keyID := field(out, "sk_"), field(out, "key_")
	c := newClient(s.url, secret)
	c.must(t, "GET", "/v1/customers", "", nil, http.StatusOK, nil)
	r, err := c.do(ctx, "POST", "/v1/customers", "", map[string]any{"name": "x"})
	if err != nil || r.status != http.StatusForbidden || !strings.Contains(string(r.body), "insufficient_scope") {
		t.Fatalf("write with a read-only key: %v %+v; want 403 insufficient_scope", err, r)
	}

	adminToken := readAdminToken(t, dir)
	admin := func(method, path string) (int, string) {
		req, _ := http.NewRequest(method, "http://"+cfg.AdminListen+path, nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if st, body := admin("POST", "/admin/v1/merchants/"+mid+"/disable"); st != 200 || !strings.Contains(body, `"disabled":true`) {
		t.Fatalf("admin disable: %d %s", st, body)
	}
	// At once: no wait, though the key was cached in serve.
	if r, _ := c.do(ctx, "GET", "/v1/customers", "", nil); r.status != http.StatusForbidden || !strings.Contains(string(r.body), "merchant_disabled") {
		t.Fatalf("key of a merchant disabled through serve's admin API: %d %s; want 403 merchant_disabled", r.status, r.body)
	}
	if code, out, errs = cli("merchants", "enable", mid); code != 0 || !strings.Contains(out, "enabled") {
		t.Fatalf("merchants enable: %d %q %s", code, out, errs)
	}
	eventuallyStatus(t, c, http.StatusOK)

	if code, out, errs = cli("keys", "roll", keyID, "--grace", "0s"); code != 0 || !strings.Contains(out, "revoked now") {
		t.Fatalf("keys roll: %d %q %s", code, out, errs)
	}
	next := field(out, "sk_")
	eventuallyStatus(t, c, http.StatusUnauthorized)
	newClient(s.url, next).must(t, "GET", "/v1/customers", "", nil, http.StatusOK, nil)
	if code, out, errs = cli("keys", "expire", field(out, "key_"), "--expires-in", "1h"); code != 0 || !strings.Contains(out, "expires at") {
		t.Fatalf("keys expire: %d %q %s", code, out, errs)
	}

	code, out, _ = cli("merchants", "show", mid)
	if code != 0 || !strings.Contains(out, "Second shop") || strings.Count(out, "key_") != 2 || !strings.Contains(out, "customers:read") {
		t.Errorf("merchants show: %d %q", code, out)
	}
	if code, out, _ = cli("merchants", "list"); code != 0 || strings.Count(out, "mer_") != 2 {
		t.Errorf("merchants list: %d %q", code, out)
	}
	if code, out, _ = cli("audit", "list", "--merchant", mid); code != 0 {
		t.Errorf("audit list: %d %q", code, out)
	}
	for _, want := range []string{"merchant.created", "api_key.created", "merchant.disabled", "admin_api", "merchant.enabled",
		"api_key.rolled", "api_key.expiry_set", "cli:"} {
		if !strings.Contains(out, want) {
			t.Errorf("audit list lacks %q:\n%s", want, out)
		}
	}
	for _, sec := range []string{secret, next} {
		if strings.Contains(out, sec) {
			t.Errorf("audit list shows a secret:\n%s", out)
		}
	}
	// Admin API JSON lists the same.
	st, body := admin("GET", "/admin/v1/api_keys?merchant="+mid)
	var list struct{ Data []map[string]any }
	if st != 200 || json.Unmarshal([]byte(body), &list) != nil || len(list.Data) != 2 {
		t.Errorf("admin key list: %d %s", st, body)
	}
	if code, _, errs = cli("merchants", "disable", "mer_unknown"); code != 1 || !strings.Contains(errs, "merchant") {
		t.Errorf("disable an unknown merchant: %d %s", code, errs)
	}
	if code, _, errs = cli("keys", "roll", keyID); code != 2 || !strings.Contains(errs, "--grace") {
		t.Errorf("roll without --grace: %d %s", code, errs)
	}
}

// eventuallyStatus waits (bounded) until the client's GET /v1/customers
// answers want: a CLI change reaches serve's process cache within its TTL.
func eventuallyStatus(t *testing.T, c *client, want int) {
	t.Helper()
	deadline := time.Now().Add(cacheSeenWait)
	for {
		r, err := c.do(context.Background(), "GET", "/v1/customers", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.status == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /v1/customers: %d %s, want %d within %v", r.status, r.body, want, cacheSeenWait)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
