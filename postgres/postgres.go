// Package postgres is the PostgreSQL implementation of surgepay.Store, the
// production store: several surgepay nodes may share one database.
//
// Writes are group-committed (package groupcommit): Config.Writers
// committers each take up to Config.BatchSizeMax queued Writes and store
// them in one transaction, pipelined with pgx.Batch so that a batch costs
// one to three round trips however many Writes it holds, BEGIN and COMMIT
// included (see DB.Apply). Reads are single statements on a bounded
// pgxpool; statements are prepared once per connection and cached.
//
// Limits, stated plainly:
//   - Times are stored as timestamptz, which holds microseconds: they are
//     truncated to the microsecond on write and read back in UTC. Times
//     inside a payment's transactions (jsonb) keep nanoseconds.
//   - There are no foreign keys (see migrations/0001_init.sql): the store
//     guards versions and idempotency keys, not references between rows.
//   - A Write whose guard fails inside a batch may, for the duration of that
//     batch, have held its idempotency key: a concurrent Write in the same
//     batch with the same key then fails with idempotency_key_exists even
//     though the first Write stored nothing. Retrying it succeeds.
//   - If the connection breaks while COMMIT is in flight, the outcome is
//     unknown: Apply returns EUNAVAILABLE with Reason
//     "commit_outcome_unknown". Every Write is safe to replay (inserts use
//     fresh IDs, updates are version-guarded, idempotency keys are unique),
//     so a replay cannot apply twice, but it may report a conflict.
//   - ListPayments filters on created by scanning the merchant's payments in
//     ID order; there is no index on created.
//   - The embedded stage (surgepay.StagedStore, see stage.go) is the table
//     staged_captures, a queue: rows are inserted at one end of the key and
//     deleted at the other, and autovacuum reclaims them. StagedBacklog
//     counts the table, a scan of the backlog.
//
// A sale (payment, perhaps an idempotency record and a staged capture,
// nothing else but events) is ONE statement of data-modifying CTEs, and a
// batch of them without events one round trip; its events are a second
// statement. The analytics counters of a whole batch are one more
// statement, sent in its last round with COMMIT; a sale that carries
// deltas runs in the rounds before, so a batch of sales without events is
// two round trips when analytics are on (see analytics.go).
package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"runtime"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/groupcommit"
)

// Config configures a DB. The zero value of every field but DSN is valid.
type Config struct {
	// DSN is a PostgreSQL connection string, URL or key=value form. Required.
	// It may hold a password: it is never printed.
	DSN string
	// Schema, if set, is created if missing and made the connections'
	// search_path, so that several stores can share one database. It must be
	// a lower-case SQL identifier. Default: the search_path of the DSN.
	Schema string
	// PoolConnsMax bounds the connection pool, readers and committers
	// together. It must exceed Writers. Default: Writers + max(4, NumCPU).
	PoolConnsMax int32
	// BatchSizeMax is the most Writes committed in one transaction.
	// Default 256 (groupcommit's default).
	BatchSizeMax int
	// QueueDepthMax is the most Writes waiting to commit; Apply fails fast
	// with EUNAVAILABLE beyond it. Default 4096 (groupcommit's default).
	QueueDepthMax int
	// QueueDelayTarget, if positive, is the queueing delay of a standing
	// queue at which Overloaded answers true for a growing share of calls
	// (groupcommit's DelayTarget, over windows of ten times it). 0: never.
	QueueDelayTarget time.Duration
	// FlushInterval is how long a committer lingers for a partial batch to
	// fill. Default 0: commit what is queued at once.
	FlushInterval time.Duration
	// Writers is the number of concurrent group committers, each holding
	// one connection while it commits. Default 4.
	Writers int
	// OnBatch, if set, observes every group commit (size, commit time).
	OnBatch func(size int, d time.Duration)
	// Tracer, if set, traces every query (otelpgx from package telemetry).
	Tracer pgx.QueryTracer
	// HungAfter is how long the database may leave a ping unanswered
	// before the store takes it as down: it then refuses statements at
	// once with EUNAVAILABLE store_unavailable and cancels those in
	// flight, until a ping is answered again (see live.go). Default
	// HungAfterDefault (1 s); negative: no watch (a hung database holds
	// each statement until its caller's context ends).
	HungAfter time.Duration
	// Log, if set, receives the database's changes of state (down, up
	// again with the statements refused meanwhile). Default: discarded.
	Log *slog.Logger
}

// Limits of the package. Each bounds a wait or a loop.
const (
	// WritersDefault is the default number of concurrent committers.
	WritersDefault = 4
	// commitTimeout bounds one batch transaction, all round trips included.
	// A batch outlives its callers' contexts (groupcommit: once queued, a
	// write goes ahead), so it needs a bound of its own.
	commitTimeout = 30 * time.Second
	// soloAttemptsMax bounds the attempts at one Write retried alone after
	// its batch failed, for deadlocks and serialization failures.
	soloAttemptsMax = 3
	// ConnectTimeoutDefault bounds opening one connection when the DSN
	// sets no connect_timeout: a database that does not answer is a fast
	// 503 store_unavailable, not a request held for the operating
	// system's TCP timeout (minutes).
	ConnectTimeoutDefault = 3 * time.Second
	// migrateTimeout bounds the migration transaction, lock wait included.
	migrateTimeout = 2 * time.Minute
	// hungAfterMin is the shortest HungAfter: a ping every 25 ms at most,
	// answered within 75 ms (a loaded database on one host can take that).
	hungAfterMin = 100 * time.Millisecond
)

