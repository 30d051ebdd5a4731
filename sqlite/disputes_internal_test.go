package sqlite

import (
	"database/sql"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/surgepay/surgepay"
)

// TestDisputesMigrationBackfill: a file at migration 0017 whose payments
// hold dispute transactions (as this version writes them, and as rows of
// earlier versions hold them: txJSONv1) gains one row a dispute at
// migration 0018, each as the payment's Disputes() tells it: two
// disputes of one payment are two rows, a change of a dispute is its
// latest state, a payment without a dispute gives none.
func TestDisputesMigrationBackfill(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "surgepay.db")
	ms, err := listMigrations()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if err := migrate(ctx, raw, slices.DeleteFunc(ms, func(m migration) bool { return m.version >= 18 }), nil); err != nil {
		t.Fatal(err)
	}
	created := time.Date(2026, 2, 1, 10, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return created.Add(d) }
	payment := func(id string, txs ...surgepay.Transaction) *surgepay.Payment {
		return &surgepay.Payment{ID: id, MerchantID: "mch_before", PaymentMethodID: "pm_1", Amount: 5000, Currency: "eur",
			CaptureMethod: surgepay.CaptureAutomatic, Status: surgepay.StatusSucceeded, AuthorizationRef: "stripe_eu:pi_" + id,
			Path: "standard", Version: int64(len(txs)), Created: created, Updated: at(time.Hour), Transactions: txs}
	}
	tx := func(typ, status, ref, msg string, amount int64, when time.Time) surgepay.Transaction {
		return surgepay.Transaction{ID: surgepay.NewID("txn"), Type: typ, Status: status, Amount: amount, ProviderRef: ref,
			Message: msg, Created: when}
	}
	two := payment("pay_two",
		tx(surgepay.TxAuthorization, surgepay.TxSucceeded, "stripe_eu:pi_pay_two", "", 5000, created),
		tx(surgepay.TxCapture, surgepay.TxSucceeded, "stripe_eu:pi_pay_two", "", 5000, created),
		tx(surgepay.TxDispute, surgepay.DisputeNeedsResponse, "stripe_eu:dp_1", "fraudulent", 5000, at(time.Minute)),
		tx(surgepay.TxRefund, surgepay.TxSucceeded, "stripe_eu:pi_pay_two", "refunded at the processor", 100, at(2*time.Minute)),
		tx(surgepay.TxDispute, surgepay.DisputeLost, "stripe_eu:dp_1", "", 5000, at(3*time.Minute)),
		tx(surgepay.TxDispute, surgepay.DisputeWarningNeedsResponse, "stripe_eu:dp_2", "duplicate", 400, at(4*time.Minute)))
	quiet := payment("pay_quiet", tx(surgepay.TxAuthorization, surgepay.TxSucceeded, "stripe_eu:pi_pay_quiet", "", 5000, created))
	old := payment("pay_old", tx(surgepay.TxAuthorization, surgepay.TxSucceeded, "stripe_eu:pi_pay_old", "", 5000, created))
	for _, p := range []*surgepay.Payment{two, quiet, old} {
		args, err := paymentArgs(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := raw.ExecContext(ctx, insertSQL("payments", paymentWriteCols), args...); err != nil {
			t.Fatal(err)
		}
	}
	// A row an earlier version wrote: txJSONv1, full names, created absolute.
	v1 := `[{"id":"txn_1","type":"authorization","status":"succeeded","amount":5000,"provider_ref":"stripe_eu:pi_pay_old","created":` +
		i64(created) + `},{"id":"txn_2","type":"dispute","status":"under_review","amount":2500,"provider_ref":"stripe_eu:dp_old",` +
		`"message":"product_not_received","created":` + i64(at(5*time.Minute)) + `}]`
	if _, err := raw.ExecContext(ctx, "UPDATE payments SET transactions = ? WHERE id = 'pay_old'", v1); err != nil {
		t.Fatal(err)
	}
	if err := raw.Close(); err != nil {
		t.Fatal(err)
	}

	db, err := Open(ctx, Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var want []*surgepay.Dispute
	for _, id := range []string{"pay_two", "pay_quiet", "pay_old"} {
		p, err := db.FindPayment(ctx, "mch_before", id)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range p.Disputes() {
			want = append(want, &d)
		}
	}
	slices.SortFunc(want, func(a, b *surgepay.Dispute) int {
		if surgepay.CursorOf(a).Before(surgepay.CursorOf(b)) {
			return -1
		}
		return 1
	})
	if len(want) != 3 {
		t.Fatalf("the payments read back hold %d disputes, want 3 (dp_1, dp_2, dp_old)", len(want))
	}
	page, err := db.ListDisputes(ctx, surgepay.DisputeQuery{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, page.Disputes); d != "" {
		t.Fatalf("the disputes after the migration (-as the payments tell them +as listed):\n%s", d)
	}
	if got := page.Disputes[0]; got.ID != "stripe_eu:dp_1" || got.Status != surgepay.DisputeLost || got.Reason != "fraudulent" ||
		!got.Created.Equal(at(time.Minute)) || !got.Updated.Equal(at(3*time.Minute)) {
		t.Fatalf("dp_1 = %+v; want lost, fraudulent, created at its first change, updated at its last", got)
	}
}

func i64(t time.Time) string { return strconv.FormatInt(t.UnixNano(), 10) }

// TestListDisputesUsesIndexes: each shape of ListDisputes' statement (one
// merchant or all, with states or any, from a cursor or the start) reads
// ranges of the disputes indexes in their order, never the table whole
// nor a sort of it: only the few rows each range gives are merged.
func TestListDisputesUsesIndexes(t *testing.T) {
	ctx := t.Context()
	db, err := Open(ctx, Config{Path: filepath.Join(t.TempDir(), "surgepay.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	cursor := &surgepay.DisputeCursor{DueBy: time.Now(), ID: "dp_1", MerchantID: "mch_1"}
	for _, tc := range []struct {
		name  string
		q     surgepay.DisputeQuery
		after *surgepay.DisputeCursor
		index string
	}{
		{"AllNeedingResponse", surgepay.DisputeQuery{Statuses: surgepay.DisputeStatusesNeedingResponse}, nil, "disputes_status_due"},
		{"AllNeedingResponseAfter", surgepay.DisputeQuery{Statuses: surgepay.DisputeStatusesNeedingResponse}, cursor, "disputes_status_due"},
		{"MerchantNeedingResponse", surgepay.DisputeQuery{MerchantID: "mch_1", Statuses: surgepay.DisputeStatusesNeedingResponse},
			cursor, "disputes_merchant_status_due"},
		{"AllAny", surgepay.DisputeQuery{}, cursor, "disputes_due"},
		{"MerchantAny", surgepay.DisputeQuery{MerchantID: "mch_1"}, cursor, "disputes_merchant_due"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.q.Limit = 25
			query, args := disputesQuery(tc.q, tc.after)
			rows, err := db.read.QueryContext(ctx, "EXPLAIN QUERY PLAN "+query, args...)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var plan []string
			searches := 0
			for rows.Next() {
				var id, parent, unused int
				var detail string
				if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
					t.Fatal(err)
				}
				plan = append(plan, detail)
				if strings.HasPrefix(detail, "SCAN disputes") || strings.HasPrefix(detail, "SEARCH disputes") &&
					!strings.Contains(detail, "USING INDEX "+tc.index+" (") {
					t.Fatalf("a read of the table not by a range of %s: %q in %q", tc.index, detail, plan)
				}
				if strings.HasPrefix(detail, "SEARCH disputes") {
					searches++
				}
			}
			if want := max(len(tc.q.Statuses), 1); searches != want {
				t.Fatalf("%d ranges read, want %d (one per state): %q", searches, want, plan)
			}
		})
	}
}
