-- 0007_webhook_operations: what an operator needs of webhooks (issue 13
-- item 6): the endpoints' health, deliveries kept after success and
-- listed, resent, and signing secrets rolled with an overlap window. It
-- only adds columns and indexes to 0003's tables.
--
-- webhook_endpoints:
--   previous_sealed_secret, previous_secret_expires: the secret a roll
--   replaced (sealed like sealed_secret) and the end of its overlap:
--   until then deliveries carry a signature under each.
--   failures_in_a_row, last_success, last_failure, last_error: health,
--   kept by the dispatchers' results (NULL and '' for never).
ALTER TABLE webhook_endpoints
    ADD COLUMN previous_sealed_secret bytea,
    ADD COLUMN previous_secret_expires timestamptz,
    ADD COLUMN failures_in_a_row integer NOT NULL DEFAULT 0,
    ADD COLUMN last_success timestamptz,
    ADD COLUMN last_failure timestamptz,
    ADD COLUMN last_error text NOT NULL DEFAULT '';

-- webhook_deliveries: a 2xx answer now keeps the row with status
-- 'succeeded' (until webhooks.delivered_retention) instead of deleting it.
--   leased: true while a claim holds the row (next_attempt is then the end
--   of its lease), so that a resend never makes an attempt in flight due.
--   last_attempt: when the last attempt ended (NULL for none).
--   resends: times resent, bounded by surgepay.WebhookResendsMax.
ALTER TABLE webhook_deliveries
    ADD COLUMN leased boolean NOT NULL DEFAULT false,
    ADD COLUMN last_attempt timestamptz,
    ADD COLUMN resends integer NOT NULL DEFAULT 0;

-- An endpoint's deliveries, newest event first (the list). The one index
-- the fan-out INSERT of a payment change writes more: no statement more.
CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id, event_id);
-- Succeeded rows by their success, for the purge; written by the result,
-- off the payment path.
CREATE INDEX webhook_deliveries_succeeded ON webhook_deliveries (updated) WHERE status = 'succeeded';
