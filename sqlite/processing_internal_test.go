package sqlite

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestListProcessingUsesIndexes: the reconciler's list reads each status
// through its partial index, never the payments table: at 10 million
// payments a scan would take seconds every pass.
func TestListProcessingUsesIndexes(t *testing.T) {
	ctx := t.Context()
	db, err := Open(ctx, Config{Path: filepath.Join(t.TempDir(), "surgepay.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.read.QueryContext(ctx, "EXPLAIN QUERY PLAN "+processingQuery, 10, "pay_01", 2)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	for _, index := range []string{"payments_processing", "payments_requires_action"} {
		if !slices.ContainsFunc(plan, func(d string) bool {
			return strings.Contains(d, "USING INDEX "+index) ||
				strings.Contains(d, "USING COVERING INDEX "+index)
		}) {
			t.Errorf("the list does not read %s: %q", index, plan)
		}
	}
	for _, d := range plan {
		if strings.HasPrefix(d, "SCAN payments") && !strings.Contains(d, "INDEX") {
			t.Errorf("a scan of the payments table: %q", plan)
		}
	}
}