var schemaPattern = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

func (c Config) withDefaults() Config {
	if c.Writers <= 0 {
		c.Writers = WritersDefault
	}
	if c.HungAfter == 0 {
		c.HungAfter = HungAfterDefault
	}
	if c.PoolConnsMax <= 0 {
		c.PoolConnsMax = int32(c.Writers + max(4, runtime.NumCPU())) //nolint:gosec // G115: a wrapped value does not exceed Writers, which Validate rejects
	}
	return c
}

// Validate checks c, with defaults applied, and returns an error naming the
// offending field.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.DSN == "":
		return errors.New("postgres: DSN is required")
	case c.Schema != "" && !schemaPattern.MatchString(c.Schema):
		return fmt.Errorf("postgres: Schema %q must match %s", c.Schema, schemaPattern)
	case int(c.PoolConnsMax) <= c.Writers:
		return fmt.Errorf("postgres: PoolConnsMax (%d) must exceed Writers (%d), or reads wait for commits",
			c.PoolConnsMax, c.Writers)
	case c.BatchSizeMax < 0 || c.QueueDepthMax < 0 || c.FlushInterval < 0:
		return errors.New("postgres: BatchSizeMax, QueueDepthMax and FlushInterval must not be negative")
	case c.HungAfter > 0 && c.HungAfter < hungAfterMin:
		return fmt.Errorf("postgres: HungAfter (%v) must be at least %v, or negative (no watch)", c.HungAfter, hungAfterMin)
	}
	return nil
}

// DB is a surgepay.Store on PostgreSQL. Safe for concurrent use.
type DB struct {
	pool      *livePool
	opPool    *livePool // the operators' searches (OperatorConnsMax)
	live      *liveness
	committer *groupcommit.Committer[*surgepay.Write]
	stopWatch context.CancelFunc // nil without a watch
	watchDone chan struct{}
}

var _ surgepay.Store = (*DB)(nil)
var _ surgepay.PaymentByRefFinder = (*DB)(nil)
var _ surgepay.CredentialsGenerationReader = (*DB)(nil)

// Open connects, applies pending migrations and starts the committers.
func Open(ctx context.Context, cfg Config) (*DB, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	pcfg, err := pgxpool.ParseConfig(cfg.DSN)
	if err != nil {
		// pgx's message may quote the DSN, password included.
		return nil, errors.New("postgres: cannot parse DSN")
	}
	pcfg.MaxConns = cfg.PoolConnsMax
	if pcfg.ConnConfig.ConnectTimeout == 0 { // the DSN's connect_timeout wins
		pcfg.ConnConfig.ConnectTimeout = ConnectTimeoutDefault
	}
	if cfg.Schema != "" {
		pcfg.ConnConfig.RuntimeParams["search_path"] = cfg.Schema
	}
	if cfg.Tracer != nil {
		pcfg.ConnConfig.Tracer = cfg.Tracer
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: connect: %w", err)
	}
	if err := migrate(ctx, pool, cfg.Schema, cfg.Log); err != nil {
		pool.Close()
		return nil, err
	}
	// Connections made before an outage may lead to a server that is no
	// longer the primary, or be broken: the pool starts afresh when the
	// database answers again.
	// The operators' searches have a pool of their own, so that they
	// never take the API's connections (issue 38).
	scfg := pcfg.Copy()
	scfg.MaxConns = surgepay.OperatorConnsMax
	search, err := pgxpool.NewWithConfig(ctx, scfg)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: connect: %w", err)
	}
	live := newLiveness(cfg.Log, func() { pool.Reset(); search.Reset() })
	db := &DB{pool: &livePool{pool: pool, live: live}, opPool: &livePool{pool: search, live: live}, live: live}
	if cfg.HungAfter > 0 {
		probe := pcfg.ConnConfig.Copy()
		probe.Tracer = nil // the probe's pings are not the requests' statements
		var wctx context.Context
		wctx, db.stopWatch = context.WithCancel(context.Background())
		db.watchDone = make(chan struct{})
		go func() { defer close(db.watchDone); db.watch(wctx, probe, cfg.HungAfter) }()
	}
	db.committer = groupcommit.New(groupcommit.Config{
		BatchSizeMax:  cfg.BatchSizeMax,
		QueueDepthMax: cfg.QueueDepthMax,
		FlushInterval: cfg.FlushInterval,
		Writers:       cfg.Writers,
		OnBatch:       cfg.OnBatch,
		DelayTarget:   cfg.QueueDelayTarget,
	}, db.commit)
	return db, nil
}

// Close commits the queued Writes, then closes the pool. Apply after Close
// returns EUNAVAILABLE.
func (db *DB) Close() error {
	db.committer.Close()
	if db.stopWatch != nil {
		db.stopWatch()
		<-db.watchDone
	}
	db.pool.Close()
	db.opPool.Close()
	return nil
}

// CommitStats returns the group committer's running totals.
func (db *DB) CommitStats() groupcommit.Stats { return db.committer.Stats() }

// QueueDepth returns the number of Writes waiting to commit.
func (db *DB) QueueDepth() int { return db.committer.QueueDepth() }

// Overloaded reports whether the committers' queue stands above
// Config.QueueDelayTarget (groupcommit.Committer.Overloaded).
func (db *DB) Overloaded() bool { return db.committer.Overloaded() }
