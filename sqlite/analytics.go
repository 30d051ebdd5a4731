package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/groupcommit"
)

// Analytics counters (migrations/0006_analytics.sql): the writer adds the
// deltas of a whole batch with one statement, before the batch commits.

// analyticsCounterCols are the counter columns, in the order of
// counterArgs.
const analyticsCounterCols = "payments_created, authorized_count, amount_authorized, captured_count, " +
	"amount_captured, declined_count, failed_count, amount_failed, voided_count, amount_voided, " +
	"refunded_count, amount_refunded"

// analyticsUpsertSQL adds any number of rows with one statement: a JSON
// array of rows [merchant, day, currency, counters...] bound as one
// parameter (prepared once; the text does not depend on the row count).
// "WHERE true" is SQLite's required disambiguation of INSERT ... SELECT
// ... ON CONFLICT.
var analyticsUpsertSQL = func() string {
	cols := strings.Split(analyticsCounterCols, ", ")
	var sel, set []string
	for i := range 3 + len(cols) {
		sel = append(sel, fmt.Sprintf("value ->> %d", i))
	}
	for _, c := range cols {
		set = append(set, c+" = "+c+" + excluded."+c)
	}
	return "INSERT INTO analytics_daily (merchant_id, day, currency, " + analyticsCounterCols + ") SELECT " +
		strings.Join(sel, ", ") + " FROM json_each(?) WHERE true ON CONFLICT (merchant_id, day, currency) DO UPDATE SET " +
		strings.Join(set, ", ")
}()

func counterArgs(c *surgepay.AnalyticsCounters) []any {
	return []any{c.PaymentsCreated, c.AuthorizedCount, c.AmountAuthorized, c.CapturedCount, c.AmountCaptured,
		c.DeclinedCount, c.FailedCount, c.AmountFailed, c.VoidedCount, c.AmountVoided, c.RefundedCount,
		c.AmountRefunded}
}

func scanCounters(c *surgepay.AnalyticsCounters) []any {
	return []any{&c.PaymentsCreated, &c.AuthorizedCount, &c.AmountAuthorized, &c.CapturedCount, &c.AmountCaptured,
		&c.DeclinedCount, &c.FailedCount, &c.AmountFailed, &c.VoidedCount, &c.AmountVoided, &c.RefundedCount,
		&c.AmountRefunded}
}

// analyticsStmts is the writer's prepared upsert.
type analyticsStmts struct{ upsert *sql.Stmt }

func (a *analyticsStmts) prepare(ctx context.Context, conn *sql.Conn) error {
	st, err := conn.PrepareContext(ctx, analyticsUpsertSQL)
	if err != nil {
		return fmt.Errorf("prepare %q: %w", analyticsUpsertSQL, err)
	}
	a.upsert = st
	return nil
}

func (a *analyticsStmts) close() error {
	if a.upsert == nil {
		return nil
	}
	return a.upsert.Close()
}

// applyAnalytics adds the analytics deltas of the items whose Writes were
// stored (no guard failed) with one upsert, counted on each of those
// items' requests; no statement if there are none. It runs in the batch's
// transaction, after its items, so that the counters commit with them.
func (w *writer) applyAnalytics(items []*groupcommit.Item[*op]) error {
	var ds []surgepay.AnalyticsDelta
	var from []*groupcommit.Item[*op]
	for _, it := range items {
		if it.Err != nil || it.Value.w == nil || len(it.Value.w.Analytics) == 0 {
			continue
		}
		ds = append(ds, it.Value.w.Analytics...)
		from = append(from, it)
	}
	rows := surgepay.MergeAnalytics(ds)
	if len(rows) == 0 {
		return nil
	}
	vals := make([][]any, len(rows))
	for i := range rows {
		r := &rows[i]
		vals[i] = append([]any{r.MerchantID, r.Date, r.Currency}, counterArgs(&r.AnalyticsCounters)...)
	}
	js, err := json.Marshal(vals)
	if err != nil {
		return fmt.Errorf("encode %d analytics rows: %w", len(rows), err)
	}
	for _, it := range from {
		surgepay.CountStatement(it.Ctx, surgepay.StmtInsert)
	}
	if _, err := w.analytics.upsert.ExecContext(context.Background(), string(js)); err != nil {
		return fmt.Errorf("add %d analytics rows: %w", len(rows), err)
	}
	return nil
}

// analyticsListSQL reads a merchant's range of days: a range of the
// primary key, the currency filtered within it.
const analyticsListSQL = "SELECT day, currency, " + analyticsCounterCols +
	" FROM analytics_daily WHERE merchant_id = ?1 AND day >= ?2 AND day <= ?3 AND (?4 = '' OR currency = ?4)" +
	" ORDER BY day, currency"

// ListAnalytics returns the merchant's counters for q's days, by date then
// currency: one range of the primary key.
func (db *DB) ListAnalytics(ctx context.Context, merchantID string, q surgepay.AnalyticsQuery) ([]*surgepay.AnalyticsDay, error) {
	defer counted(ctx)()
	rows, err := db.read.QueryContext(ctx, analyticsListSQL, merchantID, q.From, q.To, q.Currency)
	days, err := scanAll(rows, err, func(r scanner) (*surgepay.AnalyticsDay, error) {
		var d surgepay.AnalyticsDay
		err := r.Scan(append([]any{&d.Date, &d.Currency}, scanCounters(&d.AnalyticsCounters)...)...)
		return &d, err
	})
	if err != nil {
		return nil, fmt.Errorf("list analytics: %w", err)
	}
	return days, nil
}

// ListRecentPaymentMethods returns up to limit (at most
// surgepay.RecentPaymentMethodsPageMax) of the merchant's cards with IDs
// below beforeID ("" for the newest), newest first: a backward range of
// the primary key (merchant_id, id).
func (db *DB) ListRecentPaymentMethods(ctx context.Context, merchantID, beforeID string, limit int) ([]*surgepay.PaymentMethod, error) {
	if limit <= 0 {
		return nil, nil
	}
	query, args := recentPaymentMethodsQuery(merchantID, beforeID, min(limit, surgepay.RecentPaymentMethodsPageMax))
	defer counted(ctx)()
	rows, err := db.read.QueryContext(ctx, query, args...)
	pms, err := scanAll(rows, err, scanPaymentMethod)
	if err != nil {
		return nil, fmt.Errorf("list recent payment methods: %w", err)
	}
	return pms, nil
}

// recentPaymentMethodsQuery is the query of ListRecentPaymentMethods. The
// first page has no bound on id: a condition that is true for an empty
// beforeID (an OR) would keep SQLite from using it as the range's end.
func recentPaymentMethodsQuery(merchantID, beforeID string, limit int) (string, []any) {
	if beforeID == "" {
		return "SELECT " + paymentMethodCols + " FROM payment_methods WHERE merchant_id = ? ORDER BY id DESC LIMIT ?",
			[]any{merchantID, limit}
	}
	return "SELECT " + paymentMethodCols + " FROM payment_methods WHERE merchant_id = ? AND id < ? ORDER BY id DESC LIMIT ?",
		[]any{merchantID, beforeID, limit}
}
