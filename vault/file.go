package vault

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// keyringFile is the on-disk and SURGEPAY_KEYRING format. Only Save,
// LoadOrCreate, Load and FromEnv use it.
//
// The signing fields are omitted while the keyring's only signing key is
// the derived one, its primary, so that Save keeps a file from before
// signing keys in its old form. A file without them decodes to exactly
// that state (rules in signing.go).
type keyringFile struct {
	Primary           string    `json:"primary"`
	Keys              []fileKey `json:"keys"`
	FingerprintSecret string    `json:"fingerprint_secret"` // Standard base64.
	APIKeySecret      string    `json:"api_key_secret"`     // Standard base64.
	// SigningPrimary is the ID of the signing key that signs; "" means
	// SigningDerivedKeyID.
	SigningPrimary string `json:"signing_primary,omitempty"`
	// SigningKeys are the random signing keys, oldest first (secrets of
	// SigningKeyBytes). The derived key is never listed.
	SigningKeys []fileKey `json:"signing_keys,omitempty"`
	// SigningDerivedRetired keeps the derived signing key out of the keyring.
	SigningDerivedRetired bool `json:"signing_derived_retired,omitempty"`
}

type fileKey struct {
	ID      string    `json:"id"`
	Created time.Time `json:"created"`
	Secret  string    `json:"secret"` // Standard base64 of 32 bytes.
}

// Load reads a keyring file written by Save or LoadOrCreate. It refuses,
// with an error wrapping ErrFileMode that names the path and mode, a file
// that group or others may read or write (anything looser than 0600), and
// with ErrKeyringInvalid a malformed file. A missing file gives an error
// wrapping fs.ErrNotExist. Error messages never contain secrets.
func Load(path string) (*Keyring, error) {
	f, err := os.Open(path) //nolint:gosec // G304: the operator names the keyring file
	if err != nil {
		return nil, fmt.Errorf("vault: load keyring: %w", err)
	}
	defer f.Close() //nolint:errcheck // read-only: closing loses nothing
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("vault: load keyring: %w", err)
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("vault: load keyring %s: not a regular file: %w", path, ErrKeyringInvalid)
	}
	// Windows has no Unix permission bits; there the directory ACL protects the file.
	if perm := info.Mode().Perm(); perm&0o077 != 0 && runtime.GOOS != "windows" {
		return nil, fmt.Errorf("vault: keyring file %s has mode %#o, want 0600 or stricter (fix: chmod 600 %s): %w",
			path, perm, path, ErrFileMode)
	}
	data, err := io.ReadAll(io.LimitReader(f, FileBytesMax+1))
	if err != nil {
		return nil, fmt.Errorf("vault: load keyring: %w", err)
	}
	k, err := decodeKeyring(data)
	if err != nil {
		return nil, fmt.Errorf("vault: load keyring %s: %w", path, err)
	}
	return k, nil
}

// FromEnv decodes a keyring from value, the standard-base64 encoding of the
// same JSON as the key file (for example the SURGEPAY_KEYRING environment
// variable: base64 -w0 keyring.json). Surrounding white space is ignored.
// Errors wrap ErrKeyringInvalid and never contain secrets.
func FromEnv(value string) (*Keyring, error) {
	value = strings.TrimSpace(value)
	if value == "" {
		return nil, fmt.Errorf("vault: %s is empty: %w", EnvVar, ErrKeyringInvalid)
	}
	if len(value) > base64.StdEncoding.EncodedLen(FileBytesMax) {
		return nil, fmt.Errorf("vault: %s longer than %d bytes: %w", EnvVar, base64.StdEncoding.EncodedLen(FileBytesMax), ErrKeyringInvalid)
	}
	data, err := base64.StdEncoding.DecodeString(value)
	if err != nil {
		return nil, fmt.Errorf("vault: %s: not standard base64 (%v): %w", EnvVar, err, ErrKeyringInvalid)
	}
	k, err := decodeKeyring(data)
	if err != nil {
		return nil, fmt.Errorf("vault: %s: %w", EnvVar, err)
	}
	return k, nil
}

// LoadOrCreate loads the keyring file at path, or, if there is none,
// generates a keyring and writes it there (mode 0600, missing parent
// directories 0700) and returns created=true. The write is atomic and
// durable (temporary file, fsync, link into place, fsync of the directory)
// and never replaces a file: if another process creates the file first,
// LoadOrCreate loads and returns that one. Errors are those of Load and of
// the file system.
func LoadOrCreate(path string) (k *Keyring, created bool, err error) {
	k, err = Load(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return k, false, err
	}
	k, err = Generate()
	if err != nil {
		return nil, false, err
	}
	data, err := k.encode()
	if err != nil {
		return nil, false, err
	}
	err = writeFileAtomic(path, data, 0o600, false)
	if errors.Is(err, fs.ErrExist) {
		k, err = Load(path)
		return k, false, err
	}
	if err != nil {
		return nil, false, fmt.Errorf("vault: create keyring: %w", err)
	}
	return k, true, nil
}

