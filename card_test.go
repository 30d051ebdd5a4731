package surgepay

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

var now = time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC)

func TestCardValidate(t *testing.T) {
	tests := []struct {
		name  string
		card  CardInput
		brand string
		param string
	}{
		{"Visa", CardInput{Number: "4242424242424242", ExpMonth: 12, ExpYear: 2030, CVC: "123"}, BrandVisa, ""},
		{"Mastercard", CardInput{Number: "5555555555554444", ExpMonth: 1, ExpYear: 2030}, BrandMastercard, ""},
		{"Mastercard2", CardInput{Number: "2223003122003222", ExpMonth: 1, ExpYear: 2030}, BrandMastercard, ""},
		{"Amex", CardInput{Number: "378282246310005", ExpMonth: 1, ExpYear: 2030, CVC: "1234"}, BrandAmex, ""},
		{"Discover", CardInput{Number: "6011111111111117", ExpMonth: 1, ExpYear: 2030}, BrandDiscover, ""},
		{"ThisMonth", CardInput{Number: "4242424242424242", ExpMonth: 11, ExpYear: 2026}, BrandVisa, ""},
		{"ErrLuhn", CardInput{Number: "4242424242424241", ExpMonth: 12, ExpYear: 2030}, "", "card.number"},
		{"ErrLetters", CardInput{Number: "4242x24242424242", ExpMonth: 12, ExpYear: 2030}, "", "card.number"},
		{"ErrShort", CardInput{Number: "42424242", ExpMonth: 12, ExpYear: 2030}, "", "card.number"},
		{"ErrMissing", CardInput{ExpMonth: 12, ExpYear: 2030}, "", "card.number"},
		{"ErrMonth", CardInput{Number: "4242424242424242", ExpMonth: 13, ExpYear: 2030}, "", "card.exp_month"},
		{"ErrYear", CardInput{Number: "4242424242424242", ExpMonth: 1, ExpYear: 30}, "", "card.exp_year"},
		{"ErrExpired", CardInput{Number: "4242424242424242", ExpMonth: 10, ExpYear: 2026}, "", "card.exp_year"},
		{"ErrCVC", CardInput{Number: "4242424242424242", ExpMonth: 12, ExpYear: 2030, CVC: "12"}, "", "card.cvc"},
		{"ErrAmexCVC", CardInput{Number: "378282246310005", ExpMonth: 12, ExpYear: 2030, CVC: "123"}, "", "card.cvc"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			brand, err := tt.card.Validate(now)
			var param string
			if e, ok := err.(*Error); ok {
				param = e.Param
				if strings.Contains(e.Error(), tt.card.Number.Digits()) && tt.card.Number != "" {
					t.Fatalf("error %q contains the card number", e.Error())
				}
			}
			if brand != tt.brand || param != tt.param {
				t.Fatalf("got (%q, param %q, %v), want (%q, param %q)", brand, param, err, tt.brand, tt.param)
			}
		})
	}
}

func TestPANAndCVCRedactThemselves(t *testing.T) {
	pan, cvc := PAN("4000056655665556"), CVC("987")
	var logs strings.Builder
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("x", "pan", pan, "cvc", cvc)
	js, _ := json.Marshal(struct {
		P PAN
		C CVC
	}{pan, cvc})
	out := fmt.Sprintf("%v %s %+v %#v %v", pan, pan, pan, pan, cvc) + logs.String() + string(js) +
		fmt.Sprintf("%#v", ProviderCard{Number: pan, CVC: cvc})
	for _, secret := range []string{"4000056655665556", "40000566", "987"} {
		if strings.Contains(out, secret) {
			t.Fatalf("output contains %q: %s", secret, out)
		}
	}
	if !strings.Contains(out, "5556") {
		t.Fatalf("output lacks last4: %s", out)
	}
}

func TestNewIDSortsByTime(t *testing.T) {
	a := newIDAt("pay", time.UnixMilli(1_700_000_000_000))
	b := newIDAt("pay", time.UnixMilli(1_700_000_000_001))
	if a >= b || len(a) != len("pay_")+26 {
		t.Fatalf("ids %q, %q: want sorted, 30 chars", a, b)
	}
	if x, y := NewID("x"), NewID("x"); x == y {
		t.Fatal("two IDs are equal")
	}
}

func TestCurrencies(t *testing.T) {
	for code, exp := range map[string]int{"usd": 2, "EUR": 2, "jpy": 0, "kwd": 3, "clf": 4} {
		c, ok := LookupCurrency(code)
		if !ok || c.Exponent != exp {
			t.Errorf("%s: got (%v, %v), want exponent %d", code, c, ok, exp)
		}
	}
	for _, bad := range []string{"", "us", "xxx", "usdd", "xau"} {
		if _, err := ValidateCurrency("currency", bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func FuzzValidateAmount(f *testing.F) {
	for _, v := range []int64{0, 1, -1, AmountMinorMax, AmountMinorMax + 1, -1 << 63, 1<<63 - 1} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v int64) {
		err := ValidateAmount("amount", v)
		if ok := v >= 1 && v <= AmountMinorMax; ok != (err == nil) {
			t.Fatalf("ValidateAmount(%d) = %v", v, err)
		}
		if err != nil && ErrorCode(err) != EINVALID {
			t.Fatalf("code %s", ErrorCode(err))
		}
	})
}
