package surgepay

import (
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"strings"
	"testing"
)

// The card-guard corpus (issue 34, items 5 and 6): generated card numbers
// in many disguises, which must all be found, and realistic strings that
// are not card numbers, of which the test reports how many are refused.
// Both are drawn from a fixed seed. By default the corpus is small enough
// for go test -race; SURGEPAY_CARD_CORPUS=full runs the counts
// docs/security.md reports (10,000 card numbers in every disguise,
// 100,000 strings that are not cards):
//
//	SURGEPAY_CARD_CORPUS=full go test -count=1 -run TestCardGuardCorpus -v .

// corpusBrands are the brands card numbers are drawn from, written here
// from the brands' published ranges rather than from cardIssuers, so that
// a range missing there is a miss here.
var corpusBrands = []struct {
	name     string
	prefixes []string
	lengths  []int
}{
	{"visa", []string{"4"}, []int{13, 16, 19}},
	{"mastercard", []string{"51", "52", "53", "54", "55", "2221", "2500", "2720"}, []int{16}},
	{"amex", []string{"34", "37"}, []int{15}},
	{"discover", []string{"6011", "644", "649", "65"}, []int{16, 19}},
	{"jcb", []string{"3528", "3550", "3589"}, []int{16, 19}},
	{"diners", []string{"300", "305", "36", "38", "39"}, []int{14, 16}},
	{"unionpay", []string{"62", "81"}, []int{16, 17, 18, 19}},
	{"maestro", []string{"5018", "5020", "5038", "5893", "6304", "6759", "6761"}, []int{13, 16, 19}},
	{"mir", []string{"2200", "2204"}, []int{16}},
	{"rupay", []string{"60", "508", "82"}, []int{16}},
}

// corpusPAN returns a Luhn-valid number of a random brand.
func corpusPAN(r *rand.Rand) string {
	b := corpusBrands[r.IntN(len(corpusBrands))]
	n := b.lengths[r.IntN(len(b.lengths))]
	d := []byte(b.prefixes[r.IntN(len(b.prefixes))])
	for len(d) < n-1 {
		d = append(d, byte('0'+r.IntN(10)))
	}
	for c := byte('0'); c <= '9'; c++ {
		if Luhn(string(append(d, c))) {
			return string(append(d, c))
		}
	}
	panic("no check digit")
}

// group writes pan in groups of the given sizes (the last takes the rest)
// joined by sep.
func group(pan, sep string, sizes ...int) string {
	var parts []string
	for _, n := range sizes {
		if n >= len(pan) {
			break
		}
		parts, pan = append(parts, pan[:n]), pan[n:]
	}
	return strings.Join(append(parts, pan), sep)
}

// script writes pan's digits from the run of ten starting at zero.
func script(pan string, zero rune) string {
	var b strings.Builder
	for _, c := range pan {
		b.WriteRune(zero + c - '0')
	}
	return b.String()
}

// between puts s between every two digits of pan.
func between(pan, s string) string {
	return group(pan, s, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1)
}

