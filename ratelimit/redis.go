// Package ratelimit counts merchants' request rates across the nodes
// that share one Redis, so that a merchant's rate_limit holds in total
// rather than on each node. It runs a GCRA (the generic cell rate
// algorithm, a token bucket kept as one timestamp) in a Lua script: one
// round trip per request, on Redis's clock, so the nodes' clocks do not
// matter. When Redis cannot answer within Config.Timeout the caller is
// told to fall back (api: to the node's own bucket); a circuit breaker
// then skips Redis for BreakerOpenDuration, so an outage costs at most a
// few requests Timeout each, never a stall.
package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"github.com/sony/gobreaker/v2"
)

// Bounds and defaults.
const (
	// TimeoutDefault bounds one Redis call by default: a request waits at
	// most this long for its verdict before the node's bucket decides.
	TimeoutDefault = 20 * time.Millisecond
	// TimeoutMax bounds the configured timeout (rate_limits.timeout): a
	// slow Redis must not slow every limited request. (Tests on a shared
	// machine give New more.)
	TimeoutMax = 100 * time.Millisecond
	// BreakerOpenDefault is how long Redis is skipped after
	// breakerFailuresMax consecutive failures, by default.
	BreakerOpenDefault = time.Second

	breakerFailuresMax = 5
	// keyPart follows the namespace in every key: namespace + keyPart +
	// merchant ID.
	keyPart = "ratelimit:"
)

// gcra is the limiter. KEYS[1] holds the theoretical arrival time (TAT)
// in microseconds of Redis's clock; ARGV[1] is the emission interval
// (1e6 / rate, µs), ARGV[2] the burst, ARGV[3] the cost (tokens taken). A
// request is admitted when the TAT it would leave is at most burst
// intervals ahead of now, which admits exactly what a token bucket of
// burst tokens refilled at rate admits.
// The key expires when its TAT has passed (a full bucket needs no key).
// Returns {1, 0} when admitted, else {0, µs until a request would be}.
var gcra = rueidis.NewLuaScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local tolerance = interval * tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local next = tat + interval * tonumber(ARGV[3])
local allowAt = next - tolerance
if allowAt > now then
  return {0, math.ceil(allowAt - now)}
