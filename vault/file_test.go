package vault

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
)

// sameKeys reports whether a and b hold the same keys, primary and secrets.
func sameKeys(t *testing.T, a, b *Keyring) {
	t.Helper()
	if a.PrimaryID() != b.PrimaryID() || !slices.Equal(a.KeyIDs(), b.KeyIDs()) {
		t.Fatalf("keys differ: %v vs %v", a, b)
	}
	aad := []byte("m/pm")
	sealed, _ := a.Encrypt([]byte("4242424242424242"), aad)
	if got, err := b.Decrypt(sealed, aad); err != nil || string(got) != "4242424242424242" {
		t.Fatalf("b cannot decrypt a's blob: %q, %v", got, err)
	}
	if a.Fingerprint("m", []byte("1")) != b.Fingerprint("m", []byte("1")) {
		t.Fatal("fingerprint secrets differ")
	}
	if string(a.APIKeySecret()) != string(b.APIKeySecret()) {
		t.Fatal("API key secrets differ")
	}
	if !bytes.Equal(a.APIKeyHash("sk_test_x"), b.APIKeyHash("sk_test_x")) {
		t.Fatal("a loaded keyring hashes API keys differently")
	}
	sameSigningKeys(t, a, b)
}

// sameSigningKeys reports whether a and b hold the same signing keys and
// primary: every key's MAC made in one verifies in the other.
func sameSigningKeys(t *testing.T, a, b *Keyring) {
	t.Helper()
	if a.SigningPrimaryID() != b.SigningPrimaryID() || !slices.Equal(a.SigningKeyIDs(), b.SigningKeyIDs()) {
		t.Fatalf("signing keys differ: %v vs %v", a, b)
	}
	msg := []byte("pay_1")
	for _, id := range a.SigningKeyIDs() {
		mac := a.st.Load().signing.keys[id].sum(msg)
		if !b.Verify(id, msg, mac) {
			t.Fatalf("signing key %s differs", id)
		}
	}
}

func TestSaveLoad(t *testing.T) {
	k := mustGenerate(t)
	if _, err := k.Rotate(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "a", "b", "keyring.json")
	if err := k.Save(path); err != nil {
		t.Fatalf("Save: %v", err)
	}
	if runtime.GOOS != "windows" {
		info, _ := os.Stat(path)
		if got := info.Mode().Perm(); got != 0o600 {
			t.Fatalf("file mode = %#o, want 0600", got)
		}
		info, _ = os.Stat(filepath.Dir(path))
		if got := info.Mode().Perm(); got != 0o700 {
			t.Fatalf("dir mode = %#o, want 0700", got)
		}
	}
	loaded, err := Load(path)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	sameKeys(t, k, loaded)
	// Save replaces an existing file and leaves no temporary file behind.
	if _, err := k.Rotate(); err != nil {
		t.Fatal(err)
	}
	if err := k.Save(path); err != nil {
		t.Fatalf("second Save: %v", err)
	}
	loaded, _ = Load(path)
	sameKeys(t, k, loaded)
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("directory holds %d entries, want 1 (no temp files)", len(entries))
	}
}

func TestLoadErrFileMode(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no Unix permissions")
	}
	k := mustGenerate(t)
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o660, 0o606} {
		path := filepath.Join(t.TempDir(), "keyring.json")
		if err := k.Save(path); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		_, err := Load(path)
		if !errors.Is(err, ErrFileMode) {
			t.Fatalf("mode %#o: err = %v, want ErrFileMode", mode, err)
		}
		if msg, want := err.Error(), fmt.Sprintf("%#o", mode); !strings.Contains(msg, path) || !strings.Contains(msg, want) {
			t.Fatalf("mode %#o: error %q does not name the path and the mode %s", mode, msg, want)
		}
		if _, _, err := LoadOrCreate(path); !errors.Is(err, ErrFileMode) {
			t.Fatalf("LoadOrCreate mode %#o: err = %v, want ErrFileMode", mode, err)
		}
	}
	for _, mode := range []os.FileMode{0o600, 0o400} {
		path := filepath.Join(t.TempDir(), "keyring.json")
		if err := k.Save(path); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(path); err != nil {
			t.Fatalf("mode %#o: %v", mode, err)
		}
	}
}

