package api_test

import (
	"github.com/surgepay/surgepay/internal/testenv"

	"net/http"
	"strings"
	"testing"
)

// TestBadInput sends malformed requests to every route: each gets a 4xx
// naming the field, never a 5xx, and nothing stored changes.
func TestBadInput(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		cus, pm := e.customerWithCard(e.keyA, "4242424242424242")
		pay := e.must(200, e.keyA, "POST", "/v1/payments", paymentBody(cus, pm, 2500, "manual")).str("id")
		sale := e.must(200, e.keyA, "POST", "/v1/payments", paymentBody(cus, pm, 2500, "automatic")).str("id")
		card := func(number, month, year, cvc string) string {
			return `{"customer":"` + cus + `","card":{"number":` + number + `,"exp_month":` + month + `,"exp_year":` + year + `,"cvc":` + cvc + `}}`
		}
		payment := func(fields string) string {
			return `{"currency":"usd","customer":"` + cus + `","payment_method":"` + pm + `",` + fields + `}`
		}
		big := `{"name":"` + strings.Repeat("a", 70<<10) + `"}`
		tests := []struct {
			name, method, path, body string
			status                   int
			param                    string
		}{
			{"MalformedJSON", "POST", "/v1/customers", `{"name":`, 400, "body"},
			{"NotAnObject", "POST", "/v1/customers", `[1,2]`, 400, "body"},
			{"TrailingData", "POST", "/v1/customers", `{} {}`, 400, "body"},
			{"UnknownField", "POST", "/v1/customers", `{"nmae":"x"}`, 400, "nmae"}, //nolint:misspell // a misspelt field name is the input under test
			{"WrongType", "POST", "/v1/customers", `{"name":5}`, 400, "name"},
			{"BadEmail", "POST", "/v1/customers", `{"email":"not-an-email"}`, 400, "email"},
			{"TooLongName", "POST", "/v1/customers", `{"name":"` + strings.Repeat("n", 1001) + `"}`, 400, "name"},
			{"OversizedBody", "POST", "/v1/customers", big, 400, "body"},
			{"MetadataType", "POST", "/v1/customers", `{"metadata":{"a":1}}`, 400, "metadata"},
			{"TooManyMetadataKeys", "POST", "/v1/customers", `{"metadata":{` + manyKeys(21) + `}}`, 400, "metadata"},
			{"UpdateUnknownField", "POST", "/v1/customers/" + cus, `{"id":"cus_x"}`, 400, "id"},
			{"UpdateMissing", "POST", "/v1/customers/cus_missing", `{"name":"x"}`, 404, "id"},
			{"GetMissing", "GET", "/v1/customers/cus_missing", ``, 404, "id"},
			{"ListLimitZero", "GET", "/v1/customers?limit=0", ``, 400, "limit"},
			{"ListLimitHuge", "GET", "/v1/customers?limit=1000", ``, 400, "limit"},
			{"ListLimitText", "GET", "/v1/payments?limit=ten", ``, 400, "limit"},
			{"ListBadStatus", "GET", "/v1/payments?status=paid", ``, 400, "status"},
			{"ListBadCreated", "GET", "/v1/payments?created_gte=yesterday", ``, 400, "created_gte"},
			{"CardLuhn", "POST", "/v1/payment_methods", card(`"4242424242424241"`, "12", "2030", `"123"`), 400, "card.number"},
			{"CardNumberAsNumber", "POST", "/v1/payment_methods", card(`4242424242424242`, "12", "2030", `"123"`), 400, "card.number"},
			{"CardExpired", "POST", "/v1/payment_methods", card(`"4242424242424242"`, "1", "2020", `"123"`), 400, "card.exp_year"},
			{"CardMonth", "POST", "/v1/payment_methods", card(`"4242424242424242"`, "13", "2030", `"123"`), 400, "card.exp_month"},
			{"CardMonthText", "POST", "/v1/payment_methods", card(`"4242424242424242"`, `"12"`, "2030", `"123"`), 400, "card.exp_month"},
			{"CardCVC", "POST", "/v1/payment_methods", card(`"4242424242424242"`, "12", "2030", `"12a"`), 400, "card.cvc"},
			{"CardMissing", "POST", "/v1/payment_methods", `{"customer":"` + cus + `"}`, 400, "card"},
			{"CardNoCustomer", "POST", "/v1/payment_methods", `{"card":{"number":"4242424242424242","exp_month":12,"exp_year":2030}}`, 400, "customer"},
			{"CardUnknownCustomer", "POST", "/v1/payment_methods", `{"customer":"cus_nope","card":{"number":"4242424242424242","exp_month":12,"exp_year":2030}}`, 404, "customer"},
			{"AmountZero", "POST", "/v1/payments", payment(`"amount":0`), 400, "amount"},
			{"AmountNegative", "POST", "/v1/payments", payment(`"amount":-100`), 400, "amount"},
			{"AmountFraction", "POST", "/v1/payments", payment(`"amount":10.5`), 400, "amount"},
			{"AmountOverflow", "POST", "/v1/payments", payment(`"amount":99999999999999999999999`), 400, "amount"},
			{"AmountTooLarge", "POST", "/v1/payments", payment(`"amount":10000000000`), 400, "amount"},
			{"AmountString", "POST", "/v1/payments", payment(`"amount":"100"`), 400, "amount"},
			{"CurrencyUnknown", "POST", "/v1/payments", `{"amount":100,"currency":"xyz","payment_method":"` + pm + `"}`, 400, "currency"},
			{"CurrencyMissing", "POST", "/v1/payments", `{"amount":100,"payment_method":"` + pm + `"}`, 400, "currency"},
			{"CaptureMethod", "POST", "/v1/payments", payment(`"amount":100,"capture_method":"later"`), 400, "capture_method"},
			// No payment_method is a payment for a browser to pay (checkout_test.go); a cvc without one is refused.
			{"CVCWithoutPaymentMethod", "POST", "/v1/payments", `{"amount":100,"currency":"usd","cvc":"123"}`, 400, "cvc"},
			{"PaymentMethodUnknown", "POST", "/v1/payments", `{"amount":100,"currency":"usd","payment_method":"pm_nope"}`, 404, "payment_method"},
			{"TaxNoCountry", "POST", "/v1/payments", payment(`"amount":100,"tax":{"region":"CA"}`), 400, "tax.country"},
			{"TaxUnknownPlace", "POST", "/v1/payments", payment(`"amount":100,"tax":{"country":"ZZ"}`), 400, "tax.country"},
			{"TaxRegionTooLong", "POST", "/v1/payments", payment(`"amount":100,"tax":{"country":"US","region":"` + strings.Repeat("r", 65) + `"}`), 400, "tax.region"},
			{"CaptureNegative", "POST", "/v1/payments/" + pay + "/capture", `{"amount":-5}`, 400, "amount"},
			{"CaptureUnknownField", "POST", "/v1/payments/" + pay + "/capture", `{"amount_to_capture":5}`, 400, "amount_to_capture"},
			{"CaptureMissingPayment", "POST", "/v1/payments/pay_nope/capture", ``, 404, "id"},
			{"VoidBody", "POST", "/v1/payments/" + pay + "/void", `{"reason":"x"}`, 400, "reason"},
			{"RefundFraction", "POST", "/v1/payments/" + sale + "/refunds", `{"amount":1.5}`, 400, "amount"},
			{"IdempotencyKeyTooLong", "POST", "/v1/customers", `{}`, 400, "Idempotency-Key"},
			{"UnknownRoute", "GET", "/v1/nothing", ``, 404, ""},
		}
		before := snapshotAll(e, cus, pm, pay, sale)
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				idem := ""
				if tt.name == "IdempotencyKeyTooLong" {
					idem = strings.Repeat("k", 256)
				}
				r := e.do(e.keyA, tt.method, tt.path, tt.body, idem)
				if r.Status != tt.status || r.errField("param") != tt.param {
					t.Fatalf("got %d param %q: %s; want %d param %q", r.Status, r.errField("param"), r.Raw, tt.status, tt.param)
				}
				if r.errField("message") == "" || r.errField("type") == "" || r.errField("code") == "" {
					t.Fatalf("error body lacks type, code or message: %s", r.Raw)
				}
			})
		}
		if after := snapshotAll(e, cus, pm, pay, sale); after != before {
			t.Fatalf("stored objects changed:\n%s\n%s", before, after)
		}
	})
}

