package vault

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
)

func mustGenerate(t testing.TB) *Keyring {
	t.Helper()
	k, err := Generate()
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	return k
}

func TestEncryptDecrypt(t *testing.T) {
	k := mustGenerate(t)
	tests := []struct {
		name           string
		plaintext, aad []byte
	}{
		{"PAN", []byte("4242424242424242"), []byte("m_1/pm_1")},
		{"Empty", nil, []byte("m_1/pm_2")},
		{"NoAAD", []byte("5555555555554444"), nil},
		{"Max", bytes.Repeat([]byte{7}, PlaintextBytesMax), []byte("x")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sealed, err := k.Encrypt(tt.plaintext, tt.aad)
			if err != nil {
				t.Fatalf("Encrypt: %v", err)
			}
			if len(tt.plaintext) >= 8 && bytes.Contains(sealed, tt.plaintext[:8]) {
				t.Fatalf("sealed blob contains plaintext")
			}
			got, err := k.Decrypt(sealed, tt.aad)
			if err != nil {
				t.Fatalf("Decrypt: %v", err)
			}
			if !bytes.Equal(got, tt.plaintext) {
				t.Fatalf("Decrypt = %q, want %q", got, tt.plaintext)
			}
			id, err := k.KeyIDOf(sealed)
			if err != nil || id != k.PrimaryID() {
				t.Fatalf("KeyIDOf = %q, %v; want %q, nil", id, err, k.PrimaryID())
			}
		})
	}
}

func TestEncryptNonceFresh(t *testing.T) {
	k := mustGenerate(t)
	a, _ := k.Encrypt([]byte("4242424242424242"), []byte("aad"))
	b, _ := k.Encrypt([]byte("4242424242424242"), []byte("aad"))
	if bytes.Equal(a, b) {
		t.Fatal("two encryptions of the same plaintext are equal; nonce reused")
	}
}

func TestEncryptErrPlaintextTooLarge(t *testing.T) {
	k := mustGenerate(t)
	_, err := k.Encrypt(make([]byte, PlaintextBytesMax+1), nil)
	if !errors.Is(err, ErrPlaintextTooLarge) {
		t.Fatalf("err = %v, want ErrPlaintextTooLarge", err)
	}
}

func TestRotate(t *testing.T) {
	k := mustGenerate(t)
	oldID := k.PrimaryID()
	aad := []byte("m_1/pm_1")
	oldBlob, _ := k.Encrypt([]byte("4242424242424242"), aad)

	newID, err := k.Rotate()
	if err != nil {
		t.Fatalf("Rotate: %v", err)
	}
	if newID == oldID || k.PrimaryID() != newID {
		t.Fatalf("after Rotate: PrimaryID = %q, new = %q, old = %q", k.PrimaryID(), newID, oldID)
	}
	if got, want := k.KeyIDs(), []string{oldID, newID}; !slices.Equal(got, want) {
		t.Fatalf("KeyIDs = %v, want %v", got, want)
	}
	if got, err := k.Decrypt(oldBlob, aad); err != nil || string(got) != "4242424242424242" {
		t.Fatalf("Decrypt old blob = %q, %v", got, err)
	}
	newBlob, _ := k.Encrypt([]byte("5555555555554444"), aad)
	if id, _ := k.KeyIDOf(newBlob); id != newID {
		t.Fatalf("new blob key ID = %q, want %q", id, newID)
	}

	t.Run("Reencrypt", func(t *testing.T) {
		moved, changed, err := Reencrypt(k, oldBlob, aad)
		if err != nil || !changed {
			t.Fatalf("Reencrypt old = changed %v, %v; want true, nil", changed, err)
		}
		if id, _ := k.KeyIDOf(moved); id != newID {
			t.Fatalf("moved blob key ID = %q, want %q", id, newID)
		}
		if got, err := k.Decrypt(moved, aad); err != nil || string(got) != "4242424242424242" {
			t.Fatalf("Decrypt moved = %q, %v", got, err)
		}
		same, changed, err := Reencrypt(k, newBlob, aad)
		if err != nil || changed || !bytes.Equal(same, newBlob) {
			t.Fatalf("Reencrypt primary blob = changed %v, %v; want unchanged", changed, err)
		}
		if _, _, err := Reencrypt(k, oldBlob, []byte("other")); !errors.Is(err, ErrDecrypt) {
			t.Fatalf("Reencrypt wrong aad err = %v, want ErrDecrypt", err)
		}
	})

	t.Run("Retire", func(t *testing.T) {
		if err := k.Retire(newID); !errors.Is(err, ErrKeyPrimary) {
			t.Fatalf("Retire primary err = %v, want ErrKeyPrimary", err)
		}
		if err := k.Retire("k_nope"); !errors.Is(err, ErrKeyUnknown) {
			t.Fatalf("Retire unknown err = %v, want ErrKeyUnknown", err)
		}
		if err := k.Retire(oldID); err != nil {
			t.Fatalf("Retire old: %v", err)
		}
		if got := k.KeyIDs(); !slices.Equal(got, []string{newID}) {
			t.Fatalf("KeyIDs after Retire = %v, want [%s]", got, newID)
		}
		if _, err := k.Decrypt(oldBlob, aad); !errors.Is(err, ErrKeyUnknown) {
			t.Fatalf("Decrypt under retired key err = %v, want ErrKeyUnknown", err)
		}
	})
}

