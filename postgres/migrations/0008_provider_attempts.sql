-- 0008_provider_attempts: where each authorization of a merchant routed to
-- several processors was sent, recorded before the call, so that a retry
-- after a crash goes back to that processor (surgepay.ProviderAttempt).
CREATE TABLE provider_attempts (
    key       text PRIMARY KEY,
    processor text NOT NULL,
    created   timestamptz NOT NULL
);
CREATE INDEX provider_attempts_created ON provider_attempts (created);
