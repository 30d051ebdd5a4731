package sqlite

import (
	"math/rand/v2"
	"testing"
)

// TestBloom: no added hash is ever reported absent; at capacity about 1 %
// of other hashes are reported present; the filter is full past its
// capacity, and a full filter asks for a rebuild once.
func TestBloom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	b := newBloom(100_000)
	if b.capacity < 100_000 || b.capacity > 2*100_000 {
		t.Fatalf("capacity %d for 100,000 keys", b.capacity)
	}
	added := make([]int64, b.capacity)
	for i := range added {
		added[i] = int64(r.Uint64())
		b.add(added[i])
	}
	for _, h := range added {
		if !b.mayContain(h) {
			t.Fatalf("added hash %x reported absent", h)
		}
	}
	fp := 0
	const tries = 200_000
	for range tries {
		if b.mayContain(int64(r.Uint64())) {
			fp++
		}
	}
	if rate := float64(fp) / tries; rate > 0.02 || rate == 0 {
		t.Errorf("false positives %.4f at capacity, want about 0.01", rate)
	}
	if b.full() {
		t.Error("full at capacity")
	}
	b.add(1)
	if !b.full() {
		t.Error("not full past capacity")
	}

	f := newIdemFilter()
	f.cur.Store(newBloom(10))
	small := f.cur.Load().capacity
	f.add(int(small)+1, func(i int) int64 { return int64(i) })
	select {
	case <-f.build:
	default:
		t.Fatal("a full filter did not ask for a rebuild")
	}
	next := newBloom(1000)
	f.next = next
	f.add(1, func(int) int64 { return 42 })
	if !next.mayContain(42) || !f.cur.Load().mayContain(42) {
		t.Error("a hash added during a build is not in both filters")
	}
}
