-- 0012_statement_journal: a sale's statement no longer keeps a statement
-- journal.
--
-- SQLite copies every page a statement changes, before it changes it, to a
-- statement journal when the statement "may abort" inside a transaction,
-- so that an abort can undo that statement alone. The sale's INSERT INTO
-- sales (in the writer's group-commit transaction) did: the copies were
-- 9 % of the writer's apply phase (bench/RESULTS.md, issue 14 session 16).
-- Three things marked it: the trigger's RAISE(ABORT), the constraints'
-- default ABORT, and the function GLOB in the WHERE of the partial index
-- payments_processor_ref (an index's expression may raise an error, so
-- SQLite marks every statement that writes the index). The writer needs
-- none of it: a sale's only expected failure, a stored idempotency key, is
-- raised by the trigger before the statement changes a row, so RAISE(FAIL)
-- (stop, keep what the statement did: nothing) is enough; any other error
-- rolls back the whole transaction (write.go, commitTx), so the writer
-- runs the statement as INSERT OR ROLLBACK, which also ends the
-- transaction on a constraint error.
--
-- The index: routed payments ("processor:ref", FindPaymentByRef) get their
-- reference in processor_ref as well, NULL for every other payment, and
-- the index holds the non-NULL ones: a partial index with no function.
ALTER TABLE payments ADD COLUMN processor_ref TEXT;
UPDATE payments SET processor_ref = authorization_ref WHERE authorization_ref GLOB '*:*';
DROP INDEX payments_processor_ref;
CREATE INDEX payments_processor_ref ON payments (processor_ref) WHERE processor_ref IS NOT NULL;

-- sales: as in 0010, with the payment's processor_ref.
DROP VIEW sales;
CREATE VIEW sales (
	idem_rowid, idem_hash,
	idem_merchant_id, idem_key, idem_request_hash, idem_status_code, idem_body, idem_created,
	merchant_id, id, customer_id, payment_method_id, amount, amount_tax, currency,
	capture_method, status, amount_authorized, amount_captured, amount_refunded, description, metadata,
	tax, decline_code, failure_message, authorization_ref, transactions, pending, path, version, created, updated,
	processor_ref,
	staged_id, staged_merchant_id, staged_payment_id, staged_sealed, staged_created
) AS SELECT
	NULL, NULL,
	NULL, NULL, NULL, NULL, NULL, NULL,
	NULL, NULL, NULL, NULL, NULL, NULL, NULL,
	NULL, NULL, NULL, NULL, NULL, NULL, NULL,
	NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
	NULL,
	NULL, NULL, NULL, NULL, NULL
WHERE 0;

-- As in 0011, but RAISE(FAIL): the probe is the trigger's first step, so
-- nothing of the sale is stored when it raises, and the transaction stays
-- open for the batch's other Writes. The store maps the message to the
-- guard error ECONFLICT idempotency_key_exists.
CREATE TRIGGER sales_insert INSTEAD OF INSERT ON sales
BEGIN
	SELECT RAISE(FAIL, 'surgepay: idempotency_key_exists')
		WHERE NEW.idem_key IS NOT NULL AND NEW.idem_hash IS NOT NULL AND EXISTS (
			SELECT 1 FROM idempotency_index x JOIN idempotency i ON i.rowid = x.row
			WHERE x.hash = NEW.idem_hash AND i.merchant_id = NEW.idem_merchant_id AND i.key = NEW.idem_key);
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
