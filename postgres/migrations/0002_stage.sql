-- 0002_stage: the embedded stage of streamlined sales.
--
-- staged_captures holds sealed capture instructions (surgepay.StagedRecord)
-- until settlement acknowledges them (Write.StagedAck deletes them). IDs are
-- surgepay.NewID strings, which sort by creation time, so the primary key is
-- the index of oldest-first fetches (FetchStaged: id > $1 ORDER BY id
-- LIMIT $2); a second index would only cost every staged sale an insert.
-- A streamlined sale writes its idempotency record, payment and staged row
-- with one statement of data-modifying CTEs (see postgres/stage.go).
CREATE TABLE staged_captures (
    id          text PRIMARY KEY,
    merchant_id text NOT NULL,
    payment_id  text NOT NULL,
    sealed      bytea NOT NULL,
    created     timestamptz NOT NULL
);
