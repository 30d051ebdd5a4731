package sqlite

import (
	"cmp"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/surgepay/surgepay"
)

// The deferred index of idempotency keys (migration 0010).
//
// A sale with an Idempotency-Key appends its record to the table
// idempotency under a rowid the writer assigns. Which row holds a key is
// found through idempotency_index (hash of merchant and key → rowid) for
// every row up to deferred_indexes.indexed_upto, and through
// idemIndex, in memory, for the rows after it. The memory table is merged
// into idempotency_index in hash order, a chunk per group commit, once it
// holds IdempotencyTableMax entries, as a run of its own (migration 0013):
// its sorted entries are appended at the end of the run, a few pages a
// commit, where the per-sale inserts of a unique index landed each on a
// random leaf and made every commit write one whole page per sale (twice,
// with the checkpoint), and a merge into one B-tree of every key touched
// more of its leaves the more it held.
//
// A lookup in idempotency_index probes each run (idempotency_runs). The
// runs are few: one per IdempotencyTableMax records kept (34 after half an
// hour at 5,000 sales/s), at most Config.IdempotencyRunsMax (past it a
// merge goes into the newest run, at random leaves as before), and a
// lookup reaches the index only when the filter of stored keys holds the
// hash (idemfilter.go). The purge deletes a run whole once every record
// it indexes is purged (dropRuns).
//
// What survives a crash is the rows, and the memory table's entries saved
// as it fills: every idemSaveChunk records, a transaction appends their
// (rowid, hash) entries as one row of idempotency_saved (migration 0022).
// The next Open (indexRecent) reads those rows back into the memory
// table, and then only the records after the newest of them, before the
// writer starts. Only the process that holds the DB's writer adds records
// to its memory table: another process writing idempotency records to the
// same file at the same time would not see the newest of them (no surgepay
// command but serve writes any).

// IdempotencyTableMaxDefault is the default Config.IdempotencyTableMax:
// 262,144 entries, about 10 MiB in memory, twice over while one table is
// merged and the next fills. Merging N entries into an index of L leaves
// writes about L·(1-e^(-N/L)) pages: at 9 M records (64,000 leaves) and
// this N, about one page per 4 sales.
const IdempotencyTableMaxDefault = 1 << 18

// IdempotencyRunsMaxDefault is the default Config.IdempotencyRunsMax:
// 16.8 M records kept (24 h at 194 sales/s, or an hour of 5,000/s) before a
// merge goes into the newest run; a lookup that reaches the index probes
// at most as many runs (a few microseconds each, their upper pages cached).
const IdempotencyRunsMaxDefault = 64

// idemRunDropChunk is the fewest entries of a purged run one purge
// deletes (at least twice the records it purges, so that runs are dropped
// faster than records expire): a short write.
const idemRunDropChunk = 16384

// idemFlushChunk is the fewest entries a commit merges into
// idempotency_index while a frozen table waits; a commit merges at least
// twice the records it adds, so the merge outpaces any load.
const idemFlushChunk = 128

// idemFlushRows is the rows of one multi-row INSERT of a merge.
const idemFlushRows = 64

// indexRecentRows is how many rows one read of indexRecent takes: short
// read transactions, so that checkpoints are not held back long.
const indexRecentRows = 4096

// idemSaveChunk is the fewest entries of the memory table one row of
// idempotency_saved holds: the first transaction after that many records
// since the last row appends one (about 37 KiB, 9 bytes an entry, some 20
// bytes written a sale with the checkpoint's copy, of 5,300; one row every
// 0.8 s at 5,000 sales/s), and a restart reads at most about this many
// records one by one (10 ms) after the saved rows. On a slow host a
// restart with 275,000 keys not yet indexed was ready in 0.12-0.14 s,
// where reading and hashing every one of their records took 0.67-0.86 s
// (bench/RESULTS.md#overload-and-stalls).
const idemSaveChunk = 4096

