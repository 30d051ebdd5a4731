package sqlite

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"
)

// The saved filter of idempotency keys. The first filter after Open is
// built by reading every entry of idempotency_index: seconds for millions
// of keys, and until it is built every sale reads the index twice (the
// lookup, the writer's probe). After a crash in the middle of an event
// that was the slow part of coming back: at 2,500 sales/s on a slow host,
// 25 seconds of 503s after a restart at 4.4 M keys, though serve was
// ready in 0.13 s (bench/RESULTS.md#overload-and-stalls).
//
// So the filter is saved to a file beside the database (Config.Path +
// idemFilterSuffix) after its first build and after every merge that
// ends, and the next Open starts from it: it reads only the runs of
// idempotency_index the file does not cover, at most the run a crash cut
// and the one before it. The file is a cache: written whole and renamed
// over the old one, never synced; a file that is torn, of another
// database, or for a smaller filter than Config.IdempotencyFilterKeys is
// ignored and the filter built as before.
//
// Why the file holds every key it claims: it names a run of
// idempotency_index and that run's upto, and the filter holds every entry
// of that run and the runs before it. After the first build, the run is
// the newest as the build began (it read them all); after a merge this
// process ended, the run it merged into: the filter held those entries
// since their records committed (a record's hash enters the filter in use,
// and one being built, when its transaction commits), and the runs before
// it were read by the build or merged by this process too. (Only serve
// writes idempotency records, so no other process merges; another
// process, such as a surgepay command beside serve, saves after its build
// only.) Open reads only what came later: the runs after it, and that run
// again if a merge has since extended it (Config.IdempotencyRunsMax). To
// know the file is this database's, it also names two entries of that run
// (its lowest and highest hash), which must still be there: a run's
// entries are deleted only with the run.
//
// Format, little-endian: idemFilterMagic, the run, its upto, its lowest
// and highest hash, the filter's bits, capacity and keys added, its words,
// then a CRC-32C of all that.

// idemFilterSuffix names the saved filter's file after the database's.
const idemFilterSuffix = "-idemfilter"

// idemFilterMagic begins a saved filter (its format's version is the
// last byte).
const idemFilterMagic = "SPIDEMF1"

// idemFilterHeader is the bytes before the words: the magic and seven
// 8-byte fields.
const idemFilterHeader = len(idemFilterMagic) + 7*8

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// idemNewestRunQuery is the newest run of idempotency_index and its upto.
const idemNewestRunQuery = "SELECT run, upto FROM idempotency_runs ORDER BY run DESC LIMIT 1"

// idemRunEndsQuery is run ?'s lowest and highest hash.
const idemRunEndsQuery = "SELECT (SELECT hash FROM idempotency_index WHERE run = ?1 ORDER BY hash LIMIT 1), " +
	"(SELECT hash FROM idempotency_index WHERE run = ?1 ORDER BY hash DESC LIMIT 1)"

// idemRunCheckQuery is run ?1's upto if it holds the hashes ?2 and ?3.
const idemRunCheckQuery = "SELECT upto FROM idempotency_runs WHERE run = ?1 " +
	"AND EXISTS (SELECT 1 FROM idempotency_index WHERE run = ?1 AND hash = ?2) " +
	"AND EXISTS (SELECT 1 FROM idempotency_index WHERE run = ?1 AND hash = ?3)"

// idemFilterSaved is what a saved filter covers.
type idemFilterSaved struct {
	run, upto       int64 // every entry of runs up to run, and of run up to upto
	lowest, highest int64 // two entries of run: the database's
}

// askSave asks the builder to save the filter: this process's merge into
// run has ended, with every record up to upto.
func (f *idemFilter) askSave(run, upto int64) {
	f.saveMu.Lock()
	f.saveMark = idemFilterSaved{run: run, upto: upto}
	f.saveMu.Unlock()
	select {
	case f.save <- struct{}{}:
	default: // one already asked for: it saves the newest mark
	}
}

// saveAsked saves the filter for the mark askSave left.
func (db *DB) saveAsked(ctx context.Context) {
	f := db.writer.idem.filter
	f.saveMu.Lock()
	m := f.saveMark
	f.saveMu.Unlock()
	db.saveIdemFilter(ctx, m)
}

// newestRun returns the newest run of idempotency_index and its upto (0,
// 0 if none), which a build is about to read.
func (db *DB) newestRun(ctx context.Context) (idemFilterSaved, error) {
	var s idemFilterSaved
	err := db.filterRead.QueryRowContext(ctx, idemNewestRunQuery).Scan(&s.run, &s.upto)
	if errors.Is(err, sql.ErrNoRows) {
		return idemFilterSaved{}, nil
	}
	return s, err
}

// saveIdemFilter writes the filter in use to its file as holding every
// entry of the runs up to s.run, and of s.run up to s.upto, if the
// database is a file and that run has entries. A failure is logged: the
// next Open builds the filter as it would without the file.
func (db *DB) saveIdemFilter(ctx context.Context, s idemFilterSaved) {
	f := db.writer.idem.filter
	b := f.cur.Load()
	if db.filterPath == "" || b == nil || s.run == 0 {
		return
	}
	start := time.Now()
	var lowest, highest sql.NullInt64
	err := db.filterRead.QueryRowContext(ctx, idemRunEndsQuery, s.run).Scan(&lowest, &highest)
	if err == nil && !lowest.Valid {
		return // every record of the run was purged before its merge: nothing to name it by
	}
	if err == nil {
		s.lowest, s.highest = lowest.Int64, highest.Int64
		err = writeIdemFilter(db.filterPath, b, s)
	}
	if err != nil {
		if db.log != nil {
			db.log.Warn("sqlite: save the filter of idempotency keys; a restart builds it from the index", "err", err.Error())
		}
		return
	}
	f.saved.Store(&s)
	if db.log != nil {
		db.log.Debug("sqlite: saved the filter of idempotency keys", "run", s.run, "duration", time.Since(start).Round(time.Millisecond))
	}
}

