// Package sqlite is the embedded default surgepay.Store, on one SQLite
// database file (modernc.org/sqlite, pure Go).
//
// Limits, admitted:
//   - The SQLite store serialises writes. One connection writes, driven by
//     one group-commit writer (package groupcommit): concurrent Applies wait
//     in a bounded queue (Config.QueueDepthMax; beyond it Apply fails fast
//     with EUNAVAILABLE) and are committed up to Config.BatchSizeMax per
//     transaction, each in its own savepoint so a failed guard undoes only
//     its own Write. Write throughput is bounded by one core and one fsync
//     per batch, not per Write.
//   - Durability is WAL with synchronous=FULL: a batch is durable when its
//     COMMIT returns, after one fsync of the WAL. A power loss loses no
//     acknowledged Write; it may lose a batch whose callers were not yet
//     answered.
//   - Reads run on a pool of Config.ReadConnsMax query_only connections and
//     see the last committed batch (WAL snapshot isolation); they never block
//     the writer or each other.
//   - One serving process. A second process may write the same file (surgepay
//     settle beside surgepay serve on the embedded stage); the two writers
//     then take turns at SQLite's one write lock (see Config.WriteLockRetryMax).
//   - Times are stored as Unix nanoseconds: years 1678 to 2262.
//
// The DB is also the embedded stage (surgepay.StagedStore, see stage.go).
// A sale's Write (payment, perhaps an idempotency record and a staged
// capture, nothing else but events) is ONE statement, an INSERT into the
// view sales whose trigger writes the rows (migrations/0003_sale.sql); its
// events are a second. On SQLite this is a matter of the statement budget,
// not of speed: on the writer, one statement and three cost the same CPU
// (about 28 µs a Write, commit included, measured on a 2-core machine),
// since SQLite runs in process and the b-tree work is the same. The
// analytics counters of a whole batch are one more statement, before its
// COMMIT (see analytics.go).
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // database/sql driver "sqlite"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/groupcommit"
	"github.com/surgepay/surgepay/internal/contract"
)

