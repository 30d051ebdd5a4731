package cache

import "sync/atomic"

// Stat is a snapshot of one entity's counters, for a metrics collector.
// Every counter only grows; Entries and Bytes are gauges.
type Stat struct {
	Entity string
	Scope  Scope
	// Entries and Bytes are what process memory holds now: the entries,
	// and what they count against EntityConfig.BytesMax (see WithSize).
	// Both 0 without process memory (scope off, or a shared scope with
	// client_side_ttl 0).
	Entries int
	Bytes   uint64
	// Hits counts Gets answered without their loader: from process memory,
	// or from Redis in a shared scope (a negative entry counts too).
	Hits uint64
	// Misses counts Gets that called their loader or waited for a
	// concurrent Get's load of the same key.
	Misses uint64
	// Loads counts loader calls; LoadErrors those that failed (a
	// not-found answer is not an error).
	Loads      uint64
	LoadErrors uint64
	// Evictions counts entries dropped from process memory to respect
	// EntriesMax and BytesMax.
	Evictions uint64
	// Invalidations counts entries dropped because they changed: by
	// Invalidate or Set here, or by a message from Redis that another
	// process changed them (shared scopes).
	Invalidations uint64
	// Fallbacks counts Redis calls that failed, timed out or were skipped
	// while the circuit breaker was open: the loader answered instead, a
	// write was queued for retry, or a preheat or a miss's write-back was
	// not done. A write-back dropped because its queue was full, or too
	// old to write, counts too.
	Fallbacks uint64
}

type counters struct {
	hits, misses, loads, loadErrors, evictions, invalidations, fallbacks atomic.Uint64
}

func (c *counters) snapshot(entity string, scope Scope) Stat {
	return Stat{Entity: entity, Scope: scope, Hits: c.hits.Load(), Misses: c.misses.Load(),
		Loads: c.loads.Load(), LoadErrors: c.loadErrors.Load(), Evictions: c.evictions.Load(),
		Invalidations: c.invalidations.Load(), Fallbacks: c.fallbacks.Load()}
}