// idemHash is the key of idempotency_index for merchantID's key: the first
// 8 bytes of SHA-256 over merchantID, a zero byte and key, as a signed
// integer (SQLite's). A strong hash, so that no client can choose keys that
// collide; collisions are handled anyway (lookups compare the key). It
// takes strings or a scan's byte slices alike.
func idemHash[S string | []byte](merchantID, key S) int64 {
	b := make([]byte, 0, 64)
	b = append(b, merchantID...)
	b = append(b, 0)
	b = append(b, key...)
	sum := sha256.Sum256(b)
	return int64(binary.BigEndian.Uint64(sum[:8])) //nolint:gosec // G115: the hash's 64 bits, reinterpreted
}

// idemTable maps hashes to rowids.
type idemTable struct {
	rows map[int64]int64
	more map[int64][]int64 // further rowids of a hash in rows (a collision)
}

func newIdemTable() *idemTable { return &idemTable{rows: make(map[int64]int64)} }

func (t *idemTable) add(h, row int64) {
	if _, ok := t.rows[h]; !ok {
		t.rows[h] = row
		return
	}
	if t.more == nil {
		t.more = make(map[int64][]int64)
	}
	t.more[h] = append(t.more[h], row)
}

func (t *idemTable) appendRows(dst []int64, h int64) []int64 {
	if row, ok := t.rows[h]; ok {
		dst = append(dst, row)
		dst = append(dst, t.more[h]...)
	}
	return dst
}

func (t *idemTable) len() int {
	n := len(t.rows)
	for _, m := range t.more {
		n += len(m)
	}
	return n
}

// entries returns t's entries in idempotency_index's order.
func (t *idemTable) entries() []idemEntry {
	es := make([]idemEntry, 0, t.len())
	for h, row := range t.rows {
		es = append(es, idemEntry{h, row})
		for _, r := range t.more[h] {
			es = append(es, idemEntry{h, r})
		}
	}
	slices.SortFunc(es, func(a, b idemEntry) int {
		return cmp.Or(cmp.Compare(a.hash, b.hash), cmp.Compare(a.row, b.row))
	})
	return es
}

type idemEntry struct{ hash, row int64 }

type idemPending struct {
	hash, row       int64
	merchantID, key string
}

// idemIndex is the memory part of the index. Readers take mu to read the
// tables; the writer goroutine owns everything else and is the only one
// that changes the tables (under mu).
type idemIndex struct {
	mu     sync.RWMutex
	active *idemTable // committed rows after indexed_upto, not frozen
	frozen *idemTable // rows being merged into idempotency_index; nil if none

	tableMax int   // entries in active that freeze it
	runsMax  int   // runs of idempotency_index at most
	dropMin  int   // fewest entries of purged runs a purge deletes (idemRunDropChunk)
	next     int64 // rowid of the next record

	pending []idemPending // records of the open transaction

	sorted    chan []idemEntry // frozen's entries, sorted off the writer
	merge     []idemEntry      // frozen's entries once sorted
	merged    int              // entries of merge committed
	txMerged  int              // entries of merge written in the open transaction
	txDone    bool             // the open transaction ends the merge
	frozenMax int64            // the highest rowid in frozen
	mergeRun  int64            // the run merge goes into; 0 before its first chunk

	// filter holds the hash of every stored record (idemfilter.go).
	filter *idemFilter

	// Rows up to purgedUpto are purged: their entries are not merged.
	// txPurgedUpto is the open transaction's.
	purgedUpto, txPurgedUpto int64

	// Every record up to savedUpto is in idempotency_index or a row of
	// idempotency_saved; unsaved holds the committed entries after it, in
	// rowid order, until a transaction saves them (saveStep): txSaved of
	// them, up to txSavedUpto, in the open transaction.
	saveChunk   int // idemSaveChunk
	savedUpto   int64
	unsaved     []idemEntry
	txSaved     int
	txSavedUpto int64
}

func newIdemIndex(tableMax, runsMax int) *idemIndex {
	return &idemIndex{active: newIdemTable(), tableMax: tableMax, runsMax: runsMax, dropMin: idemRunDropChunk, saveChunk: idemSaveChunk,
		sorted: make(chan []idemEntry, 1),
		filter: newIdemFilter()}
}