// Config configures a DB. Zero values take the defaults.
type Config struct {
	// Path is the database file; it and its -wal and -shm companions are
	// created if missing. Required.
	Path string
	// BatchSizeMax is the most Writes committed in one transaction.
	// Default BatchSizeMaxDefault.
	BatchSizeMax int
	// ApplyBudget is how long a transaction of the writer takes Writes in:
	// once it has run this long, it commits the Writes it has applied and
	// the rest of its batch leads the next one. Default ApplyBudgetDefault;
	// negative: no budget (BatchSizeMax alone bounds a batch).
	ApplyBudget time.Duration
	// QueueDepthMax is the most Writes waiting for the writer; beyond it
	// Apply returns EUNAVAILABLE at once. Default 4096.
	QueueDepthMax int
	// QueueDelayTarget, if positive, is the queueing delay of a standing
	// queue at which Overloaded answers true for a growing share of calls
	// (groupcommit's DelayTarget, over windows of ten times it). 0: never.
	QueueDelayTarget time.Duration
	// FlushInterval is how long the writer lingers for a partial batch to
	// fill. Default 0: commit what is queued at once (batches still grow with
	// load, from the Writes that arrive during a commit).
	FlushInterval time.Duration
	// ReadConnsMax is the size of the read connection pool. Default 4.
	ReadConnsMax int
	// BusyTimeout is how long a connection waits for a lock held by another
	// connection before failing with SQLITE_BUSY. Default 5s.
	BusyTimeout time.Duration
	// CheckpointInterval is how often a background connection copies the
	// WAL into the database file. Default 10ms.
	CheckpointInterval time.Duration
	// MmapSize is how many bytes of the database file every connection
	// reads through a memory map instead of read(2). Default
	// MmapSizeDefault; negative turns the map off. SQLite caps it at
	// MmapSizeDefault.
	MmapSize int64
	// WriteLockRetryMax is the longest the writer sleeps between tries of
	// SQLite's write lock while another process holds it (surgepay settle
	// writing the file that surgepay serve writes). Tries start
	// writeLockRetryMin apart and back off to it, for up to BusyTimeout.
	// When the lock is released, the process that tries soonest takes it,
	// so the process to favour keeps the default and the other sets
	// WriteLockRetryYield. Default WriteLockRetryMaxDefault.
	WriteLockRetryMax time.Duration
	// WALPagesMax is the WAL's size, in pages, at which the writer
	// checkpoints it itself after a commit (SQLite's wal_autocheckpoint):
	// the bound on the WAL should the background checkpoints fall behind.
	// The writer restarts the WAL well before (at a quarter of it, at most
	// walRestartFrames) once a background checkpoint has copied it all
	// (checkpoint.go). Default WALPagesMaxDefault.
	WALPagesMax int
	// PageSize is the page size, in bytes, of a database file that Open
	// creates: a power of two from 512 to 65536. A file that exists keeps
	// the page size it was created with (SQLite cannot change it in WAL
	// mode). Default PageSizeDefault.
	PageSize int
	// IdempotencyTableMax is how many idempotency keys the writer indexes
	// in memory before it merges them, in hash order, into the database's
	// index (see idemindex.go). Default IdempotencyTableMaxDefault.
	IdempotencyTableMax int
	// IdempotencyRunsMax is how many runs idempotency_index holds at most
	// (migration 0013): each merge of a memory table appends a run, and a
	// lookup that reaches the index probes every run. Past it, a merge goes
	// into the newest run. Default IdempotencyRunsMaxDefault.
	IdempotencyRunsMax int
	// IdempotencyFilterKeys is how many idempotency keys the first filter
	// of stored keys holds at about 1 % false positives (idemfilter.go):
	// sized ahead, so that no rebuild runs during an event it fits. A
	// store with more keys already gets a filter for half as many again.
	// At most IdempotencyFilterKeysLimit. Default
	// IdempotencyFilterKeysDefault.
	IdempotencyFilterKeys int
	// CustomerMergeRows is how many payments the writer indexes by
	// customer in one merge into payments_by_customer (custindex.go): the
	// most a list by customer scans beyond that index. Default
	// CustomerMergeRowsDefault.
	CustomerMergeRows int
	// OnBatch, if set, observes every group commit (size, commit time).
	OnBatch func(size int, d time.Duration)
	// Logger, if set, gets a warning for a group commit that took over
	// SlowCommit, with its phases (commitphases.go), at most one per 10 s.
	Logger *slog.Logger
	// SlowCommit is the commit time that Logger is warned of. Default
	// SlowCommitDefault.
	SlowCommit time.Duration
	// OnSlowCommit, if set, is called after every group commit that took
	// over SlowCommit (logged or not), on the writer's goroutine: it must
	// not wait (serve's flight recorder).
	OnSlowCommit func()
}

