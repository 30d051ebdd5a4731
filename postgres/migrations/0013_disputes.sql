-- 0013_disputes: one row a dispute (chargeback), for the operators'
-- console: the disputes needing a response, by deadline, of one merchant
-- or all, and the disputes in any state (issue 38).
--
-- A dispute lives in its payment's transactions (a "dispute" transaction
-- for each change); nothing could list them across payments. The row is
-- written by the processor event that changes the dispute, in the
-- transaction of the payment's change (Write.Disputes); disputes are
-- rare, so no sale writes here.
--
-- due_by is the deadline of the response, NULL when unknown; due_key
-- orders unknown deadlines last and lets a cursor be one row-value
-- comparison. The indexes serve each list as a range in its order: by
-- status (one range per status asked), across merchants or per merchant,
-- and by deadline alone ("any status").
CREATE TABLE disputes (
	merchant_id text NOT NULL,
	id          text NOT NULL,
	payment_id  text NOT NULL,
	status      text NOT NULL,
	amount      bigint NOT NULL,
	currency    text NOT NULL,
	reason      text NOT NULL,
	due_by      timestamptz,
	created     timestamptz NOT NULL,
	updated     timestamptz NOT NULL,
	due_key     timestamptz NOT NULL GENERATED ALWAYS AS (coalesce(due_by, 'infinity'::timestamptz)) STORED,
	PRIMARY KEY (merchant_id, id)
);
CREATE INDEX disputes_status_due ON disputes (status, due_key, id, merchant_id);
CREATE INDEX disputes_merchant_status_due ON disputes (merchant_id, status, due_key, id);
CREATE INDEX disputes_due ON disputes (due_key, id, merchant_id);
CREATE INDEX disputes_merchant_due ON disputes (merchant_id, due_key, id);

-- The disputes of the payments stored before: each payment's dispute
-- transactions grouped by the dispute's id (Payment.Disputes): created
-- from the first, status, amount and updated from the last, the reason
-- the last non-empty one. This reads every payment once, at the
-- migration.
INSERT INTO disputes (merchant_id, id, payment_id, status, amount, currency, reason, due_by, created, updated)
SELECT DISTINCT ON (p.merchant_id, t.tx->>'provider_ref')
	p.merchant_id, t.tx->>'provider_ref', p.id,
	coalesce(last.tx->>'status', ''), coalesce((last.tx->>'amount')::bigint, 0), p.currency,
	coalesce((SELECT r.tx->>'message' FROM jsonb_array_elements(p.transactions) WITH ORDINALITY r(tx, n)
		WHERE r.tx->>'type' = 'dispute' AND r.tx->>'provider_ref' = t.tx->>'provider_ref' AND coalesce(r.tx->>'message', '') <> ''
		ORDER BY r.n DESC LIMIT 1), ''),
	(SELECT (u.tx->>'due_by')::timestamptz FROM jsonb_array_elements(p.transactions) WITH ORDINALITY u(tx, n)
		WHERE u.tx->>'type' = 'dispute' AND u.tx->>'provider_ref' = t.tx->>'provider_ref' AND u.tx ? 'due_by'
		ORDER BY u.n DESC LIMIT 1),
	(t.tx->>'created')::timestamptz, (last.tx->>'created')::timestamptz
FROM payments p
CROSS JOIN LATERAL jsonb_array_elements(p.transactions) WITH ORDINALITY t(tx, n)
CROSS JOIN LATERAL (SELECT l.tx FROM jsonb_array_elements(p.transactions) WITH ORDINALITY l(tx, n)
	WHERE l.tx->>'type' = 'dispute' AND l.tx->>'provider_ref' = t.tx->>'provider_ref'
	ORDER BY l.n DESC LIMIT 1) last
WHERE jsonb_typeof(p.transactions) = 'array' AND p.transactions @> '[{"type": "dispute"}]'
	AND t.tx->>'type' = 'dispute' AND coalesce(t.tx->>'provider_ref', '') <> ''
ORDER BY p.merchant_id, t.tx->>'provider_ref', p.id, t.n
ON CONFLICT (merchant_id, id) DO NOTHING;
