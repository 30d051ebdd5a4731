package vault

import (
	"bytes"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// fromJSON decodes a keyring file's JSON as FromEnv does.
func fromJSON(t testing.TB, js string) *Keyring {
	t.Helper()
	k, err := FromEnv(base64.StdEncoding.EncodeToString([]byte(js)))
	if err != nil {
		t.Fatalf("FromEnv: %v", err)
	}
	return k
}

// writeKeyringFile writes js to a new 0600 file and returns its path.
func writeKeyringFile(t *testing.T, js string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "keyring.json")
	if err := os.WriteFile(path, []byte(js), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func mustLoad(t *testing.T, path string) *Keyring {
	t.Helper()
	k, err := Load(path)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return k
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestSignVerify: a MAC from Sign is HMAC-SHA256 under the primary signing
// key and verifies; any change to the message, the MAC or the key ID fails.
func TestSignVerify(t *testing.T) {
	k := mustGenerate(t)
	msg := []byte("pay_123.1764412800")
	id, mac := k.Sign(msg)
	if id != k.SigningPrimaryID() {
		t.Fatalf("Sign key ID = %q, want the primary %q", id, k.SigningPrimaryID())
	}
	want := hmac.New(sha256.New, k.st.Load().signing.keys[id].secret)
	want.Write(msg)
	if !bytes.Equal(mac, want.Sum(nil)) {
		t.Fatalf("Sign MAC = %x, want HMAC-SHA256 %x", mac, want.Sum(nil))
	}
	if _, again := k.Sign(msg); !bytes.Equal(again, mac) {
		t.Fatalf("a second Sign (pooled HMAC) = %x, want %x", again, mac)
	}
	if !k.Verify(id, msg, mac) {
		t.Fatal("Verify of a fresh MAC = false")
	}
	flipped := bytes.Clone(mac)
	flipped[len(flipped)-1] ^= 1
	tests := []struct {
		name string
		id   string
		msg  []byte
		mac  []byte
	}{
		{"WrongMsg", id, []byte("pay_124.1764412800"), mac},
		{"WrongMAC", id, msg, flipped},
		{"TruncatedMAC", id, msg, mac[:16]},
		{"LongerMAC", id, msg, append(bytes.Clone(mac), 0)},
		{"NoMAC", id, msg, nil},
		{"UnknownID", "s_20260101_0000000000000000", msg, mac},
		{"EmptyID", "", msg, mac},
		{"DataKeyID", k.PrimaryID(), msg, mac},
		{"DerivedRetiredInNewKeyring", SigningDerivedKeyID, msg, mac},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if k.Verify(tt.id, tt.msg, tt.mac) {
				t.Fatal("Verify = true, want false")
			}
		})
	}
}

// TestGenerateSigningKey: a new keyring signs with one random key whose ID
// is s_DATE_HEX (27 characters), and holds no derived key.
func TestGenerateSigningKey(t *testing.T) {
	k := mustGenerate(t)
	id := k.SigningPrimaryID()
	if got := k.SigningKeyIDs(); !slices.Equal(got, []string{id}) {
		t.Fatalf("SigningKeyIDs = %v, want [%s]", got, id)
	}
	if !strings.HasPrefix(id, "s_"+time.Now().UTC().Format("20060102")[:6]) || len(id) != 27 || !validKeyID(id) {
		t.Fatalf("signing key ID %q, want s_YYYYMMDD_ and 16 hex digits", id)
	}
	derived, err := derivedSigningKey(k.APIKeySecret())
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(k.st.Load().signing.keys[id].secret, derived.secret) {
		t.Fatal("Generate's signing key is the derived one")
	}
	if other := mustGenerate(t); other.Verify(id, []byte("m"), k.signOnly(t, []byte("m"))) {
		t.Fatal("two keyrings share a signing key")
	}
}

// signOnly returns Sign's MAC.
func (k *Keyring) signOnly(t *testing.T, msg []byte) []byte {
	t.Helper()
	_, mac := k.Sign(msg)
	return mac
}

// TestRotateSigning: a rotation makes a new primary while tokens signed
// before keep verifying, and signing and data keys rotate apart.
func TestRotateSigning(t *testing.T) {
	k := mustGenerate(t)
	dataPrimary, dataIDs := k.PrimaryID(), k.KeyIDs()
	msg := []byte("pay_1")
	oldID, oldMAC := k.Sign(msg)
	newID, err := k.RotateSigning()
	if err != nil {
		t.Fatalf("RotateSigning: %v", err)
	}
	if newID == oldID || k.SigningPrimaryID() != newID {
		t.Fatalf("after RotateSigning: new %q, primary %q, old %q", newID, k.SigningPrimaryID(), oldID)
	}
	if got := k.SigningKeyIDs(); !slices.Equal(got, []string{oldID, newID}) {
		t.Fatalf("SigningKeyIDs = %v, want [%s %s]", got, oldID, newID)
	}
	if !k.Verify(oldID, msg, oldMAC) {
		t.Fatal("a token signed before the rotation no longer verifies")
	}
	if id, mac := k.Sign(msg); id != newID || !k.Verify(newID, msg, mac) || bytes.Equal(mac, oldMAC) {
		t.Fatalf("Sign after the rotation used %s", id)
	}
	if k.PrimaryID() != dataPrimary || !slices.Equal(k.KeyIDs(), dataIDs) {
		t.Fatal("RotateSigning changed the data keys")
	}
	if _, err := k.Rotate(); err != nil {
		t.Fatal(err)
	}
	if err := k.Retire(dataPrimary); err != nil {
		t.Fatal(err)
	}
	if k.SigningPrimaryID() != newID || !slices.Equal(k.SigningKeyIDs(), []string{oldID, newID}) || !k.Verify(oldID, msg, oldMAC) {
		t.Fatal("Rotate or Retire of data keys changed the signing keys")
	}
}

func TestAddSigningKeySetPrimary(t *testing.T) {
	k := mustGenerate(t)
	oldID := k.SigningPrimaryID()
	id, err := k.AddSigningKey()
	if err != nil {
		t.Fatalf("AddSigningKey: %v", err)
	}
	if k.SigningPrimaryID() != oldID {
		t.Fatalf("AddSigningKey changed the primary to %q", k.SigningPrimaryID())
	}
	if got := k.SigningKeyIDs(); !slices.Equal(got, []string{oldID, id}) {
		t.Fatalf("SigningKeyIDs = %v", got)
	}
	for _, bad := range []string{"s_nope", SigningDerivedKeyID, k.PrimaryID()} {
		if err := k.SetSigningPrimary(bad); !errors.Is(err, ErrKeyUnknown) {
			t.Fatalf("SetSigningPrimary(%q) err = %v, want ErrKeyUnknown", bad, err)
		}
	}
	if err := k.SetSigningPrimary(id); err != nil {
		t.Fatalf("SetSigningPrimary: %v", err)
	}
	if got, _ := k.Sign(nil); got != id {
		t.Fatalf("Sign used %q, want %q", got, id)
	}
}

// TestRetireSigning: a retired key stops verifying at once; the primary
// and unknown keys are refused.
func TestRetireSigning(t *testing.T) {
	k := mustGenerate(t)
	msg := []byte("pay_1")
	oldID, oldMAC := k.Sign(msg)
	if err := k.RetireSigning(oldID); !errors.Is(err, ErrKeyPrimary) {
		t.Fatalf("RetireSigning(primary) err = %v, want ErrKeyPrimary", err)
	}
	newID, err := k.RotateSigning()
	if err != nil {
		t.Fatal(err)
	}
	if err := k.RetireSigning(oldID); err != nil {
		t.Fatalf("RetireSigning: %v", err)
	}
	if k.Verify(oldID, msg, oldMAC) {
		t.Fatal("a token signed by a retired key still verifies")
	}
	if got := k.SigningKeyIDs(); !slices.Equal(got, []string{newID}) {
		t.Fatalf("SigningKeyIDs = %v, want [%s]", got, newID)
	}
	if err := k.RetireSigning(oldID); !errors.Is(err, ErrKeyUnknown) {
		t.Fatalf("second RetireSigning err = %v, want ErrKeyUnknown", err)
	}
	if err := k.SetSigningPrimary(oldID); !errors.Is(err, ErrKeyUnknown) {
		t.Fatalf("SetSigningPrimary(retired) err = %v, want ErrKeyUnknown", err)
	}
	if err := k.RetireSigning(k.PrimaryID()); !errors.Is(err, ErrKeyUnknown) {
		t.Fatalf("RetireSigning(data key ID) err = %v, want ErrKeyUnknown", err)
	}
}

func TestSigningKeysFull(t *testing.T) {
	k := mustGenerate(t)
	for range KeysMax - 1 {
		if _, err := k.AddSigningKey(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := k.RotateSigning(); !errors.Is(err, ErrKeysFull) {
		t.Fatalf("RotateSigning at %d keys err = %v, want ErrKeysFull", KeysMax, err)
	}
	if n := len(k.SigningKeyIDs()); n != KeysMax {
		t.Fatalf("%d signing keys, want %d", n, KeysMax)
	}
}

// TestSigningOldFormat: a keyring file from before signing keys loads
// unchanged and signs with the key derived from its API-key secret, the
// same in every process that loads it; Save leaves it in the old form.
func TestSigningOldFormat(t *testing.T) {
	path := writeKeyringFile(t, fuzzKeyring)
	a, b := mustLoad(t, path), mustLoad(t, path)
	c := fromJSON(t, fuzzKeyring)
	for _, k := range []*Keyring{a, b, c} {
		if k.SigningPrimaryID() != SigningDerivedKeyID || !slices.Equal(k.SigningKeyIDs(), []string{SigningDerivedKeyID}) {
			t.Fatalf("old-format keyring signs with %s of %v, want only %s", k.SigningPrimaryID(), k.SigningKeyIDs(), SigningDerivedKeyID)
		}
	}
	msg := []byte("pay_1")
	id, mac := a.Sign(msg)
	if !b.Verify(id, msg, mac) || !c.Verify(id, msg, mac) {
		t.Fatal("a token signed by one load does not verify in another")
	}
	// The derivation is fixed: HKDF-SHA256, no salt, the v1 info string.
	secret, err := hkdf.Key(sha256.New, a.APIKeySecret(), nil, "surgepay client-secret signing key v1", SigningKeyBytes)
	if err != nil {
		t.Fatal(err)
	}
	want := hmac.New(sha256.New, secret)
	want.Write(msg)
	if !bytes.Equal(mac, want.Sum(nil)) {
		t.Fatal("the derived key is not HKDF-SHA256(api_key_secret, info v1)")
	}
	other := fromJSON(t, strings.Replace(fuzzKeyring, "BAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQ=",
		"BQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQU=", 1))
	if other.Verify(id, msg, mac) {
		t.Fatal("another API-key secret derives the same signing key")
	}
	// Saved unchanged, the file keeps its old form.
	if err := a.Save(path); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, path); strings.Contains(got, "signing") {
		t.Fatalf("Save of an old-format keyring wrote signing fields:\n%s", got)
	}
	sameKeys(t, b, mustLoad(t, path))
}

// TestSigningOldFormatRotate: after a rotation is saved, the file lists the
// new key and the derived key keeps verifying the tokens it signed.
func TestSigningOldFormatRotate(t *testing.T) {
	path := writeKeyringFile(t, fuzzKeyring)
	k := mustLoad(t, path)
	msg := []byte("pay_1")
	_, oldMAC := k.Sign(msg)
	newID, err := k.RotateSigning()
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Save(path); err != nil {
		t.Fatal(err)
	}
	var f keyringFile
	if err := json.Unmarshal([]byte(readFile(t, path)), &f); err != nil {
		t.Fatal(err)
	}
	if f.SigningPrimary != newID || len(f.SigningKeys) != 1 || f.SigningKeys[0].ID != newID || f.SigningDerivedRetired {
		t.Fatalf("file signing fields: primary %q, keys %v, derived retired %v; want %s, [%s], false",
			f.SigningPrimary, f.SigningKeys, f.SigningDerivedRetired, newID, newID)
	}
	loaded := mustLoad(t, path)
	sameKeys(t, k, loaded)
	if got := loaded.SigningKeyIDs(); !slices.Equal(got, []string{SigningDerivedKeyID, newID}) {
		t.Fatalf("SigningKeyIDs = %v, want [%s %s]", got, SigningDerivedKeyID, newID)
	}
	if !loaded.Verify(SigningDerivedKeyID, msg, oldMAC) {
		t.Fatal("a token signed by the derived key no longer verifies after the rotation")
	}
}

// TestSigningDerivedPrimaryListed: a file that lists signing keys but signs
// with the derived key (AddSigningKey on an old keyring) names it and loads
// back the same.
func TestSigningDerivedPrimaryListed(t *testing.T) {
	path := writeKeyringFile(t, fuzzKeyring)
	k := mustLoad(t, path)
	id, err := k.AddSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Save(path); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, path); !strings.Contains(got, `"signing_primary": "s_derived"`) {
		t.Fatalf("file does not name the derived primary:\n%s", got)
	}
	loaded := mustLoad(t, path)
	sameKeys(t, k, loaded)
	if loaded.SigningPrimaryID() != SigningDerivedKeyID || !slices.Equal(loaded.SigningKeyIDs(), []string{SigningDerivedKeyID, id}) {
		t.Fatalf("loaded: primary %s, keys %v", loaded.SigningPrimaryID(), loaded.SigningKeyIDs())
	}
}

// TestSigningDerivedRetired: a retired derived key stays retired across
// Save and Load, and its tokens stop verifying.
func TestSigningDerivedRetired(t *testing.T) {
	path := writeKeyringFile(t, fuzzKeyring)
	k := mustLoad(t, path)
	msg := []byte("pay_1")
	_, derivedMAC := k.Sign(msg)
	if err := k.RetireSigning(SigningDerivedKeyID); !errors.Is(err, ErrKeyPrimary) {
		t.Fatalf("RetireSigning(derived primary) err = %v, want ErrKeyPrimary", err)
	}
	newID, err := k.RotateSigning()
	if err != nil {
		t.Fatal(err)
	}
	if err := k.RetireSigning(SigningDerivedKeyID); err != nil {
		t.Fatalf("RetireSigning(derived): %v", err)
	}
	for i := range 2 { // twice: a reloaded keyring saves the flag again
		if err := k.Save(path); err != nil {
			t.Fatal(err)
		}
		if got := readFile(t, path); !strings.Contains(got, `"signing_derived_retired": true`) {
			t.Fatalf("round %d: file does not record the retired derived key:\n%s", i, got)
		}
		k = mustLoad(t, path)
		if got := k.SigningKeyIDs(); !slices.Equal(got, []string{newID}) {
			t.Fatalf("round %d: SigningKeyIDs = %v, want [%s]", i, got, newID)
		}
		if k.Verify(SigningDerivedKeyID, msg, derivedMAC) {
			t.Fatalf("round %d: a token of the retired derived key verifies", i)
		}
	}
}

// TestGenerateSaveLoadSigning: a new keyring's file records its random
// signing key and the derived key as retired.
func TestGenerateSaveLoadSigning(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keyring.json")
	k, created, err := LoadOrCreate(path)
	if err != nil || !created {
		t.Fatalf("LoadOrCreate = %v, %v", created, err)
	}
	if _, err := k.AddSigningKey(); err != nil {
		t.Fatal(err)
	}
	if err := k.Save(path); err != nil {
		t.Fatal(err)
	}
	got := readFile(t, path)
	for _, want := range []string{`"signing_primary": "` + k.SigningPrimaryID() + `"`, `"signing_derived_retired": true`, `"signing_keys"`} {
		if !strings.Contains(got, want) {
			t.Fatalf("file lacks %s:\n%s", want, got)
		}
	}
	loaded := mustLoad(t, path)
	sameKeys(t, k, loaded)
	if slices.Contains(loaded.SigningKeyIDs(), SigningDerivedKeyID) {
		t.Fatal("a generated keyring holds the derived key after Load")
	}
}

// signingJSON is fuzzKeyring with a random signing key s_a as primary,
// s_b beside it, and the derived key.
var signingJSON = strings.Replace(fuzzKeyring, "\n}", `,
 "signing_primary": "s_a",
 "signing_keys": [
  {"id": "s_a", "created": "2026-03-01T00:00:00Z", "secret": "BgYGBgYGBgYGBgYGBgYGBgYGBgYGBgYGBgYGBgYGBgY="},
  {"id": "s_b", "created": "2026-04-01T00:00:00Z", "secret": "BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc="}
 ]
}`, 1)

// TestDecodeSigningErrors: malformed signing fields are refused with the
// field named and no secret shown, not even one pasted into an ID.
func TestDecodeSigningErrors(t *testing.T) {
	k := fromJSON(t, signingJSON) // the base is valid
	if got := k.SigningKeyIDs(); !slices.Equal(got, []string{SigningDerivedKeyID, "s_a", "s_b"}) || k.SigningPrimaryID() != "s_a" {
		t.Fatalf("base: keys %v, primary %s", got, k.SigningPrimaryID())
	}
	const secretA, secretB = "BgYGBgYGBgYGBgYGBgYGBgYGBgYGBgYGBgYGBgYGBgY=", "BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc="
	many := make([]fileKey, KeysMax)
	for i := range many {
		many[i] = fileKey{ID: fmt.Sprintf("s_%d", i), Secret: secretA}
	}
	manyJSON, _ := json.Marshal(many)
	retired := strings.Replace(signingJSON, `"signing_primary"`, `"signing_derived_retired": true, "signing_primary"`, 1)
	tests := []struct {
		name, json, wantMsg string
	}{
		{"ShortSecret", strings.Replace(signingJSON, secretB, "BwcH", 1), "signing_keys[s_b].secret: 3 bytes"},
		{"LongSecret", strings.Replace(signingJSON, secretB, base64.StdEncoding.EncodeToString(make([]byte, 33)), 1), "signing_keys[s_b].secret: 33 bytes"},
		{"BadBase64", strings.Replace(signingJSON, secretB, "!!!!", 1), "signing_keys[s_b].secret: not standard base64"},
		{"SecretAsID", strings.Replace(signingJSON, `"id": "s_b"`, `"id": "`+secretB+`"`, 1), "signing_keys[1]: id"},
		{"EmptyID", strings.Replace(signingJSON, `"id": "s_b"`, `"id": ""`, 1), "signing_keys[1]: id"},
		{"DerivedIDListed", strings.Replace(signingJSON, `"id": "s_b"`, `"id": "s_derived"`, 1), "signing_keys[1]: id s_derived is reserved"},
		{"DuplicateID", strings.Replace(signingJSON, `"id": "s_b"`, `"id": "s_a"`, 1), "signing_keys[1]: duplicate id s_a"},
		{"PrimaryUnknown", strings.Replace(signingJSON, `"signing_primary": "s_a"`, `"signing_primary": "s_c"`, 1), "signing_primary: s_c is not among"},
		{"SecretAsPrimary", strings.Replace(signingJSON, `"signing_primary": "s_a"`, `"signing_primary": "`+secretA+`"`, 1), "signing_primary: (44 bytes) not a key ID"},
		{"PrimaryDerivedRetired", strings.Replace(retired, `"signing_primary": "s_a",`, "", 1), "signing_primary: missing or s_derived, but signing_derived_retired"},
		{"NoSigningKey", strings.Replace(fuzzKeyring, "\n}", `, "signing_derived_retired": true}`, 1), "signing_keys: none"},
		{"TooMany", strings.Replace(fuzzKeyring, "\n}", `, "signing_primary": "s_0", "signing_keys": `+string(manyJSON)+`}`, 1),
			fmt.Sprintf("signing_keys: %d signing keys, want at most %d", KeysMax+1, KeysMax)},
		{"NotAList", strings.Replace(signingJSON, `"signing_keys": [`, `"signing_keys": {"x": [`, 1) + "}", "not"},
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
			for _, secret := range []string{secretA, secretB, secretA[:12], secretB[:12], "BAQEBAQEBAQE"} {
				if strings.Contains(err.Error(), secret) {
					t.Fatalf("err %q contains a secret", err)
				}
			}
		})
	}
	// The limit counts the derived key too: KeysMax listed keys are fine
	// once the derived key is retired.
	full := strings.Replace(fuzzKeyring, "\n}", `, "signing_derived_retired": true, "signing_primary": "s_0", "signing_keys": `+string(manyJSON)+`}`, 1)
	if k := fromJSON(t, full); len(k.SigningKeyIDs()) != KeysMax {
		t.Fatalf("%d signing keys, want %d", len(k.SigningKeyIDs()), KeysMax)
	}
}

