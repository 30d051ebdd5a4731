package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/surgepay/surgepay"
)

var _ surgepay.OperatorSearcher = (*DB)(nil)

// searchQuery builds a statement with numbered arguments.
type searchQuery struct {
	sql  strings.Builder
	args []any
}

// add writes s, each %d in it the number of the next argument (one per
// %d, in order).
func (q *searchQuery) add(s string, args ...any) {
	nums := make([]any, len(args))
	for i, a := range args {
		q.args = append(q.args, a)
		nums[i] = len(q.args)
	}
	fmt.Fprintf(&q.sql, s, nums...)
}

// SearchPayments returns a page of the payments q selects (see
// surgepay.OperatorSearcher): one statement reads at most q.Examine()
// payments of the range of the primary key (merchant_id, id), or of
// payments_status with a status, newest first, and keeps those that pass
// the other filters; when the page is not full, a second statement (of
// the same index, ids only) tells whether the range ran out or the bound
// stopped it. No index is added for the other filters: each would add
// the bytes of its entry to every sale's commit.
func (db *DB) SearchPayments(ctx context.Context, q surgepay.PaymentSearch) (*surgepay.PaymentSearchPage, error) {
	if q.Last4 != "" {
		page, err := db.searchByCard(ctx, q)
		if page != nil || err != nil {
			return page, err
		}
	}
	s := &searchQuery{}
	s.sql.WriteString("SELECT " + qualify("p", paymentCols) + " FROM (SELECT * FROM payments")
	searchWindow(s, q)
	s.sql.WriteString(") p")
	if q.Last4 != "" {
		s.add(" JOIN payment_methods m ON m.merchant_id = p.merchant_id AND m.id = p.payment_method_id AND m.last4 = $%d", q.Last4)
	}
	s.sql.WriteString(" WHERE true")
	searchFilters(s, q)
	s.add(" ORDER BY p.id DESC LIMIT $%d", q.Limit+1)
	ps, err := db.search(ctx, s)
	if err != nil {
		return nil, readErr(fmt.Errorf("search payments: %w", err))
	}
	if len(ps) > q.Limit {
		return &surgepay.PaymentSearchPage{Payments: ps[:q.Limit], Next: ps[q.Limit-1].ID}, nil
	}
	page := &surgepay.PaymentSearchPage{Payments: ps}
	c := &searchQuery{}
	c.sql.WriteString("SELECT count(*), coalesce(min(id), '') FROM (SELECT id FROM payments")
	searchWindow(c, q)
	c.sql.WriteString(") w")
	n, last, err := db.searchExamined(ctx, c)
	if err != nil {
		return nil, readErr(fmt.Errorf("search payments: %w", err))
	}
	if n >= q.Examine() {
		page.Next, page.Bounded = last, true
	}
	return page, nil
}

// searchFilters adds, after a WHERE, the filters of q on p that no index
// serves: dates, amounts, the processor's reference.
func searchFilters(s *searchQuery, q surgepay.PaymentSearch) {
	if !q.CreatedGTE.IsZero() {
		s.add(" AND p.created >= $%d", dbTime(q.CreatedGTE))
	}
	if !q.CreatedBefore.IsZero() {
		s.add(" AND p.created < $%d", dbTime(q.CreatedBefore))
	}
	if q.AmountGTE > 0 {
		s.add(" AND p.amount + p.amount_tax >= $%d", q.AmountGTE)
	}
	if q.AmountLTE > 0 {
		s.add(" AND p.amount + p.amount_tax <= $%d", q.AmountLTE)
	}
	if q.Ref != "" {
		// The reference as stored, or the processor's part of a qualified
		// one ("stripe_eu:pi_1" for "pi_1").
		s.add(" AND (p.authorization_ref = $%d OR right(p.authorization_ref, length($%d)) = $%d)", q.Ref, ":"+q.Ref, ":"+q.Ref)
	}
}

