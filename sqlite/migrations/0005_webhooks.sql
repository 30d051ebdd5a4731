-- 0005_webhooks: webhook endpoints and the outbox of their deliveries.
--
-- webhook_endpoints holds each merchant's URLs (at most
-- surgepay.WebhookEndpointsPerMerchantMax) with the signing secret sealed
-- by the card vault's keyring: the secret itself is never stored.
--
-- webhook_deliveries is the outbox: one row per (event, endpoint), written
-- in the transaction of the payment change it reports, by one INSERT ...
-- SELECT over the merchant's endpoints at commit. A row is pending until a
-- 2xx answer deletes it, or until it runs out of attempts and is kept as
-- failed. next_attempt is when a pending row is due; a claim moves it to
-- the end of the claim's lease, so a row being sent is not due, and a row
-- whose dispatcher died is due again once the lease ends. The payload is
-- the exact JSON body, the same on every attempt.
--
-- Rows are large (the payload), so the table keeps its rowid: inserts
-- append, and the partial indexes stay small (pending rows by due time,
-- failed rows by their last attempt, for the purge).
CREATE TABLE webhook_endpoints (
	merchant_id   TEXT NOT NULL,
	id            TEXT NOT NULL,
	url           TEXT NOT NULL,
	description   TEXT NOT NULL,
	sealed_secret BLOB NOT NULL,
	created       INTEGER NOT NULL,
	PRIMARY KEY (merchant_id, id)
) STRICT, WITHOUT ROWID;

CREATE TABLE webhook_deliveries (
	event_id     TEXT NOT NULL,
	endpoint_id  TEXT NOT NULL,
	merchant_id  TEXT NOT NULL,
	payment_id   TEXT NOT NULL,
	type         TEXT NOT NULL,
	payload      BLOB NOT NULL,
	status       TEXT NOT NULL, -- 'pending' or 'failed'
	attempts     INTEGER NOT NULL,
	next_attempt INTEGER NOT NULL,
	last_status  INTEGER NOT NULL,
	last_error   TEXT NOT NULL,
	created      INTEGER NOT NULL,
	updated      INTEGER NOT NULL,
	PRIMARY KEY (event_id, endpoint_id)
) STRICT;
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_failed ON webhook_deliveries (updated) WHERE status = 'failed';
