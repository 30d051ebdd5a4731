-- 0014_search_indexes: the operators' console finds a payment by its
-- card's last 4 digits, and a customer by email, through an index
-- instead of a bounded scan of the newest rows (issue 38 item 4: a search
-- over 10 million payments). Both are written when a card is saved or a
-- customer made, never by a sale (the event's sales use saved cards);
-- payments_customer then leads from the cards' customers to their
-- payments.
CREATE INDEX payment_methods_last4 ON payment_methods (merchant_id, last4, id);
-- Customers without an email take no entry.
CREATE INDEX customers_email ON customers (merchant_id, lower(email), id) WHERE email <> '';
