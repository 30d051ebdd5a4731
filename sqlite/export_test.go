package sqlite

import (
	"context"
	"database/sql"
	"slices"
)

// IdemFilterReady reports whether the filter of idempotency keys is built.
func (db *DB) IdemFilterReady() bool { return db.writer.idem.filter.cur.Load() != nil }

// IdemFilterSkips counts the lookups the filter answered.
func (db *DB) IdemFilterSkips() uint64 { return db.writer.idem.filter.absents[idemLookup].Load() }

// BreakIdemFilter empties the filter in use, as a filter that lost stored
// keys would be: for tests that the writer's uniqueness check needs it.
func (db *DB) BreakIdemFilter() { db.writer.idem.filter.cur.Store(newBloom(idemFilterKeysMin)) }

// Checkpoint runs one background checkpoint now.
func (db *DB) Checkpoint() { db.checkpoint() }

// SetStagedCountChunk sets the records one statement of StagedBacklog
// counts.
func (db *DB) SetStagedCountChunk(n int) { db.stagedChunk = n }

// RebuildIdemFilter builds the filter of idempotency keys again as a
// rebuild under load does (paced), in chunks of chunk hashes.
func (db *DB) RebuildIdemFilter(ctx context.Context, chunk int) error {
	return db.buildIdemFilterChunk(ctx, true, chunk)
}

// SetRunDropMin sets the fewest entries of purged runs of
// idempotency_index one purge deletes.
func (db *DB) SetRunDropMin(n int) { db.writer.idem.dropMin = n }

// IdemHash is idempotency_index's hash of merchantID's key.
func IdemHash(merchantID, key string) int64 { return idemHash(merchantID, key) }

// MigrateTo creates the database file at path with the migrations up to
// version only: a file an older surgepay left.
func MigrateTo(ctx context.Context, path string, version int) error {
	ms, err := listMigrations()
	if err != nil {
		return err
	}
	ms = slices.DeleteFunc(ms, func(m migration) bool { return m.version > version })
	db, err := sql.Open("sqlite", path)
	if err != nil {
		return err
	}
	defer db.Close()
	return migrate(ctx, db, ms, nil)
}

// SetIdemSaveChunk sets the fewest entries of the memory table of
// idempotency keys one row of idempotency_saved holds. Call it before
// the first Apply.
func (db *DB) SetIdemSaveChunk(n int) { db.writer.idem.saveChunk = n }

// IdemReadBack returns what Open read back into the memory table of
// idempotency keys: entries from idempotency_saved, and records read one
// by one.
func (db *DB) IdemReadBack() (saved, read int) { return db.recentSaved, db.recentRead }

// IdemFilterLoaded reports whether Open's filter of idempotency keys came
// from its saved file, and how many entries of idempotency_index it read
// to complete it.
func (db *DB) IdemFilterLoaded() (bool, int) {
	n := db.writer.idem.filter.loaded.Load()
	return n > 0, int(max(n-1, 0))
}

// IdemFilterSaved is the newest run of idempotency_index the last save of
// the filter covered and that run's upto then (0, 0: none saved).
func (db *DB) IdemFilterSaved() (run, upto int64) {
	if s := db.writer.idem.filter.saved.Load(); s != nil {
		return s.run, s.upto
	}
	return 0, 0
}

// IdemFilterMayHold reports whether the filter in use may hold merchantID's
// key (true while none is built).
func (db *DB) IdemFilterMayHold(merchantID, key string) bool {
	b := db.writer.idem.filter.cur.Load()
	return b == nil || b.mayContain(idemHash(merchantID, key))
}

// HoldReads takes every connection of the API's read pool, as the API's
// reads do after a restart under load, until release.
func (db *DB) HoldReads(ctx context.Context) (release func(), err error) {
	var conns []*sql.Conn
	release = func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}
	for range db.read.Stats().MaxOpenConnections {
		c, err := db.read.Conn(ctx)
		if err != nil {
			release()
			return nil, err
		}
		conns = append(conns, c)
	}
	return release, nil
}
