-- 0011_idempotency_filter: the writer skips the sale trigger's probe of
-- idempotency_index for keys the filter of stored keys has never seen.
--
-- The probe (migration 0010) read a random leaf of idempotency_index for
-- every sale with a key: the leaves the writer's page cache does not hold
-- grew with the database, and so did the writer's time per sale (+1.27 s
-- per 20 s of CPU from minute 1 to minute 25 of a 3,000/s event,
-- bench/RESULTS.md, issue 14 session 9). The serving process keeps a Bloom
-- filter of the hash of every stored record (idemfilter.go); a hash it
-- does not hold is in no row of idempotency_index. The writer passes
-- idem_hash NULL for such a key, and the trigger reads nothing.
-- idem_hash is only the probe's key: the memory index is the writer's.
DROP TRIGGER sales_insert;
CREATE TRIGGER sales_insert INSTEAD OF INSERT ON sales
BEGIN
	SELECT RAISE(ABORT, 'surgepay: idempotency_key_exists')
		WHERE NEW.idem_key IS NOT NULL AND NEW.idem_hash IS NOT NULL AND EXISTS (
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
