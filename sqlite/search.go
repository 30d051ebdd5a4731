package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/surgepay/surgepay"
)

var _ surgepay.OperatorSearcher = (*DB)(nil)

// SearchPayments returns a page of the payments q selects (see
// surgepay.OperatorSearcher): one statement reads at most q.Examine()
// payments of the range of (merchant_id, id), or of (merchant_id,
// status, id) with a status, newest first, and keeps those that pass the
// other filters; when the page is not full, a second statement (of the
// same index, ids only) tells whether the range ran out or the bound
// stopped it. No index is added for the other filters: each would add
// the bytes of its entry to every sale's commit (bench/regress.sh).
func (db *DB) SearchPayments(ctx context.Context, q surgepay.PaymentSearch) (*surgepay.PaymentSearchPage, error) {
	window, wargs := searchWindow(q)
	var s strings.Builder
	args := append([]any(nil), wargs...)
	s.WriteString("SELECT " + qualified("p", paymentCols) + " FROM (SELECT * FROM payments" + window + ") p")
	if q.Last4 != "" {
		s.WriteString(" JOIN payment_methods m ON m.merchant_id = p.merchant_id AND m.id = p.payment_method_id AND m.last4 = ?")
		args = append(args, q.Last4)
	}
	s.WriteString(" WHERE 1 = 1")
	if !q.CreatedGTE.IsZero() {
		s.WriteString(" AND p.created >= ?")
		args = append(args, q.CreatedGTE.UnixNano())
	}
	if !q.CreatedBefore.IsZero() {
		s.WriteString(" AND p.created < ?")
		args = append(args, q.CreatedBefore.UnixNano())
	}
	if q.AmountGTE > 0 {
		s.WriteString(" AND p.amount + p.amount_tax >= ?")
		args = append(args, q.AmountGTE)
	}
	if q.AmountLTE > 0 {
		s.WriteString(" AND p.amount + p.amount_tax <= ?")
		args = append(args, q.AmountLTE)
	}
	if q.Ref != "" {
		// The reference as stored, or the processor's part of a qualified
		// one ("stripe_eu:pi_1" for "pi_1").
		s.WriteString(" AND (p.authorization_ref = ? OR substr(p.authorization_ref, -length(?)) = ?)")
		args = append(args, q.Ref, ":"+q.Ref, ":"+q.Ref)
	}
	s.WriteString(" ORDER BY p.id DESC LIMIT ?")
	args = append(args, q.Limit+1)
	ps, err := db.searchQuery(ctx, s.String(), args)
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
	rows, err := db.read.QueryContext(ctx, query, args...)
	return scanAll(rows, err, scanPayment)
}

// searchExamined returns how many payments the window holds (at most its
// limit) and the oldest one's ID: the index alone, no row is read.
func (db *DB) searchExamined(ctx context.Context, window string, args []any) (int, string, error) {
	defer counted(ctx)()
	var n int
	var last sql.NullString
	err := db.read.QueryRowContext(ctx, "SELECT count(*), min(id) FROM (SELECT id FROM payments"+window+")", args...).Scan(&n, &last)
	return n, last.String, err
}

// FindCustomersByEmail returns up to CustomersByEmailMax of the
// merchant's customers of that email (ASCII case ignored), newest first,
// among the newest CustomerSearchExamineMax: a range of the primary key;
// when fewer match, a second statement (the key alone) tells whether the
// bound stopped it.
func (db *DB) FindCustomersByEmail(ctx context.Context, merchantID, email string) ([]*surgepay.Customer, bool, error) {
	cs, err := func() ([]*surgepay.Customer, error) {
		defer counted(ctx)()
		rows, err := db.read.QueryContext(ctx, "SELECT "+customerCols+" FROM (SELECT * FROM customers"+
			" WHERE merchant_id = ? ORDER BY id DESC LIMIT ?) WHERE email = ? COLLATE NOCASE ORDER BY id DESC LIMIT ?",
			merchantID, surgepay.CustomerSearchExamineMax, email, surgepay.CustomersByEmailMax)
		return scanAll(rows, err, scanCustomer)
	}()
	if err != nil {
		return nil, false, fmt.Errorf("find customers by email: %w", err)
	}
	if len(cs) == surgepay.CustomersByEmailMax {
		return cs, false, nil
	}
	defer counted(ctx)()
	var n int
	err = db.read.QueryRowContext(ctx, "SELECT count(*) FROM (SELECT 1 FROM customers WHERE merchant_id = ? LIMIT ?)",
		merchantID, surgepay.CustomerSearchExamineMax).Scan(&n)
	if err != nil {
		return nil, false, fmt.Errorf("find customers by email: %w", err)
	}
	return cs, n >= surgepay.CustomerSearchExamineMax, nil
}
