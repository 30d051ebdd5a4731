-- 0003_sale: one statement for every sale, staged or not.
--
-- Replaces the view staged_sales (0002) with sales: the same columns, and a
-- trigger that inserts the staged capture only when staged_id is not NULL.
-- One INSERT of one row now stores a sale's idempotency record (when
-- idem_key is not NULL), its payment, and its staged capture (when
-- staged_id is not NULL): the same rows, column for column, as the separate
-- INSERTs of the general write path. SQLite runs a statement and its
-- triggers atomically, so when the trigger raises, nothing of the Write's
-- rows is stored. Dropping the view drops its trigger.
--
-- The columns have no declared types (they are NULL expressions), so SQLite
-- applies no affinity: each value reaches the STRICT tables as it was bound.
-- The view reads no rows (WHERE 0). A migration that adds a column to one
-- of the three tables must recreate the view and its trigger.
DROP VIEW staged_sales;

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
