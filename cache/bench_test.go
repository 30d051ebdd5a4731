package cache_test

import (
	"context"
	"errors"
	"testing"

	"github.com/surgepay/surgepay/cache"
	"github.com/surgepay/surgepay/cache/redistest"
)

type apiKey struct {
	ID, MerchantID, Prefix string
	Revoked                bool
}

func benchGet(b *testing.B, tab *cache.Table[*apiKey]) {
	ctx := context.Background()
	noLoad := func(context.Context) (*apiKey, error) { return nil, errors.New("loader called") }
	if err := tab.Preheat(ctx, map[string]*apiKey{"hash": {ID: "key_1", MerchantID: "mer_1", Prefix: "sk_abcdefg"}}); err != nil {
		b.Fatal(err)
	}
	if _, err := tab.Get(ctx, "hash", noLoad); err != nil { // fills the memory layer
		b.Fatal(err)
	}
	b.Run("Serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := tab.Get(ctx, "hash", noLoad); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := tab.Get(ctx, "hash", noLoad); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}

// BenchmarkGetProcessHit is a Get answered from process memory.
func BenchmarkGetProcessHit(b *testing.B) {
	c := newCache(b, cache.DefaultConfig())
	benchGet(b, cache.Entity[*apiKey](c, cache.APIKeys, nil))
}

// BenchmarkGetGlobalHit is a global-scope Get answered from the memory
// layer that Redis keeps current (client-side caching).
func BenchmarkGetGlobalHit(b *testing.B) {
	srv := redistest.Start(b)
	c := newCache(b, sharedConfig(cache.ScopeGlobal, srv))
	benchGet(b, cache.Entity[*apiKey](c, cache.APIKeys, nil))
}

// BenchmarkGetGlobalRedis is a global-scope Get with client-side caching
// off: one Redis GET over loopback and a JSON decode each.
func BenchmarkGetGlobalRedis(b *testing.B) {
	srv := redistest.Start(b)
	cfg := sharedConfig(cache.ScopeGlobal, srv)
	cfg.ClientSideTTL = 0
	c := newCache(b, cfg)
	benchGet(b, cache.Entity[*apiKey](c, cache.APIKeys, nil))
}