// corpusDisguises are ways to write a card number outside card.number:
// those issue 34 found passing, and more of the same kinds.
var corpusDisguises = []struct {
	name string
	f    func(r *rand.Rand, pan string) string
}{
	{"plain", func(_ *rand.Rand, p string) string { return p }},
	{"4-4-4-4 spaces", func(_ *rand.Rand, p string) string { return group(p, " ", 4, 4, 4, 4) }},
	{"4-4-4-4 dashes", func(_ *rand.Rand, p string) string { return group(p, "-", 4, 4, 4, 4) }},
	{"4-4-8", func(_ *rand.Rand, p string) string { return group(p, " ", 4, 4) }},
	{"8-8", func(_ *rand.Rand, p string) string { return group(p, " ", 8) }},
	{"2-14", func(_ *rand.Rand, p string) string { return group(p, " ", 2) }},
	{"6-10", func(_ *rand.Rand, p string) string { return group(p, "-", 6) }},
	{"4-12", func(_ *rand.Rand, p string) string { return group(p, " ", 4) }},
	{"4-6-5", func(_ *rand.Rand, p string) string { return group(p, " ", 4, 6) }},
	{"random grouping", func(r *rand.Rand, p string) string { return group(p, " ", 1+r.IntN(7), 1+r.IntN(7), 1+r.IntN(7)) }},
	{"one digit a group", func(_ *rand.Rand, p string) string { return between(p, " ") }},
	{"letters before", func(_ *rand.Rand, p string) string { return "card" + p }},
	{"letters after", func(_ *rand.Rand, p string) string { return p + "exp1230" }},
	{"letters around", func(_ *rand.Rand, p string) string { return "cc" + p + "cvv" }},
	{"letters before, grouped", func(_ *rand.Rand, p string) string { return "pan" + group(p, "-", 4, 4, 4) }},
	{"full-width digits", func(_ *rand.Rand, p string) string { return script(p, '０') }},
	{"Arabic-Indic digits", func(_ *rand.Rand, p string) string { return script(p, '٠') }},
	{"Persian digits", func(_ *rand.Rand, p string) string { return script(p, '۰') }},
	{"Devanagari digits", func(_ *rand.Rand, p string) string { return script(p, '०') }},
	{"mathematical digits", func(_ *rand.Rand, p string) string { return script(p, '𝟎') }},
	{"mixed scripts", func(_ *rand.Rand, p string) string {
		return script(p[:4], '０') + " " + script(p[4:8], '٠') + " " + p[8:]
	}},
	{"zero-width spaces", func(_ *rand.Rand, p string) string { return between(p, "\u200b") }},
	{"zero-width joiners", func(_ *rand.Rand, p string) string { return group(p, "\u200d", 4, 4, 4) }},
	{"soft hyphens", func(_ *rand.Rand, p string) string { return group(p, "\u00ad", 4, 4, 4) }},
	{"combining marks", func(_ *rand.Rand, p string) string { return between(p, "\u0332") + "\u0332" }},
	{"no-break spaces", func(_ *rand.Rand, p string) string { return group(p, "\u00a0", 4, 4, 4) }},
	{"narrow no-break spaces", func(_ *rand.Rand, p string) string { return group(p, "\u202f", 4, 4, 4) }},
	{"ideographic spaces", func(_ *rand.Rand, p string) string { return group(p, "\u3000", 4, 4, 4) }},
	{"em spaces", func(_ *rand.Rand, p string) string { return group(p, "\u2003", 4, 4, 4) }},
	{"en dashes", func(_ *rand.Rand, p string) string { return group(p, "–", 4, 4, 4) }},
	{"em dashes", func(_ *rand.Rand, p string) string { return group(p, "—", 4, 4, 4) }},
	{"minus signs", func(_ *rand.Rand, p string) string { return group(p, "−", 4, 4, 4) }},
	{"non-breaking hyphens", func(_ *rand.Rand, p string) string { return group(p, "\u2011", 4, 4, 4) }},
	{"pipes", func(_ *rand.Rand, p string) string { return group(p, "|", 4, 4, 4) }},
	{"semicolons", func(_ *rand.Rand, p string) string { return group(p, ";", 4, 4, 4) }},
	{"pluses", func(_ *rand.Rand, p string) string { return group(p, "+", 4, 4, 4) }},
	{"asterisks", func(_ *rand.Rand, p string) string { return group(p, "*", 4, 4, 4) }},
	{"dots", func(_ *rand.Rand, p string) string { return group(p, ".", 4, 4, 4) }},
	{"slashes", func(_ *rand.Rand, p string) string { return group(p, "/", 4, 4, 4) }},
	{"spaced dashes", func(_ *rand.Rand, p string) string { return group(p, " -- ", 4, 4, 4) }},
	{"new lines", func(_ *rand.Rand, p string) string { return group(p, "\r\n", 4, 4, 4) }},
	{"tabs", func(_ *rand.Rand, p string) string { return group(p, "\t", 4, 4, 4) }},
	{"quoted", func(_ *rand.Rand, p string) string { return `{"n":"` + p + `"}` }},
	{"after other numbers", func(_ *rand.Rand, p string) string { return "order 12 qty 3 " + group(p, " ", 4, 4, 4) + " 12/30 123" }},
	{"in a sentence", func(_ *rand.Rand, p string) string {
		return "Zoë paid with ☕ " + group(p, " ", 4, 4, 4) + " on 2026-11-25, total 12.50 EUR"
	}},
	{"URL path", func(_ *rand.Rand, p string) string { return "https://example.com/hooks/" + p + "/in" }},
	{"URL query", func(_ *rand.Rand, p string) string { return "https://example.com/hook?card=" + group(p, "+", 4, 4, 4) }},
	{"URL escaped", func(_ *rand.Rand, p string) string { return "https://example.com/hook/" + group(p, "%20", 4, 4, 4) }},
}

