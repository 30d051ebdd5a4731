package cache_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/surgepay/surgepay/cache"
	"github.com/surgepay/surgepay/cache/redistest"
)

// sharedConfig puts every entity in scope on srv. The client-side TTL is
// long, so that a test passes only if invalidations arrive from Redis.
func sharedConfig(scope cache.Scope, srv *redistest.Server) cache.Config {
	cfg := cache.DefaultConfig()
	cfg.Namespace = "test:v1:"
	// The longest allowed: on a loaded 2-core CI machine under -race a
	// loopback round trip can take tens of milliseconds. Tests that count
	// loads allow one per fallback, and no more.
	cfg.FallbackTimeout = cache.FallbackTimeoutMax
	cfg.ClientSideTTL = time.Hour
	cfg.BreakerOpenDuration = 100 * time.Millisecond
	switch scope {
	case cache.ScopeServer:
		cfg.Redis.ServerAddr = srv.URL()
	case cache.ScopeGlobal:
		cfg.Redis.GlobalAddrs = []string{srv.URL()}
	}
	for name, e := range cfg.Entities {
		e.Scope = scope
		e.TTL = time.Hour
		cfg.Entities[name] = e
	}
	return cfg
}

// source is the store behind a loader: a value per key and a load counter.
type source struct {
	mu    sync.Mutex
	vals  map[string]string
	loads atomic.Int64
}

func newSource() *source { return &source{vals: map[string]string{}} }

func (s *source) put(k, v string) { s.mu.Lock(); s.vals[k] = v; s.mu.Unlock() }

func (s *source) loader(k string) func(context.Context) (string, error) {
	return func(context.Context) (string, error) {
		s.loads.Add(1)
		s.mu.Lock()
		defer s.mu.Unlock()
		v, ok := s.vals[k]
		if !ok {
			return "", cache.ErrNotFound
		}
		return v, nil
	}
}

// fallbacks counts the Redis calls of caches that fell back to a loader:
// tests that count loads forgive one per fallback.
func fallbacks(cs ...*cache.Cache) int64 {
	var n uint64
	for _, c := range cs {
		for _, s := range c.Stats() {
			n += s.Fallbacks
		}
	}
	return int64(n)
}

// waitWrittenBack waits until Redis holds key (under sharedConfig's
// namespace): a miss's write-back is queued, not done by the Get.
func waitWrittenBack(t testing.TB, srv *redistest.Server, entity, key string) {
	t.Helper()
	eventually(t, 5*time.Second, "the write-back of "+key+" reaches Redis", func() bool {
		r, _ := srv.Do("EXISTS", "test:v1:"+entity+":"+key)
		return r == ":1"
	})
}

func mustGet(t testing.TB, tab *cache.Table[string], k string, load func(context.Context) (string, error)) string {
	t.Helper()
	v, err := tab.Get(context.Background(), k, load)
	if err != nil {
		t.Fatalf("Get(%s): %v", k, err)
	}
	return v
}