// Defaults and ceilings of Config.
const (
	ReadConnsDefault   = 4
	ReadConnsMax       = 64
	BusyTimeoutDefault = 5 * time.Second
	// BatchSizeMaxDefault is the default Config.BatchSizeMax. A batch's
	// writers are woken together when it commits, and on 2 cores 256 of
	// them (a batch after any pause) queued for a CPU behind each other
	// and the next batch's apply: at 2,700 sales/s the median second's
	// p99 was 63-72 ms with 256, 46 with 128 and 43 with 64, for about 5
	// % more bytes written per sale (bench/RESULTS.md, issue 14 session
	// 11). Under a backlog 128 writes took 10-20 ms of the writer's CPU to
	// apply, past the 10 ms after which Go preempts a goroutine and puts it
	// on the global run queue, behind every goroutine the network readied:
	// the applies that waited 0.2-0.5 s for a core were such (session 13).
	// 64 keeps an apply under 10 ms on this machine's slow hours: after a
	// 2 s pause at 3,000/s, 8,775 and 4,196 refused against 9,429 and 7,105
	// with 128, at the same bytes written per sale.
	BatchSizeMaxDefault = 64
	// ApplyBudgetDefault is the default Config.ApplyBudget. Go's scheduler
	// preempts a goroutine that has run 10 ms and puts it on the global run
	// queue, behind every goroutine the network readied meanwhile: on 2
	// cores in a backlog, hundreds, and a preempted writer waited 0.1-0.5 s
	// for a core while every request waited on it (bench/RESULTS.md, issue
	// 14 session 13). A budget of half that keeps the writer's run short of
	// it on any host, however slow its hour, where a batch size alone holds
	// on the host it was measured on.
	ApplyBudgetDefault = 5 * time.Millisecond
	// CheckpointIntervalDefault is the default Config.CheckpointInterval.
	// A checkpoint writes each page the WAL holds once, however many
	// commits rewrote it since the last one: every 10 ms that was nearly
	// every frame again (4.7 KB per sale at 3,000/s); every 250 ms it is
	// the new rows and little more (2.9 KB), at the same p99 (issue 14,
	// bench/RESULTS.md).
	CheckpointIntervalDefault = 250 * time.Millisecond
	// MmapSizeDefault is the default Config.MmapSize, and the most the
	// SQLite of modernc.org/sqlite maps (its SQLITE_MAX_MMAP_SIZE,
	// 0x7fff0000 bytes): the first 2 GiB of the file. Reading pages
	// through the map rather than read(2) took the writer's CPU per sale
	// from 214 to 190 µs and the median second's p99 at 5,000 sales/s over
	// 600,000 sales from 18-100 ms to 15-38 ms (bench/RESULTS.md). A read
	// error of the disk under the map is a SIGBUS, which ends the process,
	// where read(2) would return an error: a database on a failing disk
	// stops the server either way.
	MmapSizeDefault = 0x7fff0000
	// PageSizeDefault is the default Config.PageSize. Every group commit
	// writes each page it changed, whole, to the WAL: the last leaf of
	// each table and index a sale appends to, whatever the few hundred
	// bytes the sales put there. Half the page, half those bytes: at
	// 3,000 sales/s 2 KiB pages wrote 10.0 KB per sale where 4 KiB wrote
	// 12.8 KB (two pairs, same hour), the writer's CPU per sale the same
	// within noise (56-60 against 56-58 µs), 6 % more bytes stored; 1 KiB
	// wrote no less (10.2 KB), took 22 % more of the writer's CPU, and
	// stored 50 % more (a payment's row overflows a 1 KiB page)
	// (bench/RESULTS.md, issue 14 session 17).
	PageSizeDefault = 2048
	// WriteLockRetryMaxDefault is the default Config.WriteLockRetryMax.
	//
	// SQLite's own busy handler (busy_timeout) sleeps 1, 2, 5, 10, 15, 20,
	// 25 ... then 100 ms between tries. Beside a second writer that is
	// unfair to the busier one: while serve's writer slept up to 100 ms,
	// settle took the lock again and again and serve's write queue grew.
	// Polling instead (with settle's batch interval) took the API's p99 at
	// 3,000 sales/s with settle keeping up from 400-700 ms to 140-210 ms
	// (bench/RESULTS.md). One try is a few microseconds.
	WriteLockRetryMaxDefault = 250 * time.Microsecond
	// WriteLockRetryYield is the Config.WriteLockRetryMax of a process that
	// gives way to another writer of the same file: surgepay settle, which
	// takes the lock in the gaps between serve's commits.
	WriteLockRetryYield = 5 * time.Millisecond
	// writeLockRetryMin is the first sleep between tries of the write lock.
	writeLockRetryMin = 20 * time.Microsecond

	// eventsPerWriteMax bounds Write.Events: events are one multi-row INSERT
	// and SQLite binds at most 32766 parameters to a statement.
	eventsPerWriteMax = 100
	// eventStmtsCached is how many multi-row event INSERTs (1..n rows) stay
	// prepared on the writer connection; a purchase has 2 events, an update 1.
	eventStmtsCached = 8
)

