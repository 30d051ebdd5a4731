package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/surgepay/surgepay/postgres"
)

// TestReadsUseThePrimaryKey checks that the preheat's pages of recent
// cards and the analytics read can run as ranges of their primary keys.
// Sequential scans are turned off for the check: on the test's empty
// tables the planner would rightly prefer one, and the point is that the
// index applies with the query's bounds as its conditions.
func TestReadsUseThePrimaryKey(t *testing.T) {
	cfg := postgres.Config{DSN: testDSN(t), Schema: newSchema(t)}
	openAt(t, cfg) // migrates the schema
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, cfg.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SET search_path = "+pgx.Identifier{cfg.Schema}.Sanitize()+"; SET enable_seqscan = off"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, query string
		args        []any
		want        []string
	}{
		{"RecentFirstPage", postgres.SQLRecentPaymentMethods, []any{"mer_1", 10},
			[]string{"Index Scan Backward using payment_methods_pkey", "Index Cond: (merchant_id = 'mer_1'::text)"}},
		{"RecentNextPage", postgres.SQLRecentPaymentMethodsBefore, []any{"mer_1", "pm_1", 10},
			[]string{"Index Scan Backward using payment_methods_pkey", "Index Cond: ((merchant_id = 'mer_1'::text) AND (id < 'pm_1'::text))"}},
		{"Analytics", postgres.SQLAnalyticsList, []any{"mer_1", "2026-01-01", "2026-01-31", ""},
			[]string{"using analytics_daily_pkey", "Index Cond: ((merchant_id = 'mer_1'::text) AND (day >= '2026-01-01'::date) AND (day <= '2026-01-31'::date))"}},
	} {
		rows, err := conn.Query(ctx, "EXPLAIN "+tc.query, tc.args...)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		plan := strings.Join(lines, "\n")
		for _, want := range tc.want {
			if !strings.Contains(plan, want) {
				t.Errorf("%s: plan\n%s\nwant %q", tc.name, plan, want)
			}
		}
		if strings.Contains(plan, "Seq Scan") {
			t.Errorf("%s: plan\n%s\nscans the table", tc.name, plan)
		}
	}
}
