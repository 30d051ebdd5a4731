package stage

import (
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Key files and environment variables.
const (
	PublicKeyFile  = "settlement.pub" // mode 0644: API hosts read it
	PrivateKeyFile = "settlement.key" // mode 0600: settlement only
	// EnvPublicKey and EnvPrivateKey hold a key as standard base64 of its
	// 32 bytes; set, they take precedence over the files.
	EnvPublicKey  = "SURGEPAY_SETTLEMENT_PUBLIC_KEY"
	EnvPrivateKey = "SURGEPAY_SETTLEMENT_PRIVATE_KEY"

	pemPublic  = "SURGEPAY SETTLEMENT PUBLIC KEY"
	pemPrivate = "SURGEPAY SETTLEMENT PRIVATE KEY"
	suiteName  = "DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, AES-256-GCM"
	keyBytes   = 32
	keyFileMax = 4 << 10
)

// WriteKeyFiles generates a settlement key pair and writes it to dir as
// PublicKeyFile (0644) and PrivateKeyFile (0600), PEM blocks with a Key-Id
// header, making dir 0700 if it does not exist (an existing one keeps its
// mode). It refuses to overwrite existing files and returns the key ID.
func WriteKeyFiles(dir string) (keyID string, err error) {
	pub, priv, err := GenerateKeys()
	if err != nil {
		return "", err
	}
	id := KeyID(pub)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("settlement keys: %w", err)
	}
	pubPath, privPath := filepath.Join(dir, PublicKeyFile), filepath.Join(dir, PrivateKeyFile)
	for _, p := range []string{pubPath, privPath} {
		if _, err := os.Stat(p); err == nil {
			return "", fmt.Errorf("settlement keys: %s exists; move it away first (records sealed to it need its private key)", p)
		}
	}
	if err := writeNew(privPath, 0o600, encodeKey(pemPrivate, id, priv)); err != nil {
		return "", err
	}
	if err := writeNew(pubPath, 0o644, encodeKey(pemPublic, id, pub)); err != nil {
		_ = os.Remove(privPath) // best effort: the public key's error is the one to report
		return "", err
	}
	return id, nil
}

func encodeKey(typ, id string, key []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Headers: map[string]string{"Key-Id": id, "Suite": suiteName}, Bytes: key})
}

// writeNew creates path with mode (never widening it through the umask's
// absence) and syncs it. A failed write removes the file.
func writeNew(path string, mode os.FileMode, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode) //nolint:gosec // G304: the operator names the key directory
	if err != nil {
		return fmt.Errorf("settlement keys: %w", err)
	}
	return writeKeyFile(f, path, mode, data)
}

// keyFile is the part of *os.File that writeKeyFile uses, so that a test can
// make each step fail.
type keyFile interface {
	Chmod(mode os.FileMode) error
	Write(b []byte) (n int, err error)
	Sync() error
	Close() error
}

// writeKeyFile sets mode on f, the newly created file at path, writes data,
// syncs and closes it. On any error it removes path and returns the error:
// an empty or partial key file must not look like a key.
func writeKeyFile(f keyFile, path string, mode os.FileMode, data []byte) error {
	err := f.Chmod(mode)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path) // best effort: the write's error is the one to report
		return fmt.Errorf("settlement keys: write %s: %w", path, err)
	}
	return nil
}

// LoadPublicKey reads a public key file written by WriteKeyFiles.
func LoadPublicKey(path string) ([]byte, error) {
	key, id, err := readKeyFile(path, pemPublic)
	if err != nil {
		return nil, err
	}
	if got := KeyID(key); id != "" && got != id {
		return nil, fmt.Errorf("settlement public key %s: Key-Id %s does not match the key (%s): the file is damaged", path, id, got)
	}
	return key, nil
}

// LoadPrivateKey reads a private key file written by WriteKeyFiles. It
// refuses a file that group or others may read.
func LoadPrivateKey(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("settlement private key: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("settlement private key %s: mode %04o lets others read it; run chmod 600 %s", path, fi.Mode().Perm(), path)
	}
	key, id, err := readKeyFile(path, pemPrivate)
	if err != nil {
		return nil, err
	}
	o, err := NewOpener(key)
	if err != nil {
		return nil, fmt.Errorf("settlement private key %s: %w", path, err)
	}
	if id != "" && o.KeyID() != id {
		return nil, fmt.Errorf("settlement private key %s: Key-Id %s does not match the key (%s): the file is damaged", path, id, o.KeyID())
	}
	return key, nil
}

func readKeyFile(path, typ string) (key []byte, id string, err error) {
	f, err := os.Open(path) //nolint:gosec // G304: the operator names the key file
	if err != nil {
		return nil, "", fmt.Errorf("settlement key: %w", err)
	}
	defer f.Close() //nolint:errcheck // read-only: closing loses nothing
	buf, err := io.ReadAll(io.LimitReader(f, keyFileMax+1))
	if err != nil {
		return nil, "", fmt.Errorf("settlement key %s: %w", path, err)
	}
	if len(buf) > keyFileMax {
		return nil, "", fmt.Errorf("settlement key %s: larger than %d bytes; not a key file", path, keyFileMax)
	}
	b, _ := pem.Decode(buf)
	if b == nil || b.Type != typ {
		return nil, "", fmt.Errorf("settlement key %s: no %q PEM block (make one with `surgepay keys settlement --out DIR`)", path, typ)
	}
	if len(b.Bytes) != keyBytes {
		return nil, "", fmt.Errorf("settlement key %s: %d bytes, want %d", path, len(b.Bytes), keyBytes)
	}
	return b.Bytes, b.Headers["Key-Id"], nil
}

// ParseKeyBase64 decodes a key from its environment form: standard base64
// of its 32 bytes.
func ParseKeyBase64(s string) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return nil, errors.New("not standard base64")
	}
	if len(b) != keyBytes {
		return nil, fmt.Errorf("%d bytes, want %d", len(b), keyBytes)
	}
	return b, nil
}

// PublicKeyFrom returns the public key from EnvPublicKey if getenv has it,
// else from the file at path.
func PublicKeyFrom(path string, getenv func(string) string) ([]byte, error) {
	if v := getenv(EnvPublicKey); v != "" {
		k, err := ParseKeyBase64(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", EnvPublicKey, err)
		}
		return k, nil
	}
	return LoadPublicKey(path)
}

// PrivateKeyFrom returns the private key from EnvPrivateKey if getenv has
// it, else from the file at path.
func PrivateKeyFrom(path string, getenv func(string) string) ([]byte, error) {
	if v := getenv(EnvPrivateKey); v != "" {
		k, err := ParseKeyBase64(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", EnvPrivateKey, err)
		}
		if _, err := NewOpener(k); err != nil {
			return nil, fmt.Errorf("%s: %w", EnvPrivateKey, err)
		}
		return k, nil
	}
	return LoadPrivateKey(path)
}
