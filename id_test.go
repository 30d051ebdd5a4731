package surgepay

import (
	"sync"
	"testing"
	"time"
)

// TestNewIDIncreases: IDs of one process strictly increase, also within a
// millisecond, across goroutines, and when the clock steps back.
func TestNewIDIncreases(t *testing.T) {
	at := time.Now().Add(time.Hour) // ahead of every ID made so far
	prev := newIDAt("pay", at)
	for i := range 1000 {
		next := newIDAt("pay", at)
		if i%100 == 0 {
			next = newIDAt("pay", at.Add(-time.Minute)) // the clock stepped back
		}
		if next <= prev {
			t.Fatalf("ID %d: %q after %q, want greater", i, next, prev)
		}
		prev = next
	}
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			last := ""
			for range 2000 {
				id := NewID("pay")
				if id <= last {
					t.Errorf("%q after %q in one goroutine", id, last)
				}
				last = id
				mu.Lock()
				if seen[id] {
					t.Errorf("duplicate ID %q", id)
				}
				seen[id] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
}

// TestNewIDCarry: a step that overflows the low 64 random bits carries into
// the high 16.
func TestNewIDCarry(t *testing.T) {
	lastID.Lock()
	ms := lastID.ms + 1000
	lastID.ms, lastID.hi, lastID.lo = ms, 7, ^uint64(0)
	lastID.Unlock()
	a := newIDAt("x", time.UnixMilli(int64(ms)))
	lastID.Lock()
	hi, lo := lastID.hi, lastID.lo
	lastID.Unlock()
	if hi != 8 || lo >= 1<<32+1 {
		t.Fatalf("after a carry: hi %d lo %d, want 8 and a small lo", hi, lo)
	}
	if b := newIDAt("x", time.UnixMilli(int64(ms))); b <= a {
		t.Fatalf("%q after %q", b, a)
	}
}