// candidates returns the rowids the memory tables hold for h.
func (x *idemIndex) candidates(h int64) []int64 {
	x.mu.RLock()
	defer x.mu.RUnlock()
	rows := x.active.appendRows(nil, h)
	if x.frozen != nil {
		rows = x.frozen.appendRows(rows, h)
	}
	return rows
}

// idemStmts are the writer's statements of the deferred index.
type idemStmts struct {
	row, last, after, mergeMany, mergeOne, state, purgeScan, purgeRows *sql.Stmt
	runs, newRun, extendRun, deadRun, dropEntries, dropRun             *sql.Stmt
	save, saveStale, saveMerged                                        *sql.Stmt
}

func (s *idemStmts) prepare(ctx context.Context, conn *sql.Conn) error {
	for _, p := range []struct {
		dst   **sql.Stmt
		query string
	}{
		{&s.row, "SELECT merchant_id, key FROM idempotency WHERE rowid = ?"},
		{&s.last, "SELECT coalesce(max(rowid), 0) FROM idempotency"},
		{&s.after, "SELECT rowid, merchant_id, key FROM idempotency WHERE rowid > ? ORDER BY rowid"},
		{&s.mergeMany, "INSERT OR IGNORE INTO idempotency_index (run, hash, row) VALUES " + rowsOf(idemFlushRows, 3)},
		{&s.mergeOne, "INSERT OR IGNORE INTO idempotency_index (run, hash, row) VALUES (?, ?, ?)"},
		{&s.state, "UPDATE deferred_indexes SET indexed_upto = max(indexed_upto, ?) WHERE name = 'idempotency'"},
		{&s.purgeScan, "SELECT rowid, created FROM idempotency ORDER BY rowid LIMIT ?"},
		{&s.purgeRows, "DELETE FROM idempotency WHERE rowid <= ?"},
		{&s.runs, "SELECT coalesce(max(run), 0), count(*) FROM idempotency_runs"},
		{&s.newRun, "INSERT INTO idempotency_runs (run, upto) VALUES (?, ?)"},
		{&s.extendRun, "UPDATE idempotency_runs SET upto = max(upto, ?2) WHERE run = ?1"},
		// The oldest run whose records are all purged (the purge deletes
		// from the front), but not the one a merge is writing.
		{&s.deadRun, "SELECT run FROM idempotency_runs WHERE upto < coalesce((SELECT min(rowid) FROM idempotency), ?1) " +
			"AND run <> ?2 ORDER BY run LIMIT 1"},
		// The first ?2 entries of run ?1 in key order, or all of them.
		{&s.dropEntries, "DELETE FROM idempotency_index WHERE run = ?1 AND hash <= coalesce(" +
			"(SELECT hash FROM idempotency_index WHERE run = ?1 ORDER BY hash LIMIT 1 OFFSET ?2), 9223372036854775807)"},
		{&s.dropRun, "DELETE FROM idempotency_runs WHERE run = ?1 AND NOT EXISTS (SELECT 1 FROM idempotency_index WHERE run = ?1)"},
		{&s.save, "INSERT INTO idempotency_saved (upto, after, entries) VALUES (?, ?, ?)"},
		// Rows past the contiguous ones Open used (a gap, or a row it
		// could not read): the records they cover are in unsaved again.
		{&s.saveStale, "DELETE FROM idempotency_saved WHERE upto > ?"},
		{&s.saveMerged, "DELETE FROM idempotency_saved WHERE upto <= ?"},
	} {
		st, err := conn.PrepareContext(ctx, p.query)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", p.query, err)
		}
		*p.dst = st
	}
	return nil
}

func (s *idemStmts) close() error {
	var errs []error
	for _, st := range []*sql.Stmt{s.row, s.last, s.after, s.mergeMany, s.mergeOne, s.state, s.purgeScan, s.purgeRows,
		s.runs, s.newRun, s.extendRun, s.deadRun, s.dropEntries, s.dropRun, s.save, s.saveStale, s.saveMerged} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	return errors.Join(errs...)
}

