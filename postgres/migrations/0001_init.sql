-- 0001_init: the surgepay schema.
--
-- Merchant-owned tables are keyed (merchant_id, id), so every lookup is
-- scoped to a merchant by its primary key. There are no foreign keys: on the
-- hot path (payments, events, idempotency) a foreign key costs an index probe
-- and a KEY SHARE lock on the parent row per insert, and thousands of
-- inserts a second against one merchant row turn into multixact churn. The
-- engine creates parents before children; the store guards versions only.
--
-- Times are timestamptz (microseconds). Payment sub-objects that are always
-- read and written whole (transactions, pending, metadata, tax) are jsonb.

CREATE TABLE merchants (
    id      text PRIMARY KEY,
    name    text NOT NULL,
    created timestamptz NOT NULL
);

CREATE TABLE api_keys (
    id          text PRIMARY KEY,
    merchant_id text NOT NULL,
    hash        bytea NOT NULL UNIQUE,
    prefix      text NOT NULL,
    revoked     boolean NOT NULL,
    created     timestamptz NOT NULL
);

CREATE TABLE customers (
    merchant_id text NOT NULL,
    id          text NOT NULL,
    name        text NOT NULL,
    email       text NOT NULL,
    description text NOT NULL,
    metadata    jsonb NOT NULL,
    version     bigint NOT NULL,
    created     timestamptz NOT NULL,
    updated     timestamptz NOT NULL,
    PRIMARY KEY (merchant_id, id)
);

CREATE TABLE payment_methods (
    merchant_id text NOT NULL,
    id          text NOT NULL,
    customer_id text NOT NULL,
    brand       text NOT NULL,
    last4       text NOT NULL,
    exp_month   integer NOT NULL,
    exp_year    integer NOT NULL,
    fingerprint text NOT NULL,
    holder_name text NOT NULL,
    sealed_pan  bytea NOT NULL,
    created     timestamptz NOT NULL,
    PRIMARY KEY (merchant_id, id)
);
CREATE INDEX payment_methods_customer ON payment_methods (merchant_id, customer_id, id);

CREATE TABLE payments (
    merchant_id       text NOT NULL,
    id                text NOT NULL,
    customer_id       text NOT NULL,
    payment_method_id text NOT NULL,
    amount            bigint NOT NULL,
    amount_tax        bigint NOT NULL,
    currency          text NOT NULL,
    capture_method    text NOT NULL,
    status            text NOT NULL,
    amount_authorized bigint NOT NULL,
    amount_captured   bigint NOT NULL,
    amount_refunded   bigint NOT NULL,
    description       text NOT NULL,
    metadata          jsonb NOT NULL,
    tax               jsonb NOT NULL,
    decline_code      text NOT NULL,
    failure_message   text NOT NULL,
    authorization_ref text NOT NULL,
    transactions      jsonb NOT NULL,
    pending           jsonb NOT NULL,
    path              text NOT NULL,
    version           bigint NOT NULL,
    created           timestamptz NOT NULL,
    updated           timestamptz NOT NULL,
    PRIMARY KEY (merchant_id, id)
);
CREATE INDEX payments_status ON payments (merchant_id, status, id);
CREATE INDEX payments_customer ON payments (merchant_id, customer_id, id);
-- Reconciliation scans payments in processing across merchants, oldest first.
CREATE INDEX payments_processing ON payments (id) WHERE status = 'processing';

-- payment_events is the audit trail: rows are inserted, never updated or
-- deleted. seq keeps insertion order, which IDs alone do not within one
-- millisecond.
CREATE TABLE payment_events (
    seq          bigint GENERATED ALWAYS AS IDENTITY,
    id           text PRIMARY KEY,
    merchant_id  text NOT NULL,
    payment_id   text NOT NULL,
    type         text NOT NULL,
    from_status  text NOT NULL,
    to_status    text NOT NULL,
    amount       bigint NOT NULL,
    actor_key_id text NOT NULL,
    request_id   text NOT NULL,
    created      timestamptz NOT NULL
);
CREATE INDEX payment_events_payment ON payment_events (merchant_id, payment_id, seq);

CREATE TABLE idempotency (
    merchant_id  text NOT NULL,
    key          text NOT NULL,
    request_hash bytea NOT NULL,
    status_code  integer NOT NULL,
    body         bytea NOT NULL,
    created      timestamptz NOT NULL,
    PRIMARY KEY (merchant_id, key)
);
CREATE INDEX idempotency_created ON idempotency (created);
