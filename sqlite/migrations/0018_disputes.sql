-- 0018_disputes: one row a dispute (chargeback), for the operators'
-- console: the disputes needing a response, by deadline, of one merchant
-- or all, and the disputes in any state (issue 38).
--
-- A dispute lives in its payment's transactions (a "dispute" transaction
-- for each change); nothing could list them across payments. The row is
-- written by the processor event that changes the dispute, in the
-- transaction of the payment's change (Write.Disputes); disputes are
-- rare, so no sale writes here.
--
-- due_by is the deadline of the response in Unix nanoseconds, NULL when
-- unknown; due_key orders unknown deadlines last (an index keeps NULLs
-- first). The indexes serve each list as a range in its order: by status
-- (one range per status asked), across merchants or per merchant, and by
-- deadline alone ("any status").
CREATE TABLE disputes (
	merchant_id TEXT NOT NULL,
	id          TEXT NOT NULL,
	payment_id  TEXT NOT NULL,
	status      TEXT NOT NULL,
	amount      INTEGER NOT NULL,
	currency    TEXT NOT NULL,
	reason      TEXT NOT NULL,
	due_by      INTEGER,
	created     INTEGER NOT NULL,
	updated     INTEGER NOT NULL,
	due_key     INTEGER NOT NULL GENERATED ALWAYS AS (coalesce(due_by, 9223372036854775807)) VIRTUAL,
	PRIMARY KEY (merchant_id, id)
) STRICT;
CREATE INDEX disputes_status_due ON disputes (status, due_key, id, merchant_id);
CREATE INDEX disputes_merchant_status_due ON disputes (merchant_id, status, due_key, id);
CREATE INDEX disputes_due ON disputes (due_key, id, merchant_id);
CREATE INDEX disputes_merchant_due ON disputes (merchant_id, due_key, id);

-- The disputes of the payments stored before: each payment's dispute
-- transactions grouped by the dispute's id (Payment.Disputes): created
-- from the first, status, amount and updated from the last, the reason
-- the last non-empty one. Transactions are stored as txJSON (short
-- names; "c" nanoseconds after the payment's created, absent for the
-- same instant, "z" the zero time; "r" is "=" for the payment's
-- authorization_ref and gains a "=" before a value that starts with one)
-- or, in rows written by earlier versions, as txJSONv1 (full names,
-- "created" absolute). This reads every payment once, at the migration
-- (a LIKE on the transactions' text, then JSON for the few that match):
-- 2.0 s for 1,000,000 payments (a 400 MB file in the page cache, 1,000
-- of them disputed; issue 38, measured on a 2-core development machine).
INSERT OR IGNORE INTO disputes (merchant_id, id, payment_id, status, amount, currency, reason, due_by, created, updated)
WITH tx AS MATERIALIZED (
	SELECT p.merchant_id, p.id AS payment_id, p.currency, j.key AS n,
		CASE
			WHEN json_type(j.value, '$.r') IS NULL THEN coalesce(json_extract(j.value, '$.provider_ref'), '')
			WHEN json_extract(j.value, '$.r') = '=' THEN p.authorization_ref
			WHEN substr(json_extract(j.value, '$.r'), 1, 1) = '=' THEN substr(json_extract(j.value, '$.r'), 2)
			ELSE json_extract(j.value, '$.r')
		END AS ref,
		coalesce(json_extract(j.value, '$.s'), json_extract(j.value, '$.status'), '') AS status,
		coalesce(json_extract(j.value, '$.a'), json_extract(j.value, '$.amount'), 0) AS amount,
		coalesce(json_extract(j.value, '$.m'), json_extract(j.value, '$.message'), '') AS reason,
		json_extract(j.value, '$.u') AS due_by,
		CASE
			WHEN json_type(j.value, '$.t') IS NULL THEN json_extract(j.value, '$.created')
			WHEN json_extract(j.value, '$.z') THEN NULL
			ELSE coalesce(p.created, 0) + coalesce(json_extract(j.value, '$.c'), 0)
		END AS created
	FROM payments p, json_each(p.transactions) j
	WHERE p.transactions LIKE '%"dispute"%'
		AND coalesce(json_extract(j.value, '$.t'), json_extract(j.value, '$.type')) = 'dispute'
),
d AS (
	SELECT merchant_id, payment_id, ref, min(n) AS first_n, max(n) AS last_n FROM tx WHERE ref <> '' GROUP BY merchant_id, payment_id, ref
)
SELECT d.merchant_id, d.ref, d.payment_id, l.status, l.amount, l.currency,
	coalesce((SELECT r.reason FROM tx r WHERE r.merchant_id = d.merchant_id AND r.payment_id = d.payment_id
		AND r.ref = d.ref AND r.reason <> '' ORDER BY r.n DESC LIMIT 1), ''),
	(SELECT u.due_by FROM tx u WHERE u.merchant_id = d.merchant_id AND u.payment_id = d.payment_id
		AND u.ref = d.ref AND u.due_by IS NOT NULL ORDER BY u.n DESC LIMIT 1),
	coalesce(f.created, 0), coalesce(l.created, f.created, 0)
FROM d
JOIN tx f ON f.merchant_id = d.merchant_id AND f.payment_id = d.payment_id AND f.n = d.first_n
JOIN tx l ON l.merchant_id = d.merchant_id AND l.payment_id = d.payment_id AND l.n = d.last_n
ORDER BY d.merchant_id, d.payment_id, d.first_n;
