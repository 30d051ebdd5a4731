package sqlite

import (
	"context"
	"fmt"
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
)

// The filter of idempotency keys: a Bloom filter over the hashes of every
// stored idempotency record, so that FindIdempotency answers "not found"
// for a new key without a SELECT. A sale with a new key is the common
// case, and its lookup was the largest cost that grew with the database:
// one probe of idempotency_index through a read connection whose page
// cache every commit empties, 36 µs per sale at minute 1 and 48 µs at
// minute 9 of a 3,000/s event (13 % of the server's CPU, bench/RESULTS.md
// issue 14 session 9).
//
// The filter never answers "absent" for a stored key: every hash in
// idempotency_index is added by a build, which scans it, and every record
// is added as it enters the memory tables (committed, absorb: before the
// tables, so that FindIdempotency can ask the filter first, and after, to
// a build under way: again), before it can leave them for
// idempotency_index; a build adds the memory tables' hashes, and records
// that enter during a build go to both filters. A purge does not remove
// hashes (a Bloom filter cannot): a purged key
// costs a lookup, as every key did before. "Present" may be wrong
// (false positives, about 1 % at capacity): then the SELECT decides. The
// writer's uniqueness check uses it for the rows in idempotency_index
// only: claimIdempotency checks the memory tables and the open
// transaction by itself, and the INSERT probes idempotency_index only for
// a hash the filter may hold (migration 0011). The filter has to be right
// for the writer as it is for lookups: a hash missing from it is a key
// stored twice. TestIdempotencyFilterInsert breaks it to see that.
//
// Open starts the build of the first filter in the background (one scan
// of idempotency_index: about a second for a few million records), sized
// for Config.IdempotencyFilterKeys (an event's keys, ahead) or half as
// many again as the records stored, whichever is more; until it ends the
// filter answers "maybe" and every check reads the index, as it would
// without a filter. Once more hashes were added than the filter holds at
// 1 %, a new one is built in the background, sized for half as many again
// as the records then stored (idemFilterGrowth), at most
// idemFilterKeysMax, and lookups use the old one meanwhile. A full
// filter of that size is rebuilt at most hourly (purged keys leave it); in
// between its false positive rate grows and lookups fall back to the
// SELECT, never to a wrong answer.

// IdempotencyFilterKeysDefault is the default Config.IdempotencyFilterKeys:
// 10 M keys at 1 % in 12 MiB, a half hour at 5,000 sales/s (9 M) and a
// tenth more, so that the event never waits on a rebuild (a rebuild
// scans every stored key: at 3.4, 5.0 and 7.5 M keys, the points where a
// filter sized by growth filled, per-minute p99 rose on a busy host).
const IdempotencyFilterKeysDefault = 10_000_000

// IdempotencyFilterKeysLimit is the most Config.IdempotencyFilterKeys
// takes: idemFilterKeysMax.
const IdempotencyFilterKeysLimit = idemFilterKeysMax

const (
	// idemFilterKeysMin is the filter of 4 MiB (3.3 M keys at 1 %) that
	// tests put in place of the one in use (BreakIdemFilter).
	idemFilterKeysMin = 3_355_443
	// idemFilterKeysMax bounds a filter: 27 M keys at 1 % in 32 MiB,
	// three half-hour events at 5,000 sales/s.
	idemFilterKeysMax = 26_843_545
	// idemFilterGrowth is a new filter's keys per key stored, in halves:
	// 3, half as many again. Each rebuild scans idempotency_index, so a
	// smaller step means more scans (geometric: at most three times the
	// keys in all); 2 left the filter of a half hour at 5,000 sales/s
	// twice its keys.
	idemFilterGrowth = 3
	// idemFilterBitsPerKey and idemFilterProbes give about 1 % false
	// positives at capacity.
	idemFilterBitsPerKey = 10
	idemFilterProbes     = 7
	// idemFilterScanRows is the hashes one SELECT of a build reads, and
	// the memory tables' hashes it adds between two rests (a rebuild).
	idemFilterScanRows = 1 << 14
	// idemFilterRebuildEvery spaces the rebuilds of a full filter of
	// idemFilterKeysMax: one that fills again at once (as many keys
	// stored as it holds) is not scanned over and over; meanwhile purged
	// keys leave, and lookups take the SELECT more often.
	idemFilterRebuildEvery = time.Hour
)