func TestRotateErrKeysFull(t *testing.T) {
	k := mustGenerate(t)
	for range KeysMax - 1 {
		if _, err := k.Rotate(); err != nil {
			t.Fatalf("Rotate: %v", err)
		}
	}
	if _, err := k.Rotate(); !errors.Is(err, ErrKeysFull) {
		t.Fatalf("err = %v, want ErrKeysFull", err)
	}
}

func TestDecryptErrTampered(t *testing.T) {
	k := mustGenerate(t)
	aad := []byte("m_1/pm_1")
	sealed, _ := k.Encrypt([]byte("4242424242424242"), aad)
	for i := range sealed {
		for _, bit := range []byte{0x01, 0x80} {
			b := bytes.Clone(sealed)
			b[i] ^= bit
			got, err := k.Decrypt(b, aad)
			if err == nil {
				t.Fatalf("byte %d ^ %#x: Decrypt = %q, nil; want error", i, bit, got)
			}
			if got != nil {
				t.Fatalf("byte %d: Decrypt returned plaintext with error %v", i, err)
			}
		}
	}
	if _, err := k.Decrypt(sealed[:len(sealed)-1], aad); !errors.Is(err, ErrDecrypt) {
		t.Fatalf("truncated: err = %v, want ErrDecrypt", err)
	}
	if _, err := k.Decrypt(append(bytes.Clone(sealed), 0), aad); !errors.Is(err, ErrDecrypt) {
		t.Fatalf("extended: err = %v, want ErrDecrypt", err)
	}
}

func TestDecryptErrors(t *testing.T) {
	k := mustGenerate(t)
	other := mustGenerate(t)
	aad := []byte("m_1/pm_1")
	pan := "4242424242424242"
	sealed, _ := k.Encrypt([]byte(pan), aad)
	foreign, _ := other.Encrypt([]byte(pan), aad)
	tests := []struct {
		name   string
		sealed []byte
		aad    []byte
		want   error
	}{
		{"ErrDecryptWrongAAD", sealed, []byte("m_1/pm_2"), ErrDecrypt},
		{"ErrDecryptNilAAD", sealed, nil, ErrDecrypt},
		{"ErrKeyUnknown", foreign, aad, ErrKeyUnknown},
		{"ErrSealedInvalidEmpty", nil, aad, ErrSealedInvalid},
		{"ErrSealedInvalidVersion", append([]byte{9}, sealed[1:]...), aad, ErrSealedInvalid},
		{"ErrSealedInvalidShort", sealed[:10], aad, ErrSealedInvalid},
		{"ErrSealedInvalidKeyID", append([]byte{1, 2, '/', '/'}, make([]byte, 40)...), aad, ErrSealedInvalid},
		{"ErrSealedInvalidHuge", make([]byte, SealedBytesMax+1), aad, ErrSealedInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := k.Decrypt(tt.sealed, tt.aad)
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if got != nil {
				t.Fatalf("plaintext returned with error")
			}
			if strings.Contains(err.Error(), pan) {
				t.Fatalf("error %q echoes the plaintext", err)
			}
		})
	}
}

