-- 0003_webhooks: webhook endpoints and the outbox of their deliveries.
--
-- webhook_endpoints holds each merchant's URLs (at most
-- surgepay.WebhookEndpointsPerMerchantMax) with the signing secret sealed
-- by the card vault's keyring: the secret itself is never stored.
--
-- webhook_deliveries is the outbox: one row per (event, endpoint), written
-- in the transaction of the payment change it reports, by one INSERT ...
-- SELECT over the merchant's endpoints at commit. A row is pending until a
-- 2xx answer deletes it, or until it runs out of attempts and is kept as
-- failed. next_attempt is when a pending row is due; a claim (SELECT ...
-- FOR UPDATE SKIP LOCKED, then UPDATE) moves it to the end of the claim's
-- lease, so nodes claiming at once take different rows, and a row whose
-- dispatcher died is due again once the lease ends. The payload is the
-- exact JSON body (bytea, not jsonb, which would reorder it).
CREATE TABLE webhook_endpoints (
    merchant_id   text NOT NULL,
    id            text NOT NULL,
    url           text NOT NULL,
    description   text NOT NULL,
    sealed_secret bytea NOT NULL,
    created       timestamptz NOT NULL,
    PRIMARY KEY (merchant_id, id)
);

CREATE TABLE webhook_deliveries (
    event_id     text NOT NULL,
    endpoint_id  text NOT NULL,
    merchant_id  text NOT NULL,
    payment_id   text NOT NULL,
    type         text NOT NULL,
    payload      bytea NOT NULL,
    status       text NOT NULL, -- 'pending' or 'failed'
    attempts     integer NOT NULL,
    next_attempt timestamptz NOT NULL,
    last_status  integer NOT NULL,
    last_error   text NOT NULL,
    created      timestamptz NOT NULL,
    updated      timestamptz NOT NULL,
    PRIMARY KEY (event_id, endpoint_id)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_failed ON webhook_deliveries (updated) WHERE status = 'failed';