func manyKeys(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = `"k` + string(rune('a'+i)) + `":"v"`
	}
	return strings.Join(parts, ",")
}

func snapshotAll(e *env, cus, pm string, pays ...string) string {
	var b strings.Builder
	b.Write(e.must(200, e.keyA, "GET", "/v1/customers/"+cus, "").Raw)
	b.Write(e.must(200, e.keyA, "GET", "/v1/payment_methods/"+pm, "").Raw)
	b.Write(e.must(200, e.keyA, "GET", "/v1/customers?limit=100", "").Raw)
	for _, p := range pays {
		b.Write(e.must(200, e.keyA, "GET", "/v1/payments/"+p, "").Raw)
	}
	b.Write(e.must(200, e.keyA, "GET", "/v1/payments?limit=100", "").Raw)
	return b.String()
}

// FuzzDecodePayment sends arbitrary bodies to payment creation: the answer
// is always a well-formed JSON response, never a 5xx or a panic.
func FuzzDecodePayment(f *testing.F) {
	for _, s := range []string{`{"amount":100,"currency":"usd","payment_method":"pm_x"}`, `{"amount":1e400}`,
		`{"amount":-0}`, `{"tax":{"country":"US"}}`, `{"metadata":{"":""}}`, `[`, `{"amount":9223372036854775808}`, "\x00"} {
		f.Add(s)
	}
	e := newFuzzEnv(f)
	f.Fuzz(func(t *testing.T, body string) {
		r := e.doT(t, e.keyA, "POST", "/v1/payments", body, "")
		if r.Status >= 500 || r.JSON == nil {
			t.Fatalf("body %q: got %d %s", body, r.Status, r.Raw)
		}
	})
}

