package engine

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/surgepay/surgepay"
)

// Bounds of the in-memory record of API key use.
const (
	// KeyUseFlushIntervalDefault is how often RunKeyUseFlusher writes
	// last-used times: a key's "last used" is at most this stale on the
	// node that served it (plus the time to the next flush on others).
	KeyUseFlushIntervalDefault = time.Minute
	// keyUseResolution: a use within this of the recorded one is not
	// recorded again, so a busy key costs a map read per request, not a
	// write.
	keyUseResolution = time.Second
	// keyUsesMax bounds the keys remembered between flushes; uses of
	// further keys are dropped until the next flush (and counted).
	keyUsesMax = 100_000
	// keyUseFinalFlushTimeout bounds the flush when the flusher stops, so
	// a store that does not answer cannot hold up a shutdown.
	keyUseFinalFlushTimeout = 5 * time.Second
)

// keyUses remembers when each key was last used since the last flush.
// "Last used" must not cost a statement per request (docs/api-keys.md):
// a request records in memory, a background flush writes every key used
// since in one Write per APIKeysUsedPerWriteMax keys. Safe for concurrent
// use.
type keyUses struct {
	m       sync.Map // key ID -> time.Time
	n       atomic.Int64
	dropped atomic.Int64
}

func newKeyUses() *keyUses { return &keyUses{} }

func (u *keyUses) record(id string, at time.Time) {
	if v, ok := u.m.Load(id); ok {
		if at.Sub(v.(time.Time)) < keyUseResolution {
			return
		}
		u.m.Store(id, at) // a racing older Store is at most keyUseResolution off
		return
	}
	if u.n.Load() >= keyUsesMax {
		u.dropped.Add(1)
		return
	}
	if _, loaded := u.m.LoadOrStore(id, at); !loaded {
		u.n.Add(1)
	}
}

// take removes and returns up to limit recorded uses.
func (u *keyUses) take(limit int) []surgepay.APIKeyUse {
	var out []surgepay.APIKeyUse
	u.m.Range(func(k, v any) bool {
		if u.m.CompareAndDelete(k, v) {
			u.n.Add(-1)
			out = append(out, surgepay.APIKeyUse{ID: k.(string), At: v.(time.Time)})
		}
		return len(out) < limit
	})
	return out
}

// FlushKeyUses writes the last-used times recorded since the last flush,
// in Writes of at most APIKeysUsedPerWriteMax keys. Uses it could not
// write are recorded again for the next flush.
func (e *Engine) FlushKeyUses(ctx context.Context) error {
	for {
		batch := e.uses.take(surgepay.APIKeysUsedPerWriteMax)
		if len(batch) == 0 {
			return nil
		}
		// In ID order, as the stores lock them (see postgres sqlAPIKeysUsed).
		slices.SortFunc(batch, func(a, b surgepay.APIKeyUse) int { return strings.Compare(a.ID, b.ID) })
		if err := e.store.Apply(ctx, &surgepay.Write{APIKeysUsed: batch}); err != nil {
			for _, b := range batch {
				e.uses.record(b.ID, b.At)
			}
			return err
		}
		if len(batch) < surgepay.APIKeysUsedPerWriteMax {
			return nil
		}
	}
}

// RunKeyUseFlusher flushes key uses every interval (<= 0: the default)
// until ctx ends, then once more, so a clean stop loses none.
func (e *Engine) RunKeyUseFlusher(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = KeyUseFlushIntervalDefault
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), keyUseFinalFlushTimeout)
			if err := e.FlushKeyUses(fctx); err != nil {
				e.log.Warn("flush API key last-used times at stop", "err", err.Error())
			}
			cancel()
			return
		case <-t.C:
			if err := e.FlushKeyUses(ctx); err != nil {
				e.log.Warn("flush API key last-used times; kept for the next flush", "err", err.Error())
			}
			if n := e.uses.dropped.Swap(0); n > 0 {
				e.log.Warn("API key uses not recorded: too many keys between flushes", "dropped", n, "max", keyUsesMax)
			}
		}
	}
}
