// Package vault encrypts card numbers at rest under rotatable AES-256-GCM
// data-encryption keys and derives keyed, non-reversible fingerprints.
//
// A Keyring holds every data key by ID. One key is primary: Encrypt always
// uses it, and writes its ID into the sealed blob, so Decrypt finds the right
// key for any blob without outside bookkeeping. That is what makes rotation
// possible without downtime:
//
//  1. Rotate adds a new key and makes it primary, then Save persists the
//     keyring and every server reloads it (or SURGEPAY_KEYRING changes).
//     From then on new writes use the new key. With several servers, split
//     this step in two so that no server meets a key it lacks: AddKey, Save,
//     reload everywhere; then SetPrimary, Save, reload everywhere.
//  2. Reads keep working throughout: blobs sealed under an older key still
//     name that key, and it is still in the keyring.
//  3. A background job calls Reencrypt on every stored blob; it rewrites
//     only the blobs that are not under the primary key (`surgepay keys
//     reencrypt`, internal/ops).
//  4. When no blob names the old key any more (KeyIDOf answers that), Retire
//     removes it and Save persists the smaller keyring (`surgepay keys
//     retire`).
//
// A server that lacks a key fails to decrypt blobs under it with
// ErrKeyUnknown; the two-phase form of step 1 prevents that.
//
// Random 96-bit nonces are used, so a single key must not seal more than
// 2^32 blobs (NIST SP 800-38D); rotate long before that.
//
// The keyring also holds client-secret signing keys (Sign, Verify): HMAC
// keys of their own that rotate apart from the data keys and can be retired
// at once after a leak; see signing.go for their rules.
//
// Secrets never leave the package in printable form: String, GoString,
// LogValue and MarshalJSON show only key IDs. The key file is written only by
// Save and LoadOrCreate.
package vault

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Limits.
const (
	// KeyIDBytesMax is the longest key ID; the sealed format stores the
	// length in one byte.
	KeyIDBytesMax = 64
	// KeysMax is the most keys a keyring holds, retired keys excluded.
	KeysMax = 256
	// PlaintextBytesMax is the largest plaintext Encrypt accepts. Card
	// numbers are at most 19 bytes; the headroom is for other small secrets.
	PlaintextBytesMax = 64 << 10
	// SealedBytesMax is the largest blob Decrypt accepts.
	SealedBytesMax = headerBytesMax + nonceBytes + PlaintextBytesMax + tagBytes
	// FileBytesMax is the largest keyring file or SURGEPAY_KEYRING value.
	FileBytesMax = 1 << 20
)

const (
	// SealedVersion is the first byte of every blob Encrypt returns.
	SealedVersion byte = 1

	keyBytes        = 32 // AES-256.
	secretBytesMin  = 32 // HMAC secrets.
	secretBytesMax  = 1024
	nonceBytes      = 12
	tagBytes        = 16
	headerBytesMax  = 2 + KeyIDBytesMax
	fingerprintSize = 16
)

// EnvVar is the environment variable FromEnv is meant to read.
const EnvVar = "SURGEPAY_KEYRING"

// Errors. Returned errors wrap these; test with errors.Is.
var (
	// ErrKeyUnknown means a blob names a key the keyring does not hold
	// (never held, or already retired), or Retire was given such an ID.
	ErrKeyUnknown = errors.New("vault: unknown key ID")
	// ErrDecrypt means authentication failed: the blob was altered, or the
	// aad differs from the one used to encrypt. The two are
	// indistinguishable by design.
	ErrDecrypt = errors.New("vault: message authentication failed (blob altered or wrong aad)")
	// ErrSealedInvalid means the input is not a blob Encrypt could produce.
	ErrSealedInvalid = errors.New("vault: malformed sealed blob")
	// ErrPlaintextTooLarge means Encrypt was given more than PlaintextBytesMax.
	ErrPlaintextTooLarge = errors.New("vault: plaintext too large")
	// ErrKeyPrimary means Retire was asked to remove the primary key.
	ErrKeyPrimary = errors.New("vault: cannot retire the primary key")
	// ErrKeysFull means Rotate would exceed KeysMax; retire old keys first.
	ErrKeysFull = errors.New("vault: keyring full")
	// ErrFileMode means a keyring file is readable or writable by group or
	// others.
	ErrFileMode = errors.New("vault: keyring file permissions too open")
	// ErrKeyringInvalid means a keyring file or environment value is
	// malformed.
	ErrKeyringInvalid = errors.New("vault: invalid keyring")
)