// TestWriteInvalidatesAcrossProcesses runs two caches (two processes,
// each with its own Redis client and memory layer) on one redis-server.
func TestWriteInvalidatesAcrossProcesses(t *testing.T) {
	for _, tc := range []struct {
		scope cache.Scope
		start func(testing.TB) *redistest.Server
	}{
		{cache.ScopeGlobal, redistest.Start},
		{cache.ScopeServer, redistest.StartUnix},
	} {
		t.Run(string(tc.scope), func(t *testing.T) {
			srv := tc.start(t)
			cfg := sharedConfig(tc.scope, srv)
			a, b := newCache(t, cfg), newCache(t, cfg)
			ta, tb := cache.Entity[string](a, cache.Customers, nil), cache.Entity[string](b, cache.Customers, nil)
			src := newSource()
			src.put("K", "v1")
			ctx := context.Background()

			// Both read K: A loads it and writes it to Redis, B reads it
			// from Redis; a second read of each comes from memory.
			if v := mustGet(t, ta, "K", src.loader("K")); v != "v1" {
				t.Fatalf("A Get = %q, want v1", v)
			}
			eventually(t, 5*time.Second, "B reads K from Redis, not from its loader", func() bool {
				before := src.loads.Load()
				v := mustGet(t, tb, "K", src.loader("K"))
				return v == "v1" && src.loads.Load() == before
			})
			// Eventually: on a loaded machine one read may miss its
			// fallback_timeout and go to the loader (a fallback, no hit).
			for name, n := range map[string]struct {
				tab *cache.Table[string]
				c   *cache.Cache
			}{"A": {ta, a}, "B": {tb, b}} {
				eventually(t, 5*time.Second, name+" serves K from the cache", func() bool {
					mustGet(t, n.tab, "K", src.loader("K"))
					return stat(t, n.c, cache.Customers).Hits > 0
				})
			}

			t.Run("Set", func(t *testing.T) {
				src.put("K", "v2")
				if err := ta.Set(ctx, "K", "v2"); err != nil {
					t.Fatal(err)
				}
				eventually(t, 5*time.Second, "B sees A's Set", func() bool { return mustGet(t, tb, "K", src.loader("K")) == "v2" })
				if v := mustGet(t, ta, "K", src.loader("K")); v != "v2" {
					t.Errorf("A Get after its Set = %q, want v2", v)
				}
			})
			t.Run("Invalidate", func(t *testing.T) {
				// B caches v2 in memory again, then A changes the source
				// and invalidates.
				eventually(t, 5*time.Second, "B caches v2", func() bool {
					before := src.loads.Load()
					return mustGet(t, tb, "K", src.loader("K")) == "v2" && src.loads.Load() == before
				})
				src.put("K", "v3")
				if err := ta.Invalidate(ctx, "K"); err != nil {
					t.Fatal(err)
				}
				eventually(t, 5*time.Second, "B sees A's Invalidate", func() bool { return mustGet(t, tb, "K", src.loader("K")) == "v3" })
			})
			if sb := stat(t, b, cache.Customers); sb.Invalidations == 0 {
				t.Errorf("B Invalidations = 0, want > 0 (Redis told B)")
			}
		})
	}
}

// TestSharedWithoutClientSideCache reads Redis on every Get.
func TestSharedWithoutClientSideCache(t *testing.T) {
	srv := redistest.Start(t)
	cfg := sharedConfig(cache.ScopeGlobal, srv)
	cfg.ClientSideTTL = 0
	a, b := newCache(t, cfg), newCache(t, cfg)
	ta, tb := cache.Entity[string](a, cache.Customers, nil), cache.Entity[string](b, cache.Customers, nil)
	src := newSource()
	src.put("m", "one")
	mustGet(t, ta, "m", src.loader("m"))
	waitWrittenBack(t, srv, cache.Customers, "m")
	if v := mustGet(t, tb, "m", src.loader("m")); v != "one" || src.loads.Load() > 1+fallbacks(a, b) {
		t.Fatalf("B Get = %q with %d loads; want one with 1 load", v, src.loads.Load())
	}
	if err := ta.Set(context.Background(), "m", "two"); err != nil {
		t.Fatal(err)
	}
	if v := mustGet(t, tb, "m", src.loader("m")); v != "two" {
		t.Fatalf("B Get after Set = %q, want two", v)
	}
}