func (c Config) withDefaults() Config {
	if c.ReadConnsMax <= 0 {
		c.ReadConnsMax = ReadConnsDefault
	}
	if c.BusyTimeout <= 0 {
		c.BusyTimeout = BusyTimeoutDefault
	}
	if c.CheckpointInterval <= 0 {
		c.CheckpointInterval = CheckpointIntervalDefault
	}
	if c.WriteLockRetryMax <= 0 {
		c.WriteLockRetryMax = WriteLockRetryMaxDefault
	}
	if c.WALPagesMax <= 0 {
		c.WALPagesMax = WALPagesMaxDefault
	}
	if c.IdempotencyTableMax <= 0 {
		c.IdempotencyTableMax = IdempotencyTableMaxDefault
	}
	if c.IdempotencyRunsMax <= 0 {
		c.IdempotencyRunsMax = IdempotencyRunsMaxDefault
	}
	if c.IdempotencyFilterKeys <= 0 {
		c.IdempotencyFilterKeys = IdempotencyFilterKeysDefault
	}
	if c.CustomerMergeRows <= 0 {
		c.CustomerMergeRows = CustomerMergeRowsDefault
	}
	if c.SlowCommit <= 0 {
		c.SlowCommit = SlowCommitDefault
	}
	if c.PageSize == 0 {
		c.PageSize = PageSizeDefault
	}
	if c.BatchSizeMax == 0 {
		c.BatchSizeMax = BatchSizeMaxDefault
	}
	switch {
	case c.ApplyBudget == 0:
		c.ApplyBudget = ApplyBudgetDefault
	case c.ApplyBudget < 0:
		c.ApplyBudget = 0
	}
	switch {
	case c.MmapSize == 0, c.MmapSize > MmapSizeDefault:
		c.MmapSize = MmapSizeDefault
	case c.MmapSize < 0:
		c.MmapSize = 0
	}
	return c
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	switch {
	case c.Path == "":
		return errors.New("sqlite: Path is required")
	case strings.ContainsRune(c.Path, '?'):
		return fmt.Errorf("sqlite: Path %q must not contain '?'", c.Path)
	case c.BatchSizeMax < 0, c.QueueDepthMax < 0, c.FlushInterval < 0, c.ReadConnsMax < 0:
		return errors.New("sqlite: BatchSizeMax, QueueDepthMax, FlushInterval and ReadConnsMax must not be negative")
	case c.ReadConnsMax > ReadConnsMax:
		return fmt.Errorf("sqlite: ReadConnsMax %d exceeds %d", c.ReadConnsMax, ReadConnsMax)
	case c.IdempotencyFilterKeys < 0 || c.IdempotencyFilterKeys > IdempotencyFilterKeysLimit:
		return fmt.Errorf("sqlite: IdempotencyFilterKeys %d must be 0 (the default) to %d", c.IdempotencyFilterKeys, IdempotencyFilterKeysLimit)
	case c.PageSize != 0 && !ValidPageSize(c.PageSize):
		return fmt.Errorf("sqlite: PageSize %d must be a power of two from 512 to 65536", c.PageSize)
	}
	return nil
}

// ValidPageSize reports whether n is a page size SQLite takes: a power of
// two from 512 to 65536.
func ValidPageSize(n int) bool {
	return n >= 512 && n <= 65536 && n&(n-1) == 0
}

// DB is a surgepay.Store on one SQLite database. Safe for concurrent use.
type DB struct {
	read   *sql.DB // query_only pool
	opRead *sql.DB // query_only pool of the operators' searches (surgepay.OperatorConnsMax)
	// filterRead is the one query_only connection of the filter of
	// idempotency keys (its builds, loads and saves): after a restart
	// the API's reads fill the read pool, and a load behind them took
	// seconds.
	filterRead *sql.DB
	// probeRead is the readiness probe's one query_only connection (see
	// Probe).
	probeRead *sql.DB
	readSt    readStmts

	write  *sql.DB   // MaxOpenConns=1; used only by the committer
	wconn  *sql.Conn // the one writer connection, held for the DB's life
	writer writer    // statements prepared on wconn
	commit *groupcommit.Committer[*op]

	ckpt      *sql.DB       // one connection that checkpoints the WAL in the background
	ckptStop  chan struct{} // closed by Close
	ckptDone  chan struct{}
	ckptStats ckptStats
	// walRestart asks the writer to restart the WAL before its next
	// transaction (checkpoint.go); restartAt is the WAL's length, in
	// frames, from which the background checkpoint asks.
	walRestart atomic.Bool
	restartAt  int64
	// stagedChunk is the records one statement of StagedBacklog counts
	// (stagedCountChunk).
	stagedChunk int
	// idemFilterKeys is Config.IdempotencyFilterKeys.
	idemFilterKeys int
	// filterBuild serializes the builds of the filter of idempotency
	// keys (the first, the rebuilds, a test's).
	filterBuild sync.Mutex

	filterStop context.CancelFunc // ends runIdemFilter
	filterDone chan struct{}
	// filterPath is where the filter of idempotency keys is saved
	// (idemfiltersave.go); "" for a database that is not a file.
	filterPath string
	log        *slog.Logger // Config.Logger
	// recentSaved and recentRead are the entries Open read back from
	// idempotency_saved and the records it read one by one
	// (indexRecent).
	recentSaved, recentRead int

	closeOnce sync.Once
	closeErr  error
}

var _ surgepay.Store = (*DB)(nil)
var _ surgepay.PaymentByRefFinder = (*DB)(nil)
var _ surgepay.CredentialsGenerationReader = (*DB)(nil)

