package sim

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
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

// TestReleaseBoundedPerStore checks that a store releases at most
// releaseStepMax expired records, so no call pays for a long idle period,
// and that stores release them all in a few steps.
func TestReleaseBoundedPerStore(t *testing.T) {
	p := New(Config{Retention: Duration(time.Minute)})
	s := &p.shards[0]
	store := func(key string, now uint32) {
		r := record{key: key, op: opCapture}
		s.store(&r, now)
	}
	for i := range 100 {
		store(fmt.Sprint("old", i), 0)
	}
	late := uint32(61) // 61 s later: every old record is expired.
	store("new0", late)
	if got := s.count(); got != 100-releaseStepMax+1 {
		t.Fatalf("after one store: %d records, want %d: at most %d released", got, 100-releaseStepMax+1, releaseStepMax)
	}
	for i := 1; i <= 100/releaseStepMax; i++ {
		store(fmt.Sprint("new", i), late)
	}
	if got, want := s.count(), 100/releaseStepMax+1; got != want || s.totals.RecordsExpired != 100 {
		t.Fatalf("after %d stores: %d records and %d expired, want %d and 100", want, got, s.totals.RecordsExpired, want)
	}
	if _, ok := s.find("old99", late); ok {
		t.Fatal("an expired key is found")
	}
	if _, ok := s.find("new0", late); !ok {
		t.Fatal("a live key is not found")
	}
}