// Save writes the keyring to path atomically and durably (temporary file,
// fsync, rename, fsync of the directory) with mode 0600, creating missing
// parent directories with mode 0700 and replacing any existing file. Safe
// for concurrent use with every other method; it writes one consistent
// snapshot.
func (k *Keyring) Save(path string) error {
	data, err := k.encode()
	if err != nil {
		return err
	}
	if err := writeFileAtomic(path, data, 0o600, true); err != nil {
		return fmt.Errorf("vault: save keyring: %w", err)
	}
	return nil
}

func (k *Keyring) encode() ([]byte, error) {
	s := k.state()
	f := keyringFile{
		Primary:           s.primary,
		FingerprintSecret: base64.StdEncoding.EncodeToString(s.fingerprintSecret),
		APIKeySecret:      base64.StdEncoding.EncodeToString(s.apiKeySecret),
	}
	for _, id := range s.order {
		dk := s.keys[id]
		f.Keys = append(f.Keys, fileKey{ID: id, Created: dk.created, Secret: base64.StdEncoding.EncodeToString(dk.secret)})
	}
	r := s.signing
	for _, id := range r.order {
		if id == SigningDerivedKeyID {
			continue
		}
		sk := r.keys[id]
		f.SigningKeys = append(f.SigningKeys, fileKey{ID: id, Created: sk.created, Secret: base64.StdEncoding.EncodeToString(sk.secret)})
	}
	if r.primary != SigningDerivedKeyID || len(f.SigningKeys) > 0 {
		f.SigningPrimary = r.primary
	}
	f.SigningDerivedRetired = r.derivedRetired
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("vault: encode keyring: %w", err)
	}
	return append(data, '\n'), nil
}

func decodeKeyring(data []byte) (*Keyring, error) {
	if len(data) > FileBytesMax {
		return nil, fmt.Errorf("larger than %d bytes: %w", FileBytesMax, ErrKeyringInvalid)
	}
	var f keyringFile
	if err := json.Unmarshal(data, &f); err != nil {
		// Report only the kind and offset: a syntax error message may quote
		// a byte of the file.
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			return nil, fmt.Errorf("not valid JSON at byte %d: %w", syn.Offset, ErrKeyringInvalid)
		}
		return nil, fmt.Errorf("not a keyring JSON object: %w", ErrKeyringInvalid)
	}
	s, err := f.state()
	if err != nil {
		return nil, err
	}
	k := &Keyring{}
	k.st.Store(s)
	return k, nil
}

func (f *keyringFile) state() (*state, error) {
	if len(f.Keys) == 0 || len(f.Keys) > KeysMax {
		return nil, fmt.Errorf("%d keys, want 1..%d: %w", len(f.Keys), KeysMax, ErrKeyringInvalid)
	}
	s := &state{keys: make(map[string]*dataKey, len(f.Keys)), primary: f.Primary}
	var err error
	if s.fingerprintSecret, err = decodeSecret("fingerprint_secret", f.FingerprintSecret, secretBytesMin, secretBytesMax); err != nil {
		return nil, err
	}
	if s.apiKeySecret, err = decodeSecret("api_key_secret", f.APIKeySecret, secretBytesMin, secretBytesMax); err != nil {
		return nil, err
	}
	s.apiKeyMACs = newAPIKeyMACs(s.apiKeySecret)
	for i, fk := range f.Keys {
		if !validKeyID(fk.ID) {
			return nil, fmt.Errorf("keys[%d]: id %q not [A-Za-z0-9_-]{1,%d}: %w", i, fk.ID, KeyIDBytesMax, ErrKeyringInvalid)
		}
		if _, dup := s.keys[fk.ID]; dup {
			return nil, fmt.Errorf("keys[%d]: duplicate id %s: %w", i, fk.ID, ErrKeyringInvalid)
		}
		secret, err := decodeSecret("keys["+fk.ID+"].secret", fk.Secret, keyBytes, keyBytes)
		if err != nil {
			return nil, err
		}
		dk, err := newDataKey(fk.ID, fk.Created, secret)
		if err != nil {
			return nil, err
		}
		s.keys[fk.ID] = dk
		s.order = append(s.order, fk.ID)
	}
	if _, ok := s.keys[s.primary]; !ok {
		return nil, fmt.Errorf("primary %q is not among the keys: %w", s.primary, ErrKeyringInvalid)
	}
	if s.signing, err = f.signingRing(s.apiKeySecret); err != nil {
		return nil, err
	}
	return s, nil
}