func TestKeyIDOfErrSealedInvalid(t *testing.T) {
	k := mustGenerate(t)
	if _, err := k.KeyIDOf([]byte{1}); !errors.Is(err, ErrSealedInvalid) {
		t.Fatalf("err = %v, want ErrSealedInvalid", err)
	}
}

func TestFingerprint(t *testing.T) {
	k := mustGenerate(t)
	pan := []byte("4242424242424242")
	a := k.Fingerprint("m_1", pan)
	if got := k.Fingerprint("m_1", pan); got != a {
		t.Fatalf("Fingerprint not stable: %q then %q", a, got)
	}
	if len(a) != 22 {
		t.Fatalf("len(Fingerprint) = %d, want 22", len(a))
	}
	if _, err := base64.RawURLEncoding.DecodeString(a); err != nil {
		t.Fatalf("Fingerprint %q not base64url: %v", a, err)
	}
	if got := k.Fingerprint("m_2", pan); got == a {
		t.Fatal("Fingerprint is the same for two merchants")
	}
	if got := k.Fingerprint("m_1", []byte("5555555555554444")); got == a {
		t.Fatal("Fingerprint is the same for two cards")
	}
	if k.Fingerprint("m_12", []byte("34")) == k.Fingerprint("m_1", []byte("234")) {
		t.Fatal("Fingerprint does not separate merchant ID from PAN")
	}
	if _, err := k.Rotate(); err != nil {
		t.Fatal(err)
	}
	if got := k.Fingerprint("m_1", pan); got != a {
		t.Fatalf("Fingerprint changed across Rotate: %q then %q", a, got)
	}
	if other := mustGenerate(t); other.Fingerprint("m_1", pan) == a {
		t.Fatal("Fingerprint is the same under two keyrings; not keyed")
	}
}

func TestAPIKeySecret(t *testing.T) {
	k := mustGenerate(t)
	s := k.APIKeySecret()
	if len(s) < 32 {
		t.Fatalf("len(APIKeySecret) = %d, want >= 32", len(s))
	}
	s[0] ^= 0xff
	if bytes.Equal(s, k.APIKeySecret()) {
		t.Fatal("APIKeySecret returns the keyring's own slice")
	}
}

// secretStrings returns every secret of k as raw bytes and in the base64
// alphabets a careless marshaller might use.
func secretStrings(k *Keyring) []string {
	s := k.state()
	raw := [][]byte{s.fingerprintSecret, s.apiKeySecret}
	for _, dk := range s.keys {
		raw = append(raw, dk.secret)
	}
	for _, sk := range s.signing.keys {
		raw = append(raw, sk.secret)
	}
	if derived, err := derivedSigningKey(s.apiKeySecret); err == nil { // retired or not, never shown
		raw = append(raw, derived.secret)
	}
	var out []string
	for _, r := range raw {
		out = append(out, string(r),
			base64.StdEncoding.EncodeToString(r), base64.RawStdEncoding.EncodeToString(r),
			base64.URLEncoding.EncodeToString(r), base64.RawURLEncoding.EncodeToString(r),
			//nolint:staticcheck // QF1010: fmt.Sprint(r) is the decimal form ("[52 50 ...]") under test
			fmt.Sprintf("%x", r), fmt.Sprint(r), fmt.Sprintf("%v", r[:8]), fmt.Sprintf("%#v", r[:8]))
	}
	return out
}

