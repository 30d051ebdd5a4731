package cache

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"math/bits"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"github.com/sony/gobreaker/v2"
)

// Bounds of the Redis layer.
const (
	// InvalidationHold is how long an invalidated key stays marked in
	// Redis (a tombstone) so that a load which read the store before the
	// write cannot put the old value back: write-backs only create absent
	// keys. A load slower than this can still do it; the TTL bounds that.
	InvalidationHold = 2 * time.Second
	// PendingInvalidationsMax bounds the invalidations kept for retry
	// while Redis is unreachable. Beyond it they are dropped and logged:
	// the entities' TTL bounds the staleness they leave.
	PendingInvalidationsMax = 10_000
	// PreheatBatchMax is the number of writes Preheat pipelines at once.
	PreheatBatchMax = 1000
	// WriteBackQueueMax bounds the loaded values of misses waiting to be
	// written back to Redis, per scope. A Get only queues its write-back,
	// so that it waits for one Redis call at most (FallbackTimeout); a
	// write-back that finds the queue full is dropped and counted as a
	// fallback: the key's next miss queues it again.
	WriteBackQueueMax = 10_000
	// WriteBackBatchMax is the number of queued write-backs pipelined in
	// one round trip.
	WriteBackBatchMax = 256
	// WriteBackAgeMax drops a write-back queued longer than this. Written
	// later, it could land after the tombstone of an invalidation that
	// followed its load had expired (InvalidationHold), and put the old
	// value back.
	WriteBackAgeMax = InvalidationHold / 2

	breakerFailuresMax       = 5 // consecutive failed calls that open the breaker
	pendingRetryInterval     = 250 * time.Millisecond
	reconnectInterval        = time.Second     // between attempts to build a Sentinel or Cluster client
	preheatBatchTimeout      = 5 * time.Second // one preheat batch; not on a request's path
	connWriteTimeoutMin      = time.Second     // a connection silent this long is closed
	blockingPoolSize         = 8               // the cache issues no blocking command
	clientName               = "surgepay-cache"
	breakerStateChangeLogKey = "breaker"

	// A value in Redis is one tag byte, then for tagValue the codec's bytes.
	tagValue       = 'v'
	notFoundValue  = "n" // a cached not-found answer (negative entry)
	tombstoneValue = "t" // an invalidated key, see InvalidationHold
)

// errNoClient is the fallback reason while a Sentinel or Cluster client
// could not be built yet.
var errNoClient = errors.New("redis client not connected yet")

// errCallerGone marks a Redis call abandoned because the caller's own
// context ended: not Redis's fault, so the breaker ignores it.
var errCallerGone = errors.New("caller's context ended")

// store is the Redis of one shared scope: its client, circuit breaker and
// queue of invalidations to retry. Safe for concurrent use.
type store struct {
	scope   Scope
	opt     rueidis.ClientOption
	timeout time.Duration
	clientT time.Duration // ClientSideTTL; 0: no client-side caching
	log     *slog.Logger
	breaker *gobreaker.TwoStepCircuitBreaker[struct{}]

	client  atomic.Pointer[rueidis.Client]
	gen     atomic.Uint64 // counts "every key changed" messages
	pending chan string   // Redis keys whose invalidation must be retried
	// writeBacks holds the misses' values for Redis, written by
	// writeBackLoop; at most WriteBackQueueMax.
	writeBacks chan writeBack
	done       chan struct{}
	wg         sync.WaitGroup
}

func newStore(scope Scope, cfg Config, log *slog.Logger, onInvalidations func(keys []string)) (*store, error) {
	opt, err := clientOptions(scope, cfg)
	if err != nil {
		return nil, err
	}
	s := &store{scope: scope, timeout: cfg.FallbackTimeout, clientT: cfg.ClientSideTTL,
		log: log.With("scope", string(scope)), pending: make(chan string, PendingInvalidationsMax),
		writeBacks: make(chan writeBack, WriteBackQueueMax), done: make(chan struct{})}
	opt.OnInvalidations = func(msgs []rueidis.RedisMessage) {
		if msgs == nil { // a flush, or the connection closed: trust nothing
			s.gen.Add(1) // before the drop, see Table.memGet
			onInvalidations(nil)
			return
		}
		keys := make([]string, 0, len(msgs))
		for _, m := range msgs {
			if k, err := m.ToString(); err == nil {
				keys = append(keys, k)
			}
		}
		onInvalidations(keys)
	}
	s.opt = opt
	s.breaker = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        "redis-" + string(scope),
		MaxRequests: 1,
		Timeout:     cfg.BreakerOpenDuration,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= breakerFailuresMax },
		IsExcluded:  func(err error) bool { return errors.Is(err, errCallerGone) },
		OnStateChange: func(_ string, from, to gobreaker.State) {
			switch to {
			case gobreaker.StateOpen:
				s.log.Warn("cache: redis unavailable, falling back to the store", breakerStateChangeLogKey, to.String(),
					"open_for", cfg.BreakerOpenDuration.String())
			case gobreaker.StateClosed:
				s.log.Info("cache: redis available again", breakerStateChangeLogKey, to.String())
			}
		},
	})
	s.connect()
	s.wg.Add(2)
	go s.retryPending()
	go s.writeBackLoop()
	return s, nil
}