// TestSigningRedacted: neither the random signing keys nor the derived one
// show in any printed form, and the signing key IDs do.
func TestSigningRedacted(t *testing.T) {
	k := fromJSON(t, signingJSON)
	js, err := json.Marshal(k)
	if err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("x", "keyring", k)
	outputs := map[string]string{
		"fmt":  fmt.Sprintf("%v %+v %#v %s", k, k, k, k),
		"json": string(js),
		"slog": logged.String(),
		"ring": fmt.Sprintf("%v %+v", k.st.Load().signing.keys, k.st.Load().signing.keys),
	}
	secrets := secretStrings(k)
	if len(secrets) < 9*7 { // 2 HMAC secrets, 2 data keys, 3 signing keys (one derived)
		t.Fatalf("secretStrings covers %d forms, want the signing keys too", len(secrets))
	}
	for name, out := range outputs {
		for _, secret := range secrets {
			if strings.Contains(out, secret) {
				t.Errorf("%s output contains a secret: %s", name, out)
			}
		}
		if name != "ring" && (!strings.Contains(out, "s_a") || !strings.Contains(out, "s_b") || !strings.Contains(out, SigningDerivedKeyID)) {
			t.Errorf("%s output does not name the signing keys: %s", name, out)
		}
	}
	if !strings.Contains(string(js), `"signing_primary":"s_a"`) || !strings.Contains(string(js), `"signing_key_ids":["s_derived","s_a","s_b"]`) {
		t.Errorf("json = %s, want signing_primary and signing_key_ids", js)
	}
}

