package cache

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/maypok86/otter/v2"
)

// Table caches the values of one entity, of type V, in the entity's scope.
// Values from process memory are shared between callers: never modify
// one. Safe for concurrent use.
type Table[V any] struct {
	c      *Cache
	name   string
	cfg    EntityConfig
	codec  Codec[V]
	mem    *otter.Cache[string, entry[V]] // process scope; memory layer of a shared scope; nil otherwise
	store  *store                         // shared scopes only
	prefix string                         // Namespace + name + ":": the Redis key of key is prefix+key
	size   func(V) int                    // heap bytes of a value (WithSize); nil: counted as 0
	st     counters
}

// EntityOption changes how Entity builds a table.
type EntityOption[V any] func(*Table[V])

// WithSize gives the table the heap bytes that a value takes beyond the
// cache's own EntryOverheadBytes (its struct and what it points to), for
// EntityConfig.BytesMax. size is called on every write to memory and
// must be cheap; it must not modify v. Without it a value counts as 0
// bytes, and BytesMax bounds only the keys and the entries' overhead.
func WithSize[V any](size func(V) int) EntityOption[V] {
	return func(t *Table[V]) { t.size = size }
}

// EntryOverheadBytes is the heap one entry of process memory takes beyond
// its key's bytes and its value's: otter's node with its expiry links,
// the entry, the hash table's slot, the frequency sketch's share, and the
// rounding of the key's allocation. Measured: the heap in use after a GC
// per entry of 20,000, less the key and the value, was 134 to 147 bytes
// for each of surgepay's entities (TestCacheSizeEstimates in engine).
const EntryOverheadBytes = 140

// entry is what memory holds: a value, or a not-found answer.
type entry[V any] struct {
	v         V
	notFound  bool
	expiresMs int64 // Unix ms after which Redis's copy is gone; 0: unknown
}

// Entity returns the table of the named entity (see EntityNames), which
// encodes values for Redis with codec (nil: JSON). It panics if the name
// is unknown or already taken: both are programmer errors.
func Entity[V any](c *Cache, name string, codec Codec[V], opts ...EntityOption[V]) *Table[V] {
	ec, ok := c.cfg.Entities[name]
	if _, retired := RetiredEntities[name]; !ok || retired {
		panic(fmt.Sprintf("cache: unknown entity %q", name))
	}
	if codec == nil {
		codec = JSON[V]()
	}
	t := &Table[V]{c: c, name: name, cfg: ec, codec: codec, prefix: c.cfg.Namespace + name + ":", store: c.stores[ec.Scope]}
	for _, o := range opts {
		o(t)
	}
	switch {
	case ec.Scope == ScopeProcess:
		t.mem = t.newMem(ec.TTL, ec.NegativeTTL)
	case t.store != nil && c.cfg.ClientSideTTL > 0:
		t.mem = t.newMem(min(ec.TTL, c.cfg.ClientSideTTL), min(ec.NegativeTTL, c.cfg.ClientSideTTL))
	}
	c.register(name, t)
	return t
}

func (t *Table[V]) newMem(ttl, negTTL time.Duration) *otter.Cache[string, entry[V]] {
	return otter.Must(&otter.Options[string, entry[V]]{
		MaximumWeight: uint64(t.cfg.BytesMax), //nolint:gosec // G115: Validate keeps BytesMax in 0..BytesMaxLimit
		Weigher:       t.weigh,
		ExpiryCalculator: otter.ExpiryWritingFunc(func(e otter.Entry[string, entry[V]]) time.Duration {
			d := ttl
			if e.Value.notFound {
				d = negTTL
			}
			if ms := e.Value.expiresMs; ms > 0 {
				d = min(d, time.Until(time.UnixMilli(ms)))
			}
			return max(d, time.Nanosecond)
		}),
		// Counted during the deletion itself: OnDeletion would start a
		// goroutine for every deleted entry (otter's default executor),
		// thousands a second under load to add one to a counter.
		OnAtomicDeletion: func(e otter.DeletionEvent[string, entry[V]]) {
			if e.Cause == otter.CauseOverflow {
				t.st.evictions.Add(1)
			}
		},
	})
}