// clientOptions builds the rueidis options of one scope. The password is
// placed only here.
func clientOptions(scope Scope, cfg Config) (rueidis.ClientOption, error) {
	r := cfg.Redis
	opt := rueidis.ClientOption{
		Username: r.Username, Password: r.Password.Reveal(), ClientName: clientName, SelectDB: r.DB,
		Dialer:            net.Dialer{Timeout: r.DialTimeout},
		PipelineMultiplex: multiplex(r.ConnsPerNode),
		CacheSizeEachConn: r.ClientSideBytesPerConn,
		DisableCache:      cfg.ClientSideTTL == 0,
		// The breaker and the loader are the retry policy: a failed call
		// falls back at once instead of waiting for a reconnection.
		DisableRetry:     true,
		ConnWriteTimeout: max(connWriteTimeoutMin, 10*cfg.FallbackTimeout),
		BlockingPoolSize: blockingPoolSize,
	}
	switch scope {
	case ScopeServer:
		if path, ok := strings.CutPrefix(r.ServerAddr, "unix://"); ok {
			opt.InitAddress = []string{path}
			opt.DialCtxFn = dialUnix
		} else {
			opt.InitAddress = []string{r.ServerAddr}
		}
		opt.ForceSingleClient = true
	case ScopeGlobal:
		opt.InitAddress = append([]string(nil), r.GlobalAddrs...)
		if r.TLS {
			tc, err := redisTLS(r)
			if err != nil {
				return opt, err
			}
			opt.TLSConfig = tc
		}
		switch {
		case r.SentinelMaster != "":
			opt.Sentinel = rueidis.SentinelOption{MasterSet: r.SentinelMaster, Username: r.Username,
				Password: r.Password.Reveal(), ClientName: clientName, Dialer: net.Dialer{Timeout: r.DialTimeout},
				TLSConfig: opt.TLSConfig}
		case r.Cluster:
			opt.ShuffleInit = true // spread the discovery load over the nodes
		default:
			opt.ForceSingleClient = true
		}
	default:
		return opt, fmt.Errorf("cache: scope %q has no Redis", scope)
	}
	return opt, nil
}