func TestLoadErrNotExist(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "missing.json"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("err = %v, want fs.ErrNotExist", err)
	}
}

func TestLoadOrCreate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data", "keyring.json")
	first, created, err := LoadOrCreate(path)
	if err != nil || !created {
		t.Fatalf("first LoadOrCreate = created %v, %v; want true, nil", created, err)
	}
	second, created, err := LoadOrCreate(path)
	if err != nil || created {
		t.Fatalf("second LoadOrCreate = created %v, %v; want false, nil", created, err)
	}
	sameKeys(t, first, second)
}

func TestLoadOrCreateConcurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keyring.json")
	const n = 8
	rings := make([]*Keyring, n)
	createdCount := 0
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			k, created, err := LoadOrCreate(path)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			rings[i] = k
			if created {
				createdCount++
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if createdCount != 1 {
		t.Fatalf("%d callers created the file, want 1", createdCount)
	}
	for _, k := range rings[1:] {
		sameKeys(t, rings[0], k)
	}
}

func TestFromEnv(t *testing.T) {
	k := mustGenerate(t)
	data, err := k.encode()
	if err != nil {
		t.Fatal(err)
	}
	value := base64.StdEncoding.EncodeToString(data)
	got, err := FromEnv(" " + value + "\n")
	if err != nil {
		t.Fatalf("FromEnv: %v", err)
	}
	sameKeys(t, k, got)
}

func TestDecodeKeyringErrors(t *testing.T) {
	valid := fuzzKeyring
	tests := []struct {
		name, json, wantMsg string
	}{
		{"NotJSON", "nope", "not valid JSON"},
		{"NotObject", "[]", "not a keyring"},
		{"NoKeys", `{"primary":"k_1","keys":[],"fingerprint_secret":"","api_key_secret":""}`, "0 keys"},
		{"PrimaryMissing", strings.Replace(valid, `"primary": "k_fuzz2"`, `"primary": "k_other"`, 1), "primary"},
		{"DuplicateID", strings.Replace(valid, `"k_fuzz1"`, `"k_fuzz2"`, 1), "duplicate"},
		{"BadID", strings.Replace(valid, `"id": "k_fuzz1"`, `"id": "k/1"`, 1), "id"},
		{"ShortKey", strings.Replace(valid, "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=", "AQEB", 1), "secret: 3 bytes"},
		{"BadBase64", strings.Replace(valid, "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=", "!!!!", 1), "not standard base64"},
		{"ShortFingerprintSecret", strings.Replace(valid, "AwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwM=", "AwMD", 1), "fingerprint_secret"},
		{"NoAPIKeySecret", strings.Replace(valid, `"api_key_secret"`, `"other"`, 1), "api_key_secret"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := FromEnv(base64.StdEncoding.EncodeToString([]byte(tt.json)))
			if !errors.Is(err, ErrKeyringInvalid) {
				t.Fatalf("err = %v, want ErrKeyringInvalid", err)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("err = %q, want it to contain %q", err, tt.wantMsg)
			}
			if strings.Contains(err.Error(), "AQEBAQEB") || strings.Contains(err.Error(), "AgICAgIC") {
				t.Fatalf("err %q contains a secret", err)
			}
		})
	}
	if _, err := FromEnv("not base64!"); !errors.Is(err, ErrKeyringInvalid) {
		t.Fatalf("FromEnv(non-base64) err = %v, want ErrKeyringInvalid", err)
	}
	if _, err := FromEnv(""); !errors.Is(err, ErrKeyringInvalid) {
		t.Fatalf("FromEnv(\"\") err = %v, want ErrKeyringInvalid", err)
	}
}
