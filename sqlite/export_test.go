package sqlite

// IdemFilterReady reports whether the filter of idempotency keys is built.
func (db *DB) IdemFilterReady() bool { return db.writer.idem.filter.cur.Load() != nil }

// IdemFilterSkips counts the lookups the filter answered.
func (db *DB) IdemFilterSkips() uint64 { return db.writer.idem.filter.skips.Load() }
