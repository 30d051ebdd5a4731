package vault

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"sync"
	"time"
)

// Client-secret signing keys.
//
// A payment's client secret is a stateless token that a browser presents to
// confirm its payment; the server checks its HMAC-SHA256 with Verify instead
// of reading the database. The signing keys are keys of their own, not
// derived from the data keys, because the two retire under opposite rules:
// a data key may go only once no stored blob names it (after re-encryption),
// while a leaked signing key must go at once, so that the tokens it signed
// stop verifying. They rotate independently: Rotate, AddKey, SetPrimary and
// Retire never touch them, and the signing methods never touch data keys.
//
// Rules, for every keyring:
//
//  1. One signing key is primary: Sign uses it. Every signing key verifies
//     until RetireSigning removes it.
//  2. The derived key, ID SigningDerivedKeyID, is HKDF-SHA256 of the API-key
//     secret (info signingDerivedInfo). It is in the keyring unless the file
//     says "signing_derived_retired": true. A keyring file written before
//     signing keys existed lists none, so its only signing key is the
//     derived one, which every server sharing that file or SURGEPAY_KEYRING
//     computes alike: signing works without rewriting the file.
//  3. Generate marks the derived key retired from the start: a new keyring
//     signs with a random key, and nothing needs the derived one.
//  4. A retired derived key stays retired: RetireSigning sets the flag, Save
//     writes it, and no method brings the key back.

// SigningKeyBytes is the size of an HMAC-SHA256 signing key.
const SigningKeyBytes = 32

// SigningDerivedKeyID is the ID of the signing key derived from the API-key
// secret; no random signing key may use it.
const SigningDerivedKeyID = "s_derived"

// signingDerivedInfo is the HKDF info string of the derived signing key.
// Changing it changes the key, and with it every client secret it signed.
const signingDerivedInfo = "surgepay client-secret signing key v1"

// signingRing is the immutable set of signing keys in a state snapshot.
// Writers change a clone and publish a new state.
type signingRing struct {
	primary string
	keys    map[string]*signingKey
	order   []string // Key IDs, oldest first; the derived key, if present, first.
	// derivedRetired records that the derived key was retired (or never
	// wanted, after Generate), so that it stays out after Save and Load.
	derivedRetired bool
}

func (r *signingRing) clone() *signingRing {
	c := *r
	c.keys = make(map[string]*signingKey, len(r.keys)+1)
	for id, sk := range r.keys {
		c.keys[id] = sk
	}
	c.order = append([]string(nil), r.order...)
	return &c
}

func (r *signingRing) add(sk *signingKey) {
	r.keys[sk.id] = sk
	r.order = append(r.order, sk.id)
}

type signingKey struct {
	id      string
	created time.Time // Zero for the derived key, which the file does not list.
	secret  []byte
	// macs holds HMAC-SHA256 states keyed with secret, reset between uses,
	// for the same reason as state.apiKeyMACs: Verify runs on every
	// confirmation, and a new HMAC costs five allocations.
	macs *sync.Pool
}

func newSigningKey(id string, created time.Time, secret []byte) *signingKey {
	return &signingKey{id: id, created: created.UTC(), secret: secret,
		macs: &sync.Pool{New: func() any { return hmac.New(sha256.New, secret) }}}
}

// sum returns HMAC-SHA256(msg) under sk.
func (sk *signingKey) sum(msg []byte) []byte {
	m := sk.macs.Get().(hash.Hash)
	m.Write(msg)
	out := m.Sum(make([]byte, 0, sha256.Size))
	m.Reset()
	sk.macs.Put(m)
	return out
}

// derivedSigningKey returns the signing key derived from the API-key secret.
func derivedSigningKey(apiKeySecret []byte) (*signingKey, error) {
	secret, err := hkdf.Key(sha256.New, apiKeySecret, nil, signingDerivedInfo, SigningKeyBytes)
	if err != nil {
		return nil, fmt.Errorf("derive signing key: %w", err)
	}
	return newSigningKey(SigningDerivedKeyID, time.Time{}, secret), nil
}

// newSigningKeyID returns an ID such as "s_20261129_3f9a1c2e5b7d9e01",
// unique in keys: a data key's form with another prefix, so that an
// operator tells the two apart. 27 characters, because it goes into every
// client secret.
func newSigningKeyID(now time.Time, keys map[string]*signingKey) string {
	for {
		id := "s_" + now.UTC().Format("20060102") + "_" + hex.EncodeToString(randomBytes(8))
		if _, dup := keys[id]; !dup {
			return id
		}
	}
}

// newRandomSigningRing returns the signing keys of a new keyring: one random
// primary key, the derived key retired (rule 3).
func newRandomSigningRing(now time.Time) *signingRing {
	r := &signingRing{keys: map[string]*signingKey{}, derivedRetired: true}
	id := newSigningKeyID(now, r.keys)
	r.add(newSigningKey(id, now, randomBytes(SigningKeyBytes)))
	r.primary = id
	return r
}

