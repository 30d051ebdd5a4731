package engine

import (
	"encoding/hex"

	"github.com/surgepay/surgepay"
)

// IdempotencyKeyHashPrefix starts an Idempotency-Key the API replaced by
// its keyed hash (see IdempotencyKey).
const IdempotencyKeyHashPrefix = "kh_"

// IdempotencyKey returns the key a client's Idempotency-Key is stored,
// compared and sent to processors under: the key itself, or, when it may
// hold a card number (surgepay.TextHasCardNumber), "kh_" and the hex
// HMAC-SHA256 of it under the keyring's API-key secret. That secret is
// per installation and shared by every node (it is in the keyring file),
// so a retry under the same key finds the same record after a restart and
// on another node; the key is never refused for its digits (issue 34
// item 6: a merchant's order failed on the README's own key), and no
// card number reaches the idempotency records, the transactions or a
// processor. The hashed input is prefixed, so that no key hashes to an
// API key's stored hash. Safe for concurrent use.
func (e *Engine) IdempotencyKey(key string) string {
	if !surgepay.TextHasCardNumber(key) {
		return key
	}
	return IdempotencyKeyHashPrefix + hex.EncodeToString(e.hashKey("idempotency-key\x00"+key))
}