// Keyring holds AES-256-GCM data-encryption keys by key ID; one is primary
// and encrypts. It also holds the fingerprint and API-key HMAC secrets and
// the client-secret signing keys, of which one is primary and signs.
//
// Safe for concurrent use. Encrypt, Decrypt, Sign, Verify and the other
// readers take no lock: Rotate, Retire, RotateSigning, RetireSigning and
// the other writers publish a new immutable snapshot. Create a Keyring
// with Generate, Load, LoadOrCreate or FromEnv; the zero value panics when
// used.
type Keyring struct {
	mu sync.Mutex // Serialises the writers (Rotate, RetireSigning, ...).
	// st points to an immutable snapshot. Keeping the secrets behind a
	// pointer also means that printing a copied Keyring value shows an
	// address, not key bytes.
	st atomic.Pointer[state]
}

type state struct {
	primary           string
	keys              map[string]*dataKey
	order             []string // Key IDs, oldest first.
	fingerprintSecret []byte
	apiKeySecret      []byte
	// apiKeyMACs holds HMAC-SHA256 states keyed with apiKeySecret, reset
	// between uses: every request hashes its API key (APIKeyHash), and a
	// new HMAC costs five allocations. Clones share it, as they share the
	// secret; a state with a new secret gets its own (newAPIKeyMACs).
	apiKeyMACs *sync.Pool
	// signing holds the client-secret signing keys; data-key writers copy
	// the pointer, signing writers replace it (changeSigning).
	signing *signingRing
}

// newAPIKeyMACs returns a pool of HMAC-SHA256 states keyed with secret.
func newAPIKeyMACs(secret []byte) *sync.Pool {
	return &sync.Pool{New: func() any { return hmac.New(sha256.New, secret) }}
}

type dataKey struct {
	id      string
	created time.Time
	secret  []byte
	aead    cipher.AEAD
}

func newDataKey(id string, created time.Time, secret []byte) (*dataKey, error) {
	if len(secret) != keyBytes {
		return nil, fmt.Errorf("key %s: secret is %d bytes, want %d: %w", id, len(secret), keyBytes, ErrKeyringInvalid)
	}
	block, err := aes.NewCipher(secret)
	if err != nil {
		return nil, fmt.Errorf("key %s: %w", id, err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("key %s: %w", id, err)
	}
	return &dataKey{id: id, created: created.UTC(), secret: secret, aead: aead}, nil
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b) // Never fails: crypto/rand crashes the program instead.
	return b
}

// newKeyID returns an ID such as "k_20260301_3f9a1c2e5b7d9e01", unique in keys.
func newKeyID(now time.Time, keys map[string]*dataKey) string {
	for {
		id := "k_" + now.UTC().Format("20060102") + "_" + hex.EncodeToString(randomBytes(8))
		if _, dup := keys[id]; !dup {
			return id
		}
	}
}

// validKeyID reports whether id is 1..KeyIDBytesMax bytes of [A-Za-z0-9_-].
func validKeyID(id string) bool {
	if id == "" || len(id) > KeyIDBytesMax {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
		if !ok {
			return false
		}
	}
	return true
}

// Generate returns a keyring with one new random primary key, new random
// fingerprint and API-key secrets, and one new random primary signing key
// (the derived signing key retired from the start). It does not write
// anything; call Save.
func Generate() (*Keyring, error) {
	now := time.Now()
	s := &state{
		keys:              map[string]*dataKey{},
		fingerprintSecret: randomBytes(secretBytesMin),
		apiKeySecret:      randomBytes(secretBytesMin),
	}
	s.apiKeyMACs = newAPIKeyMACs(s.apiKeySecret)
	id := newKeyID(now, s.keys)
	dk, err := newDataKey(id, now, randomBytes(keyBytes))
	if err != nil {
		return nil, err
	}
	s.keys[id] = dk
	s.order = []string{id}
	s.primary = id
	s.signing = newRandomSigningRing(now)
	k := &Keyring{}
	k.st.Store(s)
	return k, nil
}

