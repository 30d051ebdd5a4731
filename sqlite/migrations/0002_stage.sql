-- 0002_stage: the embedded stage of streamlined sales.
--
-- staged_captures holds sealed capture instructions (surgepay.StagedRecord)
-- until settlement acknowledges them (Write.StagedAck deletes them). IDs are
-- surgepay.NewID strings, which sort by creation time, so the primary key is
-- the index of oldest-first fetches (FetchStaged: id > ? ORDER BY id
-- LIMIT ?). WITHOUT ROWID makes that key the table's only b-tree: a staged
-- sale inserts into one b-tree here, not a table and its key index.
CREATE TABLE staged_captures (
	id          TEXT NOT NULL PRIMARY KEY,
	merchant_id TEXT NOT NULL,
	payment_id  TEXT NOT NULL,
	sealed      BLOB NOT NULL,
	created     INTEGER
) STRICT, WITHOUT ROWID;

-- staged_sales exists to be inserted into: one INSERT of one row stores a
-- streamlined sale, which is the budget of the streamlined path (one SQL
-- statement per request). Its INSTEAD OF trigger inserts the idempotency
-- record (when idem_key is not NULL), the payment and the staged capture:
-- the same rows, column for column, as the separate INSERTs of the general
-- write path. SQLite runs a statement and its triggers atomically, so when
-- the trigger raises, nothing of the three is stored.
--
-- Why a view and not columns on payments with an AFTER INSERT trigger: the
-- payments table stays as it was, and a view holds no rows.
--
-- The columns have no declared types (they are NULL expressions), so SQLite
-- applies no affinity: each value reaches the STRICT tables as it was bound.
-- The view reads no rows (WHERE 0). A migration that adds a column to one
-- of the three tables must recreate the view and its trigger.
CREATE VIEW staged_sales (
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
-- whole INSERT INTO staged_sales (and so the payment and staged rows too)
-- and leaves the transaction open; the store maps this message to the
-- guard error ECONFLICT idempotency_key_exists. changes() is the count of
-- rows of the trigger's previous INSERT: 0 when the key existed.
CREATE TRIGGER staged_sales_insert INSTEAD OF INSERT ON staged_sales
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
	VALUES (NEW.staged_id, NEW.staged_merchant_id, NEW.staged_payment_id, NEW.staged_sealed, NEW.staged_created);
END;