// dsn returns the data source name of a connection to path with pragmas.
func dsn(path string, busy time.Duration, pragmas ...string) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout("+strconv.FormatInt(busy.Milliseconds(), 10)+")")
	for _, p := range pragmas {
		q.Add("_pragma", p)
	}
	return path + "?" + q.Encode()
}

// Open opens or creates the database at cfg.Path, applies pending
// migrations and starts the writer. Close releases it.
func Open(ctx context.Context, cfg Config) (*DB, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if err := privateFiles(cfg.Path); err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", cfg.Path, err)
	}
	db := &DB{stagedChunk: stagedCountChunk, idemFilterKeys: IdempotencyFilterKeysDefault,
		filterPath: idemFilterPath(cfg.Path), log: cfg.Logger}
	if err := db.open(ctx, cfg); err != nil {
		_ = db.closeAll() // the open's error is the one to report
		return nil, fmt.Errorf("sqlite: open %s: %w", cfg.Path, err)
	}
	db.commit = groupcommit.New(groupcommit.Config{
		BatchSizeMax:  cfg.BatchSizeMax,
		QueueDepthMax: cfg.QueueDepthMax,
		FlushInterval: cfg.FlushInterval,
		Writers:       1, // SQLite has one writer.
		OnBatch:       cfg.OnBatch,
		DelayTarget:   cfg.QueueDelayTarget,
	}, db.commitBatch)
	// The first filter is built in the background, not before Open
	// returns: over millions of stored keys it takes seconds, which a
	// restart in the middle of an event cannot wait. Meanwhile the filter
	// answers "maybe" and lookups and the writer's probe read the index.
	db.idemFilterKeys = cfg.IdempotencyFilterKeys
	fctx, stop := context.WithCancel(context.Background())
	db.filterStop, db.filterDone = stop, make(chan struct{})
	go func() { defer close(db.filterDone); db.runIdemFilter(fctx) }()
	return db, nil
}

