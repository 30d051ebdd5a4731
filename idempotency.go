package surgepay

import (
	"crypto/sha256"
	"time"
)

// IdempotencyRecord is the stored answer to a POST carrying an
// Idempotency-Key: a repeat with the same key and the same request gets the
// same status and body; with a different request it is refused.
type IdempotencyRecord struct {
	MerchantID  string
	Key         string
	RequestHash [32]byte // over method, path and body.
	StatusCode  int
	Body        []byte
	Created     time.Time
}

// RequestHash returns the hash that identifies a request for idempotency.
func RequestHash(method, path string, body []byte) [32]byte {
	h := sha256.New()
	h.Write([]byte(method))
	h.Write([]byte{0})
	h.Write([]byte(path))
	h.Write([]byte{0})
	h.Write(body)
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}