// bloom is a Bloom filter of 64-bit hashes, safe for one writer and any
// readers at once. Its size is the keys it is built for times
// idemFilterBitsPerKey, to the word: a probe maps a 64-bit hash onto the
// bits by multiplying (Lemire's reduction), so no power of two is needed,
// which had made the filter of a half hour at 5,000 sales/s 16 MiB for
// 6.7 M keys rather than 8 (bench/RESULTS.md, issue 14 session 18).
type bloom struct {
	words    []atomic.Uint64
	bits     uint64 // len(words) * 64
	capacity int64  // keys it holds at about 1 % false positives
	added    atomic.Int64
}

func newBloom(keys int) *bloom {
	words := (uint64(max(keys, 1))*idemFilterBitsPerKey + 63) / 64
	n := words * 64
	return &bloom{words: make([]atomic.Uint64, words), bits: n, capacity: int64(n / idemFilterBitsPerKey)} //nolint:gosec // G115: about keys, an int
}

// probes calls f with the filter's bit indexes of h (double hashing; h is
// SHA-256 output, the second hash a mix of it).
func (b *bloom) probes(h int64, f func(i uint64) bool) bool {
	h1 := uint64(h) //nolint:gosec // G115: the hash's 64 bits, reinterpreted
	h2 := h1*0x9e3779b97f4a7c15 ^ h1>>29 | 1
	for i := range uint64(idemFilterProbes) {
		if j, _ := bits.Mul64(h1+i*h2, b.bits); !f(j) {
			return false
		}
	}
	return true
}

func (b *bloom) add(h int64) {
	b.set(h)
	b.added.Add(1)
}

// set sets h's bits without counting it (a hash added already).
func (b *bloom) set(h int64) {
	b.probes(h, func(i uint64) bool { b.words[i/64].Or(1 << (i % 64)); return true })
}

// mayContain is false only if h was never added.
func (b *bloom) mayContain(h int64) bool {
	return b.probes(h, func(i uint64) bool { return b.words[i/64].Load()&(1<<(i%64)) != 0 })
}

func (b *bloom) full() bool { return b.added.Load() > b.capacity }

// idemFilter holds the filter in use and the one being built.
type idemFilter struct {
	cur   atomic.Pointer[bloom] // nil until the first build ends
	mu    sync.Mutex            // guards next against add
	next  *bloom                // being built; nil if none
	build chan struct{}         // asks the builder for a new filter
	save  chan struct{}         // asks the builder to save the filter (idemfiltersave.go)
	built atomic.Int64          // when the last build ended, Unix nanoseconds

	// What the filter answered, per check (lookup: FindIdempotency;
	// insert: the writer's probe of idempotency_index), and how often a
	// "maybe" found no stored key (a false positive, or a purged key).
	absents, maybes, falses [idemChecks]atomic.Uint64
	builds                  atomic.Uint64

	// The saved filter (idemfiltersave.go): what the last save covered,
	// and 1 + the index entries Open read to complete the filter it
	// loaded (0: none loaded).
	saved  atomic.Pointer[idemFilterSaved]
	loaded atomic.Int64
	// saveMark is what the save askSave asked for covers.
	saveMu   sync.Mutex
	saveMark idemFilterSaved
}

// idemCheck names who asks the filter.
type idemCheck int

const (
	idemLookup idemCheck = iota // FindIdempotency, before the processor call
	idemInsert                  // the writer, before the INSERT's probe
	idemChecks
)

func newIdemFilter() *idemFilter {
	return &idemFilter{build: make(chan struct{}, 1), save: make(chan struct{}, 1)}
}

// add adds the hashes of records that have entered the memory tables
// (after, so that a build that reads the tables before they enter sees
// them here).
func (f *idemFilter) add(n int, hash func(i int) int64) {
	f.mu.Lock()
	cur, next := f.cur.Load(), f.next
	for i := range n {
		h := hash(i)
		if cur != nil {
			cur.add(h)
		}
		if next != nil {
			next.add(h)
		}
	}
	f.mu.Unlock()
	if cur != nil && next == nil && cur.full() &&
		(cur.capacity < idemFilterKeysMax || time.Since(time.Unix(0, f.built.Load())) > idemFilterRebuildEvery) {
		f.rebuild()
	}
}

// again gives the filter being built, if any, n hashes that add gave
// already, without counting them: records that entered the memory tables
// after the build copied them (committed, absorb).
func (f *idemFilter) again(n int, hash func(i int) int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.next == nil {
		return
	}
	for i := range n {
		f.next.set(hash(i))
	}
}