// weigh returns what key's entry counts against BytesMax: the heap bytes
// it takes, and at least BytesMax/EntriesMax, so that no more than
// EntriesMax entries fit either. That share is rounded up: the bytes stay
// within BytesMax, and the entries, when BytesMax is not a multiple of
// EntriesMax, may stop one short of EntriesMax.
func (t *Table[V]) weigh(key string, e entry[V]) uint32 {
	n := int64(EntryOverheadBytes + len(key))
	if t.size != nil && !e.notFound {
		n += int64(t.size(e.v))
	}
	floor := (t.cfg.BytesMax + int64(t.cfg.EntriesMax) - 1) / int64(t.cfg.EntriesMax)
	return uint32(min(max(n, floor), math.MaxUint32))
}

// Name returns the entity's name.
func (t *Table[V]) Name() string { return t.name }

// Scope returns the entity's scope.
func (t *Table[V]) Scope() Scope { return t.cfg.Scope }

// Get returns the value of key: from process memory, else (shared scopes)
// from Redis, else from load, whose result is kept (and, in a shared
// scope, written to Redis for the other processes). Concurrent Gets of one
// key in one process share one load. If Redis fails or is slower than
// FallbackTimeout, load answers and Get still succeeds. Get returns load's
// error, or the not-found error of a negative entry (see WithNotFound).
func (t *Table[V]) Get(ctx context.Context, key string, load func(context.Context) (V, error)) (V, error) {
	if t.mem != nil {
		if e, ok := t.mem.GetIfPresent(key); ok {
			t.st.hits.Add(1)
			return t.answer(key, e)
		}
	}
	switch {
	case t.cfg.Scope == ScopeOff:
		t.st.misses.Add(1)
		e, err := t.load(ctx, key, load)
		return t.answerErr(key, e, err)
	case t.store == nil: // process scope
		t.st.misses.Add(1)
		e, err := t.mem.Get(ctx, key, otter.LoaderFunc[string, entry[V]](func(ctx context.Context, key string) (entry[V], error) {
			return t.load(ctx, key, load)
		}))
		return t.answerErr(key, e, err)
	case t.mem == nil: // shared scope, no memory layer
		e, src, err := t.fetch(ctx, key, load)
		t.count(src)
		return t.answerErr(key, e, err)
	}
	// Shared scope with a memory layer. Only a value read from Redis is
	// kept in memory: Redis tracks that read and will say when the key
	// changes. A loaded value is returned wrapped in untracked, an error,
	// so that otter hands it to the waiting Gets without keeping it.
	e, err := t.memGet(ctx, key, func(ctx context.Context) (entry[V], error) {
		e, src, err := t.fetch(ctx, key, load)
		if err == nil && src != fromRedis {
			return e, &untracked[V]{e}
		}
		return e, err
	})
	if u := (*untracked[V])(nil); errors.As(err, &u) {
		t.st.misses.Add(1)
		return t.answer(key, u.e)
	} else if err != nil {
		t.st.misses.Add(1)
		var zero V
		return zero, err
	}
	t.st.hits.Add(1)
	return t.answer(key, e)
}

// memGet is the memory layer of a shared scope: fn reads Redis (and
// loads) once for concurrent Gets of key. A message from Redis that key
// changed, arriving while fn runs, makes otter discard fn's value. A lost
// connection (every key changed) does not, so memGet drops the value
// itself if one happened meanwhile.
func (t *Table[V]) memGet(ctx context.Context, key string, fn func(context.Context) (entry[V], error)) (entry[V], error) {
	var gen uint64
	owner := false
	e, err := t.mem.Get(ctx, key, otter.LoaderFunc[string, entry[V]](func(ctx context.Context, _ string) (entry[V], error) {
		owner, gen = true, t.store.gen.Load()
		return fn(ctx)
	}))
	if owner && err == nil && t.store.gen.Load() != gen {
		t.mem.Invalidate(key)
	}
	return e, err
}

