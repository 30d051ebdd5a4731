package api

import (
	"strings"
	"testing"

	"github.com/surgepay/surgepay"
)

// TestRouteScopesComplete: every authenticated route has a valid scope
// (handle requires one), and the spec states the same scope
// (x-surgepay-scope) and the 403 answer on each of them; every scope is
// needed by some route.
func TestRouteScopesComplete(t *testing.T) {
	s := New(Config{})
	scopes := s.RouteScopes()
	if len(scopes) != len(s.Routes()) || len(scopes) < 20 {
		t.Fatalf("%d route scopes for %d routes, want one per route (and the 20 or more routes there are)", len(scopes), len(s.Routes()))
	}
	ops := specOperations(t, openAPIDoc(t))
	used := map[string]bool{}
	for _, route := range s.Routes() {
		scope := scopes[route]
		if !surgepay.ValidScope(scope) && scope != surgepay.ScopeCheckout {
			t.Errorf("%s: scope %q is not a scope", route, scope)
		}
		used[scope] = true
		op := ops[route]
		if op == nil {
			t.Errorf("%s: not in the spec", route)
			continue
		}
		if got, _ := op["x-surgepay-scope"].(string); got != scope {
			t.Errorf("%s: spec x-surgepay-scope %q, router %q", route, got, scope)
		}
		if resp, _ := op["responses"].(map[string]any); resp["403"] == nil {
			t.Errorf("%s: spec has no 403 answer", route)
		}
	}
	for _, sc := range surgepay.AllScopes {
		if !used[sc] {
			t.Errorf("scope %s is needed by no route", sc)
		}
	}
	// Refunds are apart from payments: the "payments without refunds" key.
	if scopes["POST /v1/payments/{id}/refunds"] != surgepay.ScopeRefundsWrite ||
		scopes["POST /v1/payments/{id}/capture"] != surgepay.ScopePaymentsWrite {
		t.Errorf("refund and capture scopes: %q, %q", scopes["POST /v1/payments/{id}/refunds"], scopes["POST /v1/payments/{id}/capture"])
	}
	for route, scope := range scopes {
		if scope == surgepay.ScopeCheckout {
			// A browser's routes: a publishable key's, not a secret key's.
			if !strings.Contains(route, " /v1/checkout/") {
				t.Errorf("%s needs the checkout scope outside /v1/checkout/", route)
			}
			continue
		}
		if m := route[:len("GET")]; m == "GET" && !surgepay.Allows([]string{surgepay.ScopeCustomersRead, surgepay.ScopePaymentMethodsRead,
			surgepay.ScopePaymentsRead, surgepay.ScopeAnalyticsRead, surgepay.ScopeWebhooksRead}, scope) {
			t.Errorf("%s needs %s, which a read-only key lacks", route, scope)
		}
	}
}

func TestAllowsWriteGrantsRead(t *testing.T) {
	for _, tc := range []struct {
		scopes []string
		need   string
		want   bool
	}{
		{nil, surgepay.ScopeRefundsWrite, true},
		{[]string{surgepay.ScopePaymentsWrite}, surgepay.ScopePaymentsRead, true},
		{[]string{surgepay.ScopePaymentsRead}, surgepay.ScopePaymentsWrite, false},
		{[]string{surgepay.ScopePaymentsWrite}, surgepay.ScopeRefundsWrite, false},
		{[]string{surgepay.ScopeRefundsWrite}, surgepay.ScopePaymentsRead, false},
	} {
		if got := surgepay.Allows(tc.scopes, tc.need); got != tc.want {
			t.Errorf("Allows(%v, %s) = %v, want %v", tc.scopes, tc.need, got, tc.want)
		}
	}
	got, err := surgepay.ParseScopes("scopes", []string{"read_only"})
	if err != nil || len(got) != 5 {
		t.Errorf("ParseScopes(read_only) = %v, %v; want the 5 read scopes", got, err)
	}
	if got, err := surgepay.ParseScopes("scopes", []string{"full"}); err != nil || got != nil {
		t.Errorf("ParseScopes(full) = %v, %v; want nil (full access)", got, err)
	}
	if _, err := surgepay.ParseScopes("scopes", []string{"4242424242424242"}); surgepay.ErrorReason(err) != "invalid_scope" ||
		err == nil || strings.Contains(err.Error(), "4242") {
		t.Errorf("ParseScopes(unknown) = %v; want invalid_scope without the value", err)
	}
}