// TestStrictInput: what encoding/json alone would accept silently is
// refused with a 400 naming the field, and nothing is stored. Each case
// was accepted before (the first charged 778).
func TestStrictInput(t *testing.T) {
	e := newEnv(t, testenv.OpenSQLite(t))
	cus, pm := e.customerWithCard(e.keyA, "4242424242424242")
	for _, tt := range []struct {
		name, path, body, code, param string
	}{
		{"DuplicateKeyOtherCase", "/v1/payments", `{"amount":100,"AMOUNT":778,"currency":"usd","payment_method":"` + pm + `"}`, "unknown_field", "AMOUNT"},
		{"DuplicateKey", "/v1/payments", `{"amount":100,"amount":778,"currency":"usd","payment_method":"` + pm + `"}`, "duplicate_field", "amount"},
		{"DuplicateNestedKey", "/v1/payment_methods", `{"customer":"` + cus + `","card":{"number":"4242424242424242","Number":"4000000000000002","exp_month":12,"exp_year":2040}}`, "unknown_field", "card.Number"},
		{"DuplicateKeyEscaped", "/v1/payments", `{"amount":100,"\u0041MOUNT":778,"currency":"usd","payment_method":"` + pm + `"}`, "unknown_field", "AMOUNT"},
		{"DuplicateMetadataKey", "/v1/payments", `{"amount":100,"currency":"usd","payment_method":"` + pm + `","metadata":{"a":"1","a":"2"}}`, "duplicate_field", "metadata.a"},
		{"ControlInEmailEscaped", "/v1/customers", `{"email":"a\u0000@example.com"}`, "invalid_characters", "email"},
		{"InvalidUTF8", "/v1/customers", "{\"name\":\"Ad\xffa\"}", "invalid_utf8", "body"},
		{"ControlInName", "/v1/customers", `{"name":"Ada\u0007"}`, "invalid_characters", "name"},
		{"BidiOverrideInDescription", "/v1/payments", `{"amount":100,"currency":"usd","payment_method":"` + pm + `","description":"gift \u202eroF"}`, "invalid_characters", "description"},
		{"PaymentCVCNotDigits", "/v1/payments", `{"amount":100,"currency":"usd","payment_method":"` + pm + `","cvc":"abc"}`, "invalid_cvc", "cvc"},
		// Found by TestSpecFuzz: encoding/json takes null for anything.
		{"NullBody", "/v1/customers", `null`, "invalid_json", "body"},
		{"NullMetadata", "/v1/payments", `{"amount":100,"currency":"usd","payment_method":"` + pm + `","metadata":null}`, "invalid_type", "metadata"},
		{"NullCaptureMethod", "/v1/payments", `{"amount":100,"currency":"usd","payment_method":"` + pm + `","capture_method":null}`, "invalid_type", "capture_method"},
		{"NullNestedName", "/v1/payment_methods", `{"customer":"` + cus + `","card":{"number":"4242424242424242","exp_month":12,"exp_year":2040},"billing_details":{"name":null}}`, "invalid_type", "billing_details.name"},
		{"PaymentCVCTooLong", "/v1/payments", `{"amount":100,"currency":"usd","payment_method":"` + pm + `","cvc":"12345"}`, "invalid_cvc", "cvc"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do(e.keyA, "POST", tt.path, tt.body, "")
			if r.Status != 400 || r.errField("code") != tt.code || r.errField("param") != tt.param {
				t.Fatalf("got %d %s, want 400 %s on %s", r.Status, r.Raw, tt.code, tt.param)
			}
		})
	}
	if list := e.must(200, e.keyA, "GET", "/v1/payments?limit=100", ""); strings.Contains(string(list.Raw), `"amount":778`) ||
		strings.Contains(string(list.Raw), `"amount":100`) {
		t.Fatalf("a refused payment was stored: %s", list.Raw)
	}
	t.Run("DeleteWithFields", func(t *testing.T) { // a DELETE takes no fields: it ignored any body
		r := e.do(e.keyA, "DELETE", "/v1/customers/"+cus, `{"cascade":true}`, "")
		if r.Status != 400 || r.errField("code") != "unknown_field" || r.errField("param") != "cascade" {
			t.Fatalf("got %d %s, want 400 unknown_field on cascade", r.Status, r.Raw)
		}
	})
	t.Run("NullCustomerField", func(t *testing.T) { // null is "not given" where the document says nullable
		e.must(200, e.keyA, "POST", "/v1/customers/"+cus, `{"name":null,"email":null,"description":null}`)
	})
	t.Run("MalformedQuery", func(t *testing.T) {
		r := e.do(e.keyA, "GET", "/v1/payments?limit=5&customer=%zz", "", "")
		if r.Status != 400 || r.errField("code") != "invalid_query" || r.errField("param") != "query" {
			t.Fatalf("got %d %s, want 400 invalid_query", r.Status, r.Raw)
		}
	})
	t.Run("MethodNotAllowed", func(t *testing.T) {
		r := e.do(e.keyA, "DELETE", "/v1/payments", "", "")
		if r.Status != 405 || r.errField("code") != "method_not_allowed" || r.Header.Get("Allow") != "GET, POST" {
			t.Fatalf("got %d Allow %q %s, want 405 with Allow: GET, POST", r.Status, r.Header.Get("Allow"), r.Raw)
		}
		if r := e.do(e.keyA, "GET", "/v1/nothing-here", "", ""); r.Status != 404 || r.errField("code") != "route_not_found" {
			t.Fatalf("an unknown path: %d %s, want 404", r.Status, r.Raw)
		}
	})
	t.Run("ContentType", func(t *testing.T) {
		// curl -d sends application/x-www-form-urlencoded: before, its
		// body was read as JSON and the customer created.
		body := `{"name":"Ada"}`
		for _, ct := range [][]string{{"application/x-www-form-urlencoded"}, {"text/plain"}, nil,
			{"application/json; charset=latin1"}, {"application/json", "application/json"}, {"application/jsonx"},
			{"application/json; boundary=x"}, {"multipart/form-data; boundary=x"}} {
			r := e.doHeader(t, e.keyA, "POST", "/v1/customers", body, http.Header{"Content-Type": ct})
			if r.Status != 415 || r.errField("code") != "unsupported_media_type" || r.errField("param") != "Content-Type" {
				t.Errorf("Content-Type %q: got %d %s, want 415 unsupported_media_type on Content-Type", ct, r.Status, r.Raw)
			}
		}
		for _, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON;Charset=UTF-8"} {
			e.mustHeader(t, 200, "POST", "/v1/customers", body, http.Header{"Content-Type": {ct}})
		}
		// A request without a body needs no Content-Type (curl -X POST).
		sale := e.must(200, e.keyA, "POST", "/v1/payments", `{"amount":100,"currency":"usd","payment_method":"`+pm+`","capture_method":"manual"}`).str("id")
		e.mustHeader(t, 200, "POST", "/v1/payments/"+sale+"/capture", "", http.Header{"Content-Type": {"application/x-www-form-urlencoded"}})
	})
	t.Run("OK", func(t *testing.T) { // the same bodies done right are accepted
		e.must(200, e.keyA, "POST", "/v1/customers", `{"name":"Zoë O'Brien — ☕","description":"line"}`)
		e.must(200, e.keyA, "POST", "/v1/payments", `{"amount":150,"currency":"usd","payment_method":"`+pm+`","cvc":"123","metadata":{"Amount":"x","amount":"y"}}`)
	})
}

