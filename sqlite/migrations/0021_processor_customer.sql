-- 0021_processor_customer: a processor's token (a Stripe pm_… from
-- Stripe.js) is attached to a customer of the processor when it is saved,
-- so that it can be charged again (Stripe allows an unattached one once);
-- processor_customer names that customer (cus_…), sent with each of its
-- payments. Empty for a card in the vault, and for tokens saved before.
ALTER TABLE payment_methods ADD COLUMN processor_customer TEXT NOT NULL DEFAULT '';
