package cache

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
)

// ErrNotFound is what a negative entry answers by default, and what a
// loader may return to say the key does not exist (see WithNotFound).
var ErrNotFound = errors.New("not found")

// Cache holds the entities' tables and the Redis clients of the shared
// scopes. Safe for concurrent use.
type Cache struct {
	cfg         Config
	log         *slog.Logger
	isNotFound  func(error) bool
	notFoundErr func(entity, key string) error
	stores      map[Scope]*store // only the scopes some entity uses

	mu     sync.RWMutex
	tables []table          // in registration order
	byName map[string]table // entity name → table
	closed bool
}

// table is what the Cache needs of a *Table[V] of any V.
type table interface {
	stat() Stat
	scopeOf() Scope
	dropLocal(key string) // Redis said key changed
	dropLocalAll()        // Redis said: trust nothing
}

// Option changes how New builds a Cache.
type Option func(*Cache)

// WithLogger sets the logger of Redis outages and dropped invalidations.
// Default: discard.
func WithLogger(l *slog.Logger) Option { return func(c *Cache) { c.log = l } }

// WithNotFound tells the cache how loaders say "no such key" (is) and what
// a negative entry answers (errFor), for entities with a NegativeTTL.
// Default: errors.Is(err, ErrNotFound), and an error wrapping ErrNotFound.
func WithNotFound(is func(error) bool, errFor func(entity, key string) error) Option {
	return func(c *Cache) { c.isNotFound, c.notFoundErr = is, errFor }
}

// New validates cfg and returns a cache. Redis clients are built for the
// scopes that some entity uses; an unreachable Redis is not an error: the
// cache falls back to the loaders until it answers, and logs it.
func New(cfg Config, opts ...Option) (*Cache, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Cache{cfg: cfg, log: slog.New(slog.DiscardHandler), byName: map[string]table{}, stores: map[Scope]*store{},
		isNotFound: func(err error) bool { return errors.Is(err, ErrNotFound) },
		notFoundErr: func(entity, key string) error {
			return fmt.Errorf("%s %q: %w", entity, key, ErrNotFound)
		}}
	for _, o := range opts {
		o(c)
	}
	for _, name := range cfg.retiredSet() {
		c.log.Warn("cache: config cache.entities."+name+" is ignored: nothing is cached under this name; remove the section",
			"reason", RetiredEntities[name])
	}
	for _, scope := range []Scope{ScopeServer, ScopeGlobal} {
		if !c.uses(scope) {
			continue
		}
		s, err := newStore(scope, cfg, c.log, func(keys []string) { c.dropped(scope, keys) })
		if err != nil {
			c.Close()
			return nil, err
		}
		c.stores[scope] = s
	}
	return c, nil
}

func (c *Cache) uses(scope Scope) bool {
	for name, e := range c.cfg.Entities {
		if _, retired := RetiredEntities[name]; !retired && e.Scope == scope {
			return true
		}
	}
	return false
}

// Config returns the configuration in force, defaults filled in.
func (c *Cache) Config() Config { return c.cfg.withDefaults() }

// dropped routes Redis's invalidation messages of one scope to the
// tables' memory layers. keys nil means every entry of the scope.
func (c *Cache) dropped(scope Scope, keys []string) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if keys == nil {
		for _, t := range c.tables {
			if t.scopeOf() == scope {
				t.dropLocalAll()
			}
		}
		return
	}
	for _, k := range keys {
		rest, ok := strings.CutPrefix(k, c.cfg.Namespace)
		if !ok {
			continue
		}
		name, key, ok := strings.Cut(rest, ":")
		if !ok {
			continue
		}
		if t := c.byName[name]; t != nil && t.scopeOf() == scope {
			t.dropLocal(key)
		}
	}
}

// Stats returns every entity's counters, in the order Entity was called.
func (c *Cache) Stats() []Stat {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]Stat, 0, len(c.tables))
	for _, t := range c.tables {
		out = append(out, t.stat())
	}
	return out
}

// Close stops retrying invalidations and closes the Redis clients.
// Invalidations still waiting for Redis are dropped. Tables must not be
// used after Close.
func (c *Cache) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	c.mu.Unlock()
	for _, s := range c.stores {
		s.close()
	}
}

func (c *Cache) register(name string, t table) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byName[name]; ok {
		panic(fmt.Sprintf("cache: entity %q registered twice", name))
	}
	c.byName[name] = t
	c.tables = append(c.tables, t)
}
