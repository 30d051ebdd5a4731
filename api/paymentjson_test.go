package api

import (
	"bytes"
	"encoding/json"
	"math/rand"
	"reflect"
	"strings"
	"testing"
	"testing/quick"
	"time"

	"github.com/surgepay/surgepay"
)

// TestPaymentJSONMatchesMarshal: appendPaymentJSON writes what
// json.Marshal writes, for payments filled at random field by field
// (testing/quick: so a field added to paymentJSON, or to the types it
// holds, is filled and fails here until appendPaymentJSON writes it) and
// for strings that need escaping: quotes, backslashes, control bytes,
// HTML's <>&, U+2028/2029, invalid UTF-8, and empty values that
// omitempty drops.
func TestPaymentJSONMatchesMarshal(t *testing.T) {
	odd := []string{"", "plain", `q"uo\te`, "\x00\x01\b\f\n\r\t\x1f\x7f", "<a href='x'>&amp;</a>",
		"line\u2028para\u2029", "bad \xff\xfe utf8 \xc3", "émoji 🎉 日本", strings.Repeat("x", 300)}
	rng := rand.New(rand.NewSource(20261128))
	typ := reflect.TypeFor[paymentJSON]()
	for i := range 3000 {
		v, ok := quick.Value(typ, rng)
		if !ok {
			t.Fatal("quick.Value cannot make a paymentJSON")
		}
		p := v.Interface().(paymentJSON)
		switch i % 4 { // the shapes quick rarely makes
		case 0:
			p.Tax, p.Dispute, p.Disputes, p.Metadata, p.Transactions = nil, nil, nil, nil, nil
		case 1:
			p.Transactions, p.Disputes = []transactionJSON{}, []disputeJSON{}
			p.Metadata = map[string]string{}
		case 2:
			oddStrings(&p, odd, rng)
		}
		got := appendPaymentJSON(nil, &p)
		want, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("case %d:\n got %s\nwant %s", i, got, want)
		}
	}
}

// oddStrings sets every string p holds to one of odd.
func oddStrings(p *paymentJSON, odd []string, rng *rand.Rand) {
	pick := func() string { return odd[rng.Intn(len(odd))] }
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.String:
			v.SetString(pick())
		case reflect.Pointer:
			if !v.IsNil() {
				walk(v.Elem())
			}
		case reflect.Struct:
			for i := range v.NumField() {
				walk(v.Field(i))
			}
		case reflect.Slice:
			for i := range v.Len() {
				walk(v.Index(i))
			}
		case reflect.Map:
			if v.IsNil() {
				return
			}
			m := make(map[string]string)
			for range v.Len() {
				m[pick()] = pick()
			}
			v.Set(reflect.ValueOf(m))
		}
	}
	walk(reflect.ValueOf(p).Elem())
}

// TestRenderPayment: render answers a payment with appendPaymentJSON's
// bytes and the newline json.Marshal's path adds.
func TestRenderPayment(t *testing.T) {
	p := &surgepay.Payment{ID: "pay_1", MerchantID: "m", Status: surgepay.StatusSucceeded, Amount: 1250, Currency: "usd",
		CaptureMethod: "automatic", Metadata: map[string]string{"b": "2", "a": "<1>"}, Created: time.Unix(1795630318, 5)}
	status, body := render(p, nil)
	want, err := json.Marshal(paymentOf(p))
	if err != nil {
		t.Fatal(err)
	}
	if status != 200 || string(body) != string(want)+"\n" {
		t.Fatalf("render = %d %s, want 200 %s", status, body, want)
	}
}

func BenchmarkRenderPayment(b *testing.B) {
	p := &surgepay.Payment{ID: "pay_01m89ygh23phsbtq93t0h6qpbp", MerchantID: "m", CustomerID: "cus_01m89ygh23phsbtq93t0h6qpbp",
		PaymentMethodID: "pm_01m89ygh23phsbtq93t0h6qpbp", Status: surgepay.StatusSucceeded, Amount: 12403, AmountTax: 1003,
		Currency: "usd", CaptureMethod: "automatic", Created: time.Now(),
		Transactions: []surgepay.Transaction{{ID: "txn_01m89ygh23phsbtq93t0h6qpbp", Type: "sale", Status: "succeeded",
			Amount: 12403, ProviderRef: "sim_ch_01m89ygh23phsbtq93t0h6qpbp", Created: time.Now()}}}
	b.Run("append", func(b *testing.B) {
		for b.Loop() {
			render(p, nil)
		}
	})
	b.Run("marshal", func(b *testing.B) {
		for b.Loop() {
			out, _ := json.Marshal(toJSON(p))
			_ = append(out, '\n')
		}
	})
}
