package api

import (
	"context"
	"fmt"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/engine"
	"github.com/surgepay/surgepay/internal/enginetest"
)

// TestLimitersBounded: the table never holds more than bucketsMax
// buckets; making room drops the full ones first, which changes nothing a
// merchant sees, and keeps an empty one while full ones remain.
func TestLimitersBounded(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ls := newLimiters(func() time.Time { return now })
	ls.bucketsMax = 16
	take := func(id string) bool {
		_, ok := ls.take(id, 1, 1)
		return ok
	}
	if !take("busy") {
		t.Fatal("a new bucket refused its first request")
	}
	for i := range 15 {
		take(fmt.Sprint("idle", i))
	}
	now = now.Add(time.Second) // every bucket full again but busy's
	take("busy")
	if got := ls.len(); got != 16 {
		t.Fatalf("len = %d, want 16", got)
	}

	if !take("new") {
		t.Fatal("a new merchant at the bound refused its first request")
	}
	if got := ls.len(); got != 2 {
		t.Errorf("after pruning 15 full buckets: len = %d, want 2 (busy, new)", got)
	}
	if take("busy") {
		t.Error("busy's empty bucket was dropped while full ones could go: it admitted another request")
	}

	t.Run("SmallBound", func(t *testing.T) {
		small := newLimiters(func() time.Time { return now })
		small.bucketsMax = 3
		for i := range 10 {
			small.take(fmt.Sprint("mer_", i), 1, 1)
			if got := small.len(); got > small.bucketsMax {
				t.Fatalf("len = %d after %d merchants, want at most %d", got, i+1, small.bucketsMax)
			}
		}
	})
	t.Run("NoFullBucket", func(t *testing.T) {
		for i := range 64 {
			take(fmt.Sprint("flood", i)) // each takes its only token
			if got := ls.len(); got > ls.bucketsMax {
				t.Fatalf("len = %d after %d merchants, want at most %d", got, i+1, ls.bucketsMax)
			}
		}
	})
}

// TestRateLimitOffCostsNothing: a merchant without a rate limit makes no
// bucket and allocates nothing.
func TestRateLimitOffCostsNothing(t *testing.T) {
	limited := surgepay.DefaultMerchantSettings()
	limited.RateLimit = 1
	eng := enginetest.SQLite(t, &engine.Settings{Default: surgepay.DefaultMerchantSettings(),
		Merchants: map[string]surgepay.MerchantSettings{"mer_limited": limited}})
	s := New(Config{Engine: eng})
	allocs := testing.AllocsPerRun(100, func() {
		if err := s.rateLimit(context.Background(), "mer_free"); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("rateLimit of an unlimited merchant allocates %v times, want 0", allocs)
	}
	if n := s.limits.len(); n != 0 {
		t.Errorf("%d buckets after requests of an unlimited merchant, want 0", n)
	}
	if err := s.rateLimit(context.Background(), "mer_limited"); err != nil || s.limits.len() != 1 {
		t.Errorf("a limited merchant's first request: err %v, %d buckets; want nil, 1", err, s.limits.len())
	}
}

// TestLimitersRetryAfter: the wait returned with a refusal is the time
// until the next token.
func TestLimitersRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ls := newLimiters(func() time.Time { return now })
	for _, tc := range []struct {
		limit rate.Limit
		want  time.Duration
	}{{1, time.Second}, {4, 250 * time.Millisecond}, {0.25, 4 * time.Second}} {
		id := fmt.Sprint("mer_", tc.limit)
		if _, ok := ls.take(id, tc.limit, 1); !ok {
			t.Fatalf("rate %v: the first request was refused", tc.limit)
		}
		wait, ok := ls.take(id, tc.limit, 1)
		if ok || wait != tc.want {
			t.Errorf("rate %v: take = %v, %v; want %v, false", tc.limit, wait, ok, tc.want)
		}
	}
}