func (db *DB) open(ctx context.Context, cfg Config) error {
	if err := initFile(ctx, cfg.Path, cfg.PageSize); err != nil {
		return err
	}
	var err error
	// The writer: WAL, and synchronous=FULL so that a COMMIT has reached the
	// disk before its callers are answered.
	//
	// temp_store=MEMORY keeps the statement sub-journals of the per-Write
	// savepoints off the disk, and the WAL is checkpointed by a background
	// connection (see checkpointLoop) rather than by the commit that crosses
	// the threshold: profiling a 2,000/s purchase load showed a third of the
	// writer's time in sub-journal writes and in checkpoint fsyncs, and p99
	// fell from 1.6 s to 0.26 s without them. The page cache stays small
	// (8 MiB): SQLite scans its whole hash at the end of every write
	// transaction (pcache1Truncate), 8 % of the writer's time with 64 MiB.
	// wal_autocheckpoint stays on,
	// at a high mark, as the bound on the WAL should background checkpoints
	// fall behind. Pages outside the small cache are read through the
	// memory map (Config.MmapSize), not read(2).
	mmap := "mmap_size(" + strconv.FormatInt(cfg.MmapSize, 10) + ")"
	db.write, err = sql.Open("sqlite", dsn(cfg.Path, cfg.BusyTimeout,
		"journal_mode(WAL)", "synchronous(FULL)", "foreign_keys(0)", "temp_store(MEMORY)",
		"cache_size(-8192)", "wal_autocheckpoint("+strconv.Itoa(cfg.WALPagesMax)+")", mmap))
	if err != nil {
		return err
	}
	db.write.SetMaxOpenConns(1)
	db.write.SetMaxIdleConns(1)
	db.write.SetConnMaxLifetime(0)
	db.write.SetConnMaxIdleTime(0)
	ms, err := listMigrations()
	if err != nil {
		return err
	}
	if err := migrate(ctx, db.write, ms, cfg.Logger); err != nil {
		return err
	}
	if db.wconn, err = db.write.Conn(ctx); err != nil {
		return err
	}
	if err := db.writer.prepare(ctx, db.wconn); err != nil {
		return err
	}
	// The writer waits for the write lock in beginWrite, not in SQLite's
	// busy handler (see WriteLockRetryMaxDefault). Its other statements
	// meet no lock in WAL mode once the write transaction has begun. Set
	// after prepare, which may wait out another process's WAL recovery.
	if _, err := db.wconn.ExecContext(ctx, "PRAGMA busy_timeout = 0"); err != nil {
		return err
	}
	db.writer.lockWait, db.writer.lockRetryMax = cfg.BusyTimeout, cfg.WriteLockRetryMax
	db.writer.applyBudget = cfg.ApplyBudget
	db.writer.times.log, db.writer.times.slow, db.writer.times.onSlow = cfg.Logger, cfg.SlowCommit, cfg.OnSlowCommit
	db.writer.idem = newIdemIndex(cfg.IdempotencyTableMax, cfg.IdempotencyRunsMax)
	db.writer.cust.rows = int64(cfg.CustomerMergeRows)
	if err := db.indexRecent(ctx, cfg.Logger); err != nil {
		return err
	}
	if err := db.openCustMerge(ctx); err != nil {
		return err
	}

	if db.ckpt, err = sql.Open("sqlite", dsn(cfg.Path, cfg.BusyTimeout, "synchronous(FULL)", mmap)); err != nil {
		return err
	}
	db.ckpt.SetMaxOpenConns(1)
	db.ckptStats.log, db.ckptStats.pagesMax = cfg.Logger, int64(cfg.WALPagesMax)
	db.restartAt = int64(min(walRestartFrames, cfg.WALPagesMax/4))
	db.ckptStop, db.ckptDone = make(chan struct{}), make(chan struct{})
	go db.checkpointLoop(cfg.CheckpointInterval)

	db.read, err = sql.Open("sqlite", dsn(cfg.Path, cfg.BusyTimeout, "query_only(1)", mmap))
	if err != nil {
		return err
	}
	db.read.SetMaxOpenConns(cfg.ReadConnsMax)
	db.read.SetMaxIdleConns(cfg.ReadConnsMax)
	db.read.SetConnMaxIdleTime(0)
	if err := db.read.PingContext(ctx); err != nil {
		return err
	}
	// The operators' searches have a pool of their own, so that they
	// never take the API's connections (issue 38); it opens its
	// connections when a search first needs them.
	if db.opRead, err = sql.Open("sqlite", dsn(cfg.Path, cfg.BusyTimeout, "query_only(1)", mmap)); err != nil {
		return err
	}
	db.opRead.SetMaxOpenConns(surgepay.OperatorConnsMax)
	db.opRead.SetMaxIdleConns(surgepay.OperatorConnsMax)
	for _, d := range []**sql.DB{&db.filterRead, &db.probeRead} {
		if *d, err = sql.Open("sqlite", dsn(cfg.Path, cfg.BusyTimeout, "query_only(1)", mmap)); err != nil {
			return err
		}
		(*d).SetMaxOpenConns(1) // reads of their own, never queued behind the API's
		(*d).SetMaxIdleConns(1)
	}
	return db.readSt.prepare(ctx, db.read)
}

// Close commits the Writes already queued, then closes the connections.
// Apply after Close returns EUNAVAILABLE. Close may be called more than
// once; later calls return the first call's error.
func (db *DB) Close() error {
	db.closeOnce.Do(func() {
		if db.commit != nil {
			db.commit.Close()
		}
		db.closeErr = db.closeAll()
	})
	return db.closeErr
}

// WALPagesMaxDefault is the default Config.WALPagesMax: the WAL size (in
// pages: 32 MiB of 2 KiB pages, 64 MiB of the 4 KiB pages of a file made
// before session 17) at which the writer checkpoints by itself. The
// background checkpointer has copied most frames by then, so the writer's
// checkpoint is short, and it restarts the WAL. Session 1 found that with
// 80 MiB and a 10 ms interval the WAL never restarted under a steady load
// and p99 rose within seconds; since issue 14 a commit writes a third of
// the pages it did, so 16,000 pages are about 1,600 commits at 5,000 sales/s,
// and with a 250 ms interval p99 stayed where 8 MiB had it (bench/RESULTS.md).
const WALPagesMaxDefault = 16_000

// checkpointLoop copies the WAL into the database every interval with a
// PASSIVE checkpoint, which never blocks the writer or readers.
func (db *DB) checkpointLoop(interval time.Duration) {
	defer close(db.ckptDone)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-db.ckptStop:
			return
		case <-t.C:
			// An error, or busy (while another checkpoint runs), only
			// delays this checkpoint to the next tick; it is counted.
			db.checkpoint()
		}
	}
}