// rowsOf returns n groups of cols placeholders: "(?, ?), (?, ?)".
func rowsOf(n, cols int) string {
	row := placeholders(cols)
	return strings.TrimSuffix(strings.Repeat(row+", ", n), ", ")
}

// claimIdempotency checks that r's key is not stored for its merchant in
// the rows the memory tables or the open transaction hold, and reserves
// the record's rowid. The rows in idempotency_index are checked by the
// INSERT itself, with the probe claimIdempotency returns: the key's hash,
// or nil when the filter of stored keys does not hold the hash, so no row
// of idempotency_index can have it (migration 0011: the INSERT reads
// nothing). It returns the probe and the rowid.
func (w *writer) claimIdempotency(ctx context.Context, r *surgepay.IdempotencyRecord) (probe any, row int64, err error) {
	x := w.idem
	h := idemHash(r.MerchantID, r.Key)
	for _, p := range x.pending {
		if p.hash == h && p.merchantID == r.MerchantID && p.key == r.Key {
			return nil, 0, errIdempotencyExists()
		}
	}
	// The writer goroutine is the only one that changes the tables: it
	// reads them without the lock.
	rows := x.active.appendRows(nil, h)
	if x.frozen != nil {
		rows = x.frozen.appendRows(rows, h)
	}
	for _, row := range rows {
		var merchantID, key string
		surgepay.CountStatement(ctx, surgepay.StmtSelect)
		err := w.idemSt.row.QueryRowContext(context.Background(), row).Scan(&merchantID, &key)
		switch {
		case errors.Is(err, sql.ErrNoRows): // purged
		case err != nil:
			return nil, 0, fmt.Errorf("read idempotency record %d: %w", row, err)
		case merchantID == r.MerchantID && key == r.Key:
			return nil, 0, errIdempotencyExists()
		}
	}
	if !x.filter.absent(idemInsert, h) {
		probe = h
	}
	row = x.next
	x.next++
	x.pending = append(x.pending, idemPending{hash: h, row: row, merchantID: r.MerchantID, key: r.Key})
	return probe, row, nil
}

// absorb adds to the active table the records another process appended
// since this writer's last transaction, and moves the next rowid past
// them: one probe of the table's last rowid per transaction. (No surgepay
// command but serve writes idempotency records; two serve processes on
// one file would both stay right.) Call at the start of a transaction.
func (w *writer) absorb() error {
	x := w.idem
	var last int64
	if err := w.idemSt.last.QueryRowContext(context.Background()).Scan(&last); err != nil {
		return fmt.Errorf("read the last idempotency record: %w", err)
	}
	if last < x.next {
		return nil
	}
	rows, err := w.idemSt.after.QueryContext(context.Background(), x.next-1)
	if err != nil {
		return fmt.Errorf("read idempotency records after %d: %w", x.next-1, err)
	}
	defer rows.Close() //nolint:errcheck // read-only: closing loses nothing
	var es []idemEntry
	for rows.Next() {
		var row int64
		var merchantID, key string
		if err := rows.Scan(&row, &merchantID, &key); err != nil {
			return fmt.Errorf("read idempotency records after %d: %w", x.next-1, err)
		}
		es = append(es, idemEntry{idemHash(merchantID, key), row})
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read idempotency records after %d: %w", x.next-1, err)
	}
	// The filter before the tables and after them, as in committed.
	hash := func(i int) int64 { return es[i].hash }
	x.filter.add(len(es), hash)
	x.mu.Lock()
	for _, e := range es {
		x.active.add(e.hash, e.row)
		x.next = max(x.next, e.row+1)
	}
	x.mu.Unlock()
	x.filter.again(len(es), hash)
	x.unsaved = append(x.unsaved, es...)
	return nil
}

