package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/surgepay/surgepay"
)

var _ surgepay.OperatorSearcher = (*DB)(nil)

// SearchPayments returns a page of the payments q selects (see
// surgepay.OperatorSearcher). With a card's last 4 it reads through the
// indexes (searchByCard) when they lead to few enough payments. Else one
// statement reads at most q.Examine() payments of the range of
// (merchant_id, id), or of (merchant_id, status, id) with a status,
// newest first, and keeps those that pass the other filters; when the
// page is not full, a second statement (of the same index, ids only)
// tells whether the range ran out or the bound stopped it. No index is
// added to payments for the other filters: each would add the bytes of
// its entry to every sale's commit (bench/regress.sh).
func (db *DB) SearchPayments(ctx context.Context, q surgepay.PaymentSearch) (*surgepay.PaymentSearchPage, error) {
	if q.Last4 != "" {
		page, err := db.searchByCard(ctx, q)
		if page != nil || err != nil {
			return page, err
		}
	}
	window, wargs := searchWindow(q)
	var s strings.Builder
	a := &numberedArgs{args: append([]any(nil), wargs...)}
	s.WriteString("SELECT " + qualified("p", paymentCols) + " FROM (SELECT * FROM payments" + window + ") p")
	if q.Last4 != "" {
		s.WriteString(" JOIN payment_methods m ON m.merchant_id = p.merchant_id AND m.id = p.payment_method_id AND m.last4 = " + a.add(q.Last4))
	}
	s.WriteString(" WHERE 1 = 1")
	searchFilters(&s, q, a)
	s.WriteString(" ORDER BY p.id DESC LIMIT " + a.add(q.Limit+1))
	ps, err := db.searchQuery(ctx, s.String(), a.args)
	if err != nil {
		return nil, fmt.Errorf("search payments: %w", err)
	}
	if len(ps) > q.Limit {
		return &surgepay.PaymentSearchPage{Payments: ps[:q.Limit], Next: ps[q.Limit-1].ID}, nil
	}
	page := &surgepay.PaymentSearchPage{Payments: ps}
	n, last, err := db.searchExamined(ctx, window, wargs)
	if err != nil {
		return nil, fmt.Errorf("search payments: %w", err)
	}
	if n >= q.Examine() {
		page.Next, page.Bounded = last, true
	}
	return page, nil
}

// numberedArgs collects a statement's arguments, each written as ?N.
type numberedArgs struct{ args []any }

// add appends v and returns its placeholder.
func (a *numberedArgs) add(v any) string {
	a.args = append(a.args, v)
	return fmt.Sprintf("?%d", len(a.args))
}

// searchFilters adds to s, after a WHERE, the filters of q on p that no
// index serves: dates, amounts, the processor's reference.
func searchFilters(s *strings.Builder, q surgepay.PaymentSearch, a *numberedArgs) {
	if !q.CreatedGTE.IsZero() {
		s.WriteString(" AND p.created >= " + a.add(q.CreatedGTE.UnixNano()))
	}
	if !q.CreatedBefore.IsZero() {
		s.WriteString(" AND p.created < " + a.add(q.CreatedBefore.UnixNano()))
	}
	if q.AmountGTE > 0 {
		s.WriteString(" AND p.amount + p.amount_tax >= " + a.add(q.AmountGTE))
	}
	if q.AmountLTE > 0 {
		s.WriteString(" AND p.amount + p.amount_tax <= " + a.add(q.AmountLTE))
	}
	if q.Ref != "" {
		// The reference as stored, or the processor's part of a qualified
		// one ("stripe_eu:pi_1" for "pi_1").
		ref, tail := a.add(q.Ref), a.add(":"+q.Ref)
		s.WriteString(" AND (p.authorization_ref = " + ref + " OR substr(p.authorization_ref, -length(" + tail + ")) = " + tail + ")")
	}
}