// writeIdemFilter writes b, which covers s, to path: to a new file beside
// it (mode 0600), then renamed over it.
func writeIdemFilter(path string, b *bloom, s idemFilterSaved) (err error) {
	file, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	tmp := file.Name()
	defer func() {
		if err != nil {
			_ = file.Close()   // closed already, or the write's error is the one to report
			_ = os.Remove(tmp) // likewise
		}
	}()
	crc := crc32.New(castagnoli)
	w := bufio.NewWriterSize(file, 64<<10)
	buf := make([]byte, 0, 64<<10)
	buf = append(buf, idemFilterMagic...)
	for _, v := range []int64{s.run, s.upto, s.lowest, s.highest, int64(b.bits), b.capacity, b.added.Load()} { //nolint:gosec // G115: bits is a slice's length times 64
		buf = binary.LittleEndian.AppendUint64(buf, uint64(v)) //nolint:gosec // G115: reinterpreted, read back as int64
	}
	flush := func() error {
		crc.Write(buf) //nolint:errcheck // a hash.Hash never fails
		_, err := w.Write(buf)
		buf = buf[:0]
		return err
	}
	for i := range b.words {
		buf = binary.LittleEndian.AppendUint64(buf, b.words[i].Load())
		if len(buf) == cap(buf) {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	if _, err := w.Write(binary.LittleEndian.AppendUint32(nil, crc.Sum32())); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if err := file.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// readIdemFilter returns the filter saved in data and what it covers, or
// an error saying why data is not a whole saved filter.
func readIdemFilter(data []byte) (*bloom, idemFilterSaved, error) {
	var s idemFilterSaved
	if len(data) < idemFilterHeader+4 || !bytes.HasPrefix(data, []byte(idemFilterMagic)) {
		return nil, s, errors.New("not a saved filter of this version")
	}
	body := data[:len(data)-4]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(data[len(data)-4:]) {
		return nil, s, errors.New("checksum mismatch (a torn write?)")
	}
	var v [7]int64
	for i := range v {
		v[i] = int64(binary.LittleEndian.Uint64(body[len(idemFilterMagic)+8*i:])) //nolint:gosec // G115: written from an int64
	}
	s = idemFilterSaved{run: v[0], upto: v[1], lowest: v[2], highest: v[3]}
	bits, capacity, added := v[4], v[5], v[6]
	words := body[idemFilterHeader:]
	if bits <= 0 || bits%64 != 0 || int64(len(words)) != bits/8 || capacity != bits/idemFilterBitsPerKey || added < 0 {
		return nil, s, errors.New("inconsistent sizes")
	}
	b := &bloom{words: make([]atomic.Uint64, bits/64), bits: uint64(bits), capacity: capacity} //nolint:gosec // G115: positive
	for i := range b.words {
		b.words[i].Store(binary.LittleEndian.Uint64(words[8*i:]))
	}
	b.added.Store(added)
	return b, s, nil
}

// loadIdemFilter puts in use the saved filter, completed with the memory
// tables and the runs it does not cover, and reports whether it did; if
// not (no file, or one this database cannot use), the caller builds the
// filter from the index.
func (db *DB) loadIdemFilter(ctx context.Context) bool {
	if db.filterPath == "" {
		return false
	}
	start := time.Now()
	data, err := os.ReadFile(db.filterPath)
	if errors.Is(err, fs.ErrNotExist) {
		return false
	}
	notUsed := func(err error) bool {
		if db.log != nil {
			db.log.Info("sqlite: the saved filter of idempotency keys is not used; building it from the index",
				"file", db.filterPath, "reason", err.Error())
		}
		return false
	}
	var b *bloom
	var s idemFilterSaved
	if err == nil {
		b, s, err = readIdemFilter(data)
	}
	var upto int64
	if err == nil {
		err = db.filterRead.QueryRowContext(ctx, idemRunCheckQuery, s.run, s.lowest, s.highest).Scan(&upto)
		switch {
		case errors.Is(err, sql.ErrNoRows) || err == nil && upto < s.upto:
			err = fmt.Errorf("its run %d is not this database's", s.run)
		case err == nil && b.capacity < int64(min(db.idemFilterKeys, idemFilterKeysMax)):
			err = fmt.Errorf("it holds %d keys, fewer than idempotency_filter_keys (%d)", b.capacity, db.idemFilterKeys)
		}
	}
	if err != nil {
		return notUsed(err)
	}
	// The run it names again if a merge has extended it since.
	from := s.run + 1
	if upto > s.upto {
		from = s.run
	}
	db.filterBuild.Lock()
	read, err := db.fillIdemFilter(ctx, false, idemFilterScanRows, b, from)
	db.filterBuild.Unlock()
	if err != nil {
		return notUsed(err)
	}
	db.writer.idem.filter.loaded.Store(int64(read) + 1)
	if db.log != nil {
		db.log.Info("sqlite: the filter of idempotency keys read from its file", "file", db.filterPath,
			"keys", b.added.Load(), "index_entries_read", read, "duration", time.Since(start).Round(time.Millisecond))
	}
	return true
}

// idemFilterPath is where the filter of the database at path is saved: ""
// for a database that is not a file of its own.
func idemFilterPath(path string) string {
	if path == "" || path == ":memory:" || len(path) >= 5 && path[:5] == "file:" {
		return ""
	}
	return path + idemFilterSuffix
}
