package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/surgepay/surgepay"
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
		// Disguises that passed before (issue 34 item 5).
		{"DescriptionGluedLetters", "/v1/payments", pay(`"description":"card` + visa + `"`), "", "description"},
		{"DescriptionFullWidth", "/v1/payments", pay(`"description":"４０００ ０５６６ ５５６６ ５５５６"`), "", "description"},
		{"DescriptionUnicodeSpaces", "/v1/payments", pay(`"description":"4000\u202f0566\u30005566\u20035556"`), "", "description"},
		{"DescriptionPipes", "/v1/payments", pay(`"description":"4000|0566|5566|5556"`), "", "description"},
		{"Description2-14", "/v1/payments", pay(`"description":"40 00056655665556"`), "", "description"},
		{"WebhookURLPath", "/v1/webhook_endpoints", `{"url":"https://example.com/hooks/` + visa + `"}`, "", "url"},
		{"WebhookURLQuery", "/v1/webhook_endpoints", `{"url":"https://example.com/hook?c=4000-0566-5566-5556"}`, "", "url"},
		{"WebhookURLEscaped", "/v1/webhook_endpoints", `{"url":"https://example.com/hook/4000%200566%205566%205556"}`, "", "url"},
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
	all = append(all, e.must(200, e.keyA, "GET", "/v1/webhook_endpoints", "").Raw...)
	if strings.Contains(string(all), "5556") {
		t.Fatalf("a refused number was stored: %s", all)
	}
	t.Run("OK", func(t *testing.T) { // numbers that are not cards stay accepted
		e.must(200, e.keyA, "POST", "/v1/payments", pay(`"description":"order 2026-11-25/0042, call 415-555-0100","metadata":{"order":"42424242424242424242","uuid":"550e8400-e29b-41d4-a716-446655440000","sku":"4000056655665557"}`))
		e.must(200, e.keyA, "POST", "/v1/customers", `{"name":"Ada","description":"ref 4000 0566 5566 5557, order-1764340548123456789"}`)
		r := e.doHeader(t, e.keyA, "POST", "/v1/customers", `{}`, http.Header{"Content-Type": {"application/json"},
			"Idempotency-Key": {"550e8400-e29b-41d4-a716-446655440000"}, "X-Request-Id": {"f0e1d2c3b4a5968778695a4b3c2d1e0f"}})
		if r.Status != 200 || r.Header.Get("X-Request-Id") != "f0e1d2c3b4a5968778695a4b3c2d1e0f" {
			t.Fatalf("got %d X-Request-Id %q %s", r.Status, r.Header.Get("X-Request-Id"), r.Raw)
		}
	})
}

// TestIdempotencyKeyWithCardNumberNotRefused: an Idempotency-Key that may
// hold a card number is kept as its keyed hash, not refused (issue 34
// item 6: the README's own key, order-$(date +%s%N), was refused 4 times
// in 60, and a retry under it forever). A retry under the same key
// replays, after a restart too, a different body under it is
// idempotency_key_reused, and the key is not stored in clear.
func TestIdempotencyKeyWithCardNumberNotRefused(t *testing.T) {
	e := newEnv(t, testenv.OpenSQLite(t))
	cus, pm := e.customerWithCard(e.keyA, "4242424242424242")
	body := paymentBody(cus, pm, 1999, "automatic")
	for _, key := range []string{"order-4000056655665556", "4000.0566.5566.5556", "order-1764340548123456789"} {
		first := e.do(e.keyA, "POST", "/v1/payments", body, key)
		if first.Status != 200 {
			t.Fatalf("key %q: got %d %s, want 200", key, first.Status, first.Raw)
		}
		again := e.restart(t, e.sim).do(e.keyA, "POST", "/v1/payments", body, key)
		if again.Status != 200 || again.str("id") != first.str("id") || again.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("key %q: the retry after a restart got %d %s, want the replay of %s", key, again.Status, again.Raw, first.str("id"))
		}
		if r := e.do(e.keyA, "POST", "/v1/payments", paymentBody(cus, pm, 2000, "automatic"), key); r.Status != 422 ||
			r.errField("code") != "idempotency_key_reused" {
			t.Fatalf("key %q, another body: got %d %s, want 422 idempotency_key_reused", key, r.Status, r.Raw)
		}
		stored := e.eng.IdempotencyKey(key)
		if _, err := e.store.FindIdempotency(context.Background(), e.merchants[0], stored); err != nil {
			t.Fatalf("key %q: no record under %q: %v", key, stored, err)
		}
		if mayHold := surgepay.TextHasCardNumber(key); mayHold != strings.HasPrefix(stored, "kh_") || (mayHold && strings.Contains(stored, "5556")) {
			t.Fatalf("key %q is stored as %q", key, stored)
		}
	}
	if strings.Contains(e.logs.String(), "0566") {
		t.Fatal("a key's card number is in the log")
	}
}

// TestErrorsNeverEchoCardNumber: an error that would repeat what the
// client sent (an unknown field's name, the path of a 404 or a 405, an
// ID) does not repeat a card number in it (issue 34 item 5); the code and
// the reason stay.
func TestErrorsNeverEchoCardNumber(t *testing.T) {
	e := newEnv(t, testenv.OpenSQLite(t))
	for _, tt := range []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"UnknownField", "POST", "/v1/customers", `{"4000 0566 5566 5556":"x"}`, 400, "unknown_field"},
		{"UnknownNestedField", "POST", "/v1/customers", `{"address":{"card4000056655665556":"x"}}`, 400, ""},
		{"RouteNotFound", "GET", "/v1/cards/4000056655665556", "", 404, "route_not_found"},
		{"RouteNotFoundEscaped", "GET", "/v1/4000%200566%205566%205556", "", 404, "route_not_found"},
		{"CustomerID", "GET", "/v1/customers/cus_4000056655665556", "", 0, ""},
		{"MethodNotAllowed", "PUT", "/v1/customers/4000-0566-5566-5556", "", 0, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do(e.keyA, tt.method, tt.path, tt.body, "")
			if tt.status != 0 && (r.Status != tt.status || (tt.code != "" && r.errField("code") != tt.code)) {
				t.Fatalf("got %d %s, want %d %s", r.Status, r.Raw, tt.status, tt.code)
			}
			if r.Status < 400 || strings.Contains(string(r.Raw), "5556") {
				t.Fatalf("got %d %s, want an error that does not repeat the number", r.Status, r.Raw)
			}
		})
	}
}