// searchByCard returns the page of a search with a card's last 4 through
// the index of cards by last 4 (migration 0014) and payments_customer:
// the payments of the cards' customers made with these cards. A first
// statement reads the candidates' IDs from the indexes alone, newest
// first; then their rows are read in batches, newest first, each batch
// twice the last, until the page is full: a page reads the rows of about
// its own payments, not of every candidate (each row is a random read of
// the table: 150 ms at p99 for ~1,000 candidates when all were read,
// bench/RESULTS.md). It returns nil, and the bounded scan serves the
// search, when more than PaymentSearchCardsMax of the merchant's cards
// end in these digits, or their customers have more than q.Examine()
// payments in the range.
func (db *DB) searchByCard(ctx context.Context, q surgepay.PaymentSearch) (*surgepay.PaymentSearchPage, error) {
	from, before := q.IDRange()
	c := &searchQuery{}
	c.add("WITH cards AS MATERIALIZED (SELECT customer_id FROM payment_methods WHERE merchant_id = $%d AND last4 = $%d LIMIT $%d)"+
		" SELECT (SELECT count(*) FROM cards), ARRAY(SELECT c.id FROM payments c"+
		" WHERE c.merchant_id = $%d AND c.customer_id IN (SELECT customer_id FROM cards)",
		q.MerchantID, q.Last4, surgepay.PaymentSearchCardsMax+1, q.MerchantID)
	if from != "" {
		c.add(" AND c.id >= $%d", from)
	}
	if before != "" {
		c.add(" AND c.id < $%d", before)
	}
	c.add(" ORDER BY c.id DESC LIMIT $%d)", q.Examine()+1)
	var nCards int
	var cand []string
	err := func() error {
		defer count(ctx, surgepay.StmtSelect)()
		return db.opPool.QueryRow(ctx, c.sql.String(), c.args...).Scan(&nCards, &cand)
	}()
	if err != nil {
		return nil, readErr(fmt.Errorf("search payments by card: %w", err))
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
		s := &searchQuery{}
		s.add("SELECT "+qualify("p", paymentCols)+" FROM payments p WHERE p.merchant_id = $%d AND p.id = ANY($%d)"+
			" AND p.payment_method_id IN (SELECT id FROM payment_methods WHERE merchant_id = $%d AND last4 = $%d)",
			q.MerchantID, ids, q.MerchantID, q.Last4)
		if q.Status != "" {
			s.add(" AND p.status = $%d", string(q.Status))
		}
		searchFilters(s, q)
		s.sql.WriteString(" ORDER BY p.id DESC")
		got, err := db.search(ctx, s)
		if err != nil {
			return nil, readErr(fmt.Errorf("search payments by card: %w", err))
		}
		ps = append(ps, got...)
	}
	if len(ps) > q.Limit {
		return &surgepay.PaymentSearchPage{Payments: ps[:q.Limit], Next: ps[q.Limit-1].ID}, nil
	}
	return &surgepay.PaymentSearchPage{Payments: ps}, nil
}

// searchWindow adds the WHERE, ORDER BY and LIMIT of the payments a
// search reads.
func searchWindow(s *searchQuery, q surgepay.PaymentSearch) {
	s.add(" WHERE merchant_id = $%d", q.MerchantID)
	if q.Status != "" {
		s.add(" AND status = $%d", string(q.Status))
	}
	from, before := q.IDRange()
	if from != "" {
		s.add(" AND id >= $%d", from)
	}
	if before != "" {
		s.add(" AND id < $%d", before)
	}
	s.add(" ORDER BY id DESC LIMIT $%d", q.Examine())
}

func (db *DB) search(ctx context.Context, s *searchQuery) ([]*surgepay.Payment, error) {
	defer count(ctx, surgepay.StmtSelect)()
	rows, _ := db.opPool.Query(ctx, s.sql.String(), s.args...)
	return collect(rows, scanPayment)
}

func (db *DB) searchExamined(ctx context.Context, s *searchQuery) (int, string, error) {
	defer count(ctx, surgepay.StmtSelect)()
	var n int
	var last string
	err := db.opPool.QueryRow(ctx, s.sql.String(), s.args...).Scan(&n, &last)
	return n, last, err
}

// FindCustomersByEmail returns up to CustomersByEmailMax of the
// merchant's customers of that email (case ignored), newest first: a
// range of the index customers_email (migration 0014).
func (db *DB) FindCustomersByEmail(ctx context.Context, merchantID, email string) ([]*surgepay.Customer, error) {
	defer count(ctx, surgepay.StmtSelect)()
	rows, _ := db.opPool.Query(ctx, "SELECT "+customerCols+" FROM customers"+
		" WHERE merchant_id = $1 AND lower(email) = lower($2) AND email <> '' ORDER BY id DESC LIMIT $3",
		merchantID, email, surgepay.CustomersByEmailMax)
	cs, err := collect(rows, scanCustomer)
	if err != nil {
		return nil, readErr(fmt.Errorf("find customers by email: %w", err))
	}
	return cs, nil
}

// qualify returns cols ("a, b") with each column prefixed by table.
func qualify(table, cols string) string {
	names := strings.Split(cols, ",")
	for i, n := range names {
		names[i] = table + "." + strings.TrimSpace(n)
	}
	return strings.Join(names, ", ")
}