func (k *Keyring) state() *state {
	s := k.st.Load()
	if s == nil {
		panic("vault: Keyring used without Generate, Load, LoadOrCreate or FromEnv")
	}
	return s
}

// clone returns a copy of s whose map and order may be changed.
func (s *state) clone() *state {
	c := *s
	c.keys = make(map[string]*dataKey, len(s.keys)+1)
	for id, dk := range s.keys {
		c.keys[id] = dk
	}
	c.order = append([]string(nil), s.order...)
	return &c
}

// Rotate adds a new random key and makes it primary; older keys stay for
// decryption. It returns the new key's ID, or an error wrapping ErrKeysFull
// when the keyring already holds KeysMax keys. The change is in memory only:
// call Save to persist it. With several servers, prefer AddKey, distribute,
// then SetPrimary (see the package documentation).
func (k *Keyring) Rotate() (newID string, err error) {
	return k.addKey(true)
}

// AddKey adds a new random key without making it primary, and returns its
// ID, or an error wrapping ErrKeysFull when the keyring already holds
// KeysMax keys. It is the first half of a two-phase rotation: once every
// server holds the key, SetPrimary makes it the one that encrypts, so no
// server ever sees a blob under a key it does not hold. In memory only:
// call Save to persist it.
func (k *Keyring) AddKey() (id string, err error) {
	return k.addKey(false)
}

func (k *Keyring) addKey(primary bool) (string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	s := k.state()
	if len(s.keys) >= KeysMax {
		return "", fmt.Errorf("add key: %d keys: %w", len(s.keys), ErrKeysFull)
	}
	now := time.Now()
	c := s.clone()
	id := newKeyID(now, c.keys)
	dk, err := newDataKey(id, now, randomBytes(keyBytes))
	if err != nil {
		return "", err
	}
	c.keys[id] = dk
	c.order = append(c.order, id)
	if primary {
		c.primary = id
	}
	k.st.Store(c)
	return id, nil
}

// SetPrimary makes the key id the one Encrypt uses. It returns an error
// wrapping ErrKeyUnknown if the keyring does not hold id. In memory only:
// call Save to persist it.
func (k *Keyring) SetPrimary(id string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	s := k.state()
	if _, ok := s.keys[id]; !ok {
		return fmt.Errorf("set primary %q: %w", id, ErrKeyUnknown)
	}
	c := s.clone()
	c.primary = id
	k.st.Store(c)
	return nil
}

// Retire removes a non-primary key, once no stored blob uses it any more.
// It returns an error wrapping ErrKeyPrimary for the primary key and
// ErrKeyUnknown for an ID the keyring does not hold. Blobs still sealed
// under a retired key can no longer be decrypted. The change is in memory
// only: call Save to persist it.
func (k *Keyring) Retire(id string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	s := k.state()
	if id == s.primary {
		return fmt.Errorf("retire %s: %w", id, ErrKeyPrimary)
	}
	if _, ok := s.keys[id]; !ok {
		return fmt.Errorf("retire %q: %w", id, ErrKeyUnknown)
	}
	c := s.clone()
	delete(c.keys, id)
	c.order = c.order[:0]
	for _, kid := range s.order {
		if kid != id {
			c.order = append(c.order, kid)
		}
	}
	k.st.Store(c)
	return nil
}

// PrimaryID returns the ID of the key Encrypt uses.
func (k *Keyring) PrimaryID() string { return k.state().primary }

// KeyIDs returns the IDs of all keys, oldest first. The slice is a copy.
func (k *Keyring) KeyIDs() []string {
	return append([]string(nil), k.state().order...)
}

// Encrypt seals plaintext under the primary key, bound to aad. The caller
// passes aad naming the record the blob belongs to, for example
// merchantID+"/"+paymentMethodID, so that a blob copied to another record
// fails to decrypt. It returns an error wrapping ErrPlaintextTooLarge for
// more than PlaintextBytesMax bytes.
//
// The output is: version byte (SealedVersion) || key ID length (1 byte) ||
// key ID || 12-byte random nonce || ciphertext || 16-byte GCM tag. The
// header (version, length, key ID) is authenticated together with aad.
func (k *Keyring) Encrypt(plaintext []byte, aad []byte) ([]byte, error) {
	if len(plaintext) > PlaintextBytesMax {
		return nil, fmt.Errorf("encrypt %d bytes: %w", len(plaintext), ErrPlaintextTooLarge)
	}
	s := k.state()
	return seal(s.keys[s.primary], plaintext, aad), nil
}

