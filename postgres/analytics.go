package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/surgepay/surgepay"
)

// Analytics counters (migrations/0004_analytics.sql). A batch adds the
// deltas of its Writes with one upsert, the last statement before COMMIT,
// in the batch's last round: no round trip of its own.
//
// Which Writes count: those whose guards held. For most ops the batch
// knows by the last round. A sale that runs last (op.last: its guard is
// its only statement and runs in the last round too) is not known yet when
// the round is sent, so its deltas are conditional in SQL: they count if
// its payment row was inserted by this transaction (xmin is the
// transaction's ID), which it is if and only if its idempotency guard
// held. A row from before (a retry that took the ID of a payment stored by
// an earlier attempt) has an older xmin. Sales run at the top level of the
// transaction, never under a savepoint, so their rows' xmin is the
// transaction's own ID.

// analyticsStripes is how many rows hold a merchant's counters of one day
// and currency. A batch adds to one stripe, its connection's backend PID
// modulo analyticsStripes: concurrent batches hold different connections,
// so they seldom wait for each other's row lock (held until COMMIT).
const analyticsStripes = 16

const analyticsCounterCols = "payments_created, authorized_count, amount_authorized, captured_count, " +
	"amount_captured, declined_count, failed_count, amount_failed, voided_count, amount_voided, " +
	"refunded_count, amount_refunded"

// sqlAnalyticsUpsert adds any number of rows with one statement: column
// arrays unnested, grouped by key (conditional rows of several sales may
// share one), locked in key order (no deadlock between batches), added to
// stripe $17. sale is "" for a row that counts, else the ID of the
// payment the row counts only if this transaction inserted it.
var sqlAnalyticsUpsert = func() string {
	cols := strings.Split(analyticsCounterCols, ", ")
	arrays := []string{"$1::text[]", "$2::text[]", "$3::text[]"}
	names := []string{"merchant_id", "day", "currency"}
	var sums, set []string
	for i, c := range cols {
		arrays = append(arrays, fmt.Sprintf("$%d::bigint[]", i+4))
		names = append(names, c)
		sums = append(sums, "sum(d."+c+")")
		set = append(set, c+" = analytics_daily."+c+" + excluded."+c)
	}
	arrays = append(arrays, fmt.Sprintf("$%d::text[]", len(cols)+4))
	names = append(names, "sale")
	return `INSERT INTO analytics_daily (merchant_id, day, currency, stripe, ` + analyticsCounterCols + `)
		SELECT d.merchant_id, d.day::date, d.currency, $17::smallint, ` + strings.Join(sums, ", ") + `
		FROM unnest(` + strings.Join(arrays, ", ") + `) AS d(` + strings.Join(names, ", ") + `)
		WHERE d.sale = '' OR EXISTS (SELECT FROM payments p
			WHERE p.merchant_id = d.merchant_id AND p.id = d.sale AND p.xmin = pg_current_xact_id()::xid)
		GROUP BY d.merchant_id, d.day, d.currency
		ORDER BY d.merchant_id, d.day, d.currency
		ON CONFLICT (merchant_id, day, currency, stripe) DO UPDATE SET ` + strings.Join(set, ", ")
}()

// analyticsRows are the column arrays of sqlAnalyticsUpsert.
type analyticsRows struct {
	merchants, days, currencies, sales []string
	counters                           [12][]int64
}

func (r *analyticsRows) add(ds []surgepay.AnalyticsDelta, sale string) {
	for _, d := range surgepay.MergeAnalytics(ds) {
		r.merchants, r.days, r.currencies = append(r.merchants, d.MerchantID), append(r.days, d.Date), append(r.currencies, d.Currency)
		r.sales = append(r.sales, sale)
		c := &d.AnalyticsCounters
		for i, v := range [12]int64{c.PaymentsCreated, c.AuthorizedCount, c.AmountAuthorized, c.CapturedCount,
			c.AmountCaptured, c.DeclinedCount, c.FailedCount, c.AmountFailed, c.VoidedCount, c.AmountVoided,
			c.RefundedCount, c.AmountRefunded} {
			r.counters[i] = append(r.counters[i], v)
		}
	}
}

