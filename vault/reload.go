package vault

import (
	"crypto/hmac"
	"errors"
	"fmt"
	"slices"
)

// ErrReloadRefused means Reload found a keyring file that the running
// keyring cannot become: another fingerprint or API-key secret (every
// stored card fingerprint and API-key hash depends on them), or a key ID
// kept with another secret (what it sealed or signed would stop opening).
// The running keyring stays.
var ErrReloadRefused = errors.New("vault: keyring reload refused")

// KeyringChange is what a Reload changed, by key ID; it never holds a
// secret. A primary is "" when it did not change.
type KeyringChange struct {
	Added, Retired               []string // data keys
	Primary                      string   // the data key that now encrypts
	SigningAdded, SigningRetired []string
	SigningPrimary               string // the signing key that now signs
}

// Empty reports whether the reload changed nothing.
func (c KeyringChange) Empty() bool {
	return len(c.Added)+len(c.Retired)+len(c.SigningAdded)+len(c.SigningRetired) == 0 &&
		c.Primary == "" && c.SigningPrimary == ""
}

// Reload reads the keyring file at path (as Load does, with its checks)
// and makes its keys the running ones at once: a server that reloads on
// SIGHUP encrypts under a new primary data key, signs with a new primary
// signing key, and stops verifying a retired signing key's client
// secrets without a restart. The file must keep the running keyring's
// fingerprint and API-key secrets, and every key ID it shares with the
// running keyring must keep its secret; otherwise, or if the file does
// not load, Reload returns an error (ErrReloadRefused for the former)
// and the running keyring stays. Safe for concurrent use with every
// other method: readers see the old keys or the new ones, never a mix.
func (k *Keyring) Reload(path string) (KeyringChange, error) {
	n, err := Load(path)
	if err != nil {
		return KeyringChange{}, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	old, ns := k.state(), n.state()
	if !hmac.Equal(old.fingerprintSecret, ns.fingerprintSecret) || !hmac.Equal(old.apiKeySecret, ns.apiKeySecret) {
		return KeyringChange{}, fmt.Errorf("%w: %s has another fingerprint or API-key secret than the running keyring "+
			"(stored card fingerprints and API keys depend on them)", ErrReloadRefused, path)
	}
	for id, dk := range ns.keys {
		if was, ok := old.keys[id]; ok && !hmac.Equal(was.secret, dk.secret) {
			return KeyringChange{}, fmt.Errorf("%w: %s gives data key %s another secret", ErrReloadRefused, path, id)
		}
	}
	for id, sk := range ns.signing.keys {
		if was, ok := old.signing.keys[id]; ok && !hmac.Equal(was.secret, sk.secret) {
			return KeyringChange{}, fmt.Errorf("%w: %s gives signing key %s another secret", ErrReloadRefused, path, id)
		}
	}
	ns.apiKeyMACs = old.apiKeyMACs // the same secret: keep the warm states
	ch := KeyringChange{
		Added: missing(ns.order, old.keys), Retired: missing(old.order, ns.keys),
		SigningAdded: missing(ns.signing.order, old.signing.keys), SigningRetired: missing(old.signing.order, ns.signing.keys),
	}
	if ns.primary != old.primary {
		ch.Primary = ns.primary
	}
	if ns.signing.primary != old.signing.primary {
		ch.SigningPrimary = ns.signing.primary
	}
	k.st.Store(ns)
	return ch, nil
}

// missing returns the IDs of order that are not keys of in, in order.
func missing[V any](order []string, in map[string]V) []string {
	var out []string
	for _, id := range order {
		if _, ok := in[id]; !ok {
			out = append(out, id)
		}
	}
	return slices.Clip(out)
}
