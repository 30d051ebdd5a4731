-- Initial schema. Times are INTEGER Unix nanoseconds in UTC, NULL for the
-- zero time. Collections (metadata, tax, transactions, pending) are JSON
-- text, NULL for nil, so a payment is one row and one SELECT. Tables are
-- STRICT: a value of the wrong type is an error, not a silent coercion.
-- There are no foreign keys: every row is written by the engine inside one
-- Write, payments outlive their customers and cards, and an FK check is an
-- extra index probe on the single writer's hot path. Tables with small
-- rows keyed by (merchant_id, id) are WITHOUT ROWID: one b-tree per table
-- instead of a table and its primary-key index, so fewer pages per commit.
-- payments keeps its rowid: its rows are large (transactions JSON), and its
-- secondary indexes then point at a small rowid, not the text key.

CREATE TABLE merchants (
	id      TEXT NOT NULL PRIMARY KEY,
	name    TEXT NOT NULL,
	created INTEGER
) STRICT;

CREATE TABLE api_keys (
	id          TEXT NOT NULL PRIMARY KEY,
	merchant_id TEXT NOT NULL,
	hash        BLOB NOT NULL,
	prefix      TEXT NOT NULL,
	created     INTEGER,
	revoked     INTEGER NOT NULL
) STRICT;
CREATE UNIQUE INDEX api_keys_hash ON api_keys (hash);

CREATE TABLE customers (
	merchant_id TEXT NOT NULL,
	id          TEXT NOT NULL,
	name        TEXT NOT NULL,
	email       TEXT NOT NULL,
	description TEXT NOT NULL,
	metadata    TEXT,
	created     INTEGER,
	updated     INTEGER,
	version     INTEGER NOT NULL,
	PRIMARY KEY (merchant_id, id)
) STRICT, WITHOUT ROWID;

CREATE TABLE payment_methods (
	merchant_id TEXT NOT NULL,
	id          TEXT NOT NULL,
	customer_id TEXT NOT NULL,
	brand       TEXT NOT NULL,
	last4       TEXT NOT NULL,
	exp_month   INTEGER NOT NULL,
	exp_year    INTEGER NOT NULL,
	fingerprint TEXT NOT NULL,
	holder_name TEXT NOT NULL,
	sealed_pan  BLOB,
	created     INTEGER,
	PRIMARY KEY (merchant_id, id)
) STRICT, WITHOUT ROWID;
CREATE INDEX payment_methods_customer ON payment_methods (merchant_id, customer_id, id);

CREATE TABLE payments (
	merchant_id       TEXT NOT NULL,
	id                TEXT NOT NULL,
	customer_id       TEXT NOT NULL,
	payment_method_id TEXT NOT NULL,
	amount            INTEGER NOT NULL,
	amount_tax        INTEGER NOT NULL,
	currency          TEXT NOT NULL,
	capture_method    TEXT NOT NULL,
	status            TEXT NOT NULL,
	amount_authorized INTEGER NOT NULL,
	amount_captured   INTEGER NOT NULL,
	amount_refunded   INTEGER NOT NULL,
	description       TEXT NOT NULL,
	metadata          TEXT,
	tax               TEXT,
	decline_code      TEXT NOT NULL,
	failure_message   TEXT NOT NULL,
	authorization_ref TEXT NOT NULL,
	transactions      TEXT,
	pending           TEXT,
	path              TEXT NOT NULL,
	version           INTEGER NOT NULL,
	created           INTEGER,
	updated           INTEGER,
	PRIMARY KEY (merchant_id, id)
) STRICT;
CREATE INDEX payments_status ON payments (merchant_id, status, id);
CREATE INDEX payments_customer ON payments (merchant_id, customer_id, id);
-- Reconciliation scans payments in processing across merchants, oldest
-- first; few payments are ever in processing, so the index stays small.
CREATE INDEX payments_processing ON payments (id) WHERE status = 'processing';

-- payment_events is the audit trail: rows are inserted, never changed.
-- seq keeps the order of writing, which IDs (random within a millisecond)
-- do not.
CREATE TABLE payment_events (
	seq          INTEGER PRIMARY KEY,
	id           TEXT NOT NULL UNIQUE,
	merchant_id  TEXT NOT NULL,
	payment_id   TEXT NOT NULL,
	type         TEXT NOT NULL,
	from_status  TEXT NOT NULL,
	to_status    TEXT NOT NULL,
	amount       INTEGER NOT NULL,
	actor_key_id TEXT NOT NULL,
	request_id   TEXT NOT NULL,
	created      INTEGER
) STRICT;
CREATE INDEX payment_events_payment ON payment_events (merchant_id, payment_id, seq);
CREATE TRIGGER payment_events_no_update BEFORE UPDATE ON payment_events
BEGIN
	SELECT RAISE(ABORT, 'payment_events rows are immutable');
END;
CREATE TRIGGER payment_events_no_delete BEFORE DELETE ON payment_events
BEGIN
	SELECT RAISE(ABORT, 'payment_events rows are immutable');
END;

CREATE TABLE idempotency (
	merchant_id  TEXT NOT NULL,
	key          TEXT NOT NULL,
	request_hash BLOB NOT NULL,
	status_code  INTEGER NOT NULL,
	body         BLOB,
	created      INTEGER NOT NULL,
	PRIMARY KEY (merchant_id, key)
) STRICT, WITHOUT ROWID;
CREATE INDEX idempotency_created ON idempotency (created);