// TestKillRedisKeepsGetsSucceeding kills redis-server while 8 goroutines
// read, then restarts it on the same port.
func TestKillRedisKeepsGetsSucceeding(t *testing.T) {
	srv := redistest.Start(t)
	cfg := sharedConfig(cache.ScopeGlobal, srv)
	c := newCache(t, cfg)
	tab := cache.Entity[string](c, cache.APIKeys, nil)
	const keys, workers = 20, 8
	load := func(k string) func(context.Context) (string, error) {
		return func(context.Context) (string, error) { return "v-" + k, nil }
	}
	var (
		stop              = make(chan struct{})
		wg                sync.WaitGroup
		gets, failures    atomic.Int64
		slowest           atomic.Int64
		firstFailure      atomic.Value
		ctx               = context.Background()
		readSlowestMillis = func() int64 { return slowest.Load() / int64(time.Millisecond) }
	)
	for w := range workers {
		wg.Go(func() {
			for i := w; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k := fmt.Sprint("key", i%keys)
				start := time.Now()
				v, err := tab.Get(ctx, k, load(k))
				if d := int64(time.Since(start)); d > slowest.Load() {
					slowest.Store(d) // racy max: good enough for a report
				}
				gets.Add(1)
				if err != nil || v != "v-"+k {
					failures.Add(1)
					firstFailure.CompareAndSwap(nil, fmt.Sprintf("Get(%s) = %q, %v", k, v, err))
				}
			}
		})
	}
	halt := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer halt()

	eventually(t, 10*time.Second, "Redis serves hits", func() bool { return stat(t, c, cache.APIKeys).Hits > 1000 })
	srv.Kill()
	killed := stat(t, c, cache.APIKeys)
	eventually(t, 10*time.Second, "Gets fall back to the loader", func() bool {
		s := stat(t, c, cache.APIKeys)
		return s.Fallbacks > 0 && s.Loads > killed.Loads+200
	})
	down := stat(t, c, cache.APIKeys)
	srv.Restart()
	eventually(t, 10*time.Second, "the cache uses Redis again", func() bool {
		s := stat(t, c, cache.APIKeys)
		return s.Hits > down.Hits+1000
	})
	// Once Redis is back, the keys come from it: loads stop.
	settled := stat(t, c, cache.APIKeys).Loads
	time.Sleep(200 * time.Millisecond)
	if s := stat(t, c, cache.APIKeys); s.Loads > settled+keys {
		t.Errorf("loads went from %d to %d after Redis came back, want at most %d more", settled, s.Loads, keys)
	}
	halt()

	if f := failures.Load(); f > 0 {
		t.Fatalf("%d of %d Gets failed; first: %v", f, gets.Load(), firstFailure.Load())
	}
	s := stat(t, c, cache.APIKeys)
	t.Logf("%d Gets, none failed; slowest %dms; stats %+v", gets.Load(), readSlowestMillis(), s)
	if s.Fallbacks == 0 {
		t.Errorf("Fallbacks = 0, want > 0")
	}
}

// TestPausedRedisFallsBackWithinTimeout stops redis-server (SIGSTOP): it
// accepts connections and never answers. Gets must not wait longer than
// the fallback timeout (plus scheduling slack under -race).
func TestPausedRedisFallsBackWithinTimeout(t *testing.T) {
	srv := redistest.Start(t)
	cfg := sharedConfig(cache.ScopeGlobal, srv)
	cfg.FallbackTimeout = 30 * time.Millisecond
	cfg.BreakerOpenDuration = time.Minute // the breaker opens once and stays open for the test
	c := newCache(t, cfg)
	tab := cache.Entity[string](c, cache.Customers, nil)
	ctx := context.Background()
	load := func(context.Context) (string, error) { return "v", nil }
	mustGet(t, tab, "warm", load)
	srv.Pause()
	defer srv.Resume()
	var slowest time.Duration
	waited := 0 // Gets that waited for the timeout
	for i := range 50 {
		start := time.Now()
		v, err := tab.Get(ctx, fmt.Sprint("k", i), load)
		if err != nil || v != "v" {
			t.Fatalf("Get = %q, %v; want v, nil", v, err)
		}
		d := time.Since(start)
		slowest = max(slowest, d)
		if d >= cfg.FallbackTimeout*9/10 {
			waited++
		}
	}
	// The breaker opens after 5 failures: later Gets do not wait.
	if waited > 6 {
		t.Errorf("%d of 50 Gets waited for the fallback timeout, want at most 6: the circuit breaker did not open", waited)
	}
	// Not a measure of the budget (TestWriteBackOffCallerPath checks that
	// a Get makes one Redis call, and call's deadline bounds it), but well
	// below DialTimeout (1s): it fails if a Get waits for a reconnection.
	if limit := 500 * time.Millisecond; slowest > limit {
		t.Errorf("slowest Get took %s, want under %s", slowest, limit)
	}
	if s := stat(t, c, cache.Customers); s.Fallbacks < 50 {
		t.Errorf("Fallbacks = %d, want >= 50", s.Fallbacks)
	}
	t.Logf("slowest Get while Redis was paused: %s; %d Gets waited for the timeout", slowest, waited)
}