// searchByCard returns the page of a search with a card's last 4 through
// the index of cards by last 4 (migration 0019) and payments_by_customer
// with its tail: the payments of the cards' customers made with these
// cards. A first statement reads the candidates' IDs, newest first, from
// the indexes (and the tail's rows); then their rows are read in
// batches, newest first, each batch twice the last, until the page is
// full: a page reads the rows of about its own payments, not of every
// candidate (each row is a random read of the file). It returns nil, and
// the bounded scan serves the search, when more than
// PaymentSearchCardsMax of the merchant's cards end in these digits, or
// their customers have more than q.Examine() payments in the range.
func (db *DB) searchByCard(ctx context.Context, q surgepay.PaymentSearch) (*surgepay.PaymentSearchPage, error) {
	a := &numberedArgs{}
	merchant, last4 := a.add(q.MerchantID), a.add(q.Last4)
	// INDEXED BY: without it SQLite read the merchant's range of the
	// primary key, every card of the merchant (bench/search.sh).
	cards := "SELECT id, customer_id FROM payment_methods INDEXED BY payment_methods_last4 WHERE merchant_id = " + merchant + " AND last4 = " + last4
	var rng string
	from, before := q.IDRange()
	if from != "" {
		rng += " AND c.id >= " + a.add(from)
	}
	if before != "" {
		rng += " AND c.id < " + a.add(before)
	}
	// The candidates: the indexed payments of the cards' customers, and
	// their payments in the index's tail, a rowid range of about two
	// merge chunks at most ("+": not the merchant's range of the primary
	// key, as in listPaymentsOfCustomer). UNION, not UNION ALL: a chunk
	// being merged is in both. The first row is the count of cards (up
	// to the bound), with no ID.
	cardsMax, examine := a.add(surgepay.PaymentSearchCardsMax+1), a.add(q.Examine()+1)
	query := "WITH cards(id, customer_id) AS (" + cards + " LIMIT " + cardsMax + ")" + //nolint:gosec // G202: placeholders (?N) and constant text only
		" SELECT (SELECT count(*) FROM cards), NULL UNION ALL SELECT * FROM (SELECT NULL, id FROM (" +
		"SELECT c.id FROM payments_by_customer c WHERE c.merchant_id = " + merchant + " AND c.customer_id IN (SELECT customer_id FROM cards)" + rng +
		" UNION SELECT c.id FROM payments c WHERE c.rowid > (SELECT indexed_upto FROM deferred_indexes WHERE name = 'payments_by_customer')" +
		" AND +c.merchant_id = " + merchant + " AND c.customer_id IN (SELECT customer_id FROM cards)" + rng +
		") ORDER BY id DESC LIMIT " + examine + ")"
	nCards, cand, err := func() (int, []string, error) {
		defer counted(ctx)()
		rows, err := db.opRead.QueryContext(ctx, query, a.args...)
		if err != nil {
			return 0, nil, err
		}
		defer rows.Close() //nolint:errcheck // read-only: closing loses nothing
		var n int
		var ids []string
		for rows.Next() {
			var count sql.NullInt64
			var id sql.NullString
			if err := rows.Scan(&count, &id); err != nil {
				return 0, nil, err
			}
			if count.Valid {
				n = int(count.Int64)
			} else {
				ids = append(ids, id.String)
			}
		}
		return n, ids, rows.Err()
	}()
	if err != nil {
		return nil, fmt.Errorf("search payments by card: %w", err)
	}
	switch {
	case nCards > surgepay.PaymentSearchCardsMax || len(cand) > q.Examine():
		return nil, nil
	case nCards == 0:
		return &surgepay.PaymentSearchPage{}, nil
	}
	var ps []*surgepay.Payment
	for batch := max(2*(q.Limit+1), 64); len(cand) > 0 && len(ps) <= q.Limit; batch *= 2 {
		ids := cand[:min(batch, len(cand))]
		cand = cand[len(ids):]
		list, err := json.Marshal(ids)
		if err != nil {
			return nil, fmt.Errorf("search payments by card: %w", err)
		}
		b := &numberedArgs{}
		merchant := b.add(q.MerchantID)
		var s strings.Builder
		s.WriteString("SELECT " + qualified("p", paymentCols) + " FROM json_each(" + b.add(string(list)) + ") j" +
			" CROSS JOIN payments p ON p.merchant_id = " + merchant + " AND p.id = j.value" +
			" WHERE p.payment_method_id IN (SELECT id FROM payment_methods INDEXED BY payment_methods_last4 WHERE merchant_id = " +
			merchant + " AND last4 = " + b.add(q.Last4) + ")")
		if q.Status != "" {
			s.WriteString(" AND p.status = " + b.add(string(q.Status)))
		}
		searchFilters(&s, q, b)
		s.WriteString(" ORDER BY p.id DESC")
		got, err := db.searchQuery(ctx, s.String(), b.args)
		if err != nil {
			return nil, fmt.Errorf("search payments by card: %w", err)
		}
		ps = append(ps, got...)
	}
	if len(ps) > q.Limit {
		return &surgepay.PaymentSearchPage{Payments: ps[:q.Limit], Next: ps[q.Limit-1].ID}, nil
	}
	return &surgepay.PaymentSearchPage{Payments: ps}, nil
}

// searchWindow returns the WHERE, ORDER BY and LIMIT of the payments a
// search reads, and its arguments.
func searchWindow(q surgepay.PaymentSearch) (string, []any) {
	w := " WHERE merchant_id = ?"
	args := []any{q.MerchantID}
	if q.Status != "" {
		w += " AND status = ?"
		args = append(args, string(q.Status))
	}
	from, before := q.IDRange()
	if from != "" {
		w += " AND id >= ?"
		args = append(args, from)
	}
	if before != "" {
		w += " AND id < ?"
		args = append(args, before)
	}
	return w + " ORDER BY id DESC LIMIT ?", append(args, q.Examine())
}

func (db *DB) searchQuery(ctx context.Context, query string, args []any) ([]*surgepay.Payment, error) {
	defer counted(ctx)()
	rows, err := db.opRead.QueryContext(ctx, query, args...)
	return scanAll(rows, err, scanPayment)
}

// searchExamined returns how many payments the window holds (at most its
// limit) and the oldest one's ID: the index alone, no row is read.
func (db *DB) searchExamined(ctx context.Context, window string, args []any) (int, string, error) {
	defer counted(ctx)()
	var n int
	var last sql.NullString
	err := db.opRead.QueryRowContext(ctx, "SELECT count(*), min(id) FROM (SELECT id FROM payments"+window+")", args...).Scan(&n, &last)
	return n, last.String, err
}

// FindCustomersByEmail returns up to CustomersByEmailMax of the
// merchant's customers of that email (ASCII case ignored), newest first:
// a range of the index customers_email (migration 0019).
func (db *DB) FindCustomersByEmail(ctx context.Context, merchantID, email string) ([]*surgepay.Customer, error) {
	defer counted(ctx)()
	rows, err := db.opRead.QueryContext(ctx, "SELECT "+customerCols+" FROM customers INDEXED BY customers_email"+
		" WHERE merchant_id = ? AND email = ? COLLATE NOCASE AND email <> '' ORDER BY id DESC LIMIT ?",
		merchantID, email, surgepay.CustomersByEmailMax)
	cs, err := scanAll(rows, err, scanCustomer)
	if err != nil {
		return nil, fmt.Errorf("find customers by email: %w", err)
	}
	return cs, nil
}
