package sqlite

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestIdemSpanQueryProbes: the query that sizes a rebuilt filter of
// idempotency keys probes the ends of the table's B-tree and reads no
// record; a scan would hold one read transaction, and every checkpoint,
// for as long as it reads millions of records. It also counts right.
func TestIdemSpanQueryProbes(t *testing.T) {
	db, err := Open(t.Context(), Config{Path: filepath.Join(t.TempDir(), "surgepay.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.read.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+idemSpanQuery)
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
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}
	for _, step := range plan {
		if strings.HasPrefix(step, "SCAN idempotency") {
			t.Fatalf("plan of %q scans the table: %q", idemSpanQuery, plan)
		}
	}
	if !strings.Contains(strings.Join(plan, "\n"), "SEARCH idempotency") {
		t.Fatalf("plan of %q: %q; want two searches of idempotency", idemSpanQuery, plan)
	}
	var span int
	if err := db.read.QueryRowContext(t.Context(), idemSpanQuery).Scan(&span); err != nil || span != 0 {
		t.Fatalf("span of an empty table = %d, %v; want 0", span, err)
	}
}