func seal(dk *dataKey, plaintext, aad []byte) []byte {
	headerBytes := 2 + len(dk.id)
	out := make([]byte, headerBytes+nonceBytes, headerBytes+nonceBytes+len(plaintext)+tagBytes)
	out[0] = SealedVersion
	out[1] = byte(len(dk.id)) //nolint:gosec // G115: validKeyID keeps IDs within KeyIDBytesMax (64)
	copy(out[2:], dk.id)
	nonce := out[headerBytes:]
	rand.Read(nonce)
	return dk.aead.Seal(out, nonce, plaintext, additionalData(out[:headerBytes], aad)) //nolint:gosec // G407: the nonce is fresh from crypto/rand above
}

// additionalData binds the blob header and the caller's aad. The header is
// self-delimiting, so the concatenation is unambiguous.
func additionalData(header, aad []byte) []byte {
	ad := make([]byte, 0, len(header)+len(aad))
	return append(append(ad, header...), aad...)
}

// blob is a parsed sealed blob; slices alias the input.
type blob struct {
	header, nonce, ciphertext []byte
	keyID                     string
}

func parseSealed(b []byte) (blob, error) {
	if len(b) > SealedBytesMax {
		return blob{}, fmt.Errorf("%d bytes, limit %d: %w", len(b), SealedBytesMax, ErrSealedInvalid)
	}
	if len(b) < 2 {
		return blob{}, fmt.Errorf("%d bytes: %w", len(b), ErrSealedInvalid)
	}
	if b[0] != SealedVersion {
		return blob{}, fmt.Errorf("version %d, want %d: %w", b[0], SealedVersion, ErrSealedInvalid)
	}
	headerBytes := 2 + int(b[1])
	if len(b) < headerBytes+nonceBytes+tagBytes {
		return blob{}, fmt.Errorf("%d bytes, too short: %w", len(b), ErrSealedInvalid)
	}
	id := string(b[2:headerBytes])
	if !validKeyID(id) {
		return blob{}, fmt.Errorf("key ID not [A-Za-z0-9_-]{1,%d}: %w", KeyIDBytesMax, ErrSealedInvalid)
	}
	return blob{
		header:     b[:headerBytes],
		nonce:      b[headerBytes : headerBytes+nonceBytes],
		ciphertext: b[headerBytes+nonceBytes:],
		keyID:      id,
	}, nil
}

// Decrypt opens a blob from Encrypt, using the key named in the blob, and
// returns the plaintext. Errors wrap ErrSealedInvalid (not a blob),
// ErrKeyUnknown (the key is not in the keyring) or ErrDecrypt (altered blob
// or wrong aad). Errors never contain plaintext or key material. Decrypt
// never panics on any input.
func (k *Keyring) Decrypt(sealed []byte, aad []byte) ([]byte, error) {
	return k.state().open(sealed, aad)
}

func (s *state) open(b, aad []byte) ([]byte, error) {
	p, err := parseSealed(b)
	if err != nil {
		return nil, fmt.Errorf("decrypt: %w", err)
	}
	dk, ok := s.keys[p.keyID]
	if !ok {
		return nil, fmt.Errorf("decrypt: key %s: %w", p.keyID, ErrKeyUnknown)
	}
	plaintext, err := dk.aead.Open(nil, p.nonce, p.ciphertext, additionalData(p.header, aad))
	if err != nil {
		return nil, fmt.Errorf("decrypt under key %s: %w", p.keyID, ErrDecrypt)
	}
	return plaintext, nil
}

// KeyIDOf returns the ID of the key a blob was sealed under, without
// decrypting it. It returns an error wrapping ErrSealedInvalid if b is not
// shaped like a blob from Encrypt; the key need not be in the keyring.
func (k *Keyring) KeyIDOf(sealed []byte) (string, error) {
	p, err := parseSealed(sealed)
	if err != nil {
		return "", fmt.Errorf("key ID: %w", err)
	}
	return p.keyID, nil
}

