-- 0008_merchant_lifecycle: merchants can be disabled; API keys have
-- scopes, an expiry and a last-used time; every merchant and key change
-- is in an append-only audit trail.
--
-- scopes: comma-separated, '' for full access (every key made before).
-- expires, last_used: Unix nanoseconds, NULL for never.
ALTER TABLE merchants ADD COLUMN disabled INTEGER NOT NULL DEFAULT 0;
ALTER TABLE api_keys ADD COLUMN scopes TEXT NOT NULL DEFAULT '';
ALTER TABLE api_keys ADD COLUMN expires INTEGER;
ALTER TABLE api_keys ADD COLUMN last_used INTEGER;
CREATE INDEX api_keys_merchant ON api_keys (merchant_id, id);

CREATE TABLE audit_events (
	id          TEXT NOT NULL PRIMARY KEY,
	created     INTEGER NOT NULL,
	actor       TEXT NOT NULL,
	action      TEXT NOT NULL,
	merchant_id TEXT NOT NULL,
	object_id   TEXT NOT NULL,
	detail      TEXT NOT NULL
) STRICT, WITHOUT ROWID;
CREATE INDEX audit_events_merchant ON audit_events (merchant_id, id);
CREATE INDEX audit_events_object ON audit_events (object_id, id);

-- Append-only, whoever writes: the engine never updates or deletes a row,
-- and these make the database refuse it too.
CREATE TRIGGER audit_events_no_update BEFORE UPDATE ON audit_events
BEGIN SELECT RAISE(ABORT, 'audit_events is append-only'); END;
CREATE TRIGGER audit_events_no_delete BEFORE DELETE ON audit_events
BEGIN SELECT RAISE(ABORT, 'audit_events is append-only'); END;
