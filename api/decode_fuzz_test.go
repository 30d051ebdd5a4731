package api

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/surgepay/surgepay"
)

// decodeRequestTypes are the request bodies the API decodes.
func decodeRequestTypes() []func() any {
	return []func() any{
		func() any { return new(customerRequest) },
		func() any { return new(paymentMethodRequest) },
		func() any { return new(paymentRequest) },
		func() any { return new(amountRequest) },
		func() any { return new(webhookEndpointRequest) },
		func() any { return new(rollSecretRequest) },
		func() any { return new(struct{}) },
	}
}

// TestDecodeUnknownFieldIsTheScanners: an unknown field, at the top or
// nested, is refused by checkJSON (unknown_field, naming it) before
// encoding/json sees the body, so decode needs nothing from the
// library's untyped "json: unknown field" error.
func TestDecodeUnknownFieldIsTheScanners(t *testing.T) {
	for _, tt := range []struct{ body, param string }{
		{`{"bogus":1}`, "bogus"},
		{`{"card":{"number":"4242424242424242","bogus":1}}`, "card.bogus"},
		{`{"billing_details":{"address":{"bogus":"x"}}}`, "billing_details.address.bogus"},
		{`{"tax":{"bogus":"x"}}`, "tax.bogus"},
	} {
		for _, newV := range decodeRequestTypes() {
			v := newV()
			err := decode([]byte(tt.body), v)
			var se *surgepay.Error
			if !asError(err, &se) || se.Reason != "unknown_field" && se.Reason != "invalid_type" {
				t.Errorf("decode(%s into %T) = %v, want unknown_field", tt.body, v, err)
				continue
			}
			if se.Reason == "unknown_field" && !strings.Contains(se.Message, "matched in their exact case") {
				t.Errorf("decode(%s into %T) = %v: unknown_field not from checkJSON", tt.body, v, err)
			}
		}
	}
}

func asError(err error, se **surgepay.Error) bool {
	e, ok := err.(*surgepay.Error)
	*se = e
	return ok
}

// FuzzDecodeRequests decodes arbitrary bodies into every request type:
// no panic; every refusal is an EINVALID *surgepay.Error; and a body that
// checkJSON passes never meets encoding/json's unknown-field refusal,
// whose untyped error decode no longer reads.
func FuzzDecodeRequests(f *testing.F) {
	for _, s := range []string{`{"amount":100,"currency":"usd","payment_method":"pm_x"}`, `{"bogus":1}`,
		`{"card":{"number":"4242","Number":"1"}}`, `{"metadata":{"a":"b"}}`, `{"url":"https://x"}`, `[]`, `null`,
		`{"amount":1e400}`, `{"email":"a@b"}`, `{"a":1,"a":2}`, "{\"name\":\"\xff\"}", `{"tax":{"country":"US"}}`} {
		f.Add([]byte(s))
	}
	types := decodeRequestTypes()
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, newV := range types {
			v := newV()
			err := decode(body, v)
			if err == nil {
				continue
			}
			var se *surgepay.Error
			if !asError(err, &se) || se.Code != surgepay.EINVALID {
				t.Fatalf("decode(%q into %T) = %v, want an EINVALID *surgepay.Error", body, v, err)
			}
			if len(bytes.TrimSpace(body)) == 0 || checkJSON(body, schemaOf(reflect.TypeOf(v))) != nil {
				continue
			}
			dec := json.NewDecoder(bytes.NewReader(body))
			dec.DisallowUnknownFields()
			if derr := dec.Decode(newV()); derr != nil && strings.HasPrefix(derr.Error(), "json: unknown field ") {
				t.Fatalf("%q into %T: checkJSON passed a body encoding/json refuses for an unknown field: %v", body, v, derr)
			}
		}
	})
}