// redisTLS returns the TLS configuration of the global scope: TLS 1.2 or
// newer, the CA file's roots (else the system's), the client
// certificate if any. ServerName is left empty: crypto/tls takes each
// node's host.
func redisTLS(r RedisConfig) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if r.TLSCAFile != "" {
		b, err := os.ReadFile(r.TLSCAFile)
		if err != nil {
			return nil, fmt.Errorf("cache.redis.tls_ca_file: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("cache.redis.tls_ca_file %s: no PEM certificate", r.TLSCAFile)
		}
	}
	if r.TLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(r.TLSCertFile, r.TLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("cache.redis.tls_cert_file, tls_key_file: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

func dialUnix(ctx context.Context, path string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
	return d.DialContext(ctx, "unix", path)
}

// multiplex converts a number of connections (a power of two) to rueidis's
// PipelineMultiplex, whose 0 means "choose for me" and -1 one connection.
func multiplex(conns int) int {
	if conns <= 1 {
		return -1
	}
	return bits.Len(uint(conns)) - 1
}

// connect builds the client. A standalone client is built even when Redis
// is down (it reconnects by itself); a Sentinel or Cluster client needs a
// node to answer, so it is retried in the background until one does.
func (s *store) connect() {
	if s.tryConnect() {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(reconnectInterval)
		defer t.Stop()
		for {
			select {
			case <-s.done:
				return
			case <-t.C:
				if s.tryConnect() {
					return
				}
			}
		}
	}()
}

func (s *store) tryConnect() bool {
	c, err := rueidis.NewClient(s.opt)
	if c == nil {
		s.log.Warn("cache: redis client not built yet; falling back to the store", "err", err)
		return false
	}
	if err != nil {
		s.log.Warn("cache: redis unreachable at start; falling back to the store until it answers", "err", err)
	}
	select {
	case <-s.done: // closed meanwhile
		c.Close()
	default:
		s.client.Store(&c)
	}
	return true
}

// call runs fn against Redis, through the circuit breaker, cut at
// deadline (see deadline). fn returns nil for Redis's nil reply. A non-nil
// error means the caller must fall back.
func (s *store) call(ctx context.Context, deadline time.Time, fn func(ctx context.Context, c rueidis.Client) error) error {
	cp := s.client.Load()
	if cp == nil {
		return errNoClient
	}
	if !time.Now().Before(deadline) {
		return context.DeadlineExceeded // the budget is spent: do not even ask
	}
	done, err := s.breaker.Allow()
	if err != nil {
		return err
	}
	// fn runs on its own goroutine so that the caller leaves at the
	// deadline whatever the client does: rueidis honours the context
	// for commands, but a reconnection to a hung Redis can wait for
	// DialTimeout. The goroutine ends with the client's own timeouts;
	// the breaker, open after a few failures, bounds how many there are.
	var once sync.Once
	finish := func(err error) {
		once.Do(func() {
			if err != nil && ctx.Err() != nil {
				err = errCallerGone
			}
			done(err)
		})
	}
	cctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
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

// deadline is when the Redis calls of one operation starting now must
// end: all of them together, not each, take at most FallbackTimeout.
func (s *store) deadline() time.Time { return time.Now().Add(s.timeout) }

// get reads key, through the client-side cache when it is on. found is
// false for an absent key; expiresMs is when the client-side copy expires
// (Unix ms), or 0 if unknown.
func (s *store) get(ctx context.Context, deadline time.Time, key string) (val string, found bool, expiresMs int64, err error) {
	// fn may still run after call returned at the deadline: it writes to
	// r, which is read only after a successful call.
	var r struct {
		val       string
		found     bool
		expiresMs int64
	}
	err = s.call(ctx, deadline, func(ctx context.Context, c rueidis.Client) error {
		var res rueidis.RedisResult
		if s.clientT > 0 {
			res = c.DoCache(ctx, c.B().Get().Key(key).Cache(), s.clientT)
		} else {
			res = c.Do(ctx, c.B().Get().Key(key).Build())
		}
		v, err := res.ToString()
		if rueidis.IsRedisNil(err) {
			return nil
		} else if err != nil {
			return err
		}
		r.val, r.found = v, true
		if pxat := res.CachePXAT(); pxat > 0 {
			r.expiresMs = pxat
		}
		return nil
	})
	if err != nil {
		return "", false, 0, err
	}
	return r.val, r.found, r.expiresMs, nil
}

// set writes key for ttl; with nx only if absent (so that a write-back
// never replaces a newer value or a tombstone).
func (s *store) set(ctx context.Context, deadline time.Time, key, val string, ttl time.Duration, nx bool) error {
	return s.call(ctx, deadline, func(ctx context.Context, c rueidis.Client) error {
		err := c.Do(ctx, setCmd(c, key, val, ttl, nx)).Error()
		if rueidis.IsRedisNil(err) { // NX found the key
			return nil
		}
		return err
	})
}

func setCmd(c rueidis.Client, key, val string, ttl time.Duration, nx bool) rueidis.Completed {
	ms := max(ttl.Milliseconds(), 1)
	if nx {
		return c.B().Set().Key(key).Value(val).Nx().PxMilliseconds(ms).Build()
	}
	return c.B().Set().Key(key).Value(val).PxMilliseconds(ms).Build()
}

// setAbsent writes many keys if absent, for Preheat, in pipelined batches.
func (s *store) setAbsent(ctx context.Context, kvs []kv, ttl time.Duration, deadline time.Time) error {
	for len(kvs) > 0 {
		n := min(len(kvs), PreheatBatchMax)
		batch := kvs[:n]
		kvs = kvs[n:]
		d := time.Now().Add(preheatBatchTimeout)
		if !deadline.IsZero() && deadline.Before(d) {
			d = deadline
		}
		if !time.Now().Before(d) {
			return fmt.Errorf("%d keys not written: past their deadline", len(batch)+len(kvs))
		}
		err := s.call(ctx, d, func(ctx context.Context, c rueidis.Client) error {
			cmds := make(rueidis.Commands, 0, len(batch))
			for _, e := range batch {
				cmds = append(cmds, setCmd(c, e.key, e.val, ttl, true))
			}
			for _, r := range c.DoMulti(ctx, cmds...) {
				if err := r.Error(); err != nil && !rueidis.IsRedisNil(err) {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

type kv struct{ key, val string }

// writeBack is a loaded value for Redis, written only if the key is
// absent (nx; false to replace a value that does not decode).
type writeBack struct {
	key, val  string
	ttl       time.Duration
	nx        bool
	queued    time.Time
	fallbacks *atomic.Uint64 // of the entity, counts a write-back not done
}

// queueWriteBack queues w for writeBackLoop; false if the queue is full.
// It never waits.
func (s *store) queueWriteBack(w writeBack) bool {
	select {
	case s.writeBacks <- w:
		return true
	default:
		return false
	}
}

// testHookWriteBack, if set, runs before each batch of write-backs.
var testHookWriteBack atomic.Pointer[func()]

// writeBackLoop writes the queued write-backs, up to WriteBackBatchMax in
// one pipelined round trip, until the store closes. Those still queued
// then are dropped: they only warm Redis.
func (s *store) writeBackLoop() {
	defer s.wg.Done()
	batch := make([]writeBack, 0, WriteBackBatchMax)
	for {
		batch = batch[:0]
		select {
		case <-s.done:
			return
		case w := <-s.writeBacks:
			batch = append(batch, w)
		}
	fill:
		for len(batch) < WriteBackBatchMax {
			select {
			case w := <-s.writeBacks:
				batch = append(batch, w)
			default:
				break fill
			}
		}
		if h := testHookWriteBack.Load(); h != nil {
			(*h)()
		}
		s.writeBatch(batch)
	}
}

// writeBatch writes batch's fresh write-backs, within FallbackTimeout,
// and counts a fallback for each one not written.
func (s *store) writeBatch(batch []writeBack) {
	fresh := make([]writeBack, 0, len(batch))
	for _, w := range batch {
		if time.Since(w.queued) > WriteBackAgeMax {
			w.fallbacks.Add(1)
			continue
		}
		fresh = append(fresh, w)
	}
	if len(fresh) == 0 {
		return
	}
	err := s.call(context.Background(), s.deadline(), func(ctx context.Context, c rueidis.Client) error {
		cmds := make(rueidis.Commands, 0, len(fresh))
		for _, w := range fresh {
			cmds = append(cmds, setCmd(c, w.key, w.val, w.ttl, w.nx))
		}
		for _, r := range c.DoMulti(ctx, cmds...) {
			if err := r.Error(); err != nil && !rueidis.IsRedisNil(err) { // nil: NX found the key
				return err
			}
		}
		return nil
	})
	if err != nil {
		for _, w := range fresh {
			w.fallbacks.Add(1)
		}
	}
}

// invalidate replaces key with a tombstone, which makes Redis tell every
// process that read it to drop it. On failure the key is queued for retry
// and the error returned.
func (s *store) invalidate(ctx context.Context, key string) error {
	err := s.call(ctx, s.deadline(), func(ctx context.Context, c rueidis.Client) error {
		return c.Do(ctx, setCmd(c, key, tombstoneValue, InvalidationHold, false)).Error()
	})
	if err != nil {
		s.queue(key)
	}
	return err
}

func (s *store) queue(key string) {
	select {
	case s.pending <- key:
	default:
		s.log.Error("cache: invalidation dropped: too many waiting for redis; the entry may be served until its ttl",
			"pending_max", PendingInvalidationsMax)
	}
}

// retryPending retries queued invalidations, in order, until each succeeds.
func (s *store) retryPending() {
	defer s.wg.Done()
	for {
		var key string
		select {
		case <-s.done:
			return
		case key = <-s.pending:
		}
		for {
			err := s.call(context.Background(), s.deadline(), func(ctx context.Context, c rueidis.Client) error {
				return c.Do(ctx, setCmd(c, key, tombstoneValue, InvalidationHold, false)).Error()
			})
			if err == nil {
				break
			}
			select {
			case <-s.done:
				return
			case <-time.After(pendingRetryInterval):
			}
		}
	}
}

func (s *store) close() {
	close(s.done)
	s.wg.Wait()
	if cp := s.client.Load(); cp != nil {
		(*cp).Close()
	}
}