// TestSetWhileRedisDownIsRetried: a write's invalidation made while Redis
// is down reaches Redis once it answers.
func TestSetWhileRedisDownIsRetried(t *testing.T) {
	srv := redistest.Start(t)
	cfg := sharedConfig(cache.ScopeGlobal, srv)
	c := newCache(t, cfg)
	tab := cache.Entity[string](c, cache.PaymentMethods, nil)
	ctx := context.Background()
	mustGet(t, tab, "pm", func(context.Context) (string, error) { return "old", nil })
	srv.Pause() // Redis keeps its data, as a Redis with persistence would
	if err := tab.Invalidate(ctx, "pm"); err == nil {
		t.Fatal("Invalidate with Redis paused: no error, want one (queued)")
	}
	srv.Resume()
	eventually(t, 10*time.Second, "the queued invalidation reaches Redis", func() bool {
		r, _ := srv.Do("GET", "test:v1:payment_methods:pm")
		return r == "$1" // the tombstone "t"
	})
}

// TestPreheatReadTooLongAgoSkipped: values read from the store longer than
// WriteBackAgeMax ago are not written to Redis (a key deleted since may
// have lost its invalidation mark): skipped, counted as a fallback.
func TestPreheatReadTooLongAgoSkipped(t *testing.T) {
	srv := redistest.Start(t)
	c := newCache(t, sharedConfig(cache.ScopeGlobal, srv))
	tab := cache.Entity[string](c, cache.APIKeys, nil)
	before := stat(t, c, cache.APIKeys).Fallbacks
	if err := tab.PreheatRead(context.Background(), map[string]string{"stale": "v"}, time.Now().Add(-2*cache.WriteBackAgeMax)); err != nil {
		t.Fatal(err)
	}
	if r, _ := srv.Do("EXISTS", "test:v1:api_keys:stale"); r != ":0" {
		t.Fatalf("EXISTS of a key preheated from a stale read = %s, want :0", r)
	}
	if got := stat(t, c, cache.APIKeys).Fallbacks; got != before+1 {
		t.Errorf("fallbacks %d, want %d", got, before+1)
	}
	if err := tab.PreheatRead(context.Background(), map[string]string{"fresh": "v"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if r, _ := srv.Do("EXISTS", "test:v1:api_keys:fresh"); r != ":1" {
		t.Fatalf("EXISTS of a key preheated from a fresh read = %s, want :1", r)
	}
}

func TestPreheatShared(t *testing.T) {
	srv := redistest.Start(t)
	cfg := sharedConfig(cache.ScopeGlobal, srv)
	a, b := newCache(t, cfg), newCache(t, cfg)
	ta, tb := cache.Entity[string](a, cache.APIKeys, nil), cache.Entity[string](b, cache.APIKeys, nil)
	items := map[string]string{}
	for i := range 2500 { // more than one pipelined batch
		items[fmt.Sprint("key", i)] = fmt.Sprint("val", i)
	}
	if err := ta.Preheat(context.Background(), items); err != nil {
		t.Fatal(err)
	}
	for _, tab := range []*cache.Table[string]{ta, tb} {
		for k, want := range items {
			load := func(context.Context) (string, error) { return items[k], nil }
			if v := mustGet(t, tab, k, load); v != want {
				t.Fatalf("Get(%s) = %q, want %q", k, v, want)
			}
		}
	}
	// Zero loads, except one per Redis call that timed out (a loaded
	// machine): those are the fallbacks.
	for name, c := range map[string]*cache.Cache{"A": a, "B": b} {
		if s := stat(t, c, cache.APIKeys); s.Loads > s.Fallbacks || s.Hits+s.Misses != uint64(len(items)) {
			t.Errorf("%s stats = %+v, want Loads 0 (or at most Fallbacks), Hits+Misses %d", name, s, len(items))
		} else if s.Loads > 0 {
			t.Logf("%s: %d loads, each after a Redis timeout", name, s.Loads)
		}
	}
}

func TestNegativeEntryShared(t *testing.T) {
	srv := redistest.Start(t)
	cfg := sharedConfig(cache.ScopeGlobal, srv)
	e := cfg.Entities[cache.APIKeys]
	e.NegativeTTL = time.Minute
	cfg.Entities[cache.APIKeys] = e
	a, b := newCache(t, cfg), newCache(t, cfg)
	ta, tb := cache.Entity[string](a, cache.APIKeys, nil), cache.Entity[string](b, cache.APIKeys, nil)
	src := newSource()
	ctx := context.Background()
	if _, err := ta.Get(ctx, "unknown", src.loader("unknown")); !errors.Is(err, cache.ErrNotFound) {
		t.Fatalf("Get error = %v, want ErrNotFound", err)
	}
	waitWrittenBack(t, srv, cache.APIKeys, "unknown")
	// B never read the key: it finds the negative entry in Redis.
	for range 2 {
		if _, err := tb.Get(ctx, "unknown", src.loader("unknown")); !errors.Is(err, cache.ErrNotFound) {
			t.Fatalf("Get error = %v, want ErrNotFound", err)
		}
	}
	if src.loads.Load() > 1+fallbacks(a, b) {
		t.Errorf("loads = %d, want 1: the negative entry is shared", src.loads.Load())
	}
	// A read the key as absent through its client-side cache (DoCache),
	// which Redis's invalidation clears asynchronously after the
	// write-back: until it arrives A may load again (correct, only
	// slower; seen on a loaded machine). Once it has, A answers from the
	// shared negative entry without loading.
	eventually(t, 5*time.Second, "A answers from the shared negative entry", func() bool {
		before := src.loads.Load()
		_, err := ta.Get(ctx, "unknown", src.loader("unknown"))
		return errors.Is(err, cache.ErrNotFound) && src.loads.Load() == before
	})
	// A key created later replaces the negative entry everywhere.
	src.put("unknown", "created")
	if err := ta.Set(ctx, "unknown", "created"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "B sees the created key", func() bool {
		v, err := tb.Get(context.Background(), "unknown", src.loader("unknown"))
		return err == nil && v == "created"
	})
}

func TestGetIfPresentShared(t *testing.T) {
	srv := redistest.Start(t)
	cfg := sharedConfig(cache.ScopeGlobal, srv)
	a, b := newCache(t, cfg), newCache(t, cfg)
	ta, tb := cache.Entity[string](a, cache.Idempotency, nil), cache.Entity[string](b, cache.Idempotency, nil)
	ctx := context.Background()
	if _, ok := tb.GetIfPresent(ctx, "idem"); ok {
		t.Fatal("GetIfPresent of an absent key: ok, want not ok")
	}
	if err := ta.Set(ctx, "idem", "record"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "B finds A's record", func() bool {
		v, ok := tb.GetIfPresent(ctx, "idem")
		return ok && v == "record"
	})
}

// TestPreheatRedisDown: a Redis that is down when the process starts is
// not an error: Preheat returns nil, counts a fallback, and Gets load.
func TestPreheatRedisDown(t *testing.T) {
	for _, tc := range []struct {
		name string
		down func(*redistest.Server)
	}{
		{"Killed", (*redistest.Server).Kill},
		{"Paused", (*redistest.Server).Pause}, // accepts connections, never answers
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			tc.down(srv)
			defer srv.Resume()
			cfg := sharedConfig(cache.ScopeGlobal, srv)
			c := newCache(t, cfg)
			tab := cache.Entity[string](c, cache.APIKeys, nil)
			if err := tab.Preheat(context.Background(), map[string]string{"k1": "v1", "k2": "v2"}); err != nil {
				t.Fatalf("Preheat with Redis down = %v, want nil", err)
			}
			if s := stat(t, c, cache.APIKeys); s.Fallbacks == 0 {
				t.Errorf("Fallbacks = 0 after a preheat that could not reach Redis, want > 0")
			}
			load := func(context.Context) (string, error) { return "loaded", nil }
			if v := mustGet(t, tab, "k1", load); v != "loaded" {
				t.Errorf("Get = %q, want loaded (from the loader)", v)
			}
		})
	}
}