// openRun returns the run of idempotency_index that the entries of records
// up to upto go into, inside the open transaction: a new one, or the
// newest if the index holds runsMax runs.
func (w *writer) openRun(ctx context.Context, upto int64) (int64, error) {
	var last, n int64
	if err := w.idemSt.runs.QueryRowContext(ctx).Scan(&last, &n); err != nil {
		return 0, fmt.Errorf("read idempotency runs: %w", err)
	}
	if last > 0 && n >= int64(w.idem.runsMax) {
		if _, err := w.idemSt.extendRun.ExecContext(ctx, last, upto); err != nil {
			return 0, fmt.Errorf("extend idempotency run %d: %w", last, err)
		}
		return last, nil
	}
	if _, err := w.idemSt.newRun.ExecContext(ctx, last+1, upto); err != nil {
		return 0, fmt.Errorf("add idempotency run %d: %w", last+1, err)
	}
	return last + 1, nil
}

// mergeStep merges the next chunk of the frozen table into its run of
// idempotency_index inside the open transaction, and ends the merge (the
// state row) once every entry is written.
func (w *writer) mergeStep() error {
	x := w.idem
	if x.merge == nil {
		select {
		case es := <-x.sorted:
			x.merge = es
		default:
			return nil // nothing frozen, or still sorting
		}
	}
	start := x.merged + x.txMerged
	if start == 0 {
		// The merge's first chunk (again, if its transaction rolled back).
		run, err := w.openRun(context.Background(), x.frozenMax)
		if err != nil {
			return fmt.Errorf("merge idempotency index: %w", err)
		}
		x.mergeRun = run
	}
	n := max(idemFlushChunk, 2*len(x.pending))
	end := min(len(x.merge), start+n)
	chunk := x.merge[start:end]
	args := make([]any, 0, 3*idemFlushRows)
	flush := func(st *sql.Stmt) error {
		_, err := st.ExecContext(context.Background(), args...)
		args = args[:0]
		return err
	}
	purged := max(x.purgedUpto, x.txPurgedUpto)
	for _, e := range chunk {
		if e.row <= purged {
			continue // purged before it was merged
		}
		args = append(args, x.mergeRun, e.hash, e.row)
		if len(args) == cap(args) {
			if err := flush(w.idemSt.mergeMany); err != nil {
				return fmt.Errorf("merge idempotency index: %w", err)
			}
		}
	}
	for i := 0; i < len(args); i += 3 {
		if _, err := w.idemSt.mergeOne.ExecContext(context.Background(), args[i:i+3]...); err != nil {
			return fmt.Errorf("merge idempotency index: %w", err)
		}
	}
	x.txMerged += len(chunk)
	if end == len(x.merge) {
		if _, err := w.idemSt.state.ExecContext(context.Background(), x.frozenMax); err != nil {
			return fmt.Errorf("merge idempotency index: state: %w", err)
		}
		// The saved entries of what the merge indexed.
		if _, err := w.idemSt.saveMerged.ExecContext(context.Background(), x.frozenMax); err != nil {
			return fmt.Errorf("merge idempotency index: saved entries: %w", err)
		}
		x.txDone = true
	}
	return nil
}

// saveStep appends the committed entries not yet saved as one row of
// idempotency_saved inside the open transaction, once there are
// saveChunk of them: at most idemSaveRowsMax chunks' worth (the records
// an Open read one by one, the first time after an upgrade, take a few
// transactions).
func (w *writer) saveStep() error {
	x := w.idem
	if len(x.unsaved) < x.saveChunk {
		return nil
	}
	es := x.unsaved[:min(len(x.unsaved), idemSaveRowsMax*x.saveChunk)]
	upto := es[len(es)-1].row
	if _, err := w.idemSt.saveStale.ExecContext(context.Background(), x.savedUpto); err != nil {
		return fmt.Errorf("save idempotency entries: %w", err)
	}
	if _, err := w.idemSt.save.ExecContext(context.Background(), upto, x.savedUpto, encodeSaved(x.savedUpto, es)); err != nil {
		return fmt.Errorf("save idempotency entries: %w", err)
	}
	x.txSaved, x.txSavedUpto = len(es), upto
	return nil
}

