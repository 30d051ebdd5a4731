-- 0013_idempotency_runs: idempotency_index is kept as runs, one per merged
-- memory table, each appended in hash order.
--
-- Until now each memory table of keys (idemindex.go) was merged into one
-- B-tree of every key: its sorted chunk still landed on leaves spread over
-- the whole index, and as the index grew each chunk touched more of them.
-- Over a half hour at 5,000 sales/s this was two thirds of what grew in CPU
-- per request (the merge +4.9 µs, reading those leaves from the file +3.6
-- µs by minute 28) and 165 → 594 bytes written a sale (bench/RESULTS.md,
-- issue 14, sessions 19-20). Now the key begins with the run: a merge
-- appends its sorted entries at the end of its own run, a few pages a
-- commit whatever the index's size.
--
-- idempotency_runs: one row per run; upto is the highest idempotency rowid
-- the run may hold. A lookup probes each run (run = ? AND hash = ?): the
-- runs are few (at most Config.IdempotencyRunsMax; past it a merge goes
-- into the newest run), and a lookup reaches SQL only when the filter of
-- stored keys holds the hash (migration 0011). A run whose records are all
-- purged is deleted whole, in chunks, by the purge (which no longer
-- deletes entries one by one); until then the entries of its purged
-- records point at no row and match nothing.
--
-- The entries already merged become run 1.
DROP TRIGGER sales_insert;

CREATE TABLE idempotency_runs (
	run  INTEGER PRIMARY KEY,
	upto INTEGER NOT NULL
) STRICT;

CREATE TABLE idempotency_index_runs (
	run  INTEGER NOT NULL,
	hash INTEGER NOT NULL,
	row  INTEGER NOT NULL,
	PRIMARY KEY (run, hash, row)
) STRICT, WITHOUT ROWID;
INSERT INTO idempotency_index_runs (run, hash, row)
	SELECT 1, hash, row FROM idempotency_index ORDER BY hash, row;
INSERT INTO idempotency_runs (run, upto)
	SELECT 1, (SELECT max(row) FROM idempotency_index) WHERE EXISTS (SELECT 1 FROM idempotency_index);
DROP TABLE idempotency_index;
ALTER TABLE idempotency_index_runs RENAME TO idempotency_index;

-- As in 0012, the probe over the runs.
CREATE TRIGGER sales_insert INSTEAD OF INSERT ON sales
BEGIN
	SELECT RAISE(FAIL, 'surgepay: idempotency_key_exists')
		WHERE NEW.idem_key IS NOT NULL AND NEW.idem_hash IS NOT NULL AND EXISTS (
			SELECT 1 FROM idempotency_index x JOIN idempotency i ON i.rowid = x.row
			WHERE x.run IN (SELECT run FROM idempotency_runs) AND x.hash = NEW.idem_hash
				AND i.merchant_id = NEW.idem_merchant_id AND i.key = NEW.idem_key);
	INSERT INTO idempotency (rowid, merchant_id, key, request_hash, status_code, body, created)
		SELECT NEW.idem_rowid, NEW.idem_merchant_id, NEW.idem_key, NEW.idem_request_hash, NEW.idem_status_code,
			NEW.idem_body, NEW.idem_created
		WHERE NEW.idem_key IS NOT NULL;
	INSERT INTO payments (merchant_id, id, customer_id, payment_method_id, amount, amount_tax, currency,
		capture_method, status, amount_authorized, amount_captured, amount_refunded, description, metadata,
		tax, decline_code, failure_message, authorization_ref, transactions, pending, path, version, created, updated,
		processor_ref)
	VALUES (NEW.merchant_id, NEW.id, NEW.customer_id, NEW.payment_method_id, NEW.amount, NEW.amount_tax,
		NEW.currency, NEW.capture_method, NEW.status, NEW.amount_authorized, NEW.amount_captured,
		NEW.amount_refunded, NEW.description, NEW.metadata, NEW.tax, NEW.decline_code, NEW.failure_message,
		NEW.authorization_ref, NEW.transactions, NEW.pending, NEW.path, NEW.version, NEW.created, NEW.updated,
		NEW.processor_ref);
	INSERT INTO staged_captures (id, merchant_id, payment_id, sealed, created)
		SELECT NEW.staged_id, NEW.staged_merchant_id, NEW.staged_payment_id, NEW.staged_sealed, NEW.staged_created
		WHERE NEW.staged_id IS NOT NULL;
END;
