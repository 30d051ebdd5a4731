package sqlite

import (
	"fmt"
	"sync"

	"github.com/klauspost/compress/s2"
)

// Stored answers of idempotency keys are S2 blocks (Snappy's successor)
// against a dictionary: a sale's answer is ~700 bytes of JSON whose keys
// and most values repeat from one sale to the next, so the dictionary (the
// shape of a sale's answer) takes it to ~210 bytes (bench/RESULTS.md,
// issue 14), about a fifth of what the database stores and writes per
// sale, in 1.3 µs on the caller's goroutine (zstd with the same dictionary
// took 7 µs, most of it resetting its tables). A compressed body is
// bodyMark, the dictionary's ID, then the block; bodies stored before
// (JSON, which never starts with a zero byte) are read as they are.

// bodyMark starts a compressed body.
const bodyMark = 0x00

// bodyDictID names bodyDict in every compressed body. The dictionary of a
// stored body must stay readable forever: a better dictionary takes a new
// ID, and decompressBody keeps every old one.
const bodyDictID = 1

// bodyDict is the shape of a sale's answer (the API's payment object).
const bodyDict = `{"id":"pay_","object":"payment","status":"succeeded","amount":,"amount_tax":0,"amount_total":,` +
	`"amount_capturable":0,"amount_captured":,"amount_refunded":0,"currency":"usd","capture_method":"automatic",` +
	`"customer":"cus_","payment_method":"pm_","description":"","metadata":{},"tax":null,"transactions":[{"id":"txn_",` +
	`"type":"authorization","status":"succeeded","amount":,"provider_reference":"auth_","created":},{"id":"txn_",` +
	`"type":"capture","status":"pending","amount":,"created":}],"created":}`

// bodyCompressMin is the shortest body worth compressing.
const bodyCompressMin = 64

// bodyDecodedMax bounds a decoded body: far above any answer (a request
// body is at most 64 KiB, an answer smaller than a list page).
const bodyDecodedMax = 16 << 20

var bodyDicts = sync.OnceValue(func() map[byte]*s2.Dict {
	return map[byte]*s2.Dict{bodyDictID: s2.MakeDict([]byte(bodyDict), nil)}
})

// compressBody returns body as stored: compressed when that is shorter.
func compressBody(body []byte) []byte {
	if len(body) < bodyCompressMin {
		return body
	}
	dst := make([]byte, 2+s2.MaxEncodedLen(len(body)))
	dst[0], dst[1] = bodyMark, bodyDictID
	enc := bodyDicts()[bodyDictID].Encode(dst[2:], body)
	if len(enc)+2 >= len(body) {
		return body
	}
	if &enc[0] == &dst[2] { // encoded in place
		return dst[:2+len(enc)]
	}
	return append(dst[:2], enc...)
}

// decompressBody returns the answer stored as b.
func decompressBody(b []byte) ([]byte, error) {
	if len(b) == 0 || b[0] != bodyMark {
		return b, nil
	}
	if len(b) < 2 {
		return nil, fmt.Errorf("stored answer of %d bytes: truncated", len(b))
	}
	d, ok := bodyDicts()[b[1]]
	if !ok {
		return nil, fmt.Errorf("stored answer compressed with unknown dictionary %d", b[1])
	}
	if n, err := s2.DecodedLen(b[2:]); err != nil || n > bodyDecodedMax {
		return nil, fmt.Errorf("stored answer: bad length (%d, %v)", n, err)
	}
	out, err := d.Decode(nil, b[2:])
	if err != nil {
		return nil, fmt.Errorf("decompress stored answer: %w", err)
	}
	return out, nil
}
