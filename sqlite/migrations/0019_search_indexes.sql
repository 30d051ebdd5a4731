-- 0019_search_indexes: the operators' console finds a payment by its
-- card's last 4 digits, and a customer by email, through an index
-- instead of a bounded scan of the newest rows (issue 38 item 4: a search
-- over 10 million payments).
--
-- Both index tables that are written outside the sale: a card is saved
-- and a customer made before their sales (the event's sales use saved
-- cards), so a sale's commit writes no page of them. Saving a card or
-- making a customer writes one more leaf, at its place in the index
-- (docs/console.md says so). payments_by_customer (0010) then leads from
-- the cards' customers to their payments.
CREATE INDEX payment_methods_last4 ON payment_methods (merchant_id, last4, id);
-- Customers without an email take no entry.
CREATE INDEX customers_email ON customers (merchant_id, email COLLATE NOCASE, id) WHERE email <> '';
