package sqlite

import "context"

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
	db.idemFilterChunk = chunk
	return db.buildIdemFilter(ctx, true)
}
