package ops

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/surgepay/surgepay/config"
	"github.com/surgepay/surgepay/vault"
)

// ReloadKeyring logs what a reload changed by key ID, never a secret;
// nothing when nothing changed; the refusal when the file cannot be the
// running keyring; and leaves a keyring from SURGEPAY_KEYRING alone.
func TestReloadKeyringLogs(t *testing.T) {
	t.Setenv(vault.EnvVar, "")
	path := filepath.Join(t.TempDir(), "keyring.json")
	running, _, err := vault.LoadOrCreate(path)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	var out bytes.Buffer
	if err := RotateSigningKey(path, false, &out); err != nil {
		t.Fatal(err)
	}
	if err := RotateVaultKey(path, false, &out); err != nil {
		t.Fatal(err)
	}
	edited, err := vault.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	ReloadKeyring(log, running, path, "SIGHUP")
	line := logs.String()
	for _, want := range []string{"keyring reloaded", "why=SIGHUP", "data_keys_added=" + edited.PrimaryID(),
		"primary=" + edited.PrimaryID(), "signing_keys_added=" + edited.SigningPrimaryID(), "signing_primary=" + edited.SigningPrimaryID()} {
		if !strings.Contains(line, want) {
			t.Errorf("log %q lacks %q", line, want)
		}
	}
	if strings.Contains(line, "retired") {
		t.Errorf("log %q names retired keys; none were", line)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range strings.FieldsFunc(string(raw), func(r rune) bool { return r == '"' }) {
		if len(f) >= 40 && strings.Contains(line, f) { // a base64 secret
			t.Fatalf("the log holds a secret of the keyring file")
		}
	}
	if running.SigningPrimaryID() != edited.SigningPrimaryID() || running.PrimaryID() != edited.PrimaryID() {
		t.Fatal("the running keyring was not reloaded")
	}

	logs.Reset()
	ReloadKeyring(log, running, path, "SIGHUP")
	if logs.Len() != 0 {
		t.Errorf("a reload that changed nothing logged %q at info", logs.String())
	}

	other, err := vault.Generate()
	if err != nil {
		t.Fatal(err)
	}
	otherPath := filepath.Join(t.TempDir(), "other.json")
	if err := other.Save(otherPath); err != nil {
		t.Fatal(err)
	}
	ReloadKeyring(log, running, otherPath, "file changed")
	if !strings.Contains(logs.String(), "keyring reload refused") || running.PrimaryID() != edited.PrimaryID() {
		t.Errorf("another keyring: log %q, primary %s; want refused and the running keys kept", logs.String(), running.PrimaryID())
	}

	logs.Reset()
	raw, err = os.ReadFile(otherPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(vault.EnvVar, base64.StdEncoding.EncodeToString(raw))
	ReloadKeyring(log, running, otherPath, "SIGHUP")
	if logs.Len() != 0 || running.PrimaryID() != edited.PrimaryID() {
		t.Errorf("with %s set: log %q; want nothing done", vault.EnvVar, logs.String())
	}
}

// A rotation across several servers: rotate --add-only adds a key every
// server can read (after its reload) without any of them using it, and
// make-primary makes it the one used, data key or signing key alike.
func TestTwoPhaseRotation(t *testing.T) {
	t.Setenv(vault.EnvVar, "")
	path := filepath.Join(t.TempDir(), "keyring.json")
	running, _, err := vault.LoadOrCreate(path)
	if err != nil {
		t.Fatal(err)
	}
	oldData, oldSigning := running.PrimaryID(), running.SigningPrimaryID()
	var out bytes.Buffer
	if err := RotateVaultKey(path, true, &out); err != nil {
		t.Fatal(err)
	}
	if err := RotateSigningKey(path, true, &out); err != nil {
		t.Fatal(err)
	}
	if _, err := running.Reload(path); err != nil {
		t.Fatal(err)
	}
	if running.PrimaryID() != oldData || running.SigningPrimaryID() != oldSigning || len(running.KeyIDs()) != 2 ||
		len(running.SigningKeyIDs()) != 2 {
		t.Fatalf("after --add-only: primaries %s %s, keys %v %v; want the old primaries and a new key of each kind",
			running.PrimaryID(), running.SigningPrimaryID(), running.KeyIDs(), running.SigningKeyIDs())
	}
	newData, newSigning := running.KeyIDs()[1], running.SigningKeyIDs()[1]
	if !strings.Contains(out.String(), "make-primary "+newData) || !strings.Contains(out.String(), "make-primary "+newSigning) {
		t.Errorf("--add-only does not say to run make-primary with the new key IDs: %q", out.String())
	}
	for _, id := range []string{newData, newSigning} {
		if err := MakePrimary(path, id, &out); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := running.Reload(path); err != nil {
		t.Fatal(err)
	}
	if running.PrimaryID() != newData || running.SigningPrimaryID() != newSigning {
		t.Errorf("after make-primary: primaries %s %s, want %s %s", running.PrimaryID(), running.SigningPrimaryID(), newData, newSigning)
	}
	if err := MakePrimary(path, "k_nope", &out); !errors.Is(err, vault.ErrKeyUnknown) || !strings.Contains(err.Error(), newData) {
		t.Errorf("an unknown data key: %v, want ErrKeyUnknown listing the keys", err)
	}
	if err := MakePrimary(path, "s_nope", &out); !errors.Is(err, vault.ErrKeyUnknown) || !strings.Contains(err.Error(), newSigning) {
		t.Errorf("an unknown signing key: %v, want ErrKeyUnknown listing the signing keys", err)
	}
}

// WatchKeyring reloads the keyring when its file changes, without a
// signal, and stops with its context.
func TestWatchKeyring(t *testing.T) {
	t.Setenv(vault.EnvVar, "")
	path := filepath.Join(t.TempDir(), "keyring.json")
	running, _, err := vault.LoadOrCreate(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); WatchKeyring(ctx, slog.New(slog.DiscardHandler), running, path) }()
	time.Sleep(2 * config.PollInterval) // the watcher has read the file's time
	var out bytes.Buffer
	if err := RotateSigningKey(path, false, &out); err != nil {
		t.Fatal(err)
	}
	edited, err := vault.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); running.SigningPrimaryID() != edited.SigningPrimaryID(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the running keyring did not reload after its file changed")
		}
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("WatchKeyring did not return after its context ended")
	}
}

// newKeyringFile saves a new keyring in a folder of its own and returns it
// and the file's path, with SURGEPAY_KEYRING unset for the test.
func newKeyringFile(t *testing.T) (*vault.Keyring, string) {
	t.Helper()
	t.Setenv(vault.EnvVar, "")
	path := filepath.Join(t.TempDir(), "keyring.json")
	keys, err := vault.Generate()
	if err != nil {
		t.Fatal(err)
	}
	if err := keys.Save(path); err != nil {
		t.Fatal(err)
	}
	return keys, path
}