func (db *DB) closeAll() error {
	if db.filterStop != nil {
		db.filterStop()
		<-db.filterDone
		db.filterStop = nil
	}
	if db.ckptStop != nil {
		close(db.ckptStop)
		<-db.ckptDone
		db.ckptStop = nil
	}
	var errs []error
	errs = append(errs, db.readSt.close(), db.writer.close())
	if db.wconn != nil {
		errs = append(errs, db.wconn.Close())
	}
	for _, d := range []*sql.DB{db.read, db.opRead, db.filterRead, db.probeRead, db.write, db.ckpt} {
		if d != nil {
			errs = append(errs, d.Close())
		}
	}
	return errors.Join(errs...)
}

// CommitStats returns the group-commit writer's running totals.
func (db *DB) CommitStats() groupcommit.Stats { return db.commit.Stats() }

// QueueDepth returns the number of Writes waiting for the writer.
func (db *DB) QueueDepth() int { return db.commit.QueueDepth() }

// Overloaded reports whether the writer's queue stands above
// Config.QueueDelayTarget (groupcommit.Committer.Overloaded).
func (db *DB) Overloaded() bool { return db.commit.Overloaded() }

//go:embed migrations/*.sql
var migrations embed.FS

type migration struct {
	version int
	name    string
	// contractBefore is its "-- contract: binaries before NNNN" (0: an
	// expand migration): once it is applied, a surgepay whose newest
	// migration is below NNNN refuses the file.
	contractBefore int
}

// contractsVersion is the migration that added schema_migrations'
// contract_before column: a contract migration is numbered above it.
const contractsVersion = 17

// parseContract returns the version a migration's contract directive
// names, or 0 when it has none (contract.Parse).
func parseContract(version int, sql string) (int, error) {
	before, err := contract.Parse(int64(version), contractsVersion, sql)
	return int(before), err
}

// listMigrations returns the embedded migrations in version order. A file
// is named NNNN_description.sql; NNNN is its version.
func listMigrations() ([]migration, error) {
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, name := range names {
		base := path.Base(name)
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: name must start with a positive version and '_'", base)
		}
		text, err := migrations.ReadFile(name)
		if err != nil {
			return nil, err
		}
		contractBefore, err := parseContract(v, string(text))
		if err != nil {
			return nil, fmt.Errorf("migration %s: %w", base, err)
		}
		ms = append(ms, migration{version: v, name: name, contractBefore: contractBefore})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	for i := 1; i < len(ms); i++ {
		if ms[i].version == ms[i-1].version {
			return nil, fmt.Errorf("migration %s: version %d used twice", path.Base(ms[i].name), ms[i].version)
		}
	}
	return ms, nil
}

// migrate applies the migrations of ms not yet recorded in
// schema_migrations, in order, in one transaction: a failed migration
// leaves the schema as it was. A file with migrations newer than every one
// of ms is used as it is, logged to log if set, unless one of them is a
// contract naming a migration above the newest of ms: then migrate refuses
// it (docs/upgrade.md).
func migrate(ctx context.Context, db *sql.DB, ms []migration, log *slog.Logger) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close() //nolint:errcheck // hands the connection back to db; COMMIT reported the migration's own error
	// IMMEDIATE: take the write lock before reading the applied versions, so
	// two processes opening one new file cannot both migrate it.
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return fmt.Errorf("migrate: begin: %w", err)
	}
	if err := migrateTx(ctx, conn, ms, log); err != nil {
		_, _ = conn.ExecContext(context.Background(), "ROLLBACK")
		return err
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		_, _ = conn.ExecContext(context.Background(), "ROLLBACK")
		return fmt.Errorf("migrate: commit: %w", err)
	}
	return nil
}

