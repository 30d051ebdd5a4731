package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/surgepay/surgepay/vault"
)

// TestKeysSigningCommands: `keys rotate-signing` and `keys retire-signing`
// change the signing keys of the keyring file in the data folder, and
// nothing else in it. The file starts in the form a release before signing
// keys wrote (signing with the derived key); retiring the derived key
// stops its tokens; the primary and unknown keys are refused and leave the
// file as it was.
func TestKeysSigningCommands(t *testing.T) {
	isolateEnv(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "surgepay.toml")
	if err := os.WriteFile(conf, fmt.Appendf(nil, "data_dir = %q\n", dir), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "keyring.json")
	writeOldFormatKeyring(t, path)
	before, err := vault.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	msg := []byte("pay_1")
	derivedID, derivedMAC := before.Sign(msg)
	if derivedID != vault.SigningDerivedKeyID {
		t.Fatalf("old-format keyring signs with %s, want %s", derivedID, vault.SigningDerivedKeyID)
	}
	cli := func(sub string, args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := cmdKeysKeyring(sub, append(args, "--config", conf), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}

	code, out, errs := cli("rotate-signing")
	if code != 0 || !strings.Contains(out, "new primary client-secret signing key s_") || !strings.Contains(out, "SIGHUP") {
		t.Fatalf("rotate-signing: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	f := readKeyringJSON(t, path)
	newID := f.SigningPrimary
	if len(f.SigningKeys) != 1 || f.SigningKeys[0].ID != newID || f.SigningDerivedRetired || !strings.Contains(out, newID) {
		t.Fatalf("after rotate-signing the file has primary %q, keys %v, derived retired %v; stdout %q",
			newID, f.SigningKeys, f.SigningDerivedRetired, out)
	}
	if strings.Contains(out, f.SigningKeys[0].Secret) {
		t.Fatal("rotate-signing printed the new key's secret")
	}
	after := mustLoadKeyring(t, path)
	if got := after.SigningKeyIDs(); !slices.Equal(got, []string{vault.SigningDerivedKeyID, newID}) {
		t.Fatalf("signing keys %v, want [%s %s]", got, vault.SigningDerivedKeyID, newID)
	}
	if after.PrimaryID() != before.PrimaryID() || !slices.Equal(after.KeyIDs(), before.KeyIDs()) {
		t.Fatal("rotate-signing changed the data keys")
	}
	if !after.Verify(derivedID, msg, derivedMAC) {
		t.Fatal("a client secret signed before the rotation no longer verifies")
	}

	code, out, errs = cli("retire-signing", vault.SigningDerivedKeyID)
	if code != 0 || !strings.Contains(out, "is retired") || !strings.Contains(out, "stop working") {
		t.Fatalf("retire-signing: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if f := readKeyringJSON(t, path); !f.SigningDerivedRetired || f.SigningPrimary != newID {
		t.Fatalf("after retire-signing the file has derived retired %v, primary %q", f.SigningDerivedRetired, f.SigningPrimary)
	}
	after = mustLoadKeyring(t, path)
	if got := after.SigningKeyIDs(); !slices.Equal(got, []string{newID}) || after.Verify(derivedID, msg, derivedMAC) {
		t.Fatalf("after retire-signing: signing keys %v, and the derived key's token verifies: %v",
			got, after.Verify(derivedID, msg, derivedMAC))
	}
	if runtime.GOOS != "windows" {
		if info, err := os.Stat(path); err != nil || info.Mode().Perm() != 0o600 {
			t.Fatalf("keyring file mode %v, %v; want 0600", info.Mode().Perm(), err)
		}
	}

	saved, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name    string
		sub     string
		args    []string
		code    int
		wantErr string
	}{
		{"Primary", "retire-signing", []string{newID}, 1, "rotate-signing' first"},
		{"Unknown", "retire-signing", []string{"s_nope"}, 1, "unknown key ID (signing keys: " + newID + ")"},
		{"AlreadyRetired", "retire-signing", []string{vault.SigningDerivedKeyID}, 1, "unknown key ID"},
		{"NoKeyID", "retire-signing", nil, 2, "surgepay help keys retire-signing"},
		{"TwoKeyIDs", "retire-signing", []string{"s_a", "s_b"}, 2, "surgepay help keys retire-signing"},
		{"ExtraArgument", "rotate-signing", []string{"now"}, 2, "surgepay help keys rotate-signing"},
		{"UnknownFlag", "rotate-signing", []string{"--primary"}, 2, "surgepay help keys rotate-signing"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errs := cli(tt.sub, tt.args...)
			if code != tt.code || out != "" || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, tt.wantErr) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want %d, nothing, one line with %q", code, out, errs, tt.code, tt.wantErr)
			}
			if now, _ := os.ReadFile(path); !bytes.Equal(now, saved) {
				t.Fatal("a refused command changed the keyring file")
			}
		})
	}
	for _, sub := range []string{"rotate-signing", "retire-signing"} {
		if code, out, errs := cli(sub, "--help"); code != 0 || !strings.Contains(out, "Usage: surgepay keys "+sub) || errs != "" {
			t.Fatalf("%s --help: exit %d, stdout %q, stderr %q", sub, code, out, errs)
		}
	}
}

// writeOldFormatKeyring writes a keyring file as a release before signing
// keys did: a generated keyring without the signing fields.
func writeOldFormatKeyring(t *testing.T, path string) {
	t.Helper()
	k, err := vault.Generate()
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Save(path); err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(readFileBytes(t, path), &m); err != nil {
		t.Fatal(err)
	}
	for name := range m {
		if strings.HasPrefix(name, "signing") {
			delete(m, name)
		}
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// keyringSigningFields are the signing fields of the keyring file format.
type keyringSigningFields struct {
	SigningPrimary string `json:"signing_primary"`
	SigningKeys    []struct {
		ID     string `json:"id"`
		Secret string `json:"secret"`
	} `json:"signing_keys"`
	SigningDerivedRetired bool `json:"signing_derived_retired"`
}

func readKeyringJSON(t *testing.T, path string) keyringSigningFields {
	t.Helper()
	var f keyringSigningFields
	if err := json.Unmarshal(readFileBytes(t, path), &f); err != nil {
		t.Fatal(err)
	}
	return f
}

func readFileBytes(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustLoadKeyring(t *testing.T, path string) *vault.Keyring {
	t.Helper()
	k, err := vault.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
