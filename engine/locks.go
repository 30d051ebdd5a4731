package engine

import (
	"hash/maphash"
	"sync"
)

// keyLocks marks idempotency keys in flight on this node. Its size is
// bounded by the number of requests in flight, which the API bounds.
type keyLocks struct {
	mu   sync.Mutex
	held map[string]struct{}
}

func newKeyLocks() *keyLocks { return &keyLocks{held: make(map[string]struct{})} }

// tryLock marks k held and reports whether it was free.
func (l *keyLocks) tryLock(k string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.held[k]; ok {
		return false
	}
	l.held[k] = struct{}{}
	return true
}

func (l *keyLocks) unlock(k string) {
	l.mu.Lock()
	delete(l.held, k)
	l.mu.Unlock()
}

// stripedLocks serialises operations on one payment within a node, so two
// concurrent captures or refunds of the same payment do not race to the
// provider. A fixed number of stripes bounds memory.
type stripedLocks struct {
	seed    maphash.Seed
	stripes []sync.Mutex
}

func newStripedLocks(n int) *stripedLocks {
	return &stripedLocks{seed: maphash.MakeSeed(), stripes: make([]sync.Mutex, n)}
}

func (s *stripedLocks) lock(k string) func() {
	m := &s.stripes[maphash.String(s.seed, k)%uint64(len(s.stripes))]
	m.Lock()
	return m.Unlock
}
