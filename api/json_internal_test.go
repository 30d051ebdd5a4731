package api

import (
	"reflect"
	"testing"

	"github.com/surgepay/surgepay"
)

var benchPaymentBody = []byte(`{"amount":2000,"currency":"usd","customer":"cus_01m89f4mjnz97g3aakv7jqzvgt",` +
	`"payment_method":"pm_01m89f4mjqpzzf66v24egbs1hc","capture_method":"manual","description":"Order 1001",` +
	`"metadata":{"order":"1001"},"tax":{"country":"US","region":"CA","postal_code":"94105"}}`)

// BenchmarkDecodePayment is what checkJSON adds to every request body:
// compare the two sub-benchmarks (go test -bench DecodePayment ./api/).
func BenchmarkDecodePayment(b *testing.B) {
	b.Run("Decode", func(b *testing.B) {
		for b.Loop() {
			var req paymentRequest
			if err := decodeOnly(benchPaymentBody, &req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("CheckAndDecode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var req paymentRequest
			if err := decode(benchPaymentBody, &req); err != nil {
				b.Fatal(err)
			}
		}
	})
	// With the text checks a payment's fields then pass (engine's
	// validatePayment): ValidateText and ValidateMetadata, which look for
	// card numbers in the description and in metadata keys and values.
	b.Run("CheckDecodeValidateText", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var req paymentRequest
			if err := decode(benchPaymentBody, &req); err != nil {
				b.Fatal(err)
			}
			if surgepay.ValidateText("description", req.Description) != nil || surgepay.ValidateMetadata("metadata", req.Metadata) != nil {
				b.Fatal("invalid")
			}
		}
	})
}

// TestCheckJSONSchemaAllocsNone: checking a payment body's field names
// against its schema (exact case) adds no allocation to the sale path.
func TestCheckJSONSchemaAllocsNone(t *testing.T) {
	sc := schemaOf(reflect.TypeFor[*paymentRequest]())
	if sc == nil || sc.fields["tax"] == nil || !sc.fields["metadata"].isMap {
		t.Fatalf("schema of paymentRequest: got %+v, want its fields with tax and metadata", sc)
	}
	without := testing.AllocsPerRun(100, func() {
		if err := checkJSON(benchPaymentBody, nil); err != nil {
			t.Fatal(err)
		}
	})
	with := testing.AllocsPerRun(100, func() {
		if err := checkJSON(benchPaymentBody, schemaOf(reflect.TypeOf(&paymentRequest{}))); err != nil {
			t.Fatal(err)
		}
	})
	if with > without {
		t.Fatalf("checkJSON of a payment body: got %v allocations with the schema, want at most %v (without)", with, without)
	}
}
