package surgepay

import (
	"fmt"
	"strings"
	"testing"
	"unicode"
)

func TestTextHasCardNumber(t *testing.T) {
	for _, tt := range []struct {
		text string
		want bool
	}{
		{"4242424242424242", true},
		{"card 4242 4242 4242 4242 exp 12/30", true},
		{"4242-4242-4242-4242", true},
		{"4242.4242.4242.4242", true},
		{"4242_4242_4242_4242", true},
		{"4242/4242/4242/4242", true},
		{"4242 - 4242 - 4242 - 4242", true},
		// Separators found by review: comma, colon, tab, no-break space.
		{"4111,1111,1111,1111", true},
		{"4111:1111:1111:1111", true},
		{"4111\t1111\t1111\t1111", true},
		{"4111\u00a01111\u00a01111\u00a01111", true},
		{"378282246310005", true},              // Amex, 15 digits
		{"4222222222222", true},                // Visa, 13 digits
		{"6011 0009 9013 9424", true},          // Discover
		{"order 12 4242 4242 4242 4242", true}, // a run of groups ending the sequence
		{"4242424242424242 12/30", true},
		{"cc:4242424242424242.", true},
		{"(4242424242424242)", true},
		{"name\n4242424242424242", true},
		{"pm_4242424242424242", true},
		{"4242424242424241", false},      // fails Luhn
		{"424242424242", false},          // 12 digits
		{"42424242424242424242", false},  // 20 digits in one group: not a card
		{"4242    4242 4242 4242", true}, // white space runs are one separator
		{"4242 \t\n\r 4242", false},      // too far apart to be one number
		{"4242424242424242 \t\n\r\v4242", true},
		{"4242 4242-4242 4242", false},       // mixed separators: a list, not a card
		{"4242-4242–4242—4242", true},        // dashes of any kind are one separator
		{"1764340548123456789", false},       // a Luhn-valid nanosecond timestamp: 17… is no brand
		{"order-1764340548123456789", false}, // the README's idempotency key, Luhn-valid
		{"0000000000000000", false},          // Luhn-valid, no issuer
		{"9999999999999995", false},          // Luhn-valid, no issuer
		{"3711111111111117", false},          // Luhn-valid with an Amex prefix, but Amex has 15 digits
		{"550e8400-e29b-41d4-a716-446655440000", false},
		{"Invoice 2026-11-25, 3 items, total 123.45", false},
		{"", false},
		{"Zoë O'Brien — ☕ 4242 4242 4242 4242", true},
		// UUIDs and long hex IDs are words, whatever digits they hold.
		{"550e8400-e29b-41d4-a716-424242424242", false},
		{"42424242-4242-4242-a716-446655440000", true}, // its all-digit segments are read
		{"4bf92f3577b34da6a3ce929d0e0e4736", false},
		{"ab4242424242424242cd01ef", false},
		{"cc4242424242424242", true}, // too short to be a hex ID
	} {
		if got := TextHasCardNumber(tt.text); got != tt.want {
			t.Errorf("TextHasCardNumber(%q) = %v, want %v", tt.text, got, tt.want)
		}
	}
}

// TestCardNumberDisguisesIssue34: the disguises of issue 34 item 5 that
// passed the guard in a payment's description, each with its own number.
func TestCardNumberDisguisesIssue34(t *testing.T) {
	for _, s := range []string{
		"card4111111111111111", // letters glued to the number
		"41111111 11111111",    // 8-8
		"41 11111111111111",    // 2-14
		"411111-1111111111",    // 6-10
		"4111 111111111111",    // 4-12
		"４１１１ １１１１ １１１１ １１１１",                // full-width digits
		"٤١١١ ١١١١ ١١١١ ١١١١",                // Arabic-Indic digits
		"4111\u200b1111\u200b1111\u200b1111", // zero-width spaces
		"4111\u20281111\u20281111\u20281111", // line separators
		"4111\u30001111\u30001111\u30001111", // ideographic spaces
		"4111\u20111111\u20111111\u20111111", // non-breaking hyphens
		"4111—1111—1111—1111",                // em dashes
		"4111|1111|1111|1111",
		"4111;1111;1111;1111",
		"4111+1111+1111+1111",
		"4111*1111*1111*1111",
	} {
		if !TextHasCardNumber(s) {
			t.Errorf("TextHasCardNumber(%q) = false, want true", s)
		}
	}
}

