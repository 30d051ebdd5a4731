-- 0004_idempotency_rowid: idempotency records in a rowid table with a
-- unique index on (merchant_id, key), instead of a WITHOUT ROWID table keyed
-- by it.
--
-- Idempotency keys are the clients' own, random strings. Keyed by them, the
-- table took every record (with its ~1 KB response body) at a random place
-- in one large B-tree; once that tree outgrew the page cache, each insert
-- read pages, and the single writer slowed as the database grew: three
-- back-to-back 12 s runs at 5,000 streamlined sales/s (180,000 sales) gave
-- p99 24 -> 47 -> 131 ms. Now the records are appended in rowid order and
-- only the small index of keys takes random inserts: 17 -> 39 -> 46 ms on
-- the same runs (bench/RESULTS.md).
--
-- The view sales and its trigger insert into idempotency, so they are
-- dropped first and recreated, unchanged from 0003, at the end.
DROP VIEW sales;

CREATE TABLE idempotency_new (
	merchant_id  TEXT NOT NULL,
	key          TEXT NOT NULL,
	request_hash BLOB NOT NULL,
	status_code  INTEGER NOT NULL,
	body         BLOB,
	created      INTEGER NOT NULL
) STRICT;
INSERT INTO idempotency_new (merchant_id, key, request_hash, status_code, body, created)
	SELECT merchant_id, key, request_hash, status_code, body, created FROM idempotency ORDER BY created;
DROP TABLE idempotency;
ALTER TABLE idempotency_new RENAME TO idempotency;
CREATE UNIQUE INDEX idempotency_key ON idempotency (merchant_id, key);
CREATE INDEX idempotency_created ON idempotency (created);

CREATE VIEW sales (
	idem_merchant_id, idem_key, idem_request_hash, idem_status_code, idem_body, idem_created,
	merchant_id, id, customer_id, payment_method_id, amount, amount_tax, currency,
	capture_method, status, amount_authorized, amount_captured, amount_refunded, description, metadata,
	tax, decline_code, failure_message, authorization_ref, transactions, pending, path, version, created, updated,
	staged_id, staged_merchant_id, staged_payment_id, staged_sealed, staged_created
) AS SELECT
	NULL, NULL, NULL, NULL, NULL, NULL,
	NULL, NULL, NULL, NULL, NULL, NULL, NULL,
	NULL, NULL, NULL, NULL, NULL, NULL, NULL,
	NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
	NULL, NULL, NULL, NULL, NULL
WHERE 0;

-- A key already stored is refused with RAISE(ABORT), which backs out the
-- whole INSERT INTO sales (and so the payment and staged rows too) and
-- leaves the transaction open; the store maps this message to the guard
-- error ECONFLICT idempotency_key_exists. changes() is the count of rows of
-- the trigger's previous INSERT: 0 when the key existed.
CREATE TRIGGER sales_insert INSTEAD OF INSERT ON sales
BEGIN
	INSERT INTO idempotency (merchant_id, key, request_hash, status_code, body, created)
		SELECT NEW.idem_merchant_id, NEW.idem_key, NEW.idem_request_hash, NEW.idem_status_code,
			NEW.idem_body, NEW.idem_created
		WHERE NEW.idem_key IS NOT NULL
		ON CONFLICT DO NOTHING;
	SELECT RAISE(ABORT, 'surgepay: idempotency_key_exists')
		WHERE NEW.idem_key IS NOT NULL AND changes() = 0;
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