// TestSigningConcurrent: Sign and Verify run without a lock while keys are
// rotated, retired and saved; a fresh token fails only if its key was
// retired meanwhile (a retired key never comes back).
func TestSigningConcurrent(t *testing.T) {
	k := fromJSON(t, fuzzKeyring)
	path := filepath.Join(t.TempDir(), "keyring.json")
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 300 {
				msg := fmt.Appendf(nil, "pay_%d_%d", g, i)
				id, mac := k.Sign(msg)
				if !k.Verify(id, msg, mac) && slices.Contains(k.SigningKeyIDs(), id) {
					t.Errorf("a fresh token of the held key %s does not verify", id)
					return
				}
				if k.Verify(id, append(msg, 'x'), mac) {
					t.Error("a token verifies for another message")
					return
				}
			}
		})
	}
	var ids []string
	for i := range 30 {
		id, err := k.RotateSigning()
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
		if i >= 2 {
			if err := k.RetireSigning(ids[i-2]); err != nil {
				t.Fatal(err)
			}
		}
		if i%10 == 0 {
			if _, err := k.Rotate(); err != nil {
				t.Fatal(err)
			}
			if err := k.Save(path); err != nil {
				t.Fatal(err)
			}
		}
	}
	wg.Wait()
	if err := k.Save(path); err != nil {
		t.Fatal(err)
	}
	sameKeys(t, k, mustLoad(t, path))
}

func BenchmarkVerify(b *testing.B) {
	k := mustGenerate(b)
	msg := []byte("pay_0123456789abcdef.1764412800")
	id, mac := k.Sign(msg)
	b.ReportAllocs()
	for b.Loop() {
		if !k.Verify(id, msg, mac) {
			b.Fatal("Verify = false")
		}
	}
}
