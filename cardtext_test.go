package surgepay

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
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
		{"4242424242424241", false},       // fails Luhn
		{"424242424242", false},           // 12 digits
		{"42424242424242424242", false},   // 20 digits in one group: not a card
		{"4242    4242 4242 4242", false}, // four spaces: two numbers
		{"x4242424242424242", false},      // glued to a letter
		{"4242424242424242x", false},
		{"550e8400-e29b-41d4-a716-446655440000", false},
		{"Invoice 2026-11-25, 3 items, total 123.45", false},
		{"", false},
		{"Zoë O'Brien — ☕ 4242 4242 4242 4242", true},
	} {
		if got := TextHasCardNumber(tt.text); got != tt.want {
			t.Errorf("TextHasCardNumber(%q) = %v, want %v", tt.text, got, tt.want)
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

// TestTextHasCardNumberRandomIDs measures how often a random identifier a
// client may use as an Idempotency-Key reads as a card number (it is then
// refused): UUIDs and 32 hex digits. The bounds are far above what is
// measured (0 in 100,000 for both at this seed), so a change of rule that
// starts refusing real keys fails here.
func TestTextHasCardNumberRandomIDs(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const n = 100_000
	hex := func(k int) string {
		var b strings.Builder
		for range k {
			fmt.Fprintf(&b, "%x", r.IntN(16))
		}
		return b.String()
	}
	uuids, hexes := 0, 0
	for range n {
		if TextHasCardNumber(hex(8) + "-" + hex(4) + "-4" + hex(3) + "-" + hex(4) + "-" + hex(12)) {
			uuids++
		}
		if TextHasCardNumber(hex(32)) {
			hexes++
		}
	}
	t.Logf("random IDs read as card numbers: %d UUIDs, %d hex-32 of %d", uuids, hexes, n)
	if uuids > n/10_000 || hexes > n/10_000 {
		t.Errorf("random IDs read as card numbers: %d UUIDs, %d hex-32 of %d; want at most 1 in 10,000", uuids, hexes, n)
	}
}

func TestTextHasCardNumberAllocs(t *testing.T) {
	for _, s := range []string{"order 1042", "card 4242 4242 4242 4242", strings.Repeat("1 ", 500)} {
		if a := testing.AllocsPerRun(100, func() { TextHasCardNumber(s); DigitsHaveCardNumber(s) }); a != 0 {
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