// corpusNonCards are realistic strings that are not card numbers, by kind.
var corpusNonCards = []struct {
	kind string
	f    func(r *rand.Rand) string
}{
	{"UUID v4", func(r *rand.Rand) string {
		return fmt.Sprintf("%08x-%04x-4%03x-%x%03x-%012x", r.Uint32(), r.IntN(1<<16), r.IntN(1<<12), 8+r.IntN(4), r.IntN(1<<12), r.Uint64()>>16)
	}},
	{"hex-32 ID", func(r *rand.Rand) string { return fmt.Sprintf("%016x%016x", r.Uint64(), r.Uint64()) }},
	{"nanosecond timestamp", func(r *rand.Rand) string { return fmt.Sprint(1_700_000_000_000_000_000 + r.Int64N(1e17)) }},
	{"order-$(date +%s%N)", func(r *rand.Rand) string { return fmt.Sprint("order-", 1_700_000_000_000_000_000+r.Int64N(1e17)) }},
	{"seconds.nanoseconds", func(r *rand.Rand) string {
		return fmt.Sprintf("%d.%09d", 1_700_000_000+r.Int64N(1e8), r.IntN(1e9))
	}},
	{"millisecond timestamp", func(r *rand.Rand) string { return fmt.Sprint(1_700_000_000_000 + r.Int64N(1e11)) }},
	{"microsecond timestamp", func(r *rand.Rand) string { return fmt.Sprint(1_700_000_000_000_000 + r.Int64N(1e14)) }},
	{"order number", func(r *rand.Rand) string { return fmt.Sprintf("ORD-%d-%06d", 2020+r.IntN(10), r.IntN(1e6)) }},
	{"10-digit order number", func(r *rand.Rand) string { return fmt.Sprintf("%010d", r.Int64N(1e10)) }},
	{"16-digit order number", func(r *rand.Rand) string { return fmt.Sprintf("%016d", r.Int64N(1e16)) }},
	{"phone (E.164)", func(r *rand.Rand) string { return fmt.Sprintf("+%d%d", 1+r.IntN(98), 1e9+r.Int64N(9e9)) }},
	{"phone (US)", func(r *rand.Rand) string {
		return fmt.Sprintf("+1 (%03d) %03d-%04d", 200+r.IntN(800), 200+r.IntN(800), r.IntN(1e4))
	}},
	{"phone (UK)", func(r *rand.Rand) string { return fmt.Sprintf("+44 20 %04d %04d", r.IntN(1e4), r.IntN(1e4)) }},
	{"two phones", func(r *rand.Rand) string {
		return fmt.Sprintf("+1 %03d %03d %04d, +1 %03d %03d %04d", 200+r.IntN(800), 200+r.IntN(800), r.IntN(1e4),
			200+r.IntN(800), 200+r.IntN(800), r.IntN(1e4))
	}},
	{"date", func(r *rand.Rand) string {
		return fmt.Sprintf("%d-%02d-%02d", 1950+r.IntN(100), 1+r.IntN(12), 1+r.IntN(28))
	}},
	{"date and time", func(r *rand.Rand) string {
		return fmt.Sprintf("%d-%02d-%02d %02d:%02d:%02d", 2000+r.IntN(40), 1+r.IntN(12), 1+r.IntN(28), r.IntN(24), r.IntN(60), r.IntN(60))
	}},
	{"RFC 3339 nanoseconds", func(r *rand.Rand) string {
		return fmt.Sprintf("%d-%02d-%02dT%02d:%02d:%02d.%09dZ", 2000+r.IntN(40), 1+r.IntN(12), 1+r.IntN(28), r.IntN(24), r.IntN(60), r.IntN(60), r.IntN(1e9))
	}},
	{"date range (day first)", func(r *rand.Rand) string {
		return fmt.Sprintf("%02d.%02d.%d-%02d.%02d.%d", 1+r.IntN(28), 1+r.IntN(12), 2000+r.IntN(40), 1+r.IntN(28), 1+r.IntN(12), 2000+r.IntN(40))
	}},
	{"amount", func(r *rand.Rand) string { return fmt.Sprintf("%d.%02d", r.IntN(1e6), r.IntN(100)) }},
	{"amount with thousands", func(r *rand.Rand) string {
		return fmt.Sprintf("EUR %d,%03d,%03d.%02d", r.IntN(1000), r.IntN(1000), r.IntN(1000), r.IntN(100))
	}},
	{"amount list", func(r *rand.Rand) string {
		return fmt.Sprintf("%d.%02d, %d.%02d, %d.%02d", r.IntN(1000), r.IntN(100), r.IntN(1000), r.IntN(100), r.IntN(1000), r.IntN(100))
	}},
	{"invoice sentence", func(r *rand.Rand) string {
		return fmt.Sprintf("Invoice %d-%02d-%02d #%d, %d items, total %d.%02d EUR, call +1 %03d %03d %04d",
			2020+r.IntN(10), 1+r.IntN(12), 1+r.IntN(28), r.IntN(1e6), 1+r.IntN(20), r.IntN(1e4), r.IntN(100),
			200+r.IntN(800), 200+r.IntN(800), r.IntN(1e4))
	}},
	{"postal code", func(r *rand.Rand) string { return fmt.Sprintf("%05d-%04d", r.IntN(1e5), r.IntN(1e4)) }},
}