// analyticsQuery returns the batch's upsert, counted on the request of
// every op it adds to, and false if no op has deltas to add: ops whose
// guards held, and (conditionally) ops that run last.
func (t *txn) analyticsQuery(ops []*op) (queued, bool) {
	var rows analyticsRows
	var unconditional []surgepay.AnalyticsDelta
	var from []*op
	for _, o := range ops {
		w := o.item.Value
		switch {
		case len(w.Analytics) == 0:
			continue
		case o.last:
			rows.add(w.Analytics, w.PaymentInsert.ID)
		case o.failed == nil:
			unconditional = append(unconditional, w.Analytics...)
		default:
			continue
		}
		from = append(from, o)
	}
	rows.add(unconditional, "")
	if len(rows.merchants) == 0 {
		return queued{}, false
	}
	args := []any{rows.merchants, rows.days, rows.currencies}
	for i := range rows.counters {
		args = append(args, rows.counters[i])
	}
	stripe := int16(t.conn.PgConn().PID() % analyticsStripes)
	args = append(args, rows.sales, stripe)
	return queued{sql: sqlAnalyticsUpsert, args: args, read: func(br pgx.BatchResults) error {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("add analytics: %w", err)
		}
		// Counted on the Writes it added to, as on SQLite: by now the
		// round's earlier results are read, so a sale that ran last and
		// was refused (o.failed) is known, and added nothing.
		for _, o := range from {
			if o.failed == nil {
				surgepay.CountStatement(o.item.Ctx, surgepay.StmtInsert)
			}
		}
		return nil
	}}, true
}

// sqlAnalyticsList reads a merchant's range of days, its stripes summed:
// a range of the primary key.
var sqlAnalyticsList = func() string {
	var sums []string
	for _, c := range strings.Split(analyticsCounterCols, ", ") {
		sums = append(sums, "sum("+c+")::bigint")
	}
	return `SELECT to_char(day, 'YYYY-MM-DD'), currency, ` + strings.Join(sums, ", ") + `
		FROM analytics_daily WHERE merchant_id = $1 AND day >= $2::date AND day <= $3::date AND ($4 = '' OR currency = $4)
		GROUP BY day, currency ORDER BY day, currency`
}()

// ListAnalytics returns the merchant's counters for q's days, by date then
// currency, its stripes summed: one range of the primary key.
func (db *DB) ListAnalytics(ctx context.Context, merchantID string, q surgepay.AnalyticsQuery) ([]*surgepay.AnalyticsDay, error) {
	defer count(ctx, surgepay.StmtSelect)()
	rows, _ := db.pool.Query(ctx, sqlAnalyticsList, merchantID, q.From, q.To, q.Currency)
	days, err := collect(rows, func(row pgx.Row) (*surgepay.AnalyticsDay, error) {
		var d surgepay.AnalyticsDay
		c := &d.AnalyticsCounters
		err := row.Scan(&d.Date, &d.Currency, &c.PaymentsCreated, &c.AuthorizedCount, &c.AmountAuthorized,
			&c.CapturedCount, &c.AmountCaptured, &c.DeclinedCount, &c.FailedCount, &c.AmountFailed,
			&c.VoidedCount, &c.AmountVoided, &c.RefundedCount, &c.AmountRefunded)
		return &d, err
	})
	if err != nil {
		return nil, fmt.Errorf("list analytics: %w", err)
	}
	return days, nil
}

// The pages of ListRecentPaymentMethods: the first, and those after an ID.
const (
	sqlRecentPaymentMethods = "SELECT " + paymentMethodCols +
		" FROM payment_methods WHERE merchant_id = $1 ORDER BY id DESC LIMIT $2"
	sqlRecentPaymentMethodsBefore = "SELECT " + paymentMethodCols +
		" FROM payment_methods WHERE merchant_id = $1 AND id < $2 ORDER BY id DESC LIMIT $3"
)

// ListRecentPaymentMethods returns up to limit (at most
// surgepay.RecentPaymentMethodsPageMax) of the merchant's cards with IDs
// below beforeID ("" for the newest), newest first: a backward range of
// the primary key (merchant_id, id). The first page has its own text: a
// condition true for an empty beforeID (an OR) would keep the planner
// from using id as the range's end.
func (db *DB) ListRecentPaymentMethods(ctx context.Context, merchantID, beforeID string, limit int) ([]*surgepay.PaymentMethod, error) {
	if limit <= 0 {
		return nil, nil
	}
	limit = min(limit, surgepay.RecentPaymentMethodsPageMax)
	defer count(ctx, surgepay.StmtSelect)()
	var rows pgx.Rows
	if beforeID == "" {
		rows, _ = db.pool.Query(ctx, sqlRecentPaymentMethods, merchantID, limit)
	} else {
		rows, _ = db.pool.Query(ctx, sqlRecentPaymentMethodsBefore, merchantID, beforeID, limit)
	}
	pms, err := collect(rows, scanPaymentMethod)
	if err != nil {
		return nil, fmt.Errorf("list recent payment methods: %w", err)
	}
	return pms, nil
}
