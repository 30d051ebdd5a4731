package sqlite

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestReadsUseThePrimaryKey checks that the preheat's page of recent cards
// and the analytics read are ranges of their primary keys, and that the
// idempotency filter's rebuild sizes itself with two probes of the table's
// ends (idemSpanQuery; a scan held every checkpoint back for as long as it
// read millions of records): SEARCH, never SCAN, whatever the size of the
// tables.
func TestReadsUseThePrimaryKey(t *testing.T) {
	db, err := Open(t.Context(), Config{Path: filepath.Join(t.TempDir(), "surgepay.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	first, firstArgs := recentPaymentMethodsQuery("mer_1", "", 10)
	next, nextArgs := recentPaymentMethodsQuery("mer_1", "pm_1", 10)
	for _, tc := range []struct {
		name, query string
		args        []any
		want        string
	}{
		{"RecentFirstPage", first, firstArgs, "SEARCH payment_methods USING PRIMARY KEY (merchant_id=?)"},
		{"RecentNextPage", next, nextArgs, "SEARCH payment_methods USING PRIMARY KEY (merchant_id=? AND id<?)"},
		{"Analytics", analyticsListSQL, []any{"mer_1", "2026-01-01", "2026-01-31", ""},
			"SEARCH analytics_daily USING PRIMARY KEY (merchant_id=? AND day>? AND day<?)"},
		{"IdempotencySpan", idemSpanQuery, nil, "SEARCH idempotency"},
		{"StagedCount", stagedCountQuery, []any{"", 10},
			"SEARCH staged_captures USING COVERING INDEX sqlite_autoindex_staged_captures_1 (id>?)"},
		// One probe of each run (the runs table is read whole: at most
		// IdempotencyRunsMax rows).
		{"IdempotencyLookup", idempotencyLookupQuery, []any{int64(1), "mer_1", "key"},
			"SEARCH x USING PRIMARY KEY (run=? AND hash=?)"},
		{"IdempotencyFilterPage", idemFilterPageQuery, []any{int64(0), int64(0), int64(0), 10},
			"SEARCH idempotency_index USING PRIMARY KEY ((run,hash,row)>(?,?,?))"},
	} {
		rows, err := db.read.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+tc.query, tc.args...)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		scans := false
		for _, step := range plan {
			// A constant row (the SELECT around two subqueries) and a
			// subquery's rows read no table.
			scans = scans || strings.HasPrefix(step, "SCAN") && step != "SCAN CONSTANT ROW" &&
				!strings.HasPrefix(step, "SCAN (subquery-") && step != "SCAN idempotency_runs"
		}
		if got := strings.Join(plan, "; "); !strings.Contains(got, tc.want) || scans {
			t.Errorf("%s: plan %q, want %q and no scan", tc.name, got, tc.want)
		}
	}
}
