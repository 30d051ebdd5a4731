-- 0007_processor_tokens: a payment method may be a processor's token (a
-- Stripe pm_… collected by Stripe.js on the merchant's page) instead of a
-- card number in the vault: processor names the processor it belongs to
-- (its payments go there and nowhere else), processor_token the token.
-- Both empty for a card in the vault, whose sealed_pan is then set.
ALTER TABLE payment_methods ADD COLUMN processor TEXT NOT NULL DEFAULT '';
ALTER TABLE payment_methods ADD COLUMN processor_token TEXT NOT NULL DEFAULT '';

-- A processor's webhook names its own object (a PaymentIntent), not
-- surgepay's payment: FindPaymentByRef finds it by authorization_ref. The
-- index is partial: only routed payments ("processor:ref") are in it, so
-- the simulator's payments of the embedded default write no page of it.
CREATE INDEX payments_processor_ref ON payments (authorization_ref) WHERE authorization_ref GLOB '*:*';
