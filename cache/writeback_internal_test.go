package cache

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/surgepay/surgepay/cache/redistest"
)

// heldWriteBacks holds the write-back loop before each batch until
// release is called (cleanup releases it too, before the cache closes).
// entered receives once per batch held.
type heldWriteBacks struct {
	entered chan struct{}
	release func()
}

func holdWriteBacks(t *testing.T) *heldWriteBacks {
	gate := make(chan struct{})
	h := &heldWriteBacks{entered: make(chan struct{}, 1), release: sync.OnceFunc(func() { close(gate) })}
	hook := func() {
		select {
		case h.entered <- struct{}{}:
		default:
		}
		<-gate
	}
	testHookWriteBack.Store(&hook)
	t.Cleanup(func() { testHookWriteBack.Store(nil) })
	return h
}

// globalCustomers returns the customers table of a new cache, in the
// global scope on srv, closed at cleanup after h is released.
func globalCustomers(t *testing.T, srv *redistest.Server, h *heldWriteBacks) (*Cache, *Table[string]) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Namespace = "test:v1:"
	cfg.FallbackTimeout = FallbackTimeoutMax // a loaded CI machine
	cfg.ClientSideTTL = 0
	cfg.Redis.GlobalAddrs = []string{srv.URL()}
	cfg.Entities[Customers] = EntityConfig{Scope: ScopeGlobal, TTL: time.Hour}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	t.Cleanup(h.release) // runs first: Close waits for the loop
	return c, Entity[string](c, Customers, nil)
}

func redisHas(t *testing.T, srv *redistest.Server, key string) bool {
	t.Helper()
	r, err := srv.Do("EXISTS", "test:v1:customers:"+key)
	if err != nil {
		t.Fatal(err)
	}
	return r == ":1"
}

func load(context.Context) (string, error) { return "v", nil }

// TestWriteBackOffCallerPath: a miss's write-back to Redis is queued, not
// made by the Get. The write-back loop is held until the Get has
// returned; were the write-back on the caller's path, the Get would wait
// for it (and the hook would never run) and the test would fail. So a Get
// spends one Redis call, bounded by FallbackTimeout, whatever the
// write-back costs.
func TestWriteBackOffCallerPath(t *testing.T) {
	srv := redistest.Start(t)
	h := holdWriteBacks(t)
	_, tab := globalCustomers(t, srv, h)

	done := make(chan error, 1)
	go func() {
		_, err := tab.Get(context.Background(), "k", load)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Get did not return while its write-back was held: the write-back is on the caller's path")
	}
	select {
	case <-h.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the write-back loop never took the miss's write-back")
	}
	if redisHas(t, srv, "k") {
		t.Fatal("Redis has k while its write-back is held")
	}
	h.release()
	waitFor(t, "the released write-back reaches Redis", func() bool { return redisHas(t, srv, "k") })
}

// TestWriteBackQueueBound: while Redis does not take write-backs, at most
// WriteBackQueueMax wait (plus the batch being written); the others are
// dropped and counted as fallbacks, and the Gets still succeed.
func TestWriteBackQueueBound(t *testing.T) {
	srv := redistest.Start(t)
	h := holdWriteBacks(t)
	c, tab := globalCustomers(t, srv, h)
	ctx := context.Background()
	mustGet := func(k string) {
		if _, err := tab.Get(ctx, k, load); err != nil {
			t.Fatalf("Get(%s): %v", k, err)
		}
	}
	mustGet("first") // taken by the loop, held
	<-h.entered
	const extra = 50
	for i := range WriteBackQueueMax + extra {
		mustGet(strconv.Itoa(i))
	}
	st := c.Stats()[0]
	if st.Fallbacks < extra {
		t.Errorf("Fallbacks = %d after %d write-backs beyond the queue's bound, want at least %d", st.Fallbacks, extra, extra)
	}
	if n := len(c.stores[ScopeGlobal].writeBacks); n != WriteBackQueueMax {
		t.Errorf("queued write-backs = %d, want WriteBackQueueMax %d", n, WriteBackQueueMax)
	}
	h.release()
	// Write-backs are written in order: once a later one is in Redis, the
	// queue has been written.
	waitFor(t, "the queue drains", func() bool { return len(c.stores[ScopeGlobal].writeBacks) == 0 })
	waitFor(t, "the queued write-backs reach Redis", func() bool {
		mustGet("last") // again if its write-back timed out on a loaded machine
		return redisHas(t, srv, "last")
	})
	r, _ := srv.Do("DBSIZE")
	if n, _ := strconv.Atoi(strings.TrimPrefix(r, ":")); n > WriteBackQueueMax+2 {
		t.Errorf("Redis holds %d keys, want at most %d: the first, the queue's, and the last", n, WriteBackQueueMax+2)
	}
}

// TestWriteBackAgedIsDropped: a write-back that waited longer than
// WriteBackAgeMax is not written: it could land after the tombstone of a
// later invalidation expired.
func TestWriteBackAgedIsDropped(t *testing.T) {
	srv := redistest.Start(t)
	h := holdWriteBacks(t)
	c, tab := globalCustomers(t, srv, h)
	if _, err := tab.Get(context.Background(), "old", load); err != nil {
		t.Fatal(err)
	}
	<-h.entered
	time.Sleep(WriteBackAgeMax + 100*time.Millisecond)
	before := c.Stats()[0].Fallbacks
	h.release()
	waitFor(t, "the aged write-back is counted as a fallback", func() bool { return c.Stats()[0].Fallbacks > before })
	if redisHas(t, srv, "old") {
		t.Error("Redis has the aged write-back's key, want it dropped")
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
