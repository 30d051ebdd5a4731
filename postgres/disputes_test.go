package postgres_test

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/postgres"
)

// TestDisputesMigrationBackfill: migration 0013's backfill, run on
// payments stored before it (their dispute transactions, no row of the
// table), gives one row a dispute, each as the payment's Disputes() tells
// it: two disputes of one payment are two rows, a change of a dispute is
// its latest state, a payment without a dispute gives none.
func TestDisputesMigrationBackfill(t *testing.T) {
	ctx := t.Context()
	cfg := postgres.Config{DSN: testDSN(t), Schema: newSchema(t)}
	db := openAt(t, cfg)
	created := time.Date(2026, 2, 1, 10, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return created.Add(d) }
	m := &surgepay.Merchant{ID: "mch_before", Name: "Before", Created: created}
	if err := db.Apply(ctx, &surgepay.Write{Merchant: m}); err != nil {
		t.Fatal(err)
	}
	tx := func(typ, status, ref, msg string, amount int64, when, due time.Time) surgepay.Transaction {
		return surgepay.Transaction{ID: surgepay.NewID("txn"), Type: typ, Status: status, Amount: amount, ProviderRef: ref,
			Message: msg, Created: when, DueBy: due}
	}
	var none time.Time
	payments := map[string][]surgepay.Transaction{
		"pay_two": {
			tx(surgepay.TxAuthorization, surgepay.TxSucceeded, "pi_two", "", 5000, created, none),
			tx(surgepay.TxDispute, surgepay.DisputeNeedsResponse, "stripe_eu:dp_1", "fraudulent", 5000, at(time.Minute), at(7*24*time.Hour)),
			tx(surgepay.TxRefund, surgepay.TxSucceeded, "pi_two", "", 100, at(2*time.Minute), none),
			tx(surgepay.TxDispute, surgepay.DisputeLost, "stripe_eu:dp_1", "", 5000, at(3*time.Minute), none),
			tx(surgepay.TxDispute, surgepay.DisputeWarningNeedsResponse, "stripe_eu:dp_2", "duplicate", 400, at(4*time.Minute), none)},
		"pay_quiet": {tx(surgepay.TxAuthorization, surgepay.TxSucceeded, "pi_quiet", "", 5000, created, none)},
	}
	for id, txs := range payments {
		p := &surgepay.Payment{ID: id, MerchantID: m.ID, PaymentMethodID: "pm_1", Amount: 5000, Currency: "eur",
			CaptureMethod: surgepay.CaptureAutomatic, Status: surgepay.StatusSucceeded, AuthorizationRef: "pi_" + id,
			Path: "standard", Version: 1, Created: created, Updated: at(time.Hour), Transactions: txs}
		if err := db.Apply(ctx, &surgepay.Write{PaymentInsert: p}); err != nil {
			t.Fatal(err)
		}
	}
	// The table as the migration finds it: none of these rows.
	migration, err := os.ReadFile("migrations/0013_disputes.sql")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, cfg.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "SET search_path TO "+cfg.Schema+"; DROP TABLE disputes; "+string(migration)); err != nil {
		t.Fatal(err)
	}

	var want []*surgepay.Dispute
	for _, id := range []string{"pay_two", "pay_quiet"} {
		p, err := db.FindPayment(ctx, m.ID, id)
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
	if len(want) != 2 || want[0].ID != "stripe_eu:dp_1" || !want[0].DueBy.Equal(at(7*24*time.Hour)) {
		t.Fatalf("the payments read back hold %+v, want dp_1 (with its deadline), dp_2", want)
	}
	page, err := db.ListDisputes(ctx, surgepay.DisputeQuery{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, page.Disputes); d != "" {
		t.Fatalf("the disputes after the migration (-as the payments tell them +as listed):\n%s", d)
	}
}
