-- 0011_leases: the leases of background work (surgepay.Leaser). Each
-- serve runs the reconciler and the purges only while it holds their
-- lease, renewed at each pass, so that N nodes on one database do not each
-- run them; another node takes a lease over once its holder stops renewing
-- (expires passed, by the database's clock).
CREATE TABLE leases (
	name    text PRIMARY KEY,
	holder  text NOT NULL,
	expires timestamptz NOT NULL
);
