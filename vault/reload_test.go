package vault

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// savedRing is a new keyring saved at a fresh path, and a second Keyring
// loaded from it: the CLI edits the file through one, serve runs the other.
func savedRing(t *testing.T) (path string, cli, running *Keyring) {
	t.Helper()
	cli, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(t.TempDir(), "keyring.json")
	if err := cli.Save(path); err != nil {
		t.Fatal(err)
	}
	if running, err = Load(path); err != nil {
		t.Fatal(err)
	}
	return path, cli, running
}

// A retired signing key stops verifying, a new primary signs and a new
// data key encrypts, once the running keyring reloads the file: no
// restart.
func TestReloadTakesEffectAtOnce(t *testing.T) {
	path, cli, running := savedRing(t)
	msg := []byte("pay_1|1767225600")
	leakedID, leakedMAC := running.Sign(msg)
	oldData := running.PrimaryID()
	sealed, err := running.Encrypt([]byte("4242424242424242"), []byte("card_1"))
	if err != nil {
		t.Fatal(err)
	}

	newSigning, err := cli.RotateSigning()
	if err != nil {
		t.Fatal(err)
	}
	if err := cli.RetireSigning(leakedID); err != nil {
		t.Fatal(err)
	}
	newData, err := cli.Rotate()
	if err != nil {
		t.Fatal(err)
	}
	if err := cli.Save(path); err != nil {
		t.Fatal(err)
	}
	if !running.Verify(leakedID, msg, leakedMAC) {
		t.Fatal("the running keyring changed before its reload")
	}

	ch, err := running.Reload(path)
	if err != nil {
		t.Fatal(err)
	}
	want := KeyringChange{Added: []string{newData}, Primary: newData,
		SigningAdded: []string{newSigning}, SigningRetired: []string{leakedID}, SigningPrimary: newSigning}
	if !slices.Equal(ch.Added, want.Added) || len(ch.Retired) != 0 || ch.Primary != want.Primary ||
		!slices.Equal(ch.SigningAdded, want.SigningAdded) || !slices.Equal(ch.SigningRetired, want.SigningRetired) ||
		ch.SigningPrimary != want.SigningPrimary || ch.Empty() {
		t.Fatalf("change %+v, want %+v", ch, want)
	}
	if running.Verify(leakedID, msg, leakedMAC) {
		t.Error("a client secret of the retired signing key still verifies after the reload")
	}
	if id, mac := running.Sign(msg); id != newSigning || !cli.Verify(id, msg, mac) {
		t.Errorf("signs with %s after the reload, want %s", id, newSigning)
	}
	if running.PrimaryID() != newData {
		t.Errorf("primary data key %s, want %s", running.PrimaryID(), newData)
	}
	if got, err := running.Decrypt(sealed, []byte("card_1")); err != nil || string(got) != "4242424242424242" {
		t.Errorf("a card sealed under %s before the reload: %v", oldData, err)
	}
	if !slices.Equal(running.APIKeyHash("sk_test_x"), cli.APIKeyHash("sk_test_x")) {
		t.Error("API-key hashes differ after the reload")
	}

	if ch, err := running.Reload(path); err != nil || !ch.Empty() {
		t.Errorf("a second reload of the same file: %+v, %v; want no change", ch, err)
	}
}

// A file the running keyring cannot become is refused, and the running
// keys stay: another API-key or fingerprint secret, a known key ID with
// another secret, a file that does not load.
func TestReloadRefused(t *testing.T) {
	path, _, running := savedRing(t)
	msg := []byte("pay_1|1767225600")
	id, mac := running.Sign(msg)
	primary := running.PrimaryID()
	stays := func(t *testing.T) {
		t.Helper()
		if !running.Verify(id, msg, mac) || running.PrimaryID() != primary {
			t.Error("the running keyring changed after a refused reload")
		}
	}

	t.Run("other secrets", func(t *testing.T) {
		other, err := Generate()
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(t.TempDir(), "other.json")
		if err := other.Save(p); err != nil {
			t.Fatal(err)
		}
		if _, err := running.Reload(p); !errors.Is(err, ErrReloadRefused) || !strings.Contains(err.Error(), "API-key secret") {
			t.Errorf("another keyring: %v, want ErrReloadRefused naming the secrets", err)
		}
		stays(t)
	})
	t.Run("a key ID with another secret", func(t *testing.T) {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		k := fromJSON(t, string(raw))
		s := k.state().clone()
		s.signing = s.signing.clone()
		s.signing.keys[id] = newSigningKey(id, s.signing.keys[id].created, randomBytes(SigningKeyBytes))
		k.st.Store(s)
		p := filepath.Join(t.TempDir(), "edited.json")
		if err := k.Save(p); err != nil {
			t.Fatal(err)
		}
		if _, err := running.Reload(p); !errors.Is(err, ErrReloadRefused) || !strings.Contains(err.Error(), id) {
			t.Errorf("signing key %s with another secret: %v, want ErrReloadRefused naming it", id, err)
		}
		stays(t)
	})
	t.Run("does not load", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "bad.json")
		if err := os.WriteFile(p, []byte(`{"version":1,`), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := running.Reload(p); !errors.Is(err, ErrKeyringInvalid) {
			t.Errorf("a malformed file: %v, want ErrKeyringInvalid", err)
		}
		if _, err := running.Reload(filepath.Join(t.TempDir(), "missing.json")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a missing file: %v, want not exist", err)
		}
		stays(t)
	})
}

// Readers running through reloads see one keyring or the other, never a
// failure (go test -race).
func TestReloadConcurrent(t *testing.T) {
	path, cli, running := savedRing(t)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				msg := []byte("m")
				if id, mac := running.Sign(msg); !running.Verify(id, msg, mac) {
					t.Error("a signature did not verify during reloads")
					return
				}
				b, err := running.Encrypt([]byte("x"), nil)
				if err != nil {
					t.Error(err)
					return
				}
				if _, err := running.Decrypt(b, nil); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	for range 20 {
		if _, err := cli.AddSigningKey(); err != nil {
			t.Fatal(err)
		}
		if _, err := cli.AddKey(); err != nil {
			t.Fatal(err)
		}
		if err := cli.Save(path); err != nil {
			t.Fatal(err)
		}
		if _, err := running.Reload(path); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
}