// untracked carries a loaded value through otter without it being kept.
type untracked[V any] struct{ e entry[V] }

func (*untracked[V]) Error() string { return "cache: loaded value not kept in memory" }

type source int

const (
	fromRedis source = iota
	fromLoader
)

func (t *Table[V]) count(src source) {
	if src == fromRedis {
		t.st.hits.Add(1)
	} else {
		t.st.misses.Add(1)
	}
}

// GetIfPresent returns the value of key from process memory or, in a
// shared scope, from Redis; ok is false if neither has it (or holds a
// negative entry), or if Redis fails. It never loads.
func (t *Table[V]) GetIfPresent(ctx context.Context, key string) (v V, ok bool) {
	var e entry[V]
	switch {
	case t.mem != nil && t.store == nil: // process scope
		e, ok = t.mem.GetIfPresent(key)
	case t.mem != nil:
		e, ok = t.mem.GetIfPresent(key)
		if !ok {
			var err error
			e, err = t.memGet(ctx, key, func(ctx context.Context) (entry[V], error) {
				e, st := t.read(ctx, t.store.deadline(), key)
				if st != readHit {
					return e, otter.ErrNotFound
				}
				return e, nil
			})
			ok = err == nil
		}
	case t.store != nil:
		var st readStatus
		e, st = t.read(ctx, t.store.deadline(), key)
		ok = st == readHit
	}
	if !ok || e.notFound {
		t.st.misses.Add(1)
		return v, false
	}
	t.st.hits.Add(1)
	return e.v, true
}

// Peek returns the value of key if this process's memory holds it (the
// process scope, or a shared scope's memory layer), without asking Redis,
// loading, or counting a hit or a miss: for a background check of what
// memory holds against the source of truth, not for requests.
func (t *Table[V]) Peek(key string) (v V, ok bool) {
	if t.mem == nil {
		return v, false
	}
	e, ok := t.mem.GetIfPresent(key)
	if !ok || e.notFound {
		return v, false
	}
	return e.v, true
}

func (t *Table[V]) answer(key string, e entry[V]) (V, error) {
	if e.notFound {
		var zero V
		return zero, t.c.notFoundErr(t.name, key)
	}
	return e.v, nil
}

func (t *Table[V]) answerErr(key string, e entry[V], err error) (V, error) {
	if err != nil {
		var zero V
		return zero, err
	}
	return t.answer(key, e)
}

// load calls the loader and counts it. A not-found answer becomes a
// negative entry if the entity caches them.
func (t *Table[V]) load(ctx context.Context, key string, load func(context.Context) (V, error)) (entry[V], error) {
	t.st.loads.Add(1)
	v, err := load(ctx)
	switch {
	case err == nil:
		return entry[V]{v: v}, nil
	case t.c.isNotFound(err):
		if t.cfg.NegativeTTL > 0 {
			return entry[V]{notFound: true}, nil
		}
		return entry[V]{}, err
	default:
		t.st.loadErrors.Add(1)
		return entry[V]{}, err
	}
}

type readStatus int

const (
	readHit       readStatus = iota
	readAbsent               // Redis has no entry
	readTombstone            // invalidated less than InvalidationHold ago
	readCorrupt              // an entry the codec cannot read
	readFailed               // Redis failed, timed out or the breaker is open
)