func TestKeyringRedacted(t *testing.T) {
	k := mustGenerate(t)
	if _, err := k.Rotate(); err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(k)
	if err != nil {
		t.Fatalf("json.Marshal: %v", err)
	}
	jsStruct, _ := json.Marshal(struct{ K *Keyring }{k})
	var logged bytes.Buffer
	slog.New(slog.NewTextHandler(&logged, nil)).Info("x", "keyring", k)
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("x", "keyring", k)
	outputs := map[string]string{
		"fmt":         fmt.Sprintf("%v %+v %#v %s", k, k, k, k),
		"fmtNested":   fmt.Sprintf("%v %+v %#v", []any{k}, struct{ K *Keyring }{k}, map[string]*Keyring{"k": k}),
		"json":        string(js),
		"jsonNested":  string(jsStruct),
		"slog":        logged.String(),
		"state":       fmt.Sprintf("%v %+v", k.st.Load().keys, k.st.Load().keys),
		"valueFields": fmt.Sprintf("%+v", &k.st),
	}
	for name, out := range outputs {
		for _, secret := range secretStrings(k) {
			if strings.Contains(out, secret) {
				t.Errorf("%s output contains a secret: %s", name, out)
			}
		}
		if name != "state" && name != "valueFields" && !strings.Contains(out, k.PrimaryID()) {
			t.Errorf("%s output does not name the primary key: %s", name, out)
		}
		if name != "state" && name != "valueFields" && !strings.Contains(out, k.SigningPrimaryID()) {
			t.Errorf("%s output does not name the primary signing key: %s", name, out)
		}
	}
}

func TestKeyringConcurrent(t *testing.T) {
	k := mustGenerate(t)
	aad := []byte("m/pm")
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				pan := []byte(fmt.Sprintf("4242%012d", g*1000+i))
				b, err := k.Encrypt(pan, aad)
				if err != nil {
					t.Error(err)
					return
				}
				if got, err := k.Decrypt(b, aad); err != nil || !bytes.Equal(got, pan) {
					t.Errorf("Decrypt = %q, %v", got, err)
					return
				}
				if _, _, err := Reencrypt(k, b, aad); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	for range 20 {
		if _, err := k.Rotate(); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
}

func TestZeroKeyringPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	var k Keyring
	if got := k.String(); got != "vault.Keyring{}" {
		t.Errorf("String = %q", got)
	}
	k.PrimaryID()
}

func BenchmarkEncrypt(b *testing.B) {
	k := mustGenerate(b)
	pan, aad := []byte("4242424242424242"), []byte("m_1/pm_1")
	for b.Loop() {
		if _, err := k.Encrypt(pan, aad); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecrypt(b *testing.B) {
	k := mustGenerate(b)
	aad := []byte("m_1/pm_1")
	sealed, _ := k.Encrypt([]byte("4242424242424242"), aad)
	for b.Loop() {
		if _, err := k.Decrypt(sealed, aad); err != nil {
			b.Fatal(err)
		}
	}
}

func TestAddKeySetPrimary(t *testing.T) {
	k := mustGenerate(t)
	oldID := k.PrimaryID()
	id, err := k.AddKey()
	if err != nil {
		t.Fatalf("AddKey: %v", err)
	}
	if k.PrimaryID() != oldID {
		t.Fatalf("AddKey changed the primary to %q", k.PrimaryID())
	}
	if got := k.KeyIDs(); !slices.Equal(got, []string{oldID, id}) {
		t.Fatalf("KeyIDs = %v", got)
	}
	if err := k.SetPrimary("k_nope"); !errors.Is(err, ErrKeyUnknown) {
		t.Fatalf("SetPrimary unknown err = %v, want ErrKeyUnknown", err)
	}
	if err := k.SetPrimary(id); err != nil {
		t.Fatalf("SetPrimary: %v", err)
	}
	b, _ := k.Encrypt([]byte("4242424242424242"), nil)
	if got, _ := k.KeyIDOf(b); got != id {
		t.Fatalf("blob key ID = %q, want %q", got, id)
	}
}

// TestAPIKeyHash: the pooled HMAC gives HMAC-SHA256 under APIKeySecret,
// the same on reuse (each state is reset), and a keyring loaded from the
// same file gives the same hash while another keyring does not.
func TestAPIKeyHash(t *testing.T) {
	k, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	want := func(secret string) []byte {
		m := hmac.New(sha256.New, k.APIKeySecret())
		m.Write([]byte(secret))
		return m.Sum(nil)
	}
	for i := range 3 {
		for _, s := range []string{"sk_test_a", "sk_test_b", ""} {
			if got := k.APIKeyHash(s); !bytes.Equal(got, want(s)) {
				t.Fatalf("round %d: APIKeyHash(%q) = %x, want %x", i, s, got, want(s))
			}
		}
	}
	other, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(other.APIKeyHash("sk_test_a"), k.APIKeyHash("sk_test_a")) {
		t.Fatal("two keyrings hash a key alike")
	}
}
