package engine

import "testing"

// Audit IDs made in one millisecond still increase: the trail lists
// changes in the order they were made.
func TestAuditIDsIncrease(t *testing.T) {
	var a auditIDs
	prev := ""
	for i := range 10_000 {
		id := a.next()
		if id <= prev {
			t.Fatalf("ID %d %q after %q: not increasing", i, id, prev)
		}
		prev = id
	}
	if got := nextID("aud_0000000000000000000000000z"); got != "aud_00000000000000000000000010" {
		t.Errorf("nextID carries: %q", got)
	}
}