// Sign returns HMAC-SHA256(msg) under the primary signing key, and that
// key's ID, which the token must carry for Verify. Safe for concurrent use;
// takes no lock.
func (k *Keyring) Sign(msg []byte) (keyID string, mac []byte) {
	r := k.state().signing
	sk := r.keys[r.primary]
	return sk.id, sk.sum(msg)
}

// Verify reports whether mac is the full 32-byte HMAC-SHA256(msg) under the
// signing key keyID, comparing in constant time. It is false for a key ID
// the keyring does not hold (never held, or retired) and for a mac of any
// other length (a truncated MAC does not verify). Whether a key ID is held
// is not secret and may show in timing. Safe for concurrent use; takes no
// lock.
func (k *Keyring) Verify(keyID string, msg, mac []byte) bool {
	sk, ok := k.state().signing.keys[keyID]
	if !ok || len(mac) != sha256.Size {
		return false
	}
	return hmac.Equal(sk.sum(msg), mac)
}

// RotateSigning adds a new random signing key and makes it primary; older
// keys keep verifying until retired. It returns the new key's ID, or an
// error wrapping ErrKeysFull when the keyring already holds KeysMax signing
// keys. In memory only: call Save to persist it. With several servers,
// prefer AddSigningKey, distribute, then SetSigningPrimary, so that no
// server meets a client secret signed with a key it lacks.
func (k *Keyring) RotateSigning() (newID string, err error) {
	return k.addSigningKey(true)
}

// AddSigningKey adds a new random signing key without making it primary and
// returns its ID, or an error wrapping ErrKeysFull. It is the first half of
// a two-phase rotation across several servers, as AddKey is for data keys:
// once every server holds the key, SetSigningPrimary makes it the one that
// signs. In memory only: call Save to persist it.
func (k *Keyring) AddSigningKey() (string, error) {
	return k.addSigningKey(false)
}

func (k *Keyring) addSigningKey(primary bool) (id string, err error) {
	err = k.changeSigning(func(r *signingRing) error {
		if len(r.keys) >= KeysMax {
			return fmt.Errorf("add signing key: %d keys: %w", len(r.keys), ErrKeysFull)
		}
		now := time.Now()
		id = newSigningKeyID(now, r.keys)
		r.add(newSigningKey(id, now, randomBytes(SigningKeyBytes)))
		if primary {
			r.primary = id
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return id, nil
}

// SetSigningPrimary makes the signing key id the one Sign uses. It returns
// an error wrapping ErrKeyUnknown if the keyring does not hold id. In
// memory only: call Save to persist it.
func (k *Keyring) SetSigningPrimary(id string) error {
	return k.changeSigning(func(r *signingRing) error {
		if _, ok := r.keys[id]; !ok {
			return fmt.Errorf("set signing primary %q: %w", id, ErrKeyUnknown)
		}
		r.primary = id
		return nil
	})
}

// RetireSigning removes a signing key at once: from then on Verify refuses
// every token it signed. It is what to do after a leak, so unlike Retire it
// needs no preparation. It returns an error wrapping ErrKeyPrimary for the
// primary key (rotate first) and ErrKeyUnknown for an ID the keyring does
// not hold. Retiring SigningDerivedKeyID is permanent: Save records it. In
// memory only: call Save to persist it.
func (k *Keyring) RetireSigning(id string) error {
	return k.changeSigning(func(r *signingRing) error {
		if id == r.primary {
			return fmt.Errorf("retire signing key %s: %w", id, ErrKeyPrimary)
		}
		if _, ok := r.keys[id]; !ok {
			return fmt.Errorf("retire signing key %q: %w", id, ErrKeyUnknown)
		}
		delete(r.keys, id)
		order := r.order[:0]
		for _, kid := range r.order {
			if kid != id {
				order = append(order, kid)
			}
		}
		r.order = order
		if id == SigningDerivedKeyID {
			r.derivedRetired = true
		}
		return nil
	})
}

// changeSigning applies change to a clone of the signing keys and, if it
// returns nil, publishes a new snapshot with them. The data keys and
// secrets are shared with the old snapshot, unchanged.
func (k *Keyring) changeSigning(change func(r *signingRing) error) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	s := k.state()
	r := s.signing.clone()
	if err := change(r); err != nil {
		return err
	}
	c := *s
	c.signing = r
	k.st.Store(&c)
	return nil
}

// SigningPrimaryID returns the ID of the signing key Sign uses.
func (k *Keyring) SigningPrimaryID() string { return k.state().signing.primary }

// SigningKeyIDs returns the IDs of all signing keys, oldest first (the
// derived key, if held, first). The slice is a copy.
func (k *Keyring) SigningKeyIDs() []string {
	return append([]string(nil), k.state().signing.order...)
}
