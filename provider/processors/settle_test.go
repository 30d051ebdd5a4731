package processors_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/config"
	"github.com/surgepay/surgepay/provider/processors"
	"github.com/surgepay/surgepay/provider/stripe/stripedouble"
	"github.com/surgepay/surgepay/vault"
)

// TestSettleReloaderFollowsSecret: a continuous settle follows its
// processors' secret_key. Rolled at Stripe (another key in the file), and
// sealed again under a rotated keyring (the same key, a seal by a data key
// only the keyring file knows yet): each call after a reload reaches
// Stripe with the key the file holds then. A secret this keyring cannot
// open is refused, and the running key stays.
func TestSettleReloaderFollowsSecret(t *testing.T) {
	target, err := url.Parse(stripedouble.StartLocalstripe(t))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	last := ""
	forward := httputil.NewSingleHostReverseProxy(target)
	stripeAPI := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		last = r.Header.Get("Authorization")
		mu.Unlock()
		forward.ServeHTTP(w, r)
	}))
	t.Cleanup(stripeAPI.Close)

	dir := t.TempDir()
	path, keysPath := filepath.Join(dir, "surgepay.toml"), filepath.Join(dir, "keyring.json")
	keys, err := vault.Generate()
	if err != nil {
		t.Fatal(err)
	}
	if err := keys.Save(keysPath); err != nil {
		t.Fatal(err)
	}
	write := func(keys *vault.Keyring, secret string) config.Config {
		t.Helper()
		sealed, err := processors.Seal(keys, "eu", secret)
		if err != nil {
			t.Fatal(err)
		}
		conf := fmt.Sprintf("data_dir = %q\nkeyring_file = %q\n[processors.eu]\nkind = \"stripe\"\nsecret_key = %q\nbase_url = %q\n",
			dir, keysPath, sealed, stripeAPI.URL)
		if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Load(path, func(string) string { return "" })
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	prov, rl, err := processors.OpenForSettle(write(keys, "sk_test_first"))
	if err != nil || rl == nil {
		t.Fatalf("open: %v, reloader %v", err, rl)
	}
	calls := 0
	wantKey := func(what, key string) {
		t.Helper()
		calls++
		mu.Lock()
		last = ""
		mu.Unlock()
		// A capture of an authorization Stripe does not have: it reaches
		// Stripe, which refuses it.
		res, err := prov.Capture(t.Context(), &surgepay.CaptureRequest{IdempotencyKey: fmt.Sprint("settle-", calls),
			AuthorizationRef: "eu:pi_unknown", Amount: 100, Currency: "usd"})
		if err == nil && res.Approved {
			t.Fatalf("%s: a capture of an unknown PaymentIntent approved", what)
		}
		mu.Lock()
		defer mu.Unlock()
		if last != "Bearer "+key {
			t.Errorf("%s: Stripe saw %q, want the key %s", what, last, key)
		}
	}
	wantKey("at start", "sk_test_first")

	if err := rl.Reload(write(keys, "sk_test_rolled")); err != nil {
		t.Fatalf("reload with a rolled key: %v", err)
	}
	wantKey("after the key was rolled", "sk_test_rolled")

	if _, err := keys.Rotate(); err != nil {
		t.Fatal(err)
	}
	if err := keys.Save(keysPath); err != nil {
		t.Fatal(err)
	}
	if err := rl.Reload(write(keys, "sk_test_resealed")); err != nil {
		t.Fatalf("reload with a key sealed by the rotated keyring: %v", err)
	}
	wantKey("after sealing under the rotated keyring", "sk_test_resealed")

	other, err := vault.Generate()
	if err != nil {
		t.Fatal(err)
	}
	if err := rl.Reload(write(other, "sk_test_foreign")); err == nil {
		t.Fatal("reload with a secret sealed by another keyring: accepted, want refused")
	}
	wantKey("after a refused reload", "sk_test_resealed")
}
