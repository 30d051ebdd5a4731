-- 0010_deferred_indexes: the two indexes that took a random leaf per sale
-- (idempotency keys; payments by customer) are written in sorted chunks
-- instead, behind the rows (see idemindex.go and custindex.go); staged
-- records move to a rowid table.
--
-- Every group commit writes each page it changed, whole, to the WAL, and
-- the checkpoint writes it again. Appended rows share their pages; an
-- index insert at a random place is one page per sale. At 3,000 sales/s
-- these two indexes were about half of the 40 KB written per sale.
--
-- deferred_indexes: per index, the rowid of its table up to which every
-- row is in the index. Rows after it are the index's tail.
--
-- Idempotency keys are the clients' own random strings. The unique index
-- idempotency_key (merchant_id, key) took every sale's key at a random
-- leaf: each group commit wrote one whole 4 KiB page per sale to the WAL,
-- and the checkpoint wrote it again (bench/RESULTS.md, issue 14). Now:
--   - idempotency rows are appended with a rowid the writer assigns, and
--     carry no index of their own;
--   - idempotency_index maps a 64-bit hash of (merchant_id, key) to the
--     rowid, for every row up to deferred_indexes.indexed_upto;
--   - rows after it are indexed by the serving process in memory, and
--     merged into idempotency_index in hash order, a few hundred entries
--     per commit; a process that opens the database indexes the rows after
--     indexed_upto first (after a crash, that is the memory it lost).
-- A key's uniqueness is checked by the writer: in memory for the newest
-- rows, and here, by the trigger of sales or the guarded INSERT, for the
-- rows in idempotency_index. idempotency_created goes too: the purge walks
-- the rows in rowid order, which is the order of creation.
--
-- The hash is a signed INTEGER (SQLite's integers are signed): the first 8
-- bytes of SHA-256 over merchant_id, a zero byte and key. Two keys with one
-- hash are both kept: a lookup compares merchant_id and key.
DROP VIEW sales;
DROP INDEX idempotency_key;
DROP INDEX idempotency_created;

CREATE TABLE idempotency_index (
	hash INTEGER NOT NULL,
	row  INTEGER NOT NULL,
	PRIMARY KEY (hash, row)
) STRICT, WITHOUT ROWID;

CREATE TABLE deferred_indexes (
	name         TEXT NOT NULL PRIMARY KEY,
	indexed_upto INTEGER NOT NULL
) STRICT;
-- Existing idempotency records are indexed by the first Open (in Go: the
-- hash is SHA-256).
INSERT INTO deferred_indexes (name, indexed_upto) VALUES ('idempotency', 0);

-- Payments by customer, newest first (GET /v1/payments?customer=): the
-- index payments_customer (merchant_id, customer_id, id) took each sale at
-- its customer's place, one leaf per sale once a merchant has many
-- customers. payments_by_customer holds the same keys for the payments up
-- to indexed_upto; the writer merges the tail in chunks of
-- customerMergeRows rows, sorted, and a list reads the index and the tail
-- (a short rowid range). Payments are never deleted and never change
-- customer.
DROP INDEX payments_customer;
CREATE TABLE payments_by_customer (
	merchant_id TEXT NOT NULL,
	customer_id TEXT NOT NULL,
	id          TEXT NOT NULL,
	PRIMARY KEY (merchant_id, customer_id, id)
) STRICT, WITHOUT ROWID;
INSERT INTO payments_by_customer (merchant_id, customer_id, id)
	SELECT merchant_id, customer_id, id FROM payments ORDER BY merchant_id, customer_id, id;
INSERT INTO deferred_indexes (name, indexed_upto)
	VALUES ('payments_by_customer', (SELECT coalesce(max(rowid), 0) FROM payments));

-- staged_captures becomes a rowid table with a unique index on id (it was
-- WITHOUT ROWID, keyed by id). SQLite appends to a rowid table's last leaf
-- by starting a new leaf when it is full; a full leaf of an index B-tree
-- (which a WITHOUT ROWID table is) is rebalanced with its siblings and
-- their parent, three or four pages, and a staged record of ~400 bytes
-- filled a leaf every few sales: about one page per sale in every commit.
-- The index on id holds short keys, so it splits rarely.
CREATE TABLE staged_captures_new (
	id          TEXT NOT NULL UNIQUE,
	merchant_id TEXT NOT NULL,
	payment_id  TEXT NOT NULL,
	sealed      BLOB NOT NULL,
	created     INTEGER
) STRICT;
INSERT INTO staged_captures_new (id, merchant_id, payment_id, sealed, created)
	SELECT id, merchant_id, payment_id, sealed, created FROM staged_captures ORDER BY id;
DROP TABLE staged_captures;
ALTER TABLE staged_captures_new RENAME TO staged_captures;

-- sales: as in 0004, with the idempotency record's rowid and hash.
CREATE VIEW sales (
	idem_rowid, idem_hash,
	idem_merchant_id, idem_key, idem_request_hash, idem_status_code, idem_body, idem_created,
	merchant_id, id, customer_id, payment_method_id, amount, amount_tax, currency,
	capture_method, status, amount_authorized, amount_captured, amount_refunded, description, metadata,
	tax, decline_code, failure_message, authorization_ref, transactions, pending, path, version, created, updated,
	staged_id, staged_merchant_id, staged_payment_id, staged_sealed, staged_created
) AS SELECT
	NULL, NULL,
	NULL, NULL, NULL, NULL, NULL, NULL,
	NULL, NULL, NULL, NULL, NULL, NULL, NULL,
	NULL, NULL, NULL, NULL, NULL, NULL, NULL,
	NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
	NULL, NULL, NULL, NULL, NULL
WHERE 0;

-- A key already in idempotency_index is refused with RAISE(ABORT), which
-- backs out the whole INSERT INTO sales and leaves the transaction open;
-- the store maps this message to the guard error ECONFLICT
-- idempotency_key_exists. Keys not yet in idempotency_index were checked
-- by the writer before this statement.
CREATE TRIGGER sales_insert INSTEAD OF INSERT ON sales
BEGIN
	SELECT RAISE(ABORT, 'surgepay: idempotency_key_exists')
		WHERE NEW.idem_key IS NOT NULL AND EXISTS (
			SELECT 1 FROM idempotency_index x JOIN idempotency i ON i.rowid = x.row
			WHERE x.hash = NEW.idem_hash AND i.merchant_id = NEW.idem_merchant_id AND i.key = NEW.idem_key);
	INSERT INTO idempotency (rowid, merchant_id, key, request_hash, status_code, body, created)
		SELECT NEW.idem_rowid, NEW.idem_merchant_id, NEW.idem_key, NEW.idem_request_hash, NEW.idem_status_code,
			NEW.idem_body, NEW.idem_created
		WHERE NEW.idem_key IS NOT NULL;
	INSERT INTO payments (merchant_id, id, customer_id, payment_method_id, amount, amount_tax, currency,
		capture_method, status, amount_authorized, amount_captured, amount_refunded, description, metadata,
		tax, decline_code, failure_message, authorization_ref, transactions, pending, path, version, created, updated)
	VALUES (NEW.merchant_id, NEW.id, NEW.customer_id, NEW.payment_method_id, NEW.amount, NEW.amount_tax,
		NEW.currency, NEW.capture_method, NEW.status, NEW.amount_authorized, NEW.amount_captured,
		NEW.amount_refunded, NEW.description, NEW.metadata, NEW.tax, NEW.decline_code, NEW.failure_message,
		NEW.authorization_ref, NEW.transactions, NEW.pending, NEW.path, NEW.version, NEW.created, NEW.updated);
	INSERT INTO staged_captures (id, merchant_id, payment_id, sealed, created)
		SELECT NEW.staged_id, NEW.staged_merchant_id, NEW.staged_payment_id, NEW.staged_sealed, NEW.staged_created
		WHERE NEW.staged_id IS NOT NULL;
END;
