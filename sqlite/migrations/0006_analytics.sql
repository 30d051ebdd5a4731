-- 0006_analytics: per-merchant payment counters by UTC day and currency.
--
-- One row per (merchant, day, currency). Each group commit adds the
-- counters of its whole batch with one INSERT ... ON CONFLICT DO UPDATE
-- SET n = n + excluded.n, in the transaction of the payments they count
-- (see Write.Analytics). SQLite has one writer, so one row per key is never
-- contended. day is TEXT YYYY-MM-DD, which sorts as dates do; the primary
-- key is the index of a merchant's range of days (ListAnalytics). WITHOUT
-- ROWID: the key is the table's only b-tree. Amounts are exact integers in
-- minor units.
CREATE TABLE analytics_daily (
	merchant_id       TEXT NOT NULL,
	day               TEXT NOT NULL,
	currency          TEXT NOT NULL,
	payments_created  INTEGER NOT NULL,
	authorized_count  INTEGER NOT NULL,
	amount_authorized INTEGER NOT NULL,
	captured_count    INTEGER NOT NULL,
	amount_captured   INTEGER NOT NULL,
	declined_count    INTEGER NOT NULL,
	failed_count      INTEGER NOT NULL,
	amount_failed     INTEGER NOT NULL,
	voided_count      INTEGER NOT NULL,
	amount_voided     INTEGER NOT NULL,
	refunded_count    INTEGER NOT NULL,
	amount_refunded   INTEGER NOT NULL,
	PRIMARY KEY (merchant_id, day, currency)
) STRICT, WITHOUT ROWID;