// TestJSONFieldNamesExact: encoding/json matches field names without case,
// so `{"AMOUNT":101}` made a payment of 101 and card.NUMBER, Name and
// Amount were taken as their fields. A key that is not a field in its
// exact case is now 400 unknown_field naming it, and nothing is stored.
func TestJSONFieldNamesExact(t *testing.T) {
	e := newEnv(t, testenv.OpenSQLite(t))
	cus, pm := e.customerWithCard(e.keyA, "4242424242424242")
	for _, tt := range []struct {
		name, path, body, param string
	}{
		{"TopLevel", "/v1/payments", `{"AMOUNT":101,"currency":"usd","payment_method":"` + pm + `"}`, "AMOUNT"},
		{"Capitalised", "/v1/customers", `{"Name":"Ada"}`, "Name"},
		{"Nested", "/v1/payment_methods", `{"customer":"` + cus + `","card":{"NUMBER":"4242424242424242","exp_month":12,"exp_year":2040}}`, "card.NUMBER"},
		{"Escaped", "/v1/payments", `{"\u0061mount":101,"Currency":"usd","payment_method":"` + pm + `"}`, "Currency"},
		{"NestedObjectName", "/v1/payment_methods", `{"customer":"` + cus + `","Card":{"number":"4242424242424242","exp_month":12,"exp_year":2040}}`, "Card"},
		{"InAmountBody", "/v1/payments/pay_01m89f4mjnz97g3aakv7jqzvgt/refunds", `{"Amount":5}`, "Amount"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do(e.keyA, "POST", tt.path, tt.body, "")
			if r.Status != 400 || r.errField("code") != "unknown_field" || r.errField("param") != tt.param {
				t.Fatalf("got %d %s, want 400 unknown_field on %s", r.Status, r.Raw, tt.param)
			}
		})
	}
	if list := e.must(200, e.keyA, "GET", "/v1/payments?limit=100", ""); strings.Contains(string(list.Raw), `"amount":101`) {
		t.Fatalf("a payment with AMOUNT was stored: %s", list.Raw)
	}
	// An escape spelling a field's exact name is that name.
	e.must(200, e.keyA, "POST", "/v1/payments", `{"\u0061mount":102,"currency":"usd","payment_method":"`+pm+`"}`)
}