// idemSaveRowsMax bounds one row of idempotency_saved to this many times
// idemSaveChunk entries (about 600 KiB).
const idemSaveRowsMax = 16

// encodeSaved returns es, in rowid order after after, as a row's entries
// (migration 0022): each rowid's difference from the one before as a
// uvarint, then the hash's 8 bytes, big-endian.
func encodeSaved(after int64, es []idemEntry) []byte {
	b := make([]byte, 0, len(es)*(8+3))
	prev := after
	for _, e := range es {
		b = binary.AppendUvarint(b, uint64(e.row-prev))      //nolint:gosec // G115: rowids ascend
		b = binary.BigEndian.AppendUint64(b, uint64(e.hash)) //nolint:gosec // G115: the hash's 64 bits, reinterpreted
		prev = e.row
	}
	return b
}

// decodeSaved appends to es the entries of a row of idempotency_saved
// that covers (after, upto], and reports whether they were whole, in
// ascending order and within that range.
func decodeSaved(es []idemEntry, after, upto int64, b []byte) ([]idemEntry, bool) {
	row := after
	for len(b) > 0 {
		d, n := binary.Uvarint(b)
		if n <= 0 || d == 0 || len(b) < n+8 || row >= upto || d > uint64(upto-row) { //nolint:gosec // G115: upto > row here
			return es, false
		}
		row += int64(d)                                                             //nolint:gosec // G115: at most upto - row
		es = append(es, idemEntry{int64(binary.BigEndian.Uint64(b[n : n+8])), row}) //nolint:gosec // G115: the hash's 64 bits, reinterpreted
		b = b[n+8:]
	}
	return es, true
}

// itemFailed forgets the records an item reserved since mark: its guard
// failed and its changes were rolled back.
func (x *idemIndex) itemFailed(mark int) { x.pending = x.pending[:mark] }

// rolledBack forgets the open transaction's records and merge progress.
func (x *idemIndex) rolledBack() {
	x.pending = x.pending[:0]
	x.txMerged, x.txDone, x.txPurgedUpto = 0, false, 0
	x.txSaved, x.txSavedUpto = 0, 0
}

// committed moves the transaction's records into the active table, ends a
// finished merge, and freezes the active table once it is full.
func (x *idemIndex) committed() {
	x.purgedUpto = max(x.purgedUpto, x.txPurgedUpto)
	if x.txSaved > 0 {
		x.unsaved = append(x.unsaved[:0], x.unsaved[x.txSaved:]...)
		x.savedUpto, x.txSaved, x.txSavedUpto = x.txSavedUpto, 0, 0
	}
	if len(x.pending) == 0 && x.txMerged == 0 && !x.txDone {
		x.txPurgedUpto = 0
		return
	}
	// The filter before the table, and a filter being built again after
	// it: before, because FindIdempotency asks the filter first, and a key
	// it does not hold must not be in the table either; after, because a
	// build copies the table once it has begun to take new hashes
	// (buildIdemFilter), and a key added to the table after that copy
	// must reach the new filter.
	pending := func(i int) int64 { return x.pending[i].hash }
	x.filter.add(len(x.pending), pending)
	x.mu.Lock()
	for _, p := range x.pending {
		x.active.add(p.hash, p.row)
		x.unsaved = append(x.unsaved, idemEntry{p.hash, p.row})
	}
	x.merged += x.txMerged
	if x.txDone {
		x.filter.askSave(x.mergeRun, x.frozenMax) // a run more that a restart need not read
		x.frozen, x.merge, x.merged, x.mergeRun = nil, nil, 0, 0
	}
	freeze := x.frozen == nil && x.active.len() >= x.tableMax
	if freeze {
		x.frozen, x.active = x.active, newIdemTable()
		x.frozenMax = x.next - 1
	}
	x.mu.Unlock()
	x.filter.again(len(x.pending), pending)
	x.pending = x.pending[:0]
	x.txMerged, x.txDone, x.txPurgedUpto = 0, false, 0
	if freeze {
		// Sorting a full table takes tens of milliseconds: not on the
		// writer. The frozen table is read-only from here on. The
		// goroutine drops the writer's profile labels (commitphases.go).
		go func(t *idemTable) {
			pprof.SetGoroutineLabels(context.Background())
			x.sorted <- t.entries()
		}(x.frozen)
	}
}

