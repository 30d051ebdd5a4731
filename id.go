package surgepay

import (
	"crypto/rand"
	"encoding/binary"
	"sync"
	"time"
)

const crockford = "0123456789abcdefghjkmnpqrstvwxyz"

// NewID returns prefix + "_" + 26 characters: a 48-bit millisecond
// timestamp and 80 random bits in Crockford base32 (lower case), so IDs of
// one prefix sort by creation time. Safe for concurrent use.
//
// Within a process, IDs strictly increase: an ID made in the same
// millisecond as the one before (or after the clock stepped back) takes
// the previous one's timestamp and random part plus a random step of up to
// 2^32. So rows keyed by ID are appended at the end of their B-trees, where
// SQLite splits a full leaf by starting a new one; random order within a
// millisecond made it rebalance three leaves and their parent on every
// split (a third of the pages a sale's commit wrote, bench/RESULTS.md,
// issue 14). The step keeps the next ID unguessable to 32 bits.
func NewID(prefix string) string {
	return newIDAt(prefix, time.Now())
}

// lastID is the previous ID's timestamp and random part.
var lastID struct {
	sync.Mutex
	ms     uint64
	hi, lo uint64 // the 80 random bits: 16 in hi, 64 in lo
}

func newIDAt(prefix string, t time.Time) string {
	var b [16]byte
	ms := uint64(max(t.UnixMilli(), 0))
	rand.Read(b[6:])
	hi, lo := uint64(binary.BigEndian.Uint16(b[6:8])), binary.BigEndian.Uint64(b[8:])
	lastID.Lock()
	if ms <= lastID.ms {
		step := lo>>32 + 1
		ms, hi, lo = lastID.ms, lastID.hi, lastID.lo+step
		if lo < step { // carry
			hi++
			if hi > 0xffff { // 2^80 IDs in one millisecond: next millisecond
				ms, hi = ms+1, 0
			}
		}
	}
	lastID.ms, lastID.hi, lastID.lo = ms, hi, lo
	lastID.Unlock()
	binary.BigEndian.PutUint64(b[:8], ms<<16|hi)
	binary.BigEndian.PutUint64(b[8:], lo)
	out := make([]byte, 0, len(prefix)+27)
	out = append(out, prefix...)
	out = append(out, '_')
	// 128 bits → 26 base32 digits (130 bits); the top two bits are zero.
	hi, lo = binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])
	var digits [26]byte
	for i := 25; i >= 0; i-- {
		digits[i] = crockford[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return string(append(out, digits[:]...))
}
