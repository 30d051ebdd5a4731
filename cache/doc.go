// Package cache is surgepay's scoped cache for data that rarely changes:
// API keys, customers, payment methods and idempotency records (merchant
// settings and tax rates are held in memory by their owners, and no
// request reads a merchant: see RetiredEntities). Each entity is configured in one place (Config,
// the [cache] section of the config file) with a scope:
//
//   - process: in this process's memory (otter), bounded by EntriesMax
//     and BytesMax, expiring after TTL. Concurrent misses of one key share one load.
//   - server: in the Redis shared by the processes of one host (a unix
//     socket), plus a memory layer in each process.
//   - global: in the Redis shared by all hosts (standalone, Sentinel or
//     Cluster), plus a memory layer in each process.
//   - off: not cached.
//
// Every key a shared scope writes is Namespace + entity + ":" + key, so
// one Redis can serve several deployments and a new value encoding can be
// rolled out under a new namespace.
//
// A shared-scope Get looks in process memory, then in Redis, then calls
// its loader and queues the value's write-back to Redis, which a
// background loop writes in pipelined batches (WriteBackQueueMax,
// WriteBackBatchMax). Memory holds only values
// read from Redis with client-side caching (rueidis DoCache): Redis
// remembers the read and sends an invalidation when the key changes, so
// a Set or Invalidate in one process reaches the memory of every other
// process within a network round trip. A lost connection drops the memory
// layer of its scope.
//
// Redis is an accelerator, never a dependency: a Get makes one Redis
// call, bounded by FallbackTimeout (50ms by default, at most 100ms), and
// never waits for its write-back; a call that fails or overruns falls
// back to the loader and counts a fallback, and the request succeeds.
// Preheat with Redis down or hung is logged and counted, not an error. The caller
// leaves at the deadline even while the client reconnects to a hung
// Redis. After 5 consecutive failures a circuit breaker skips Redis for
// BreakerOpenDuration, so an outage costs no timeout per request.
//
// # Limits
//
// The consistency model is "invalidate after write, bounded by TTL":
//
//   - Process scope is per process. Invalidate and Set reach only this
//     process's memory: another process serves its copy until TTL. Use a
//     shared scope for data that must change everywhere at once.
//   - A write invalidates other processes' memory asynchronously (one
//     push message), not atomically: a read on another host racing the
//     write can still return the old value once.
//   - A loader that read the store before a write can write the old value
//     back to Redis after the write's invalidation. Invalidations leave a
//     tombstone for InvalidationHold (2s) that write-backs do not replace,
//     which closes that race for loads faster than about 0.9s (a
//     write-back lands at most WriteBackAgeMax plus FallbackTimeout after
//     its load); TTL bounds the rest.
//   - While Redis is unreachable, invalidations are queued (at most
//     PendingInvalidationsMax) and retried until Redis answers. A Redis
//     that comes back with its old data (persistence, a promoted replica)
//     may serve it until the queue has drained; a dropped invalidation
//     (queue full) leaves the old value until TTL.
//   - Process memory is bounded by EntriesMax and BytesMax per entity
//     (BytesMax counts what WithSize says of each value); Redis only by
//     its own maxmemory policy (use allkeys-lru or volatile-lru: every key
//     the cache writes has a TTL).
//   - Values held in process memory are shared: callers must not modify
//     them.
package cache
