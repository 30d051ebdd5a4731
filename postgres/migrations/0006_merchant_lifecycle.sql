-- 0006_merchant_lifecycle: merchants can be disabled; API keys have
-- scopes, an expiry and a last-used time; every merchant and key change
-- is in an append-only audit trail.
--
-- scopes: comma-separated, '' for full access (every key made before).
-- expires, last_used: NULL for never.
ALTER TABLE merchants ADD COLUMN disabled boolean NOT NULL DEFAULT false;
ALTER TABLE api_keys ADD COLUMN scopes text NOT NULL DEFAULT '';
ALTER TABLE api_keys ADD COLUMN expires timestamptz;
ALTER TABLE api_keys ADD COLUMN last_used timestamptz;
CREATE INDEX api_keys_merchant ON api_keys (merchant_id, id);

CREATE TABLE audit_events (
    id          text PRIMARY KEY,
    created     timestamptz NOT NULL,
    actor       text NOT NULL,
    action      text NOT NULL,
    merchant_id text NOT NULL,
    object_id   text NOT NULL,
    detail      text NOT NULL
);
CREATE INDEX audit_events_merchant ON audit_events (merchant_id, id);
CREATE INDEX audit_events_object ON audit_events (object_id, id);

-- Append-only, whoever writes: the engine never updates or deletes a row,
-- and this makes the database refuse it too (TRUNCATE included).
CREATE FUNCTION audit_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_events is append-only';
END $$;
CREATE TRIGGER audit_events_no_change BEFORE UPDATE OR DELETE ON audit_events
    FOR EACH ROW EXECUTE FUNCTION audit_events_append_only();
CREATE TRIGGER audit_events_no_truncate BEFORE TRUNCATE ON audit_events
    FOR EACH STATEMENT EXECUTE FUNCTION audit_events_append_only();
