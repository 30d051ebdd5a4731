-- 0014_provider_attempts: where each authorization of a merchant routed to
-- several processors was sent, recorded before the call, so that a retry
-- after a crash goes back to that processor (surgepay.ProviderAttempt).
-- created: Unix nanoseconds.
CREATE TABLE provider_attempts (
	key       TEXT NOT NULL PRIMARY KEY,
	processor TEXT NOT NULL,
	created   INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
CREATE INDEX provider_attempts_created ON provider_attempts (created);
