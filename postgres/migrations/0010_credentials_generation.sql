-- 0010_credentials_generation: a counter of the changes to the standing of
-- API keys (a key revoked, expired or rolled, a merchant disabled or
-- enabled), raised in the transaction that makes the change, once per
-- batch, after its other statements (so a transaction waiting for this
-- row's lock never holds one its holder needs).
--
-- Every serve caches API keys in its own memory for minutes; a change made
-- by another process (the CLI, another serve) did not reach that cache
-- until its entry expired (issue 34: a revoked key kept working for
-- 299 s). Each serve now polls this one row (engine.RunCredentialsWatch)
-- and, when it moves, drops the keys it caches that changed.
CREATE TABLE credentials_generation (
	id         smallint PRIMARY KEY CHECK (id = 1),
	generation bigint NOT NULL
);
INSERT INTO credentials_generation (id, generation) VALUES (1, 0);
