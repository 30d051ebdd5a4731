-- 0022_idempotency_saved: the writer's memory table of idempotency keys
-- is saved as it fills, so that a restart reads it back in a few reads.
--
-- The keys of the records after deferred_indexes.indexed_upto live only in
-- the writer's memory table until a merge writes them into
-- idempotency_index (idemindex.go). A restart used to read every one of
-- those records again and hash its key: up to twice IdempotencyTableMax
-- records spread over tens of thousands of pages among their stored
-- answers, 0.6-1.4 s before serve was ready on a slow host (issue 35
-- item 6). Now the writer appends, every few thousand records, one row
-- holding their (rowid, hash) entries, and Open reads those rows and only
-- the records after the newest of them.
--
-- A row covers the records with a rowid in (after, upto]: entries holds
-- each one's rowid, as the uvarint difference from the one before (from
-- after for the first), and the 8 bytes of its hash, big-endian. Rows are
-- contiguous (each after is the upto of the one before it); Open uses them
-- only as far as they are, and reads the records after that. A merge that
-- ends deletes the rows up to what it indexed.
CREATE TABLE idempotency_saved (
	upto    INTEGER PRIMARY KEY,
	after   INTEGER NOT NULL,
	entries BLOB NOT NULL
) STRICT;
