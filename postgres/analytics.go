package postgres

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5"

	"github.com/surgepay/surgepay"
)

// Analytics counters (migrations/0004_analytics.sql). A batch adds the
// deltas of its Writes whose guards held, summed by key, with one upsert:
// the last statement before COMMIT, in the batch's last round, so no
// round trip of its own. A sale that would run in the last round itself
// (op.last: a sale without events, whose guard is its only statement) is
// not known to hold when that round is sent; when it carries deltas it
// takes the rounds of other Writes instead (see newOp), one round trip
// more for its batch.
//
// Why not keep such a sale in the last round and make its row
// conditional (count it only if its payment row is this transaction's,
// by xmin): the upsert then needs a GROUP BY and an EXISTS per row in SQL,
// which cost about 170 µs more of the server's time per batch than this
// statement (about 25 µs over a SELECT 1, in one transaction on
// loopback). BenchmarkApplyStagedSaleAnalyticsParallel (one merchant, 4
// committers, 2 shared cores): 10,200 sales/s that way, 16,600/s this way
// with its round trip, 21,500/s with analytics off.

// analyticsStripes is how many rows hold a merchant's counters of one day
// and currency. The upsert holds its row's lock until COMMIT; with one row,
// every batch counting the merchant waits for the previous one's commit.
// With WAL flushes slowed to 2 ms (commit_delay, as a disk or a
// synchronous standby would), BenchmarkApplyStagedSaleAnalyticsParallel
// ran 5,200 sales/s on one row, 11,500/s on 16 stripes, and 13,600/s with
// analytics off.
const analyticsStripes = 16

// analyticsStripeNext numbers the batches of this process: a batch adds to
// stripe n % analyticsStripes, so the batches of one node's committers
// (Writers, 4 by default) in flight at once add to different rows. Nodes
// collide by chance.
var analyticsStripeNext atomic.Uint32

const analyticsCounterCols = "payments_created, authorized_count, amount_authorized, captured_count, " +
	"amount_captured, declined_count, failed_count, amount_failed, voided_count, amount_voided, " +
	"refunded_count, amount_refunded"

// sqlAnalyticsUpsert adds any number of rows, one per key (summed by
// surgepay.MergeAnalytics, which also sorts them, so that concurrent
// batches lock rows in one order), to stripe $16: one statement text, so
// one prepared statement per connection.
var sqlAnalyticsUpsert = func() string {
	cols := strings.Split(analyticsCounterCols, ", ")
	arrays := []string{"$1::text[]", "$2::text[]", "$3::text[]"}
	var set []string
	for i, c := range cols {
		arrays = append(arrays, fmt.Sprintf("$%d::bigint[]", i+4))
		set = append(set, c+" = analytics_daily."+c+" + excluded."+c)
	}
	return `INSERT INTO analytics_daily (merchant_id, day, currency, stripe, ` + analyticsCounterCols + `)
		SELECT d.merchant_id, d.day::date, d.currency, $16::smallint, d.` + strings.Join(cols, ", d.") + `
		FROM unnest(` + strings.Join(arrays, ", ") + `) AS d(merchant_id, day, currency, ` + analyticsCounterCols + `)
		ON CONFLICT (merchant_id, day, currency, stripe) DO UPDATE SET ` + strings.Join(set, ", ")
}()

// analyticsQuery returns the batch's upsert, counted on the request of
// every op it adds to, and false if none has deltas to add. It runs in the
// last round, when every guard but those of ops that run last (which carry
// no deltas, see newOp) is known.
func (t *txn) analyticsQuery(ops []*op) (queued, bool) {
	var ds []surgepay.AnalyticsDelta
	var from []*op
	for _, o := range ops {
		if w := o.item.Value; len(w.Analytics) > 0 && !o.last && o.failed == nil {
			ds = append(ds, w.Analytics...)
			from = append(from, o)
		}
	}
	rows := surgepay.MergeAnalytics(ds)
	if len(rows) == 0 {
		return queued{}, false
	}
	n := len(rows)
	merchants, days, currencies := make([]string, n), make([]string, n), make([]string, n)
	var counters [12][]int64
	for i := range counters {
		counters[i] = make([]int64, n)
	}
	for i, d := range rows {
		merchants[i], days[i], currencies[i] = d.MerchantID, d.Date, d.Currency
		c := &d.AnalyticsCounters
		for j, v := range [12]int64{c.PaymentsCreated, c.AuthorizedCount, c.AmountAuthorized, c.CapturedCount,
			c.AmountCaptured, c.DeclinedCount, c.FailedCount, c.AmountFailed, c.VoidedCount, c.AmountVoided,
			c.RefundedCount, c.AmountRefunded} {
			counters[j][i] = v
		}
	}
	args := []any{merchants, days, currencies}
	for i := range counters {
		args = append(args, counters[i])
	}
	args = append(args, int16(analyticsStripeNext.Add(1)%analyticsStripes))
	for _, o := range from {
		surgepay.CountStatement(o.item.Ctx, surgepay.StmtInsert)
	}
	return queued{sql: sqlAnalyticsUpsert, args: args, read: readExec("add analytics")}, true
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
		return nil, readErr(fmt.Errorf("list analytics: %w", err))
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
		return nil, readErr(fmt.Errorf("list recent payment methods: %w", err))
	}
	return pms, nil
}
