package sim

import "math/bits"

// table finds a shard's records by a hash of one of their strings (the
// idempotency key, the payment ID). It is an open-addressing hash table of
// positions in the shard's records, with linear probing, kept at most half
// full: 4 bytes a slot, 8 to 16 a record, where a Go map keyed by the
// string takes about 40 a record. The strings are stored once, in the
// records; the table keeps no hashes, so hashAt recomputes the hash of the
// record at a position when entries move.
type table struct {
	slots []uint32 // position+1; 0 marks a free slot. The length is 0 or a power of two.
	shift uint8    // 64 - log2(len(slots)).
	used  int
}

// tableSlotsMin is the size of a table's first allocation.
const tableSlotsMin = 16

// fibonacci is 2^64 divided by the golden ratio. Multiplying by it moves
// every bit of a hash into the top bits, which pick the home slot: within
// a shard the low bits of a key's hash are all alike (they chose the shard).
const fibonacci = 0x9E3779B97F4A7C15

func (t *table) home(h uint64) int { return int((h * fibonacci) >> t.shift) } //nolint:gosec // G115: below len(slots) after the shift

// find calls match with the positions on h's probe sequence, those stored
// under h among others, until match returns true, and returns that
// position.
func (t *table) find(h uint64, match func(pos uint32) bool) (uint32, bool) {
	if t.used == 0 {
		return 0, false
	}
	mask := len(t.slots) - 1
	for i := t.home(h); t.slots[i] != 0; i = (i + 1) & mask {
		if pos := t.slots[i] - 1; match(pos) {
			return pos, true
		}
	}
	return 0, false
}

// insert adds pos under h, doubling the table when it would be more than
// half full.
func (t *table) insert(h uint64, pos uint32, hashAt func(pos uint32) uint64) {
	if 2*(t.used+1) > len(t.slots) {
		t.resize(max(tableSlotsMin, 2*len(t.slots)), hashAt)
	}
	t.put(h, pos)
	t.used++
}

func (t *table) put(h uint64, pos uint32) {
	mask := len(t.slots) - 1
	i := t.home(h)
	for t.slots[i] != 0 {
		i = (i + 1) & mask
	}
	t.slots[i] = pos + 1
}

func (t *table) resize(n int, hashAt func(pos uint32) uint64) {
	old := t.slots
	t.slots = make([]uint32, n)
	t.shift = uint8(64 - bits.TrailingZeros(uint(n))) //nolint:gosec // G115: 0..64
	for _, v := range old {
		if v != 0 {
			t.put(hashAt(v-1), v-1)
		}
	}
}

// remove deletes pos, stored under h; a position the table does not hold
// is left alone. Entries after the hole in its run move back into it when
// their home slot is not after the hole (backward-shift deletion), so
// every entry stays reachable from its home without tombstones.
func (t *table) remove(h uint64, pos uint32, hashAt func(pos uint32) uint64) {
	if t.used == 0 {
		return
	}
	mask := len(t.slots) - 1
	i := t.home(h)
	for t.slots[i] != pos+1 {
		if t.slots[i] == 0 {
			return
		}
		i = (i + 1) & mask
	}
	t.used--
	for j := (i + 1) & mask; t.slots[j] != 0; j = (j + 1) & mask {
		home := t.home(hashAt(t.slots[j] - 1))
		if (j-home)&mask >= (j-i)&mask { // the hole lies between the entry's home and the entry.
			t.slots[i] = t.slots[j]
			i = j
		}
	}
	t.slots[i] = 0
}