// absent reports whether h is surely not a stored record's hash, and
// counts the answer for c.
func (f *idemFilter) absent(c idemCheck, h int64) bool {
	b := f.cur.Load()
	if b == nil || b.mayContain(h) {
		f.maybes[c].Add(1)
		return false
	}
	f.absents[c].Add(1)
	return true
}

// falsePositive counts a "maybe" for c after which no stored record had
// the key.
func (f *idemFilter) falsePositive(c idemCheck) { f.falses[c].Add(1) }

// IdempotencyFilterStats is what the filter of stored idempotency keys
// answered since Open, and its size.
type IdempotencyFilterStats struct {
	// Per check: Lookup is FindIdempotency (the SELECT before a
	// processor call), Insert the writer's probe of idempotency_index.
	LookupAbsent, LookupMaybe, LookupFalse uint64 // "absent" answers spare a read
	InsertAbsent, InsertMaybe, InsertFalse uint64
	Builds                                 uint64 // filters built since Open
	Bytes                                  int64  // of the filter in use (0: none yet)
	Keys                                   int64  // hashes it holds, counted with repeats
	Capacity                               int64  // keys it holds at about 1 % false positives
}

// IdempotencyFilterStats reports the filter of stored idempotency keys.
func (db *DB) IdempotencyFilterStats() IdempotencyFilterStats {
	f := db.writer.idem.filter
	s := IdempotencyFilterStats{
		LookupAbsent: f.absents[idemLookup].Load(), LookupMaybe: f.maybes[idemLookup].Load(), LookupFalse: f.falses[idemLookup].Load(),
		InsertAbsent: f.absents[idemInsert].Load(), InsertMaybe: f.maybes[idemInsert].Load(), InsertFalse: f.falses[idemInsert].Load(),
		Builds: f.builds.Load(),
	}
	if b := f.cur.Load(); b != nil {
		s.Bytes, s.Keys, s.Capacity = int64(len(b.words))*8, b.added.Load(), b.capacity
	}
	return s
}

func (f *idemFilter) rebuild() {
	select {
	case f.build <- struct{}{}:
	default: // one already asked for
	}
}

