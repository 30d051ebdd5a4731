package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/surgepay/surgepay/internal/testenv"
)

// TestCardNumberInText: a card number outside the card fields (13 to 19
// digits passing Luhn, with any separators) is refused with 400
// card_number_in_text naming the field, its value is not echoed, and
// nothing is stored. Each was accepted, stored and returned before.
func TestCardNumberInText(t *testing.T) {
	e := newEnv(t, testenv.OpenSQLite(t))
	cus, pm := e.customerWithCard(e.keyA, "4242424242424242")
	const visa = "4000056655665556" // Luhn-valid, used only here
	pay := func(fields string) string {
		return `{"amount":100,"currency":"usd","payment_method":"` + pm + `",` + fields + `}`
	}
	card := `"card":{"number":"4242424242424242","exp_month":12,"exp_year":2031}`
	for _, tt := range []struct {
		name, path, body, idem, param string
	}{
		{"Description", "/v1/payments", pay(`"description":"paid by 4000 0566 5566 5556"`), "", "description"},
		{"DescriptionDots", "/v1/payments", pay(`"description":"4000.0566.5566.5556"`), "", "description"},
		{"DescriptionUnderscores", "/v1/payments", pay(`"description":"4000_0566_5566_5556"`), "", "description"},
		{"DescriptionSlashes", "/v1/payments", pay(`"description":"4000/0566/5566/5556"`), "", "description"},
		{"MetadataValue", "/v1/payments", pay(`"metadata":{"note":"` + visa + `"}`), "", "metadata.note"},
		{"MetadataKey", "/v1/payments", pay(`"metadata":{"` + visa + `":"x"}`), "", "metadata"},
		{"CustomerName", "/v1/customers", `{"name":"Ada ` + visa + `"}`, "", "name"},
		{"CustomerEmail", "/v1/customers", `{"email":"` + visa + `@example.com"}`, "", "email"},
		{"CustomerDescription", "/v1/customers", `{"description":"card 4000-0566-5566-5556 exp 12/31"}`, "", "description"},
		{"CustomerUpdateMetadata", "/v1/customers/" + cus, `{"metadata":{"card":"4000 0566 5566 5556"}}`, "", "metadata.card"},
		{"BillingName", "/v1/payment_methods", `{"customer":"` + cus + `",` + card + `,"billing_details":{"name":"` + visa + `"}}`, "", "billing_details.name"},
		{"WebhookDescription", "/v1/webhook_endpoints", `{"url":"https://example.com/hook","description":"` + visa + `"}`, "", "description"},
		{"TaxPostalCode", "/v1/payments", pay(`"tax":{"country":"US","region":"CA","postal_code":"` + visa + `"}`), "", "tax.postal_code"},
		{"IdempotencyKey", "/v1/payments", pay(`"description":"ok"`), "order-" + visa, "Idempotency-Key"},
		{"IdempotencyKeyGrouped", "/v1/customers", `{}`, "4000.0566.5566.5556", "Idempotency-Key"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do(e.keyA, "POST", tt.path, tt.body, tt.idem)
			if r.Status != 400 || r.errField("code") != "card_number_in_text" || r.errField("param") != tt.param {
				t.Fatalf("got %d %s, want 400 card_number_in_text on %s", r.Status, r.Raw, tt.param)
			}
			if strings.Contains(string(r.Raw), "5556") {
				t.Fatalf("the error echoes the number: %s", r.Raw)
			}
		})
	}
	t.Run("RequestID", func(t *testing.T) {
		r := e.doHeader(t, e.keyA, "GET", "/v1/customers/"+cus, "", http.Header{"X-Request-Id": {"4000 0566 5566 5556"}})
		if r.Status != 400 || r.errField("code") != "card_number_in_text" || r.errField("param") != "X-Request-Id" {
			t.Fatalf("got %d %s, want 400 card_number_in_text on X-Request-Id", r.Status, r.Raw)
		}
		if id := r.Header.Get("X-Request-Id"); !strings.HasPrefix(id, "req_") {
			t.Fatalf("X-Request-Id %q, want a new req_ ID", id)
		}
	})
	all := e.must(200, e.keyA, "GET", "/v1/payments?limit=100", "").Raw
	all = append(all, e.must(200, e.keyA, "GET", "/v1/customers?limit=100", "").Raw...)
	all = append(all, e.must(200, e.keyA, "GET", "/v1/payment_methods?customer="+cus, "").Raw...)
	if strings.Contains(string(all), "5556") {
		t.Fatalf("a refused number was stored: %s", all)
	}
	t.Run("OK", func(t *testing.T) { // numbers that are not cards stay accepted
		e.must(200, e.keyA, "POST", "/v1/payments", pay(`"description":"order 2026-11-25/0042, call 415-555-0100","metadata":{"order":"42424242424242424242","uuid":"550e8400-e29b-41d4-a716-446655440000","sku":"4000056655665557"}`))
		e.must(200, e.keyA, "POST", "/v1/customers", `{"name":"Ada","description":"ref x4000056655665556"}`)
		r := e.doHeader(t, e.keyA, "POST", "/v1/customers", `{}`, http.Header{"Content-Type": {"application/json"},
			"Idempotency-Key": {"550e8400-e29b-41d4-a716-446655440000"}, "X-Request-Id": {"f0e1d2c3b4a5968778695a4b3c2d1e0f"}})
		if r.Status != 200 || r.Header.Get("X-Request-Id") != "f0e1d2c3b4a5968778695a4b3c2d1e0f" {
			t.Fatalf("got %d X-Request-Id %q %s", r.Status, r.Header.Get("X-Request-Id"), r.Raw)
		}
	})
}
