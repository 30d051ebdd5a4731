package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
)

// TestListDisputesUsesIndexes: each shape of ListDisputes' statement (one
// merchant or all, with states or any, from a cursor or the start), on a
// table of 20,000 disputes, reads ranges of the disputes indexes in their
// order, never the table whole nor a sort of it: only the few rows each
// range gives are merged.
func TestListDisputesUsesIndexes(t *testing.T) {
	// As testDSN (postgres_test) does, in this package's own tests.
	dsn := os.Getenv("SURGEPAY_TEST_POSTGRES_URL")
	if dsn == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("SURGEPAY_TEST_POSTGRES_URL is not set, and CI is: PostgreSQL tests must run in CI")
		}
		t.Skip("SURGEPAY_TEST_POSTGRES_URL is not set")
	}
	b := make([]byte, 8)
	rand.Read(b)
	schema := "t_" + hex.EncodeToString(b)
	ctx := t.Context()
	db, err := Open(ctx, Config{DSN: dsn, Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = db.pool.pool.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
		db.Close()
	})
	// A table of some size, with statistics: the plan of an empty one is
	// whatever is cheapest for no rows.
	if _, err := db.pool.pool.Exec(ctx, "INSERT INTO "+schema+".disputes ("+disputeCols+") "+
		"SELECT 'mch_' || (i % 50), 'dp_' || i, 'pay_' || i, "+
		"(ARRAY['warning_needs_response', 'warning_under_review', 'warning_closed', 'needs_response', 'under_review', "+
		"'won', 'lost', 'prevented'])[i % 8 + 1], 100, 'eur', 'fraudulent', "+
		"CASE WHEN i % 10 = 0 THEN NULL ELSE now() + i * interval '1 minute' END, now(), now() "+
		"FROM generate_series(1, 20000) i"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.pool.pool.Exec(ctx, "ANALYZE "+schema+".disputes"); err != nil {
		t.Fatal(err)
	}
	cursor := &surgepay.DisputeCursor{DueBy: time.Now().Add(time.Hour), ID: "dp_1", MerchantID: "mch_1"}
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
		{"AllAnyUnknownDeadline", surgepay.DisputeQuery{}, &surgepay.DisputeCursor{ID: "dp_1", MerchantID: "m"}, "disputes_due"},
		{"MerchantAny", surgepay.DisputeQuery{MerchantID: "mch_1"}, cursor, "disputes_merchant_due"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.q.Limit = 25
			s := disputesQuery(tc.q, tc.after)
			rows, err := db.pool.pool.Query(ctx, "EXPLAIN "+s.sql.String(), s.args...)
			if err != nil {
				t.Fatal(err)
			}
			var plan []string
			for rows.Next() {
				var line string
				if err := rows.Scan(&line); err != nil {
					t.Fatal(err)
				}
				plan = append(plan, line)
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			text := strings.Join(plan, "\n")
			if want := max(len(tc.q.Statuses), 1); strings.Count(text, "Index Scan using "+tc.index+" ") != want ||
				strings.Contains(text, "Seq Scan") || strings.Contains(text, "Bitmap") {
				t.Fatalf("want %d range(s) of %s in its order, no scan of the table:\n%s", want, tc.index, text)
			}
		})
	}
}