// TestTextCharactersRefused: a NUL or other control character in a
// metadata key or value was stored, a lone surrogate escape was stored as
// U+FFFD, and invisible format characters (zero-width space, joiner, soft
// hyphen, byte order mark) in names passed where bidirectional ones did
// not.
func TestTextCharactersRefused(t *testing.T) {
	e := newEnv(t, testenv.OpenSQLite(t))
	cus, pm := e.customerWithCard(e.keyA, "4242424242424242")
	sale := `{"amount":100,"currency":"usd","payment_method":"` + pm + `",`
	for _, tt := range []struct {
		name, path, body, code, param string
	}{
		{"NULInMetadataValue", "/v1/payments", sale + `"metadata":{"order":"10\u00001"}}`, "invalid_characters", "metadata.order"},
		{"NULInMetadataKey", "/v1/customers", `{"metadata":{"ord\u0000er":"1"}}`, "invalid_characters", "metadata"},
		{"LineFeedInMetadataValue", "/v1/customers", `{"metadata":{"note":"a\nb"}}`, "invalid_characters", "metadata.note"},
		{"C1InMetadataValue", "/v1/payments", sale + `"metadata":{"order":"1\u0085"}}`, "invalid_characters", "metadata.order"},
		{"LoneHighSurrogate", "/v1/customers", `{"name":"Ada \ud800"}`, "invalid_utf8", "name"},
		{"LoneLowSurrogate", "/v1/payments", sale + `"description":"x\udc00y"}`, "invalid_utf8", "description"},
		{"HighSurrogateThenOther", "/v1/customers", `{"metadata":{"k":"\ud83d\u0041"}}`, "invalid_utf8", "metadata.k"},
		{"LoneSurrogateInKey", "/v1/customers", `{"metadata":{"\udfff":"v"}}`, "invalid_utf8", "metadata"},
		{"ZeroWidthSpaceInName", "/v1/customers", `{"name":"Pay\u200bPal"}`, "invalid_characters", "name"},
		{"ZeroWidthJoinerInName", "/v1/customers", `{"name":"Ada\u200d"}`, "invalid_characters", "name"},
		{"SoftHyphenInDescription", "/v1/payments", sale + `"description":"gi\u00adft"}`, "invalid_characters", "description"},
		{"ByteOrderMarkInBillingName", "/v1/payment_methods", `{"customer":"` + cus +
			`","card":{"number":"4242424242424242","exp_month":12,"exp_year":2040},"billing_details":{"name":"\ufeffAda"}}`, "invalid_characters", "billing_details.name"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do(e.keyA, "POST", tt.path, tt.body, "")
			if r.Status != 400 || r.errField("code") != tt.code || r.errField("param") != tt.param {
				t.Fatalf("got %d %s, want 400 %s on %s", r.Status, r.Raw, tt.code, tt.param)
			}
		})
	}
	// A surrogate pair is one character; text without hidden characters
	// passes.
	e.must(200, e.keyA, "POST", "/v1/customers", `{"name":"Ada \ud83d\ude00","metadata":{"note":"caf\u00e9 ☕"}}`)
}

// mustHeader sends a request with the headers h as merchant A and fails
// the test unless the status is want.
func (e *env) mustHeader(t *testing.T, want int, method, path, body string, h http.Header) *response {
	t.Helper()
	r := e.doHeader(t, e.keyA, method, path, body, h)
	if r.Status != want {
		t.Fatalf("%s %s %v: got %d %s, want %d", method, path, h, r.Status, r.Raw, want)
	}
	return r
}
