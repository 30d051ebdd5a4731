package cache_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/surgepay/surgepay/cache"
)

// newCache returns a cache of cfg, closed with the test.
func newCache(t testing.TB, cfg cache.Config, opts ...cache.Option) *cache.Cache {
	t.Helper()
	c, err := cache.New(cfg, opts...)
	if err != nil {
		t.Fatalf("cache.New: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// withEntity returns the default config with one entity changed.
func withEntity(name string, e cache.EntityConfig) cache.Config {
	cfg := cache.DefaultConfig()
	cfg.Entities[name] = e
	return cfg
}

func stat(t testing.TB, c *cache.Cache, entity string) cache.Stat {
	t.Helper()
	for _, s := range c.Stats() {
		if s.Entity == entity {
			return s
		}
	}
	t.Fatalf("no stats for %s", entity)
	return cache.Stat{}
}

// eventually polls cond every 10ms until it holds or d passes.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestProcessGetLoadsOnceForConcurrentGets(t *testing.T) {
	c := newCache(t, cache.DefaultConfig())
	tab := cache.Entity[string](c, cache.APIKeys, nil)
	var loads atomic.Int32
	load := func(context.Context) (string, error) {
		loads.Add(1)
		time.Sleep(50 * time.Millisecond) // long enough for all 50 Gets to arrive
		return "v", nil
	}
	const gets = 50
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, gets)
	for range gets {
		wg.Go(func() {
			<-start
			v, err := tab.Get(context.Background(), "k", load)
			if err != nil || v != "v" {
				errs <- fmt.Errorf("Get = %q, %v; want v, nil", v, err)
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := loads.Load(); got != 1 {
		t.Errorf("loads = %d, want 1", got)
	}
	if s := stat(t, c, cache.APIKeys); s.Loads != 1 || s.Hits+s.Misses != gets {
		t.Errorf("stats = %+v, want Loads 1 and Hits+Misses %d", s, gets)
	}
}

func TestProcessTTLExpires(t *testing.T) {
	c := newCache(t, withEntity(cache.Customers, cache.EntityConfig{Scope: cache.ScopeProcess, TTL: 50 * time.Millisecond}))
	tab := cache.Entity[int](c, cache.Customers, nil)
	var loads atomic.Int32
	load := func(context.Context) (int, error) { return int(loads.Add(1)), nil }
	ctx := context.Background()
	if v, _ := tab.Get(ctx, "k", load); v != 1 {
		t.Fatalf("first Get = %d, want 1", v)
	}
	if v, _ := tab.Get(ctx, "k", load); v != 1 {
		t.Fatalf("second Get = %d, want 1 (cached)", v)
	}
	eventually(t, 2*time.Second, "entry expires and reloads", func() bool {
		v, _ := tab.Get(ctx, "k", load)
		return v == 2
	})
}

func TestProcessEntriesMaxBoundsMemory(t *testing.T) {
	const entriesMax, n = 100, 2000
	c := newCache(t, withEntity(cache.Customers, cache.EntityConfig{Scope: cache.ScopeProcess, TTL: time.Hour, EntriesMax: entriesMax}))
	tab := cache.Entity[int](c, cache.Customers, nil)
	ctx := context.Background()
	for i := range n {
		if _, err := tab.Get(ctx, fmt.Sprint(i), func(context.Context) (int, error) { return i, nil }); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 5*time.Second, "evictions counted", func() bool { return stat(t, c, cache.Customers).Evictions >= n-entriesMax-entriesMax/10 })
	present := 0
	for i := range n {
		if _, ok := tab.GetIfPresent(ctx, fmt.Sprint(i)); ok {
			present++
		}
	}
	// otter may exceed its bound briefly while it evicts; never by much.
	if present > entriesMax+entriesMax/10 {
		t.Errorf("%d entries present, want at most %d (EntriesMax %d)", present, entriesMax+entriesMax/10, entriesMax)
	}
}

// TestProcessBytesMaxBoundsMemory: values of 1 KiB, 10 times what
// bytes_max holds, leave at most bytes_max counted (each value's size,
// its key and EntryOverheadBytes) and the table about full; values too
// small for bytes_max to bind are bounded by entries_max.
func TestProcessBytesMaxBoundsMemory(t *testing.T) {
	const valueBytes, n = 1024, 1000
	for _, tc := range []struct {
		name                 string
		entriesMax           int
		bytesMax             int64
		value                []byte
		entriesMin, entryMax int
	}{
		// 100 KiB hold 87 entries of 1,024 + EntryOverheadBytes (140)
		// + 1 to 3 bytes of key.
		{"BytesBind", 10_000, 100 << 10, make([]byte, valueBytes), 80, 87},
		// 1 MB would hold 6,000 of these; entries_max is 50.
		{"EntriesBind", 50, 1_000_000, nil, 50, 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCache(t, withEntity(cache.Customers, cache.EntityConfig{Scope: cache.ScopeProcess, TTL: time.Hour,
				EntriesMax: tc.entriesMax, BytesMax: tc.bytesMax}))
			tab := cache.Entity(c, cache.Customers, nil, cache.WithSize(func(v []byte) int { return len(v) }))
			for i := range n {
				if err := tab.Set(context.Background(), fmt.Sprint(i), tc.value); err != nil {
					t.Fatal(err)
				}
			}
			s := stat(t, c, cache.Customers)
			if s.Bytes > uint64(tc.bytesMax) {
				t.Errorf("Bytes = %d, want at most bytes_max %d", s.Bytes, tc.bytesMax)
			}
			if s.Entries < tc.entriesMin || s.Entries > tc.entryMax {
				t.Errorf("Entries = %d, want %d to %d", s.Entries, tc.entriesMin, tc.entryMax)
			}
			// Counted as the entries go, not later on other goroutines.
			if s.Evictions != uint64(n-s.Entries) {
				t.Errorf("Evictions = %d, want %d (every entry not kept)", s.Evictions, n-s.Entries)
			}
		})
	}
}

func TestProcessInvalidate(t *testing.T) {
	c := newCache(t, cache.DefaultConfig())
	tab := cache.Entity[string](c, cache.PaymentMethods, nil)
	ctx := context.Background()
	src := "old"
	load := func(context.Context) (string, error) { return src, nil }
	if v, _ := tab.Get(ctx, "pm_1", load); v != "old" {
		t.Fatalf("Get = %q, want old", v)
	}
	src = "new"
	if v, _ := tab.Get(ctx, "pm_1", load); v != "old" {
		t.Fatalf("Get before Invalidate = %q, want old (cached)", v)
	}
	if err := tab.Invalidate(ctx, "pm_1"); err != nil {
		t.Fatal(err)
	}
	if v, _ := tab.Get(ctx, "pm_1", load); v != "new" {
		t.Fatalf("Get after Invalidate = %q, want new", v)
	}
	if s := stat(t, c, cache.PaymentMethods); s.Loads != 2 || s.Invalidations != 1 {
		t.Errorf("stats = %+v, want Loads 2, Invalidations 1", s)
	}
}

func TestProcessSetReplaces(t *testing.T) {
	c := newCache(t, cache.DefaultConfig())
	tab := cache.Entity[string](c, cache.APIKeys, nil)
	ctx := context.Background()
	if err := tab.Set(ctx, "k", "set"); err != nil {
		t.Fatal(err)
	}
	v, err := tab.Get(ctx, "k", func(context.Context) (string, error) { return "", errors.New("loader called") })
	if err != nil || v != "set" {
		t.Fatalf("Get = %q, %v; want set, nil", v, err)
	}
}

func TestNegativeEntries(t *testing.T) {
	for _, tc := range []struct {
		name      string
		negTTL    time.Duration
		wantLoads int32
	}{
		{"Off", 0, 3},
		{"On", time.Minute, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCache(t, withEntity(cache.APIKeys, cache.EntityConfig{Scope: cache.ScopeProcess, TTL: time.Hour, NegativeTTL: tc.negTTL}))
			tab := cache.Entity[string](c, cache.APIKeys, nil)
			var loads atomic.Int32
			load := func(context.Context) (string, error) { loads.Add(1); return "", cache.ErrNotFound }
			for range 3 {
				if _, err := tab.Get(context.Background(), "nokey", load); !errors.Is(err, cache.ErrNotFound) {
					t.Fatalf("Get error = %v, want ErrNotFound", err)
				}
			}
			if got := loads.Load(); got != tc.wantLoads {
				t.Errorf("loads = %d, want %d", got, tc.wantLoads)
			}
		})
	}
}

func TestWithNotFoundMapsDomainErrors(t *testing.T) {
	errDomain := errors.New("domain: not_found")
	c := newCache(t, withEntity(cache.APIKeys, cache.EntityConfig{Scope: cache.ScopeProcess, TTL: time.Hour, NegativeTTL: time.Minute}),
		cache.WithNotFound(func(err error) bool { return errors.Is(err, errDomain) },
			func(entity, key string) error { return fmt.Errorf("%s %s: %w", entity, key, errDomain) }))
	tab := cache.Entity[string](c, cache.APIKeys, nil)
	var loads atomic.Int32
	for range 2 {
		_, err := tab.Get(context.Background(), "mer_1", func(context.Context) (string, error) { loads.Add(1); return "", errDomain })
		if !errors.Is(err, errDomain) || !strings.Contains(err.Error(), "api_keys mer_1") {
			t.Fatalf("Get error = %v, want the domain error naming api_keys mer_1", err)
		}
	}
	if loads.Load() != 1 {
		t.Errorf("loads = %d, want 1 (the second answer is the negative entry)", loads.Load())
	}
	if s := stat(t, c, cache.APIKeys); s.LoadErrors != 0 {
		t.Errorf("LoadErrors = %d, want 0: not found is not an error", s.LoadErrors)
	}
}

func TestLoadErrorsAreNotCached(t *testing.T) {
	c := newCache(t, cache.DefaultConfig())
	tab := cache.Entity[string](c, cache.Customers, nil)
	boom := errors.New("database down")
	if _, err := tab.Get(context.Background(), "k", func(context.Context) (string, error) { return "", boom }); !errors.Is(err, boom) {
		t.Fatalf("Get error = %v, want %v", err, boom)
	}
	v, err := tab.Get(context.Background(), "k", func(context.Context) (string, error) { return "ok", nil })
	if err != nil || v != "ok" {
		t.Fatalf("Get after an error = %q, %v; want ok, nil", v, err)
	}
	if s := stat(t, c, cache.Customers); s.LoadErrors != 1 || s.Loads != 2 {
		t.Errorf("stats = %+v, want LoadErrors 1, Loads 2", s)
	}
}

func TestScopeOffAlwaysLoads(t *testing.T) {
	c := newCache(t, withEntity(cache.Idempotency, cache.EntityConfig{Scope: cache.ScopeOff}))
	tab := cache.Entity[int](c, cache.Idempotency, nil)
	ctx := context.Background()
	if err := tab.Preheat(ctx, map[string]int{"k": 1}); err != nil {
		t.Fatal(err)
	}
	if err := tab.Set(ctx, "k", 1); err != nil {
		t.Fatal(err)
	}
	var loads atomic.Int32
	for range 3 {
		if _, err := tab.Get(ctx, "k", func(context.Context) (int, error) { return int(loads.Add(1)), nil }); err != nil {
			t.Fatal(err)
		}
	}
	if loads.Load() != 3 {
		t.Errorf("loads = %d, want 3", loads.Load())
	}
}

func TestPreheatProcess(t *testing.T) {
	c := newCache(t, cache.DefaultConfig())
	tab := cache.Entity[string](c, cache.APIKeys, nil)
	ctx := context.Background()
	items := map[string]string{}
	for i := range 100 {
		items[fmt.Sprint("key", i)] = fmt.Sprint("val", i)
	}
	if err := tab.Preheat(ctx, items); err != nil {
		t.Fatal(err)
	}
	for k, want := range items {
		v, err := tab.Get(ctx, k, func(context.Context) (string, error) { return "", errors.New("loader called") })
		if err != nil || v != want {
			t.Fatalf("Get(%s) = %q, %v; want %q", k, v, err, want)
		}
	}
	if s := stat(t, c, cache.APIKeys); s.Loads != 0 || s.Hits != 100 {
		t.Errorf("stats = %+v, want Loads 0, Hits 100", s)
	}
}

func TestEntityPanicsOnUnknownOrDuplicateName(t *testing.T) {
	c := newCache(t, cache.DefaultConfig())
	cache.Entity[string](c, cache.APIKeys, nil)
	for _, name := range []string{"nope", cache.APIKeys} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Entity(%q) did not panic", name)
				}
			}()
			cache.Entity[string](c, name, nil)
		}()
	}
}
