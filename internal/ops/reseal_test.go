package ops

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/surgepay/surgepay/cache"
	"github.com/surgepay/surgepay/config"
	"github.com/surgepay/surgepay/internal/testenv"
	"github.com/surgepay/surgepay/provider/processors"
)

// TestResealFile: after a rotation, `processors reseal` seals the
// configuration file's [processors] secrets again under the new primary
// key and changes nothing else in the file (comments, other values); the
// secrets open to the same keys; a second run has nothing to do; a
// secret given by the environment is named, not changed; and then the
// old key can be retired.
func TestResealFile(t *testing.T) {
	keys, keyring := newKeyringFile(t)
	dir := filepath.Dir(keyring)
	path := filepath.Join(dir, "surgepay.toml")
	old := keys.PrimaryID()
	seal := func(name, secret string) string {
		t.Helper()
		s, err := processors.Seal(keys, name, secret)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	euKey, euHook, usKey := seal("eu", "sk_test_eu"), seal("eu", "whsec_eu"), seal("us", "sk_test_us")
	conf := fmt.Sprintf(`# the shop's processors
data_dir = %q
keyring_file = %q

[processors.eu]
kind = "stripe"          # Stripe, Europe
secret_key = %q
webhook_secret = %q

[processors.us]
kind = "stripe"
secret_key = "sk_test_plain_in_file"
`, dir, keyring, euKey, euHook)
	if err := os.WriteFile(path, []byte(conf), 0o640); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SURGEPAY_PROCESSOR_US_SECRET_KEY", usKey)
	load := func() config.Config {
		t.Helper()
		cfg, err := config.Load(path, os.Getenv)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	if _, err := keys.Rotate(); err != nil {
		t.Fatal(err)
	}
	if err := keys.Save(keyring); err != nil {
		t.Fatal(err)
	}

	var out, errb bytes.Buffer
	if code := ProcessorsResealMain([]string{"--config", path}, &out, &errb); code != 0 {
		t.Fatalf("processors reseal: exit %d: %s", code, errb.String())
	}
	for _, want := range []string{"processors.eu.secret_key sealed again under " + keys.PrimaryID(),
		"processors.eu.webhook_secret sealed again", "processors.us.secret_key is sealed under an older key but given by the environment"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("processors reseal printed:\n%s\nwant %q", out.String(), want)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg := load()
	eu := cfg.Processors["eu"]
	want := strings.NewReplacer(euKey, string(eu.SecretKey), euHook, string(eu.WebhookSecret)).Replace(conf)
	if string(got) != want || string(eu.SecretKey) == euKey {
		t.Errorf("the file after reseal:\n%s\nwant only the two sealed values changed:\n%s", got, want)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("the file's mode after reseal: %v, %v; want 0640 kept", fi.Mode(), err)
	}
	for field, w := range map[string]string{string(eu.SecretKey): "sk_test_eu", string(eu.WebhookSecret): "whsec_eu"} {
		if id, _ := sealedKeyID(keys, field); id != keys.PrimaryID() {
			t.Errorf("a resealed secret is under %s, want %s", id, keys.PrimaryID())
		}
		if plain, err := processors.Unseal(keys, "eu", cache.Secret(field)); err != nil || plain != w {
			t.Errorf("a resealed secret opens to %q, %v; want %s", plain, err, w)
		}
	}
	out.Reset()
	if code := ProcessorsResealMain([]string{"--config", path}, &out, &errb); code != 0 || strings.Contains(out.String(), "sealed again") {
		t.Errorf("a second reseal: exit %d, printed %q; want nothing sealed again", code, out.String())
	}

	// Once the environment's secret is sealed again too, nothing names the
	// old key.
	t.Setenv("SURGEPAY_PROCESSOR_US_SECRET_KEY", seal("us", "sk_test_us"))
	out.Reset()
	if err := RetireVaultKey(context.Background(), testenv.OpenSQLite(t), load(), old, ReencryptOptions{RateMax: -1}, &out); err != nil {
		t.Fatalf("retire after reseal: %v\n%s", err, out.String())
	}
}