// corpusSize returns the number of card numbers and of strings that are
// not cards: the full counts with SURGEPAY_CARD_CORPUS=full.
func corpusSize() (cards, nonCards int) {
	if os.Getenv("SURGEPAY_CARD_CORPUS") == "full" {
		return 10_000, 100_000
	}
	return 200, 23_000
}

// TestCardGuardCorpus: every generated card number is found in every
// disguise (issue 34 item 5: 32 disguises passed), and the strings that
// are not cards are refused rarely (item 6); the refusals are logged by
// kind, and bounded so that a change of rule that starts refusing them
// fails here.
func TestCardGuardCorpus(t *testing.T) {
	cards, nonCards := corpusSize()
	r := rand.New(rand.NewPCG(34, 5))
	missed := 0
	for range cards {
		pan := corpusPAN(r)
		for _, d := range corpusDisguises {
			s := d.f(r, pan)
			found := TextHasCardNumber(s)
			if strings.HasPrefix(s, "https://") {
				found = URLHasCardNumber(s)
			}
			if !found {
				if missed++; missed <= 10 {
					t.Errorf("%s: %q not found", d.name, s)
				}
			}
		}
	}
	t.Logf("card numbers: %d missed of %d (%d numbers in %d disguises)", missed, cards*len(corpusDisguises), cards, len(corpusDisguises))
	per := (nonCards + len(corpusNonCards) - 1) / len(corpusNonCards)
	total := 0
	for _, k := range corpusNonCards {
		refused, inURL := 0, 0
		for range per {
			s := k.f(r)
			if TextHasCardNumber(s) {
				refused++
			}
			if URLHasCardNumber("https://shop.example.com/hooks/" + url.PathEscape(s) + "?ref=" + url.QueryEscape(s)) {
				inURL++
			}
		}
		total += refused
		t.Logf("%-24s %5d refused of %d in text, %d in a webhook URL", k.kind, refused, per, inURL)
		// The bound: 16-digit order numbers are refused as often as
		// random 16 digits read as a card (the Luhn check and an issuer
		// prefix: about 1 in 25), and runs of numbers joined by
		// separators (phone and amount lists) nearly as often; every
		// other kind at most 1 in 1,000.
		bound := per / 1000
		switch k.kind {
		case "16-digit order number", "two phones", "amount list", "invoice sentence", "amount with thousands":
			bound = per / 15
		}
		if refused > bound || inURL > bound {
			t.Errorf("%s: %d refused of %d in text, %d in a URL, want at most %d", k.kind, refused, per, inURL, bound)
		}
	}
	t.Logf("not cards: %d refused of %d", total, per*len(corpusNonCards))
}

