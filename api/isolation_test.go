package api_test

import (
	"strings"
	"testing"
)

// TestTenantIsolation sends merchant A's object IDs to every route as
// merchant B: each answers 404 and nothing of A's changes.
func TestTenantIsolation(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		cus, pm := e.customerWithCard(e.keyA, "4242424242424242")
		auth := e.must(200, e.keyA, "POST", "/v1/payments", paymentBody(cus, pm, 2500, "manual")).str("id")
		sale := e.must(200, e.keyA, "POST", "/v1/payments", paymentBody(cus, pm, 2500, "automatic")).str("id")
		snapshot := func() string {
			var b strings.Builder
			for _, p := range []string{"/v1/customers/" + cus, "/v1/payment_methods/" + pm, "/v1/payments/" + auth,
				"/v1/payments/" + sale, "/v1/payments/" + auth + "/events"} {
				b.Write(e.must(200, e.keyA, "GET", p, "").Raw)
			}
			return b.String()
		}
		before := snapshot()
		cusB, pmB := e.customerWithCard(e.keyB, "4242424242424242")
		routes := []struct{ method, path, body string }{
			{"GET", "/v1/customers/" + cus, ""},
			{"POST", "/v1/customers/" + cus, `{"name":"Mallory"}`},
			{"DELETE", "/v1/customers/" + cus, ""},
			{"GET", "/v1/payment_methods/" + pm, ""},
			{"DELETE", "/v1/payment_methods/" + pm, ""},
			{"POST", "/v1/payment_methods", `{"customer":"` + cus + `","card":{"number":"4242424242424242","exp_month":1,"exp_year":2031}}`},
			{"POST", "/v1/payments", paymentBody("", pm, 100, "automatic")},
			{"POST", "/v1/payments", paymentBody(cusB, pm, 100, "automatic")},
			{"GET", "/v1/payments/" + auth, ""},
			{"GET", "/v1/payments/" + auth + "/events", ""},
			{"POST", "/v1/payments/" + auth + "/capture", ""},
			{"POST", "/v1/payments/" + auth + "/void", ""},
			{"POST", "/v1/payments/" + sale + "/refunds", `{"amount":100}`},
		}
		for _, r := range routes {
			res := e.do(e.keyB, r.method, r.path, r.body, "")
			if res.Status != 404 {
				t.Errorf("%s %s as merchant B: got %d %s, want 404", r.method, r.path, res.Status, res.Raw)
			}
		}
		for _, list := range []string{"/v1/customers?limit=100", "/v1/payments?limit=100", "/v1/payment_methods?customer=" + cus,
			"/v1/payments?customer=" + cus} {
			res := e.must(200, e.keyB, "GET", list, "")
			for _, id := range []string{cus, pm, auth, sale} {
				if strings.Contains(string(res.Raw), id) {
					t.Errorf("merchant B's %s shows A's %s", list, id)
				}
			}
		}
		if _, err := e.eng.GetPaymentMethod(t.Context(), callFor(e, e.keyB), pmB); err != nil {
			t.Fatal(err)
		}
		if after := snapshot(); after != before {
			t.Fatalf("merchant A's objects changed:\n%s\n%s", before, after)
		}
		if fx := e.sim.Effects(auth); fx.Captures != 0 || fx.Voids != 0 {
			t.Fatalf("the network saw %+v on A's authorization", fx)
		}
	})
}

func TestAuthentication(t *testing.T) {
	e := newEnv(t, openSQLite(t))
	for _, key := range []string{"", "sk_wrong", strings.Repeat("x", 300)} {
		r := e.do(key, "GET", "/v1/customers", "", "")
		if r.Status != 401 || r.errField("type") != "authentication_error" {
			t.Fatalf("key %q: got %d %s, want 401", key, r.Status, r.Raw)
		}
	}
	r := e.do("", "GET", "/v1/openapi.json", "", "")
	if r.Status != 200 || r.str("openapi") == "" {
		t.Fatalf("openapi.json: %d", r.Status)
	}
}
