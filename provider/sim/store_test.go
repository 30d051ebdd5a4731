package sim

import (
	"math/rand/v2"
	"testing"
)

// TestTable inserts and removes positions at random and checks that the
// table finds exactly the positions it holds. Hashes take 8 values only,
// so runs are long, wrap around the end of the slots and interleave: the
// cases backward-shift deletion must get right.
func TestTable(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	hashes := make([]uint64, 1000) // position → hash
	for i := range hashes {
		hashes[i] = uint64(rng.IntN(8)) << 61 // the top bits pick the home slot.
	}
	hashAt := func(pos uint32) uint64 { return hashes[pos] }
	var tb table
	held := make(map[uint32]bool)
	for step := range 20_000 {
		pos := uint32(rng.IntN(len(hashes)))
		if held[pos] {
			tb.remove(hashes[pos], pos, hashAt)
			delete(held, pos)
		} else {
			tb.insert(hashes[pos], pos, hashAt)
			held[pos] = true
		}
		if step%97 != 0 {
			continue
		}
		if tb.used != len(held) || 2*tb.used > len(tb.slots) {
			t.Fatalf("step %d: %d used in %d slots, want %d and at most half full", step, tb.used, len(tb.slots), len(held))
		}
		for p := range hashes {
			pos := uint32(p)
			_, found := tb.find(hashes[pos], func(q uint32) bool { return q == pos })
			if found != held[pos] {
				t.Fatalf("step %d: position %d found %v, want %v", step, pos, found, held[pos])
			}
		}
	}
	// Removing a position the table does not hold changes nothing.
	used := tb.used
	for p := range hashes {
		if !held[uint32(p)] {
			tb.remove(hashes[p], uint32(p), hashAt)
		}
	}
	if tb.used != used {
		t.Fatalf("removing absent positions: used %d, want %d", tb.used, used)
	}
}
