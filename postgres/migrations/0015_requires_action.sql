-- 0015_requires_action: the reconciler lists the payments awaiting a
-- shopper's 3-D Secure authentication (status requires_action, browser
-- checkout) to look up those abandoned, as it lists those in processing:
-- through a partial index, which sales never write (they never have that
-- status), so that the list costs nothing at 10 million payments.
CREATE INDEX payments_requires_action ON payments (id) WHERE status = 'requires_action';
