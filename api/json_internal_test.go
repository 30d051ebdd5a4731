package api

import (
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
