package surgepay

import (
	"errors"
	"testing"
)

// TestParseScopesContradictory is issue 34 item 12: ["read_only","full"]
// made a full-access key. Scopes that contradict each other are refused
// EINVALID invalid_scope naming the field, by the CLI and the admin API
// alike (both call ParseScopes).
func TestParseScopesContradictory(t *testing.T) {
	for _, in := range [][]string{
		{"read_only", "full"},
		{"full", "read_only"},
		{"payments:read", "full"},
		{" full", "customers:write"},
		{"read_only", "payments:write"},
		{"read_only", "payments_no_refunds"},
		{"payments_no_refunds", "refunds:write"},
	} {
		got, err := ParseScopes("scopes", in)
		var e *Error
		if !errors.As(err, &e) || e.Code != EINVALID || e.Reason != "invalid_scope" || e.Param != "scopes" {
			t.Errorf("ParseScopes(%q) = %v, %v; want EINVALID invalid_scope naming scopes", in, got, err)
		}
	}
	for _, tc := range []struct {
		in   []string
		want int // scopes stored; 0: full access
	}{
		{[]string{"full"}, 0},
		{[]string{"full", "full"}, 0},
		{[]string{"read_only"}, 5},
		{[]string{"read_only", "payments:read"}, 5},
		{[]string{"payments_no_refunds", "payments:write"}, len(AllScopes) - 1},
		{[]string{"payments:write", "refunds:write"}, 2},
	} {
		got, err := ParseScopes("scopes", tc.in)
		if err != nil || len(got) != tc.want {
			t.Errorf("ParseScopes(%q) = %v, %v; want %d scopes", tc.in, got, err, tc.want)
		}
	}
}