// runIdemFilter builds the first filter, at once and unpaced, then builds
// it again whenever it is asked to, until ctx ends. A first build that
// fails (the context ended, a read error) is tried again after a pause:
// without a filter every check reads the index, right but slower.
func (db *DB) runIdemFilter(ctx context.Context) {
	f := db.writer.idem.filter
	if !db.loadIdemFilter(ctx) {
		for {
			// The newest run before the build reads them: what its
			// filter, once saved, covers.
			mark, err := db.newestRun(ctx)
			if err == nil {
				if err = db.buildIdemFilter(ctx, false); err == nil {
					db.saveIdemFilter(ctx, mark)
					break
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.save:
			db.saveAsked(ctx)
			continue
		case <-f.build:
		}
		if cur := f.cur.Load(); cur != nil && !cur.full() {
			// Asked again by a record added before the last build had
			// begun: that build made room (a half hour at 3,000/s
			// rebuilt twice in a row, the second for nothing).
			continue
		}
		// A build that fails leaves lookups the filter they had, or
		// their SELECT; the next record added to a full filter asks
		// again.
		_ = db.buildIdemFilter(ctx, true)
	}
}

// idemSpanQuery is the span of the idempotency table's rowids: two probes
// of the ends of its B-tree, as scalar subqueries. SQLite looks up max() or
// min() alone at an end of an index; "SELECT max(rowid) - min(rowid) FROM
// idempotency" read every record instead, millions of them with their
// stored answers, in one read transaction that held back every checkpoint
// meanwhile: at 3,000 sales/s the filter's first rebuild (minute 19) let the
// WAL grow to 128,000 pages and the writer then checkpointed them inside a
// COMMIT of 1.7 s, which began an episode of refusals (bench/RESULTS.md,
// issue 14, session 12). TestReadsUseThePrimaryKey checks the plan.
const idemSpanQuery = "SELECT coalesce((SELECT max(rowid) FROM idempotency) - (SELECT min(rowid) FROM idempotency) + 1, 0)"

// idemFilterPageQuery reads a page of idempotency_index after an entry
// (run, hash, row), in key order.
const idemFilterPageQuery = "SELECT run, hash, row FROM idempotency_index WHERE (run, hash, row) > (?, ?, ?) " +
	"ORDER BY run, hash, row LIMIT ?"

// buildIdemFilter builds a filter of every stored record's hash and puts
// it in use: the memory tables' hashes, then idempotency_index, a page of
// hashes per SELECT; records that enter meanwhile are added to both. If
// paced (a rebuild, under load) it rests after each chunk (restAfter:
// back to back, the first rebuild at 3,000 sales/s, 3.4 M keys, took a
// core for seconds on a slow hour and began an episode of refusals;
// meanwhile the full filter answers, with more false positives); the
// first build, which nothing answers before, does not.
func (db *DB) buildIdemFilter(ctx context.Context, paced bool) error {
	return db.buildIdemFilterChunk(ctx, paced, idemFilterScanRows)
}

// buildIdemFilterChunk is buildIdemFilter reading chunk hashes a SELECT
// (tests read fewer). One build runs at a time.
func (db *DB) buildIdemFilterChunk(ctx context.Context, paced bool, chunk int) error {
	db.filterBuild.Lock()
	defer db.filterBuild.Unlock()
	// The records stored (the memory tables' too), at most: rowids
	// increase and the purge deletes from the front, so the span of
	// rowids sizes the filter without a scan before the scan.
	var stored int
	if err := db.filterRead.QueryRowContext(ctx, idemSpanQuery).Scan(&stored); err != nil {
		return fmt.Errorf("size idempotency filter: %w", err)
	}
	_, err := db.fillIdemFilter(ctx, paced, chunk, newBloom(min(max(db.idemFilterKeys, stored*idemFilterGrowth/2), idemFilterKeysMax)), math.MinInt64)
	return err
}

// fillIdemFilter adds to next the memory tables' hashes and those of
// idempotency_index's runs from fromRun on, puts it in use, and returns
// the entries of idempotency_index it read. Call it holding filterBuild.
func (db *DB) fillIdemFilter(ctx context.Context, paced bool, chunk int, next *bloom, fromRun int64) (int, error) {
	x := db.writer.idem
	f := x.filter
	f.mu.Lock()
	f.next = next
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.next = nil
		f.mu.Unlock()
	}()
	chunkStart := time.Now()
	rest := func() error {
		if !paced {
			return nil
		}
		err := restAfter(ctx, chunkStart)
		chunkStart = time.Now()
		return err
	}
	// The active table's hashes are copied under the lock, which the
	// writer needs after each commit: a copy is a few milliseconds, adding
	// them to the filter (seven random bits each) many times that. The
	// frozen table is read-only once frozen: it is read without the lock.
	// (A hash in more is in rows too.)
	x.mu.RLock()
	active := make([]int64, 0, len(x.active.rows))
	for h := range x.active.rows {
		active = append(active, h)
	}
	frozen := x.frozen
	x.mu.RUnlock()
	for i, h := range active {
		next.add(h)
		if (i+1)%chunk == 0 {
			if err := rest(); err != nil {
				return 0, err
			}
		}
	}
	if frozen != nil {
		i := 0
		for h := range frozen.rows {
			next.add(h)
			if i++; i%chunk == 0 {
				if err := rest(); err != nil {
					return 0, err
				}
			}
		}
	}
	if err := rest(); err != nil {
		return 0, err
	}
	// Pages of entries in key order, each after the last one read, from
	// the first entry of fromRun on.
	run, hash, row := fromRun, int64(math.MinInt64), int64(math.MinInt64)
	if fromRun > math.MinInt64 {
		run, hash, row = fromRun-1, math.MaxInt64, math.MaxInt64
	}
	read := 0
	for {
		rows, err := db.filterRead.QueryContext(ctx, idemFilterPageQuery, run, hash, row, chunk)
		if err != nil {
			return read, fmt.Errorf("read idempotency index: %w", err)
		}
		n := 0
		for rows.Next() {
			if err := rows.Scan(&run, &hash, &row); err != nil {
				_ = rows.Close() // the scan's error is the one to report
				return read, fmt.Errorf("read idempotency index: %w", err)
			}
			next.add(hash)
			n++
		}
		if err := rows.Close(); err != nil {
			return read, fmt.Errorf("read idempotency index: %w", err)
		}
		read += n
		if n < chunk {
			break
		}
		if err := rest(); err != nil {
			return read, err
		}
	}
	f.mu.Lock()
	f.cur.Store(next)
	f.next = nil
	f.mu.Unlock()
	f.built.Store(time.Now().UnixNano())
	f.builds.Add(1)
	return read, nil
}
