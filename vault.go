package surgepay

// Vault encrypts card numbers at rest and fingerprints them. Package vault
// implements it with a rotatable AES-256-GCM keyring.
type Vault interface {
	// Encrypt seals plaintext bound to aad (the record it belongs to).
	Encrypt(plaintext, aad []byte) ([]byte, error)
	// Decrypt opens a sealed blob under any key of the ring, checking aad.
	Decrypt(sealed, aad []byte) ([]byte, error)
	// Fingerprint returns a keyed, irreversible, per-merchant card fingerprint.
	Fingerprint(merchantID string, pan []byte) string
	// APIKeyHash returns the keyed hash of an API key's secret (HMAC-SHA256
	// under a server secret), which is what the store holds.
	APIKeyHash(secret string) []byte
}

// Signer signs and checks the server's stateless tokens (the browser's
// client secrets, docs/checkout.md) under rotatable HMAC-SHA256 keys of
// their own (package vault's signing keys): a key ID names the key, so a
// rotation leaves live tokens valid, and retiring a key ends them at once.
type Signer interface {
	// Sign returns the MAC of msg under the primary signing key, and its ID.
	Sign(msg []byte) (keyID string, mac []byte)
	// Verify reports whether mac is msg's MAC under the key keyID; false
	// for a key it does not hold.
	Verify(keyID string, msg, mac []byte) bool
}

// TaxTable answers tax rates from an in-memory table.
type TaxTable interface {
	// RateBPS returns the rate in basis points for the most specific match.
	RateBPS(country, region, postalCode, category string) (bps int, ok bool)
	// Compute returns the tax on amountMinor at rateBPS under the table's
	// documented rounding rule.
	Compute(amountMinor int64, rateBPS int) (int64, error)
}