// indexRecent puts every row after indexed_upto in the memory table: the
// tables a stopped process held (the active one, and a frozen one whose
// merge it had not finished), as they were, and sets the next rowid. It
// runs at Open, before the writer starts, and only reads: a restart in the
// middle of an event is ready once these entries are read. Most come from
// the rows of idempotency_saved, as far as they are contiguous; the
// records after those are read and hashed one by one (at most about
// idemSaveChunk), and are the first the writer saves again. Reading and
// hashing every record took 1.1-1.2 s on a slow host at 270,000 of them
// (there are at most 2 × IdempotencyTableMax), and indexing them into
// idempotency_index first, ten seconds at 266,000. The first commit that
// finds the table full freezes it and merges it in the background of the commits, as at any
// other time. Entries of a merge the stopped process left half done stay
// in their run and are merged again in the new one: a lookup meets the
// same row twice, and the purge drops both runs in turn.
func (db *DB) indexRecent(ctx context.Context, log *slog.Logger) error {
	start := time.Now()
	x := db.writer.idem
	var upto, maxRow int64
	if err := db.wconn.QueryRowContext(ctx, "SELECT indexed_upto, (SELECT coalesce(max(rowid), 0) FROM idempotency) FROM deferred_indexes WHERE name = 'idempotency'").
		Scan(&upto, &maxRow); err != nil {
		return fmt.Errorf("read idempotency index state: %w", err)
	}
	x.next = max(upto, maxRow) + 1
	// Most of the table's entries come back at once: no growing.
	x.active = &idemTable{rows: make(map[int64]int64, min(max(maxRow-upto, 0), 2*int64(x.tableMax)))}
	saved, err := db.loadSaved(ctx, upto)
	if err != nil {
		return err
	}
	x.savedUpto = saved
	db.recentSaved = x.active.len()
	for saved < maxRow {
		last, err := db.loadRows(ctx, saved)
		if err != nil {
			return fmt.Errorf("read idempotency records after %d: %w", saved, err)
		}
		if last == saved {
			break
		}
		saved = last
	}
	db.recentRead = len(x.unsaved)
	if log != nil && (db.recentSaved > 0 || db.recentRead > 0) {
		log.Info("idempotency keys not yet indexed read back", "saved_entries", db.recentSaved,
			"records_read", db.recentRead, "duration", time.Since(start).Round(time.Millisecond))
	}
	return nil
}

// loadSaved adds to the active table the entries of the rows of
// idempotency_saved after indexed upto, as far as they are contiguous, and
// returns the rowid up to which they cover the records.
func (db *DB) loadSaved(ctx context.Context, upto int64) (int64, error) {
	x := db.writer.idem
	rows, err := db.wconn.QueryContext(ctx, "SELECT upto, after, entries FROM idempotency_saved WHERE upto > ? ORDER BY upto", upto)
	if err != nil {
		return upto, fmt.Errorf("read saved idempotency entries: %w", err)
	}
	defer rows.Close() //nolint:errcheck // read-only: closed and checked at the end; this one is for the early returns
	covered := upto
	var es []idemEntry
	var entries []byte
	for rows.Next() {
		var to, after int64
		if err := rows.Scan(&to, &after, &entries); err != nil {
			return upto, fmt.Errorf("read saved idempotency entries: %w", err)
		}
		if after > covered {
			break // a gap: the records from covered on are read one by one
		}
		var ok bool
		if es, ok = decodeSaved(es[:0], after, to, entries); !ok {
			// Not a row this writer wrote: the records from covered on
			// are read one by one.
			break
		}
		for _, e := range es {
			if e.row > covered {
				x.active.add(e.hash, e.row)
			}
		}
		covered = to
	}
	if err := rows.Close(); err != nil {
		return upto, fmt.Errorf("read saved idempotency entries: %w", err)
	}
	return covered, nil
}