// signingRing decodes the signing fields under the rules in signing.go.
// Errors name the field; a key ID that is not valid is not shown, as it may
// be a secret pasted into the wrong field.
func (f *keyringFile) signingRing(apiKeySecret []byte) (*signingRing, error) {
	derived := !f.SigningDerivedRetired
	n := len(f.SigningKeys)
	if derived {
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("signing_keys: none, and signing_derived_retired is true: no signing key left: %w", ErrKeyringInvalid)
	}
	if n > KeysMax {
		return nil, fmt.Errorf("signing_keys: %d signing keys, want at most %d: %w", n, KeysMax, ErrKeyringInvalid)
	}
	r := &signingRing{keys: make(map[string]*signingKey, n), derivedRetired: f.SigningDerivedRetired}
	if derived {
		sk, err := derivedSigningKey(apiKeySecret)
		if err != nil {
			return nil, err
		}
		r.add(sk)
	}
	for i, fk := range f.SigningKeys {
		switch {
		case !validKeyID(fk.ID):
			return nil, fmt.Errorf("signing_keys[%d]: id (%d bytes) not [A-Za-z0-9_-]{1,%d}: %w", i, len(fk.ID), KeyIDBytesMax, ErrKeyringInvalid)
		case fk.ID == SigningDerivedKeyID:
			return nil, fmt.Errorf("signing_keys[%d]: id %s is reserved for the derived key, which is never listed: %w", i, fk.ID, ErrKeyringInvalid)
		case r.keys[fk.ID] != nil:
			return nil, fmt.Errorf("signing_keys[%d]: duplicate id %s: %w", i, fk.ID, ErrKeyringInvalid)
		}
		secret, err := decodeSecret("signing_keys["+fk.ID+"].secret", fk.Secret, SigningKeyBytes, SigningKeyBytes)
		if err != nil {
			return nil, err
		}
		r.add(newSigningKey(fk.ID, fk.Created, secret))
	}
	r.primary = f.SigningPrimary
	if r.primary == "" {
		r.primary = SigningDerivedKeyID
	}
	if r.keys[r.primary] == nil {
		switch {
		case !validKeyID(r.primary):
			return nil, fmt.Errorf("signing_primary: (%d bytes) not a key ID: %w", len(r.primary), ErrKeyringInvalid)
		case r.primary == SigningDerivedKeyID:
			return nil, fmt.Errorf("signing_primary: missing or %s, but signing_derived_retired is true: %w", SigningDerivedKeyID, ErrKeyringInvalid)
		}
		return nil, fmt.Errorf("signing_primary: %s is not among the signing keys: %w", r.primary, ErrKeyringInvalid)
	}
	return r, nil
}

func decodeSecret(field, value string, bytesMin, bytesMax int) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(value)
	if err != nil {
		return nil, fmt.Errorf("%s: not standard base64: %w", field, ErrKeyringInvalid)
	}
	if len(b) < bytesMin || len(b) > bytesMax {
		return nil, fmt.Errorf("%s: %d bytes, want %d..%d: %w", field, len(b), bytesMin, bytesMax, ErrKeyringInvalid)
	}
	return b, nil
}

// writeFileAtomic writes data to a temporary file in path's directory,
// fsyncs it, moves it to path and fsyncs the directory, so that path holds
// either the old or the new content after a crash. Missing directories are
// created with mode 0700. With replace false it links instead of renaming,
// and returns an error wrapping fs.ErrExist if path already exists.
func writeFileAtomic(path string, data []byte, perm os.FileMode, replace bool) (err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*") // Mode 0600.
	if err != nil {
		return err
	}
	defer func() {
		// Best effort: on success tmp is closed and renamed (both fail
		// harmlessly); on failure the first error is the one returned.
		_ = tmp.Close()
		_ = os.Remove(tmp.Name())
	}()
	if err := tmp.Chmod(perm); err != nil {
		return err
	}
	if _, err := io.Copy(tmp, bytes.NewReader(data)); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if replace {
		err = os.Rename(tmp.Name(), path)
	} else {
		err = os.Link(tmp.Name(), path)
	}
	if err != nil {
		return err
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil // Directories cannot be opened for sync there.
	}
	d, err := os.Open(dir) //nolint:gosec // G304: the keyring file's directory
	if err != nil {
		return err
	}
	defer d.Close() //nolint:errcheck // opened only to sync; Sync's error is returned
	return d.Sync()
}
