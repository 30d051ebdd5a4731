package api

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/surgepay/surgepay"
)

// limitersMax bounds the token buckets one Server keeps. A bucket is made
// only for a merchant that authenticated while it had a rate limit, and
// merchants are created by the operator, never by a client, so the set is
// bounded by the merchants the operator made; this is the backstop
// (about 200 bytes a bucket: 13 MB when full). See prune.
const limitersMax = 1 << 16

// limiters holds the per-merchant token buckets of the request rate limit
// (merchants.*.rate_limit and rate_burst). The buckets are in this
// process: the limit is per node. Safe for concurrent use.
type limiters struct {
	now        func() time.Time
	bucketsMax int // limitersMax but in tests
	mu         sync.RWMutex
	m          map[string]*limiter // by merchant ID; at most bucketsMax
}

// limiter is a merchant's bucket and the settings it was last given.
type limiter struct {
	bucket *rate.Limiter
	limit  rate.Limit // guarded by limiters.mu
	burst  int        // guarded by limiters.mu
}

func newLimiters(now func() time.Time) *limiters {
	return &limiters{now: now, bucketsMax: limitersMax, m: make(map[string]*limiter)}
}

// take takes a token from the merchant's bucket, made or brought up to
// limit and burst first. If the bucket is empty it takes nothing and
// returns ok false and how long until a token is there.
func (ls *limiters) take(merchantID string, limit rate.Limit, burst int) (retryAfter time.Duration, ok bool) {
	now := ls.now()
	b := ls.bucket(merchantID, limit, burst, now)
	if b.AllowN(now, 1) {
		return 0, true
	}
	need := 1 - b.TokensAt(now)
	return time.Duration(need / float64(limit) * float64(time.Second)), false
}

// bucket returns the merchant's bucket with limit and burst. A settings
// reload that changed them is applied here, on the merchant's next
// request: a full bucket is replaced by a new one (full at the new burst,
// which is what the merchant would have had if the change had come with
// the reload); any other keeps its tokens and refills at the new rate
// from now on, up to the new burst. A request that took the old bucket
// just before it was replaced may get one extra token.
func (ls *limiters) bucket(merchantID string, limit rate.Limit, burst int, now time.Time) *rate.Limiter {
	ls.mu.RLock()
	l := ls.m[merchantID]
	current := l != nil && l.limit == limit && l.burst == burst
	ls.mu.RUnlock()
	if current {
		return l.bucket
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	l = ls.m[merchantID]
	switch {
	case l == nil:
		if len(ls.m) >= ls.bucketsMax {
			ls.prune(now)
		}
		l = newLimiter(limit, burst)
		ls.m[merchantID] = l
	case l.limit == limit && l.burst == burst:
	case l.full(now):
		l = newLimiter(limit, burst)
		ls.m[merchantID] = l
	default:
		l.bucket.SetLimitAt(now, limit)
		l.bucket.SetBurstAt(now, burst)
		l.limit, l.burst = limit, burst
	}
	return l.bucket
}

func newLimiter(limit rate.Limit, burst int) *limiter {
	return &limiter{bucket: rate.NewLimiter(limit, burst), limit: limit, burst: burst}
}

// full reports whether the bucket holds its burst at now: it then admits
// exactly what a new bucket would. Called with limiters.mu held.
func (l *limiter) full(now time.Time) bool { return l.bucket.TokensAt(now) >= float64(l.burst) }

// prune makes room for a sixteenth of bucketsMax new buckets (one at
// least). It drops the full buckets first: a full bucket admits exactly
// what a new one would, so dropping it changes nothing. If that is not
// room enough it drops others at random, each of which its merchant gets
// back full: at most one extra burst per dropped merchant, and only with
// more than bucketsMax merchants limited at once. Called with ls.mu held;
// one pass over the table per bucketsMax/16 new merchants.
func (ls *limiters) prune(now time.Time) {
	for id, l := range ls.m {
		if l.full(now) {
			delete(ls.m, id)
		}
	}
	keep := ls.bucketsMax - max(1, ls.bucketsMax/16)
	for id := range ls.m {
		if len(ls.m) <= keep {
			break
		}
		delete(ls.m, id)
	}
}

// len returns the number of buckets held.
func (ls *limiters) len() int {
	ls.mu.RLock()
	defer ls.mu.RUnlock()
	return len(ls.m)
}

// SharedRateLimiter counts merchants' requests across the nodes that
// share it (ratelimit.Redis), so that a merchant's rate_limit holds in
// total. Safe for concurrent use.
type SharedRateLimiter interface {
	// Take takes one request from merchantID's allowance of limit
	// requests per second with bursts of burst; ok false, with the wait
	// until one is left, when none is. An error means the shared count
	// could not be reached in time: the node's own bucket decides.
	Take(ctx context.Context, merchantID string, limit float64, burst int) (retryAfter time.Duration, ok bool, err error)
}

// rateLimit returns an ERATELIMIT error, with Retry-After in whole
// seconds (at least 1), if the merchant has a rate limit and its
// allowance is spent: across the nodes when Config.SharedRateLimiter is
// set and answers, else in the node's own bucket. A merchant without a
// rate limit (the default) costs one settings lookup: no lock, no
// bucket, no Redis.
func (s *Server) rateLimit(ctx context.Context, merchantID string) error {
	set := s.eng.SettingsFor(merchantID)
	if set.RateLimit <= 0 {
		return nil
	}
	burst := set.Burst()
	where := "on this server"
	if s.cfg.SharedRateLimiter != nil {
		wait, ok, err := s.cfg.SharedRateLimiter.Take(ctx, merchantID, set.RateLimit, burst)
		if err == nil {
			if ok {
				return nil
			}
			return s.rateLimited(merchantID, set.RateLimit, burst, wait, "across the servers")
		}
		s.tel.ObserveRateLimitFallback()
	}
	wait, ok := s.limits.take(merchantID, rate.Limit(set.RateLimit), burst)
	if ok {
		return nil
	}
	return s.rateLimited(merchantID, set.RateLimit, burst, wait, where)
}

// rateLimited counts a refusal and returns its error.
func (s *Server) rateLimited(merchantID string, limit float64, burst int, wait time.Duration, where string) error {
	s.tel.ObserveRateLimited(merchantID)
	retry := max(1, int(math.Ceil(wait.Seconds())))
	return &surgepay.Error{Code: surgepay.ERATELIMIT, Reason: "rate_limited", RetryAfter: retry,
		Message: fmt.Sprintf("too many requests for this merchant's rate limit (%v per second, bursts of %d, %s); retry after %d s",
			limit, burst, where, retry)}
}