end
redis.call('SET', KEYS[1], string.format('%.0f', next), 'PX', math.ceil((next - now) / 1000) + 1)
return {1, 0}
`)

// Config configures a Redis limiter.
type Config struct {
	// Client is the Redis client's options (cache.ClientOption).
	Client rueidis.ClientOption
	// Namespace prefixes every key (cache.namespace).
	Namespace string
	// Timeout bounds one request's Redis call. 0: TimeoutDefault. The
	// configuration bounds it to TimeoutMax.
	Timeout time.Duration
	// BreakerOpenDuration is how long Redis is skipped after 5
	// consecutive failures. 0: BreakerOpenDefault.
	BreakerOpenDuration time.Duration
	// Logger gets one line when Redis stops answering and one when it
	// answers again, never one per request.
	Logger *slog.Logger
}

// Redis is a rate limiter shared by every node that uses the same Redis
// and Namespace. Safe for concurrent use.
type Redis struct {
	cfg     Config
	log     *slog.Logger
	breaker *gobreaker.TwoStepCircuitBreaker[struct{}]

	client atomic.Pointer[rueidis.Client]
	done   chan struct{} // closed by Close
	wg     sync.WaitGroup

	down      atomic.Bool   // the last call failed
	fallbacks atomic.Uint64 // calls failed since the last state change
}

// ErrUnavailable is returned (wrapped) when Redis did not answer: the
// caller falls back to its own count.
var ErrUnavailable = errors.New("ratelimit: redis unavailable")

// New returns a limiter on the Redis of cfg.Client. A Redis down at start
// is not an error: Take falls back until it answers.
func New(cfg Config) (*Redis, error) {
	if cfg.Timeout == 0 {
		cfg.Timeout = TimeoutDefault
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("ratelimit: Timeout %s must not be negative (0: %s)", cfg.Timeout, TimeoutDefault)
	}
	if cfg.BreakerOpenDuration <= 0 {
		cfg.BreakerOpenDuration = BreakerOpenDefault
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.Client.DisableCache = true
	cfg.Client.DisableRetry = true
	r := &Redis{cfg: cfg, log: cfg.Logger, done: make(chan struct{})}
	r.breaker = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        "redis-ratelimit",
		MaxRequests: 1,
		Timeout:     cfg.BreakerOpenDuration,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= breakerFailuresMax },
		IsExcluded:  func(err error) bool { return errors.Is(err, errCallerGone) },
	})
	r.connect()
	return r, nil
}

// errCallerGone marks a call abandoned because the request's own context
// ended: not Redis's fault.
var errCallerGone = errors.New("caller's context ended")

// Take takes one request from key's allowance of limit requests per
// second with bursts of burst. ok false: none is left, and retryAfter is
// when one will be. A non-nil error (ErrUnavailable, wrapped) means Redis
// did not answer within Timeout, or is being skipped after failures: the
// caller decides alone. It never waits longer than Timeout.
func (r *Redis) Take(ctx context.Context, key string, limit float64, burst int) (retryAfter time.Duration, ok bool, err error) {
	return r.TakeN(ctx, key, limit, burst, 1)
}

// TakeN is Take of n at once (at most burst: a cost above it takes the
// whole burst), for calls that cost more than one of a budget.
func (r *Redis) TakeN(ctx context.Context, key string, limit float64, burst, n int) (retryAfter time.Duration, ok bool, err error) {
	if limit <= 0 || burst < 1 {
		return 0, true, nil
	}
	n = min(max(n, 1), burst)
	interval := strconv.FormatInt(max(1, int64(math.Round(1e6/limit))), 10)
	var res struct {
		admitted bool
		waitUs   int64
	}
	err = r.call(ctx, func(ctx context.Context, c rueidis.Client) error {
		vals, err := gcra.Exec(ctx, c, []string{r.cfg.Namespace + keyPart + key},
			[]string{interval, strconv.Itoa(burst), strconv.Itoa(n)}).AsIntSlice()
		if err != nil {
			return err
		}
		if len(vals) != 2 {
			return fmt.Errorf("ratelimit script answered %d values, want 2", len(vals))
		}
		res.admitted, res.waitUs = vals[0] == 1, vals[1]
		return nil
	})
	if err != nil {
		r.failed(err)
		return 0, false, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	r.answered()
	return time.Duration(res.waitUs) * time.Microsecond, res.admitted, nil
}

// call runs fn against Redis through the breaker, and returns at
// Timeout whatever the client does: rueidis honours the context for
// commands, but a reconnection to a hung Redis can take its dial
// timeout. fn's goroutine then ends with the client's own timeouts; the
// breaker, open after a few failures, bounds how many there are.
func (r *Redis) call(ctx context.Context, fn func(ctx context.Context, c rueidis.Client) error) error {
	cp := r.client.Load()
	if cp == nil {
		return errNoClient
	}
	done, err := r.breaker.Allow()
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	var once sync.Once
	finish := func(err error) {
		once.Do(func() {
			if err != nil && ctx.Err() != nil {
				err = errCallerGone
			}
			done(err)
		})
	}
	result := make(chan error, 1)
	go func() {
		err := fn(cctx, *cp)
		finish(err)
		result <- err
	}()
	select {
	case err = <-result:
		return err
	case <-cctx.Done():
		err = cctx.Err()
		finish(err)
		return err
	}
}

// errNoClient is the fallback reason while a Sentinel or Cluster client
// could not be built yet.
var errNoClient = errors.New("redis client not connected yet")

// connect builds the client. A standalone client is built even when
// Redis is down (it reconnects by itself); a Sentinel or Cluster client
// needs a node to answer, so it is tried again in the background, every
// BreakerOpenDuration, never on a request's path.
func (r *Redis) connect() {
	if r.tryConnect() {
		return
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		t := time.NewTicker(r.cfg.BreakerOpenDuration)
		defer t.Stop()
		for {
			select {
			case <-r.done:
				return
			case <-t.C:
				if r.tryConnect() {
					return
				}
			}
		}
	}()
}

func (r *Redis) tryConnect() bool {
	c, err := rueidis.NewClient(r.cfg.Client)
	if c == nil {
		r.failed(err)
		return false
	}
	select {
	case <-r.done: // closed meanwhile
		c.Close()
	default:
		r.client.Store(&c)
	}
	return true
}

// failed counts a fallback and logs the change of state once.
func (r *Redis) failed(err error) {
	r.fallbacks.Add(1)
	if !r.down.Swap(true) {
		r.log.Warn("rate limits: redis unavailable; each node applies the merchants' rate_limit alone until it answers",
			"err", err.Error(), "timeout", r.cfg.Timeout.String())
	}
}

// answered logs, once, that Redis answers again, with how many requests
// fell back meanwhile.
func (r *Redis) answered() {
	if r.down.Load() && r.down.Swap(false) {
		r.log.Info("rate limits: redis available again; the merchants' rate_limit holds across the nodes",
			"fallbacks", r.fallbacks.Swap(0))
	}
}

// Close stops connecting and closes the client. Not safe for concurrent
// use with itself.
func (r *Redis) Close() {
	close(r.done)
	r.wg.Wait()
	if cp := r.client.Load(); cp != nil {
		(*cp).Close()
	}
}
