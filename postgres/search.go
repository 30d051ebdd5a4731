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
	s := &searchQuery{}
	s.sql.WriteString("SELECT " + qualify("p", paymentCols) + " FROM (SELECT * FROM payments")
	searchWindow(s, q)
	s.sql.WriteString(") p")
	if q.Last4 != "" {
		s.add(" JOIN payment_methods m ON m.merchant_id = p.merchant_id AND m.id = p.payment_method_id AND m.last4 = $%d", q.Last4)
	}
	s.sql.WriteString(" WHERE true")
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
	rows, _ := db.pool.Query(ctx, s.sql.String(), s.args...)
	return collect(rows, scanPayment)
}

func (db *DB) searchExamined(ctx context.Context, s *searchQuery) (int, string, error) {
	defer count(ctx, surgepay.StmtSelect)()
	var n int
	var last string
	err := db.pool.QueryRow(ctx, s.sql.String(), s.args...).Scan(&n, &last)
	return n, last, err
}

// FindCustomersByEmail returns up to CustomersByEmailMax of the
// merchant's customers of that email (case ignored), newest first, among
// the newest CustomerSearchExamineMax: a range of the primary key; when
// fewer match, a second statement (the key alone) tells whether the bound
// stopped it.
func (db *DB) FindCustomersByEmail(ctx context.Context, merchantID, email string) ([]*surgepay.Customer, bool, error) {
	cs, err := func() ([]*surgepay.Customer, error) {
		defer count(ctx, surgepay.StmtSelect)()
		rows, _ := db.pool.Query(ctx, "SELECT "+customerCols+" FROM (SELECT * FROM customers"+
			" WHERE merchant_id = $1 ORDER BY id DESC LIMIT $2) c WHERE lower(email) = lower($3) ORDER BY id DESC LIMIT $4",
			merchantID, surgepay.CustomerSearchExamineMax, email, surgepay.CustomersByEmailMax)
		return collect(rows, scanCustomer)
	}()
	if err != nil {
		return nil, false, readErr(fmt.Errorf("find customers by email: %w", err))
	}
	if len(cs) == surgepay.CustomersByEmailMax {
		return cs, false, nil
	}
	defer count(ctx, surgepay.StmtSelect)()
	var n int
	err = db.pool.QueryRow(ctx, "SELECT count(*) FROM (SELECT 1 FROM customers WHERE merchant_id = $1 LIMIT $2) c",
		merchantID, surgepay.CustomerSearchExamineMax).Scan(&n)
	if err != nil {
		return nil, false, readErr(fmt.Errorf("find customers by email: %w", err))
	}
	return cs, n >= surgepay.CustomerSearchExamineMax, nil
}

// qualify returns cols ("a, b") with each column prefixed by table.
func qualify(table, cols string) string {
	names := strings.Split(cols, ",")
	for i, n := range names {
		names[i] = table + "." + strings.TrimSpace(n)
	}
	return strings.Join(names, ", ")
}