// TestRedactCardTextCorpus: in every disguise of the corpus, with text
// around it, RedactCardText leaves no card number the guard finds and no
// run of the number's digits, and keeps the text around it; a string the
// guard finds no card in comes back as it is.
func TestRedactCardTextCorpus(t *testing.T) {
	cards, _ := corpusSize()
	r := rand.New(rand.NewPCG(35, 7))
	for range cards {
		pan := corpusPAN(r)
		for _, d := range corpusDisguises {
			s := d.f(r, pan)
			if strings.HasPrefix(s, "https://") {
				continue // URLs are scrubbed decoded by the log handler's callers; the guard checks them escaped
			}
			in := "declined: " + s + " (order A-17)"
			got := RedactCardText(in, "[redacted]")
			if TextHasCardNumber(got) || strings.Contains(got, pan[4:10]) {
				t.Fatalf("%s: %q redacted to %q: a card number is left", d.name, in, got)
			}
			if !strings.HasPrefix(got, "declined: ") || !strings.HasSuffix(got, " (order A-17)") || !strings.Contains(got, "[redacted]") {
				t.Fatalf("%s: %q redacted to %q: want the text around the number kept", d.name, in, got)
			}
		}
	}
	for _, k := range corpusNonCards {
		for range 50 {
			s := k.f(r)
			if got := RedactCardText(s, "[redacted]"); !TextHasCardNumber(s) && got != s {
				t.Fatalf("%s: %q changed to %q, though it holds no card number", k.kind, s, got)
			}
		}
	}
}

// TestRedactCardText: what is replaced, and what is kept.
func TestRedactCardText(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"card ４２４２ ４２４２ ４２４２ ４２４２ exp 12/30", "card X exp 12/30"},
		{"pan=٤٢٤٢٤٢٤٢٤٢٤٢٤٢٤٢;", "pan=X;"},
		{"4242 -- 4242 -- 4242 -- 4242 and 5555555555554444", "X and X"},
		{"order 12 4242 4242 4242 4242 shipped", "order X shipped"},
		{"two: 4242424242424242, 4000056655665556.", "two: X, X."},
		{"id 123e4567-e89b-12d3-a456-426614174000 ok", "id 123e4567-e89b-12d3-a456-426614174000 ok"},
		{"4242424242424241", "4242424242424241"}, // fails the Luhn check
		{"", ""},
	} {
		if got := RedactCardText(tt.in, "X"); got != tt.want {
			t.Errorf("RedactCardText(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	clean := "payment pay_01m8kdvj7a6a57yzvfk76cmrep declined: insufficient_funds"
	if n := testing.AllocsPerRun(100, func() { _ = RedactCardText(clean, "X") }); n != 0 {
		t.Errorf("a string with no card number costs %v allocations, want 0", n)
	}
}
