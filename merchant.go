package surgepay

import "time"

// Merchant owns every other object. Settings are read on every request and
// so are cached by the engine.
type Merchant struct {
	ID      string
	Name    string
	Created time.Time
}

// APIKey authenticates a merchant. Only a keyed hash of the secret is
// stored (HMAC-SHA256 under the server's API-key secret): checking a key is
// one hash and one map or index lookup, microseconds, not a slow password
// hash per request.
type APIKey struct {
	ID         string // public identifier, e.g. "key_...", recorded in the audit trail.
	MerchantID string
	Hash       []byte // HMAC-SHA256 of the secret.
	Prefix     string // first characters of the secret, to help people tell keys apart.
	Created    time.Time
	Revoked    bool
}
