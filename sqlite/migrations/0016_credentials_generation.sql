-- 0016_credentials_generation: a counter of the changes to the standing of
-- API keys (a key revoked, expired or rolled, a merchant disabled or
-- enabled), raised in the transaction that makes the change.
--
-- Every serve caches API keys in its own memory for minutes; a change made
-- by another process (the CLI, another serve on the file) did not reach
-- that cache until its entry expired (issue 34: a revoked key kept working
-- for 299 s). Each serve now polls this one row (engine.RunCredentialsWatch)
-- and, when it moves, drops the keys it caches that changed. PRAGMA
-- data_version alone cannot tell: every sale changes the file.
CREATE TABLE credentials_generation (
	id         INTEGER PRIMARY KEY CHECK (id = 1),
	generation INTEGER NOT NULL
) STRICT;
INSERT INTO credentials_generation (id, generation) VALUES (1, 0);