// read gets key from Redis.
func (t *Table[V]) read(ctx context.Context, deadline time.Time, key string) (entry[V], readStatus) {
	val, found, expiresMs, err := t.store.get(ctx, deadline, t.prefix+key)
	switch {
	case err != nil:
		t.st.fallbacks.Add(1)
		return entry[V]{}, readFailed
	case !found:
		return entry[V]{}, readAbsent
	case val == tombstoneValue:
		return entry[V]{}, readTombstone
	case val == notFoundValue:
		return entry[V]{notFound: true, expiresMs: expiresMs}, readHit
	case len(val) > 0 && val[0] == tagValue:
		v, err := t.codec.Unmarshal([]byte(val[1:]))
		if err == nil {
			return entry[V]{v: v, expiresMs: expiresMs}, readHit
		}
		t.c.log.Warn("cache: value in redis does not decode; replacing it", "entity", t.name, "err", err)
	default:
		t.c.log.Warn("cache: value in redis has an unknown tag; replacing it", "entity", t.name)
	}
	return entry[V]{}, readCorrupt
}

// fetch reads key from Redis, else loads it and queues a write-back for
// the other processes: written only if absent, so that neither a newer
// value nor a tombstone is replaced. Nothing is written back after a
// failed read. The caller waits for one Redis call, bounded by
// FallbackTimeout, and for the load, which is not bounded by it; never
// for the write-back (see WriteBackQueueMax).
func (t *Table[V]) fetch(ctx context.Context, key string, load func(context.Context) (V, error)) (entry[V], source, error) {
	// The write-back's age runs from before the Redis read, so before the
	// store read it carries: see WriteBackAgeMax.
	started := time.Now()
	e, st := t.read(ctx, t.store.deadline(), key)
	if st == readHit {
		return e, fromRedis, nil
	}
	e, err := t.load(ctx, key, load)
	if err != nil || st == readFailed || st == readTombstone {
		return e, fromLoader, err
	}
	val, ttl, err := t.encode(e)
	if err != nil {
		t.c.log.Warn("cache: value does not encode; not written to redis", "entity", t.name, "err", err)
		return e, fromLoader, nil
	}
	wb := writeBack{key: t.prefix + key, val: val, ttl: ttl, nx: st != readCorrupt, queued: started, fallbacks: &t.st.fallbacks}
	if !t.store.queueWriteBack(wb) {
		t.st.fallbacks.Add(1)
	}
	return e, fromLoader, nil
}

func (t *Table[V]) encode(e entry[V]) (val string, ttl time.Duration, err error) {
	if e.notFound {
		return notFoundValue, t.cfg.NegativeTTL, nil
	}
	b, err := t.codec.Marshal(e.v)
	if err != nil {
		return "", 0, err
	}
	return string(tagValue) + string(b), t.cfg.TTL, nil
}

// Set stores v as key's value, after the source of truth has been
// written. In a shared scope it replaces the value in Redis, which tells
// the other processes to drop their copies. If Redis fails, the key is
// invalidated as soon as Redis answers again, and the error is returned
// for the log: the caller's write stands.
func (t *Table[V]) Set(ctx context.Context, key string, v V) error {
	switch {
	case t.cfg.Scope == ScopeOff:
		return nil
	case t.store == nil:
		t.mem.Set(key, entry[V]{v: v})
		return nil
	}
	val, ttl, err := t.encode(entry[V]{v: v})
	if err != nil {
		return t.Invalidate(ctx, key)
	}
	t.dropMem(key)
	err = t.store.set(ctx, t.store.deadline(), t.prefix+key, val, ttl, false)
	t.dropMem(key) // a Get may have read the old value meanwhile
	if err != nil {
		t.st.fallbacks.Add(1)
		t.store.queue(t.prefix + key)
		return fmt.Errorf("cache: set %s in redis (invalidation queued): %w", t.name, err)
	}
	return nil
}

