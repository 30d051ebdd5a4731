package vault

import (
	"bytes"
	"encoding/base64"
	"errors"
	"testing"
)

// fuzzKeyring is a fixed keyring so that corpus entries sealed under its
// keys reach the authentication step.
const fuzzKeyring = `{
 "primary": "k_fuzz2",
 "keys": [
  {"id": "k_fuzz1", "created": "2026-01-01T00:00:00Z", "secret": "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE="},
  {"id": "k_fuzz2", "created": "2026-02-01T00:00:00Z", "secret": "AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI="}
 ],
 "fingerprint_secret": "AwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwM=",
 "api_key_secret": "BAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQ="
}`

func FuzzDecrypt(f *testing.F) {
	k, err := FromEnv(base64.StdEncoding.EncodeToString([]byte(fuzzKeyring)))
	if err != nil {
		f.Fatal(err)
	}
	good, _ := k.Encrypt([]byte("4242424242424242"), []byte("m_1/pm_1"))
	f.Add(good, []byte("m_1/pm_1"))
	f.Add([]byte{}, []byte{})
	f.Add([]byte{1, 7, 'k', '_', 'f', 'u', 'z', 'z', '1'}, []byte("a"))
	f.Fuzz(func(t *testing.T, sealed, aad []byte) {
		got, err := k.Decrypt(sealed, aad)
		if err == nil {
			// Only a genuine blob can open; re-sealing must round-trip.
			again, err := k.Encrypt(got, aad)
			if err != nil {
				t.Fatalf("Encrypt of decrypted plaintext: %v", err)
			}
			if back, err := k.Decrypt(again, aad); err != nil || !bytes.Equal(back, got) {
				t.Fatalf("round trip = %q, %v", back, err)
			}
			return
		}
		if got != nil {
			t.Fatalf("plaintext returned with error %v", err)
		}
		if !errors.Is(err, ErrSealedInvalid) && !errors.Is(err, ErrKeyUnknown) && !errors.Is(err, ErrDecrypt) {
			t.Fatalf("unexpected error kind: %v", err)
		}
		_, _ = k.KeyIDOf(sealed) // must not panic; errors are expected
		_, _, _ = Reencrypt(k, sealed, aad)
	})
}
