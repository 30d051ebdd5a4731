-- 0004_analytics: per-merchant payment counters by UTC day and currency.
--
-- Each group commit adds the counters of its whole batch with one INSERT
-- ... ON CONFLICT DO UPDATE SET n = n + excluded.n, in the transaction of
-- the payments they count (see Write.Analytics), as its last statement
-- before COMMIT.
--
-- stripe: a merchant's counters of one day and currency are spread over
-- up to 16 rows (0..15), and each batch adds to one of them. The upsert
-- holds its row's lock until COMMIT; with a single row per key, the
-- batches of every committer and every node would queue behind each
-- other's commit whenever they count the same merchant (a single-merchant
-- surge: all of them). Reads sum the stripes. See postgres/analytics.go.
CREATE TABLE analytics_daily (
    merchant_id       text     NOT NULL,
    day               date     NOT NULL,
    currency          text     NOT NULL,
    stripe            smallint NOT NULL,
    payments_created  bigint   NOT NULL,
    authorized_count  bigint   NOT NULL,
    amount_authorized bigint   NOT NULL,
    captured_count    bigint   NOT NULL,
    amount_captured   bigint   NOT NULL,
    declined_count    bigint   NOT NULL,
    failed_count      bigint   NOT NULL,
    amount_failed     bigint   NOT NULL,
    voided_count      bigint   NOT NULL,
    amount_voided     bigint   NOT NULL,
    refunded_count    bigint   NOT NULL,
    amount_refunded   bigint   NOT NULL,
    PRIMARY KEY (merchant_id, day, currency, stripe)
);
