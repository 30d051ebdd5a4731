package ratelimit_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/surgepay/surgepay/cache"
	"github.com/surgepay/surgepay/cache/redistest"
	"github.com/surgepay/surgepay/ratelimit"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// generous is the timeout of the tests that need Redis's answers: a
// shared test machine may stall a call for longer than the default's
// 20 ms, which would be a fallback.
const generous = 5 * time.Second

// newLimiter returns a limiter on srv through the cache's own client
// options, logging to logs.
func newLimiter(t *testing.T, srv *redistest.Server, logs *syncBuffer, timeout time.Duration) *ratelimit.Redis {
	t.Helper()
	cc := cache.DefaultConfig()
	cc.Redis.GlobalAddrs = []string{srv.URL()}
	opt, err := cache.ClientOption(cache.ScopeGlobal, cc)
	if err != nil {
		t.Fatal(err)
	}
	r, err := ratelimit.New(ratelimit.Config{Client: opt, Namespace: "test:", BreakerOpenDuration: 20 * time.Millisecond,
		Timeout: timeout,
		Logger:  slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

// TestRedisBurstThenRefused: a merchant gets its burst, then a refusal
// whose wait is at most one interval; other keys are apart; two limiters
// on one Redis (two nodes) share one allowance.
func TestRedisBurstThenRefused(t *testing.T) {
	srv := redistest.Start(t)
	var logs syncBuffer
	a, b := newLimiter(t, srv, &logs, generous), newLimiter(t, srv, &logs, generous)
	ctx := context.Background()
	// 0.01 per second: no refill while the test runs (100 s a request).
	const limit, burst = 0.01, 6
	admitted := 0
	for i := range 2 * burst {
		node := a
		if i%2 == 1 {
			node = b
		}
		wait, ok, err := node.Take(ctx, "mer_a", limit, burst)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			admitted++
		} else if wait <= 0 || wait > 100*time.Second {
			t.Errorf("refusal %d: wait %s, want in (0, 100s]", i, wait)
		}
	}
	if admitted != burst {
		t.Errorf("two nodes admitted %d, want the burst %d in total (each node alone would admit %d)", admitted, burst, 2*burst)
	}
	if _, ok, err := a.Take(ctx, "mer_b", limit, burst); !ok || err != nil {
		t.Errorf("another merchant: ok %v err %v, want admitted", ok, err)
	}
	t.Run("FractionalRateRefills", func(t *testing.T) {
		// 1000 per second, burst 1: the next request is due within 1 ms.
		_, ok, err := a.Take(ctx, "mer_fast", 1000, 1)
		if !ok || err != nil {
			t.Fatalf("first: ok %v err %v", ok, err)
		}
		for range 1000 {
			wait, ok, err := a.Take(ctx, "mer_fast", 1000, 1)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				return
			}
			if wait > time.Millisecond {
				t.Fatalf("wait %s at 1000 per second, want at most 1ms", wait)
			}
			time.Sleep(wait)
		}
		t.Fatal("never admitted again")
	})
	if strings.Contains(logs.String(), "unavailable") {
		t.Errorf("a healthy Redis logged: %s", logs.String())
	}
}

// TestRedisDown: with Redis killed, Take returns ErrUnavailable (the
// caller decides alone) and one log line says so, not one per request;
// once Redis is back, Take counts again and one line says that.
func TestRedisDown(t *testing.T) {
	srv := redistest.Start(t)
	var logs syncBuffer
	r := newLimiter(t, srv, &logs, generous)
	ctx := context.Background()
	if _, ok, err := r.Take(ctx, "mer_a", 1, 1); !ok || err != nil {
		t.Fatalf("up: ok %v err %v", ok, err)
	}
	srv.Kill()
	for range 50 {
		if _, _, err := r.Take(ctx, "mer_a", 1, 1); !errors.Is(err, ratelimit.ErrUnavailable) {
			t.Fatalf("Redis down: err %v, want ErrUnavailable", err)
		}
	}
	if n := strings.Count(logs.String(), "redis unavailable"); n != 1 {
		t.Errorf("%d lines say Redis is unavailable after 50 requests, want 1:\n%s", n, logs.String())
	}
	srv.Restart()
	for i := 0; ; i++ {
		_, _, err := r.Take(ctx, "mer_a", 1, 1)
		if err == nil {
			break
		}
		if i == 500 {
			t.Fatalf("Redis back: still %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := strings.Count(logs.String(), "redis available again"); n != 1 {
		t.Errorf("%d lines say Redis is back, want 1:\n%s", n, logs.String())
	}
}

// TestRedisPaused: a Redis that accepts connections but never answers
// (SIGSTOP) is an error, not a wait for its answer.
func TestRedisPaused(t *testing.T) {
	srv := redistest.Start(t)
	var logs syncBuffer
	r := newLimiter(t, srv, &logs, 0) // the default 20 ms
	ctx := context.Background()
	if _, _, err := r.Take(ctx, "mer_a", 1, 1); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(err)
	}
	srv.Pause()
	defer srv.Resume()
	for range 10 {
		if _, _, err := r.Take(ctx, "mer_a", 1, 1); !errors.Is(err, ratelimit.ErrUnavailable) {
			t.Fatalf("Redis paused: err %v, want ErrUnavailable", err)
		}
	}
}

// BenchmarkRedisTake is one limited request's cost: one round trip to a
// local redis-server, the script and the timeout guard.
func BenchmarkRedisTake(b *testing.B) {
	srv := redistest.Start(b)
	cc := cache.DefaultConfig()
	cc.Redis.GlobalAddrs = []string{srv.URL()}
	opt, err := cache.ClientOption(cache.ScopeGlobal, cc)
	if err != nil {
		b.Fatal(err)
	}
	r, err := ratelimit.New(ratelimit.Config{Client: opt, Namespace: "bench:", Timeout: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := r.Take(ctx, "mer_bench", 1e6, 1e6); err != nil {
			b.Fatal(err)
		}
	}
}

// TestRedisDownAtStart: a limiter made while Redis is down falls back,
// then counts once Redis answers, without being made again.
func TestRedisDownAtStart(t *testing.T) {
	srv := redistest.Start(t)
	srv.Kill()
	var logs syncBuffer
	r := newLimiter(t, srv, &logs, generous)
	ctx := context.Background()
	if _, _, err := r.Take(ctx, "mer_a", 1, 1); !errors.Is(err, ratelimit.ErrUnavailable) {
		t.Fatalf("Redis down at start: err %v, want ErrUnavailable", err)
	}
	srv.Restart()
	for i := 0; ; i++ {
		if _, _, err := r.Take(ctx, "mer_a", 1, 1); err == nil {
			break
		} else if i == 500 {
			t.Fatalf("Redis up after the start: still %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
