package telemetry

import (
	"context"
	"sync/atomic"
	"time"
)

// RequestStats counts, for one request, what the SQL StatementCounter does
// not: cache lookups and time spent waiting on the card-network provider.
// The API puts one in every request's context; the engine counts cache
// lookups with CountCacheHit and CountCacheMiss, and the Provider decorator
// adds provider time. Safe for concurrent use; the zero value is ready.
type RequestStats struct {
	cacheHits     atomic.Int64
	cacheMisses   atomic.Int64
	providerCalls atomic.Int64
	providerNano  atomic.Int64
}

// CacheHits returns the cache lookups answered from a cache.
func (s *RequestStats) CacheHits() int64 { return s.cacheHits.Load() }

// CacheMisses returns the cache lookups that went to the store.
func (s *RequestStats) CacheMisses() int64 { return s.cacheMisses.Load() }

// ProviderCalls returns the provider calls made.
func (s *RequestStats) ProviderCalls() int64 { return s.providerCalls.Load() }

// ProviderTime returns the time spent waiting on the provider.
func (s *RequestStats) ProviderTime() time.Duration { return time.Duration(s.providerNano.Load()) }

type requestStatsKey struct{}

// WithRequestStats returns a context that carries s.
func WithRequestStats(ctx context.Context, s *RequestStats) context.Context {
	return context.WithValue(ctx, requestStatsKey{}, s)
}

// RequestStatsFrom returns the RequestStats in ctx, or nil.
func RequestStatsFrom(ctx context.Context) *RequestStats {
	s, _ := ctx.Value(requestStatsKey{}).(*RequestStats)
	return s
}

// CountCacheHit counts a cache hit on the request in ctx, if any.
func CountCacheHit(ctx context.Context) {
	if s := RequestStatsFrom(ctx); s != nil {
		s.cacheHits.Add(1)
	}
}

// CountCacheMiss counts a cache miss on the request in ctx, if any.
func CountCacheMiss(ctx context.Context) {
	if s := RequestStatsFrom(ctx); s != nil {
		s.cacheMisses.Add(1)
	}
}

// countProviderCall adds one provider call of duration d.
func countProviderCall(ctx context.Context, d time.Duration) {
	if s := RequestStatsFrom(ctx); s != nil {
		s.providerCalls.Add(1)
		s.providerNano.Add(int64(d))
	}
}