func migrateTx(ctx context.Context, conn *sql.Conn, ms []migration, log *slog.Logger) error {
	if _, err := conn.ExecContext(ctx,
		"CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER NOT NULL PRIMARY KEY, applied INTEGER NOT NULL) STRICT"); err != nil {
		return fmt.Errorf("migrate: create schema_migrations: %w", err)
	}
	applied := map[int]bool{}
	latest := 0
	rows, err := conn.QueryContext(ctx, "SELECT version FROM schema_migrations")
	if err != nil {
		return fmt.Errorf("migrate: read versions: %w", err)
	}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			_ = rows.Close() // the scan's error is the one to report
			return fmt.Errorf("migrate: read versions: %w", err)
		}
		applied[v], latest = true, max(latest, v)
	}
	if err := rows.Err(); err != nil {
		_ = rows.Close() // the read's error is the one to report
		return fmt.Errorf("migrate: read versions: %w", err)
	}
	if err := rows.Close(); err != nil {
		return fmt.Errorf("migrate: read versions: %w", err)
	}
	for _, m := range ms {
		if applied[m.version] {
			continue
		}
		if m.version < latest {
			// Applying it now would run it after migrations written for a
			// schema that did not have it; skipping it would lose it.
			return fmt.Errorf("migrate: %s is not applied but %d, a later one, is: a migration must be numbered above every applied one",
				path.Base(m.name), latest)
		}
		text, err := migrations.ReadFile(m.name)
		if err != nil {
			return err
		}
		if _, err := conn.ExecContext(ctx, string(text)); err != nil {
			return fmt.Errorf("migrate: %s: %w", path.Base(m.name), err)
		}
		if err := record(ctx, conn, m); err != nil {
			return fmt.Errorf("migrate: record %d: %w", m.version, err)
		}
	}
	if len(ms) > 0 && latest > ms[len(ms)-1].version {
		return checkContracts(ctx, conn, latest, ms[len(ms)-1].version, log)
	}
	return nil
}

// record notes m as applied, with its contract if it has one: a migration
// without one is recorded as migrations were before contractsVersion.
func record(ctx context.Context, conn *sql.Conn, m migration) error {
	if m.contractBefore == 0 {
		_, err := conn.ExecContext(ctx, "INSERT INTO schema_migrations (version, applied) VALUES (?, ?)",
			m.version, time.Now().UnixNano())
		return err
	}
	_, err := conn.ExecContext(ctx, "INSERT INTO schema_migrations (version, applied, contract_before) VALUES (?, ?, ?)",
		m.version, time.Now().UnixNano(), m.contractBefore)
	return err
}

// checkContracts refuses a file at migration latest, above this release's
// newest, if a contract among its migrations needs a later release. Every
// embedded migration is applied by then, contractsVersion's among them, so
// contract_before exists.
func checkContracts(ctx context.Context, conn *sql.Conn, latest, newest int, log *slog.Logger) error {
	var before int
	if err := conn.QueryRowContext(ctx, "SELECT coalesce(max(contract_before), 0) FROM schema_migrations").Scan(&before); err != nil {
		return fmt.Errorf("migrate: read contracts: %w", err)
	}
	if before > newest {
		return fmt.Errorf("migrate: the file is at migration %04d, and a contract among its migrations removed what "+
			"surgepay before migration %04d uses; this surgepay's newest is %04d: run a release with migration %04d "+
			"or later (docs/upgrade.md)", latest, before, newest, before)
	}
	if log != nil {
		log.Info("sqlite: the file is newer than this surgepay: migrations after this one's newest are "+
			"expand-only, so it runs on them (docs/upgrade.md)", "schema_migration", latest, "newest_known", newest)
	}
	return nil
}

// initFile gives a database file that privateFiles has just created (still
// empty) its page size, which SQLite fixes when it writes the file's first
// page: here, by switching it to WAL. The writer's DSN cannot: the driver
// runs a DSN's pragmas in alphabetical order, journal_mode before
// page_size. A file with content is left as it is, and so is a path
// privateFiles does not create (":memory:", a "file:" URI).
func initFile(ctx context.Context, path string, pageSize int) (err error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil || fi.Size() > 0 {
		return err
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		return err
	}
	defer func() {
		// The file was written: a failed close is a failed write.
		if cerr := db.Close(); err == nil {
			err = cerr
		}
	}()
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close() //nolint:errcheck // hands the connection back to db, whose Close is checked
	for _, q := range []string{"PRAGMA page_size = " + strconv.Itoa(pageSize), "PRAGMA journal_mode = WAL"} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("new file: %s: %w", q, err)
		}
	}
	return nil
}

// privateFiles makes the database file readable by its owner only (0600),
// creating it so if it does not exist: SQLite gives its -wal and -shm files
// the database file's mode, and they hold payments too. Files an older
// version left more open are narrowed. An in-memory database (":memory:",
// a "file:" URI) is left alone.
func privateFiles(path string) error {
	if path == "" || path == ":memory:" || strings.HasPrefix(path, "file:") {
		return nil
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600) //nolint:gosec // G304: the operator names the file (Config.Path)
	if err != nil {
		return err
	}
	_ = f.Close() // nothing written: opened only to create it
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Chmod(p, 0o600); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}