// loadRows adds up to indexRecentRows rows after upto to the active
// table and to the entries to save, and returns the last rowid it read
// (upto if none).
func (db *DB) loadRows(ctx context.Context, upto int64) (int64, error) {
	x := db.writer.idem
	rows, err := db.wconn.QueryContext(ctx, "SELECT rowid, merchant_id, key FROM idempotency WHERE rowid > ? ORDER BY rowid LIMIT ?",
		upto, indexRecentRows)
	if err != nil {
		return upto, err
	}
	defer rows.Close() //nolint:errcheck // closed and checked at the end; this one is for the early returns
	last := upto
	var merchantID, key []byte
	for rows.Next() {
		var row int64
		if err := rows.Scan(&row, &merchantID, &key); err != nil {
			return upto, err
		}
		h := idemHash(merchantID, key)
		x.active.add(h, row)
		x.unsaved = append(x.unsaved, idemEntry{h, row})
		last = row
	}
	return last, rows.Close()
}

// purge deletes up to o.purgeLimit of the oldest records created before
// o.purgeBefore, and then entries of the runs of idempotency_index whose
// records are all purged (dropRuns). Records are in rowid order of
// creation (within the few milliseconds a request takes): the purge stops
// at the first one not yet expired. The entries of purged records in a run
// that still indexes live ones stay until the run goes: they point at no
// row, and a lookup finds nothing through them.
func (w *writer) purge(ctx context.Context, o *op) (int, error) {
	surgepay.CountStatement(ctx, surgepay.StmtSelect)
	rows, err := w.idemSt.purgeScan.QueryContext(context.Background(), o.purgeLimit)
	if err != nil {
		return 0, fmt.Errorf("purge idempotency records: %w", err)
	}
	cutoff := o.purgeBefore.UnixNano()
	var last int64
	for rows.Next() {
		var row, created int64
		if err := rows.Scan(&row, &created); err != nil {
			_ = rows.Close() // the scan's error is the one to report
			return 0, fmt.Errorf("purge idempotency records: %w", err)
		}
		if created >= cutoff {
			break
		}
		last = row
	}
	if err := rows.Close(); err != nil {
		return 0, fmt.Errorf("purge idempotency records: %w", err)
	}
	var n int64
	if last > 0 {
		if n, err = exec(ctx, surgepay.StmtDelete, w.idemSt.purgeRows, last); err != nil {
			return 0, fmt.Errorf("purge idempotency records: %w", err)
		}
		// Rows still in the memory tables are skipped when merged; a
		// lookup that finds their rowid finds no row.
		w.idem.txPurgedUpto = max(w.idem.txPurgedUpto, last)
	}
	if err := w.dropRuns(ctx, max(w.idem.dropMin, 2*int(n))); err != nil {
		return 0, err
	}
	return int(n), nil
}

// dropRuns deletes up to limit entries (and a few more of the same hash)
// of the runs of idempotency_index whose records are all purged, oldest
// first, and a run's row once its entries are gone. The run a merge is
// writing is never one of them: its records are not all purged, or the
// merge goes on writing after them.
func (w *writer) dropRuns(ctx context.Context, limit int) error {
	for limit > 0 {
		var run int64
		surgepay.CountStatement(ctx, surgepay.StmtSelect)
		err := w.idemSt.deadRun.QueryRowContext(context.Background(), w.idem.next, w.idem.mergeRun).Scan(&run)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("find purged idempotency runs: %w", err)
		}
		n, err := exec(ctx, surgepay.StmtDelete, w.idemSt.dropEntries, run, limit-1)
		if err != nil {
			return fmt.Errorf("drop idempotency run %d: %w", run, err)
		}
		gone, err := exec(ctx, surgepay.StmtDelete, w.idemSt.dropRun, run)
		if err != nil {
			return fmt.Errorf("drop idempotency run %d: %w", run, err)
		}
		if gone == 0 {
			return nil // limit reached inside the run
		}
		limit -= int(n)
	}
	return nil
}