// Invalidate drops key, after the source of truth has changed. In a
// shared scope it marks the key invalidated in Redis, which tells the
// other processes to drop their copies. If Redis fails, this is retried
// until Redis answers, and the error is returned for the log.
func (t *Table[V]) Invalidate(ctx context.Context, key string) error {
	t.st.invalidations.Add(1)
	t.dropMem(key)
	if t.store == nil {
		return nil
	}
	err := t.store.invalidate(ctx, t.prefix+key)
	t.dropMem(key)
	if err != nil {
		t.st.fallbacks.Add(1)
		return fmt.Errorf("cache: invalidate %s in redis (queued for retry): %w", t.name, err)
	}
	return nil
}

func (t *Table[V]) dropMem(key string) {
	if t.mem != nil {
		t.mem.Invalidate(key)
	}
}

// Preheat fills the cache with items, typically at start, so that the
// first requests do not miss. In a shared scope it writes to Redis the
// keys Redis does not have yet (pipelined, PreheatBatchMax at a time).
// A Redis that fails or does not answer is not an error: Preheat logs it,
// counts a fallback and returns nil, leaving the cache working, only
// colder. It does not fill the memory layer instead: that layer holds
// only values Redis tracks, so that another process's write reaches it.
// Preheat returns an error only if a value does not encode.
func (t *Table[V]) Preheat(ctx context.Context, items map[string]V) error {
	return t.PreheatRead(ctx, items, time.Now())
}

// PreheatRead is Preheat for items read from the store at readAt (before
// the read began). In a shared scope it writes them only within
// WriteBackAgeMax of readAt, as a write-back: a key invalidated since
// readAt is then still marked (InvalidationHold) and keeps its mark, where
// a value read earlier would put a deleted card back in Redis for its TTL.
// Items read too long ago are skipped (logged, counted as a fallback):
// callers preheating many keys read and preheat them in pages.
func (t *Table[V]) PreheatRead(ctx context.Context, items map[string]V, readAt time.Time) error {
	switch {
	case t.cfg.Scope == ScopeOff:
		return nil
	case t.store == nil:
		for k, v := range items {
			t.mem.Set(k, entry[V]{v: v})
		}
		return nil
	}
	if age := time.Since(readAt); age > WriteBackAgeMax {
		t.st.fallbacks.Add(1)
		t.c.log.Warn("cache: preheat skipped: read from the store too long ago to be written safely",
			"entity", t.name, "scope", string(t.cfg.Scope), "keys", len(items), "age", age.String())
		return nil
	}
	kvs := make([]kv, 0, len(items))
	for k, v := range items {
		val, _, err := t.encode(entry[V]{v: v})
		if err != nil {
			return fmt.Errorf("cache: preheat %s: encode %q: %w", t.name, k, err)
		}
		kvs = append(kvs, kv{key: t.prefix + k, val: val})
	}
	// Every write lands within WriteBackAgeMax of readAt, or not at all.
	if err := t.store.setAbsent(ctx, kvs, t.cfg.TTL, readAt.Add(WriteBackAgeMax)); err != nil {
		t.st.fallbacks.Add(1)
		t.c.log.Warn("cache: preheat skipped: redis unavailable; the first requests read the store",
			"entity", t.name, "scope", string(t.cfg.Scope), "keys", len(kvs), "err", err.Error())
	}
	return nil
}

// stat returns, after the pending evictions are applied (and counted),
// the counters and what process memory holds.
func (t *Table[V]) stat() Stat {
	if t.mem != nil {
		t.mem.CleanUp()
	}
	s := t.st.snapshot(t.name, t.cfg.Scope)
	if t.mem != nil {
		s.Entries, s.Bytes = t.mem.EstimatedSize(), t.mem.WeightedSize()
	}
	return s
}

func (t *Table[V]) scopeOf() Scope { return t.cfg.Scope }

func (t *Table[V]) dropLocal(key string) {
	if t.mem != nil {
		if _, ok := t.mem.Invalidate(key); ok {
			t.st.invalidations.Add(1)
		}
	}
}

func (t *Table[V]) dropLocalAll() {
	if t.mem != nil {
		t.mem.InvalidateAll()
	}
}