// TestDigitValue: Go's table of decimal digits is in runs of ten from
// zero, which DigitValue relies on.
func TestDigitValue(t *testing.T) {
	for _, r := range unicode.Nd.R16 {
		if r.Stride != 1 || (r.Hi-r.Lo+1)%10 != 0 {
			t.Errorf("Nd range %#x-%#x: stride %d, not runs of ten", r.Lo, r.Hi, r.Stride)
		}
	}
	for _, r := range unicode.Nd.R32 {
		if r.Stride != 1 || (r.Hi-r.Lo+1)%10 != 0 {
			t.Errorf("Nd range %#x-%#x: stride %d, not runs of ten", r.Lo, r.Hi, r.Stride)
		}
	}
	for _, tt := range []struct {
		r    rune
		want int
		ok   bool
	}{{'7', 7, true}, {'７', 7, true}, {'٧', 7, true}, {'७', 7, true}, {'𝟕', 7, true}, {'𝟗', 9, true}, {'²', 0, false}, {'a', 0, false}} {
		if got, ok := DigitValue(tt.r); got != tt.want || ok != tt.ok {
			t.Errorf("DigitValue(%q) = %d, %v, want %d, %v", tt.r, got, ok, tt.want, tt.ok)
		}
	}
}

func TestDigitsHaveCardNumber(t *testing.T) {
	for _, tt := range []struct {
		id   string
		want bool
	}{
		{"42424242424242420000000000000000", true}, // inside a longer run
		{"aaaa4242424242424242bbbbbbbbbbbb", true},
		{"4bf92f3577b34da6a3ce929d0e0e4736", false}, // the W3C example trace ID
		{"00f067aa0ba902b7", false},
		{"424242424242", false},
		{"", false},
	} {
		if got := DigitsHaveCardNumber(tt.id); got != tt.want {
			t.Errorf("DigitsHaveCardNumber(%q) = %v, want %v", tt.id, got, tt.want)
		}
	}
}

func TestTextHasCardNumberAllocs(t *testing.T) {
	for _, s := range []string{"order 1042", "card 4242 4242 4242 4242", strings.Repeat("1 ", 500)} {
		if a := testing.AllocsPerRun(100, func() { _ = TextHasCardNumber(s); _ = DigitsHaveCardNumber(s) }); a != 0 {
			t.Errorf("%q: %v allocations, want 0", s[:min(len(s), 20)], a)
		}
	}
}

func TestValidateRefusesCardNumbers(t *testing.T) {
	const pan = "4242 4242 4242 4242"
	check := func(name string, err error, param string) {
		t.Helper()
		e, ok := err.(*Error)
		if !ok || e.Reason != ReasonCardNumberInText || e.Param != param {
			t.Errorf("%s: got %v, want %s on %s", name, err, ReasonCardNumberInText, param)
			return
		}
		if strings.Contains(e.Error(), "4242") {
			t.Errorf("%s: the error echoes the number: %v", name, e)
		}
	}
	check("text", ValidateText("description", "paid with "+pan), "description")
	check("email", ValidateEmail("email", "4242424242424242@example.com"), "email")
	check("metadata value", ValidateMetadata("metadata", map[string]string{"note": pan}), "metadata.note")
	check("metadata key", ValidateMetadata("metadata", map[string]string{pan: "x"}), "metadata")
	_, err := (&CardInput{Number: "4242424242424242", ExpMonth: 12, ExpYear: 2099, Name: pan}).Validate(now)
	check("holder name", err, "billing_details.name")
}

func FuzzTextHasCardNumber(f *testing.F) {
	for _, s := range []string{"4242 4242 4242 4242", "1-2-3", "x4242424242424242", strings.Repeat("4", 40)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := TextHasCardNumber(s)
		// Whatever the text, a card number appended after a space is found.
		if !TextHasCardNumber(s + " 4242424242424242") {
			t.Fatalf("%q + a card number: not found", s)
		}
		_ = got
	})
}

func BenchmarkTextHasCardNumber(b *testing.B) {
	for _, s := range []string{"order 1042 for Ada Lovelace", "call 415-555-0100 or 212 555 0199 before 2026-12-01"} {
		b.Run(fmt.Sprint(len(s)), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				TextHasCardNumber(s)
			}
		})
	}
}