// Reencrypt returns sealed re-sealed under the primary key with the same
// aad and changed=true if it was under another key. A blob already under the
// primary key is returned as is, unauthenticated, with changed=false. Errors
// are those of Decrypt. It is the step of the rotation job that moves rows;
// safe for concurrent use with Rotate (a concurrent rotation at worst leaves
// the blob under the previous primary, which the next pass moves).
func Reencrypt(k *Keyring, sealed, aad []byte) ([]byte, bool, error) {
	s := k.state()
	p, err := parseSealed(sealed)
	if err != nil {
		return nil, false, fmt.Errorf("reencrypt: %w", err)
	}
	if p.keyID == s.primary {
		return sealed, false, nil
	}
	plaintext, err := s.open(sealed, aad)
	if err != nil {
		return nil, false, fmt.Errorf("reencrypt: %w", err)
	}
	out := seal(s.keys[s.primary], plaintext, aad)
	clear(plaintext)
	return out, true, nil
}

// Fingerprint returns a stable, non-reversible de-duplication fingerprint of
// a card number within one merchant: HMAC-SHA256 under the keyring's
// fingerprint secret over the length-prefixed merchantID followed by pan,
// truncated to 16 bytes and encoded as unpadded base64url (22 characters).
// The same card gives different fingerprints for different merchants, and
// the same fingerprint across key rotations (the fingerprint secret does
// not rotate). The length prefix keeps ("ab","12") and ("a","b12") apart.
func (k *Keyring) Fingerprint(merchantID string, pan []byte) string {
	m := hmac.New(sha256.New, k.state().fingerprintSecret)
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(merchantID))) //nolint:gosec // G115: an ID longer than 4 GiB cannot reach here
	m.Write(n[:])
	m.Write([]byte(merchantID))
	m.Write(pan)
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:fingerprintSize])
}

// APIKeySecret returns a copy of the server secret used to HMAC API keys
// before they are stored or compared.
func (k *Keyring) APIKeySecret() []byte {
	return append([]byte(nil), k.state().apiKeySecret...)
}

// APIKeyHash returns HMAC-SHA256 of an API key's secret under the server
// secret (APIKeySecret): what is stored and looked up, never the key.
func (k *Keyring) APIKeyHash(secret string) []byte {
	pool := k.state().apiKeyMACs
	m := pool.Get().(hash.Hash)
	m.Write([]byte(secret))
	sum := m.Sum(make([]byte, 0, sha256.Size))
	m.Reset()
	pool.Put(m)
	return sum
}

// String describes the keyring by key IDs only (data keys, then signing
// keys); it never shows secrets.
func (k *Keyring) String() string {
	s := k.st.Load()
	if s == nil {
		return "vault.Keyring{}"
	}
	return fmt.Sprintf("vault.Keyring{primary: %s, keys: [%s], signing_primary: %s, signing_keys: [%s]}",
		s.primary, strings.Join(s.order, " "), s.signing.primary, strings.Join(s.signing.order, " "))
}

// GoString is String, so %#v does not print secrets either.
func (k *Keyring) GoString() string { return k.String() }

// LogValue describes the keyring by key IDs only.
func (k *Keyring) LogValue() slog.Value {
	s := k.st.Load()
	if s == nil {
		return slog.StringValue(k.String())
	}
	return slog.GroupValue(slog.String("primary", s.primary), slog.Any("keys", s.order),
		slog.String("signing_primary", s.signing.primary), slog.Any("signing_keys", s.signing.order))
}

// MarshalJSON returns {"primary": ID, "key_ids": [IDs], "signing_primary":
// ID, "signing_key_ids": [IDs]} and no secrets. The key file format is
// written only by Save.
func (k *Keyring) MarshalJSON() ([]byte, error) {
	v := struct {
		Primary        string   `json:"primary"`
		KeyIDs         []string `json:"key_ids"`
		SigningPrimary string   `json:"signing_primary"`
		SigningKeyIDs  []string `json:"signing_key_ids"`
	}{KeyIDs: []string{}, SigningKeyIDs: []string{}}
	if s := k.st.Load(); s != nil {
		v.Primary, v.KeyIDs = s.primary, s.order
		v.SigningPrimary, v.SigningKeyIDs = s.signing.primary, s.signing.order
	}
	return json.Marshal(v)
}
