package surgepay

import (
	"net/url"
	"sort"
	"unicode"
	"unicode/utf8"
)

// Card numbers outside card fields. A card number belongs in card.number
// only, where it is encrypted at rest and never logged; one pasted into a
// description, a name, metadata, a header or a webhook URL would be
// stored, logged, returned and sent in clear. Like Stripe, surgepay
// refuses such text (an Idempotency-Key is replaced instead: see
// api/handlers.go).
//
// The guard reads text as a person would read a card number in it: every
// Unicode decimal digit by its value (full-width, Arabic-Indic, …), any
// short run of characters that are neither letters nor digits (spaces of
// every kind, dashes, '|', ';', '+', '*', …) as a separator between digit
// groups, format characters (zero-width spaces and joiners) and
// combining marks as nothing, and a letter next to a number as no reason
// to ignore it ("card4242…"). Any run of whole consecutive groups, in any
// grouping, is a candidate; it reads as a card number when it has as many
// digits as some brand issues, starts with that brand's issuer prefix
// (cardIssuers) and passes the Luhn check. Issue 34 item 5 lists the 32
// disguises that passed the guard before; TestCardGuardCorpus sends
// 10,000 numbers in 36 disguises and 100,000 strings that are not cards
// through it (docs/security.md has the figures).

// Card numbers, by length in digits. TextCardDigitsMin is 13: the shortest
// numbers issued today (old Visa) have 13 digits; a 12-digit run in text is
// far more often a phone or an order number than a card.
const (
	TextCardDigitsMin = 13
	TextCardDigitsMax = 19
	// textCardSeparatorsMax bounds the visible characters between two
	// digit groups of one number ("4111 -- 1111" has four); format
	// characters and combining marks are not counted. Further apart, the
	// groups are two numbers.
	textCardSeparatorsMax = 4
)

// ReasonCardNumberInText is the error reason of text that holds a card
// number.
const ReasonCardNumberInText = "card_number_in_text"

// CardNumberInText returns the EINVALID error for a field that holds a
// card number. The message names the field and never echoes its value.
func CardNumberInText(param string) *Error {
	return Invalid(param, ReasonCardNumberInText,
		"%s looks like it holds a card number (13 to 19 digits with an issuer's prefix, passing the Luhn check, in any grouping); card numbers are accepted only in card.number", param)
}

// cardIssuer is a range of issuer identification numbers: the card
// numbers whose first prefixDigits digits lie in [lo, hi], with a length
// in digits whose bit is set in lengths.
type cardIssuer struct {
	lo, hi       uint32
	prefixDigits int
	lengths      uint32
}

func cardLengths(least, most int) uint32 {
	var m uint32
	for l := least; l <= most; l++ {
		m |= 1 << l
	}
	return m
}

// cardIssuers are the issuer prefixes and lengths of the brands in use,
// broad where a brand's ranges are scattered (Maestro's 50 and 56-69
// cover RuPay's 60 and 508, Verve, InterPayment, Troy's 65): a number in
// one of them is treated as a card. No brand issues numbers starting with
// 0, 1 (but GPN's 1946), 7, 31-33 or 9 (but Troy's 9792 and Humo's 9860),
// which keeps nanosecond timestamps (19 digits from 17…) and most order
// numbers out. UATP (airline cards: 1, 15 digits) is left out on purpose:
// 15-digit runs from 1 are common in text (a phone list's "+1 415 …")
// and UATP cards are not taken by surgepay's processors.
var cardIssuers = [...]cardIssuer{
	{4, 4, 1, 1<<13 | 1<<16 | 1<<19},       // Visa
	{51, 55, 2, 1 << 16},                   // Mastercard
	{2221, 2720, 4, 1 << 16},               // Mastercard 2-series
	{34, 34, 2, 1 << 15},                   // American Express
	{37, 37, 2, 1 << 15},                   // American Express
	{6011, 6011, 4, cardLengths(16, 19)},   // Discover
	{644, 649, 3, cardLengths(16, 19)},     // Discover
	{65, 65, 2, cardLengths(16, 19)},       // Discover, RuPay, Troy
	{3528, 3589, 4, cardLengths(16, 19)},   // JCB
	{300, 305, 3, cardLengths(14, 19)},     // Diners Club
	{3095, 3095, 4, cardLengths(14, 19)},   // Diners Club
	{36, 36, 2, cardLengths(14, 19)},       // Diners Club
	{38, 39, 2, cardLengths(14, 19)},       // Diners Club
	{62, 62, 2, cardLengths(16, 19)},       // UnionPay
	{81, 82, 2, cardLengths(16, 19)},       // UnionPay, RuPay
	{50, 50, 2, cardLengths(13, 19)},       // Maestro, Verve, RuPay
	{56, 69, 2, cardLengths(13, 19)},       // Maestro and the 6-series
	{2200, 2205, 4, cardLengths(16, 19)},   // Mir, BORICA
	{8600, 8600, 4, 1 << 16},               // UzCard
	{9792, 9792, 4, 1 << 16},               // Troy
	{9860, 9860, 4, 1 << 16},               // Humo
	{1946, 1946, 4, 1<<16 | 1<<18 | 1<<19}, // GPN
}

// cardIssued reports whether digits (values 0-9) have the length and the
// prefix of a brand's card numbers.
func cardIssued(digits []byte) bool {
	for _, c := range &cardIssuers {
		if c.lengths&(1<<len(digits)) == 0 {
			continue
		}
		var p uint32
		for _, d := range digits[:c.prefixDigits] {
			p = p*10 + uint32(d)
		}
		if p >= c.lo && p <= c.hi {
			return true
		}
	}
	return false
}

// DigitValue returns the value of a Unicode decimal digit (category Nd:
// '0'-'9', full-width, Arabic-Indic, Devanagari, mathematical, …). The
// Unicode standard assigns them in runs of ten, from zero to nine, so a
// digit's value is its distance from the start of its run, modulo ten
// (TestDigitValue checks this of Go's table).
func DigitValue(r rune) (int, bool) {
	if r < utf8.RuneSelf {
		if r >= '0' && r <= '9' {
			return int(r - '0'), true
		}
		return 0, false
	}
	if r <= 0xffff {
		t := unicode.Nd.R16
		i := sort.Search(len(t), func(i int) bool { return rune(t[i].Hi) >= r })
		if i < len(t) && rune(t[i].Lo) <= r {
			return int(r-rune(t[i].Lo)) % 10, true
		}
		return 0, false
	}
	t := unicode.Nd.R32
	i := sort.Search(len(t), func(i int) bool { return rune(t[i].Hi) >= r }) //nolint:gosec // G115: a code point, at most unicode.MaxRune
	if i < len(t) && rune(t[i].Lo) <= r {                                    //nolint:gosec // G115: a code point, at most unicode.MaxRune
		return int(r-rune(t[i].Lo)) % 10, true //nolint:gosec // G115: a code point, at most unicode.MaxRune
	}
	return 0, false
}

// cardRuneKind sorts the characters of text for the guard.
type cardRuneKind uint8

const (
	runeSeparator cardRuneKind = iota // counted towards textCardSeparatorsMax
	runeInvisible                     // ends a group, not counted
	runeLetter                        // ends the sequence of groups
	runeDigit
)

func cardKind(r rune) (cardRuneKind, int) {
	if v, ok := DigitValue(r); ok {
		return runeDigit, v
	}
	if r < utf8.RuneSelf {
		if r|0x20 >= 'a' && r|0x20 <= 'z' {
			return runeLetter, 0
		}
		return runeSeparator, 0
	}
	switch {
	case unicode.IsLetter(r), unicode.IsNumber(r):
		// Other numbers (superscripts, circled digits, Roman numerals)
		// are not read as digits: they end a number as letters do.
		return runeLetter, 0
	case unicode.In(r, unicode.Cf, unicode.Mn, unicode.Me):
		return runeInvisible, 0
	}
	return runeSeparator, 0
}

// cardSeparator is the separator between two digit groups, as the guard
// compares them: its visible characters, every run of white space as one
// ' ' and every dash as '-'.
type cardSeparator struct {
	r [textCardSeparatorsMax]rune
	n int
}

func (k *cardSeparator) add(r rune) {
	switch {
	case unicode.IsSpace(r):
		r = ' '
	case unicode.Is(unicode.Pd, r) || r == '\u2212': // a dash or a minus sign
		r = '-'
	}
	if r == ' ' && k.n > 0 && k.r[k.n-1] == ' ' {
		return
	}
	if k.n < len(k.r) {
		k.r[k.n] = r
		k.n++
	}
}

// cardScan is the state of the guard over one text: the last
// TextCardDigitsMax digits of the current sequence of groups, which of
// them start a group, and the separator before each group.
type cardScan struct {
	digits  [TextCardDigitsMax]byte
	starts  [TextCardDigitsMax]bool
	before  [TextCardDigitsMax]cardSeparator
	n       int           // digits held
	inGroup bool          // the last character was a digit
	seps    int           // visible separators since the last digit
	sep     cardSeparator // the separator since the last digit
}

// digit adds a digit to the sequence.
func (c *cardScan) digit(v int) {
	start := !c.inGroup
	if start && c.seps > textCardSeparatorsMax {
		c.n = 0
	}
	if c.n == len(c.digits) {
		copy(c.digits[:], c.digits[1:])
		copy(c.starts[:], c.starts[1:])
		copy(c.before[:], c.before[1:])
		c.n--
	}
	c.digits[c.n], c.starts[c.n], c.before[c.n] = byte(v), start, c.sep //nolint:gosec // G115: v is a digit's value, 0 to 9 (DigitValue)
	c.n++
	c.inGroup, c.seps, c.sep = true, 0, cardSeparator{}
}

// separator notes a character between digit groups; invisible ones
// (format characters, combining marks) are not counted or compared.
func (c *cardScan) separator(r rune, visible bool) {
	if visible {
		c.seps++
		c.sep.add(r)
	}
}

// groupEnd reports whether a run of whole groups ending with the one just
// ended is a card number. The Luhn sum is built from the right as the
// candidate grows leftwards; a group longer than 19 digits has no start
// among the digits held, so nothing that includes it is a candidate.
// A candidate's groups are joined by one separator throughout, as a
// person writes a card number and as every disguise in the corpus does:
// runs of numbers joined by different separators are lists, dates and
// times ("+1 415 555 0100, +1 212 555 0199", "14:30:00.123456789"),
// which read as card numbers one time in eight and one in fifty when any
// mix of separators was allowed (TestCardGuardCorpus).
func (c *cardScan) groupEnd() bool {
	c.inGroup = false
	sum, joined := 0, false
	var sep cardSeparator
	for k := c.n - 1; k >= 0; k-- {
		d := int(c.digits[k])
		if (c.n-1-k)%2 == 1 {
			if d *= 2; d > 9 {
				d -= 9
			}
		}
		sum += d
		if !c.starts[k] {
			continue
		}
		if l := c.n - k; l >= TextCardDigitsMin && sum%10 == 0 && cardIssued(c.digits[k:c.n]) {
			return true
		}
		// Growing the candidate past this group start adds the separator
		// before it.
		if joined && c.before[k] != sep {
			return false
		}
		sep, joined = c.before[k], true
	}
	return false
}

// TextHasCardNumber reports whether s holds something that reads as a card
// number (see the top of this file): 13 to 19 digits of any script, in
// one group or in groups of any size joined by up to four separator
// characters of any kind, with the length and the issuer prefix of a
// brand's numbers, passing the Luhn check. Letters next to the number do
// not hide it; letters between its groups split it. An unbroken run of
// more than 19 digits is one long number, not a card. It does not
// allocate, and a string with fewer than 13 digits costs one pass over
// its characters.
func TextHasCardNumber(s string) bool {
	digits := 0
	for _, r := range s {
		if _, ok := DigitValue(r); ok {
			digits++
		}
	}
	if digits < TextCardDigitsMin {
		return false
	}
	var c cardScan
	for i := 0; i < len(s); {
		if n := hexTokenBytes(s, i); n > 0 {
			// A hexadecimal identifier: its digits are not a decimal
			// number, whatever letters are in between.
			if c.inGroup && c.groupEnd() {
				return true
			}
			c.n = 0
			i += n
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		kind, v := cardKind(r)
		if kind == runeDigit {
			c.digit(v)
			continue
		}
		if c.inGroup && c.groupEnd() {
			return true
		}
		switch kind {
		case runeLetter:
			c.n = 0
		case runeSeparator:
			c.separator(r, true)
		}
	}
	return c.inGroup && c.groupEnd()
}

// RedactCardText returns s with each card number TextHasCardNumber finds
// in it replaced by with, and s itself, without allocating, if it holds
// none. What is replaced is the whole sequence of digit groups the number
// was found in, from its first digit to the end of the number's last
// group: digits of any script, the separators between them and any
// shorter number the sequence began with ("order 12 4242 4242 4242 4242"
// loses "12" too), so that the log and trace scrubber
// (telemetry.Redact) misses nothing the request guard refuses.
func RedactCardText(s, with string) string {
	if !TextHasCardNumber(s) {
		return s
	}
	var out []byte
	last, start := 0, -1 // start: the byte where the current sequence of groups began
	var c cardScan
	found := func(end int) { // a number ended at byte end
		out = append(append(out, s[last:start]...), with...)
		last, start, c = end, -1, cardScan{}
	}
	for i := 0; i < len(s); {
		if n := hexTokenBytes(s, i); n > 0 {
			if c.inGroup && c.groupEnd() {
				found(i)
			}
			c.n, start = 0, -1
			i += n
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		kind, v := cardKind(r)
		if kind == runeDigit {
			if !c.inGroup && (start < 0 || c.n == 0 || c.seps > textCardSeparatorsMax) {
				start = i // digit() starts a new sequence here
			}
			c.digit(v)
			i += size
			continue
		}
		if c.inGroup && c.groupEnd() {
			found(i)
		}
		switch kind {
		case runeLetter:
			c.n, start = 0, -1
		case runeSeparator:
			c.separator(r, true)
		}
		i += size
	}
	if c.inGroup && c.groupEnd() {
		found(len(s))
	}
	return string(append(out, s[last:]...))
}

// URLHasCardNumber reports whether a URL holds a card number, as written
// or once its percent-escapes are decoded ("/hooks/4242%204242%20…",
// "?card=4242+4242+…"): a webhook endpoint's URL is stored, returned and
// requested on every delivery.
func URLHasCardNumber(raw string) bool {
	if TextHasCardNumber(raw) {
		return true
	}
	if p, err := url.PathUnescape(raw); err == nil && p != raw && TextHasCardNumber(p) {
		return true
	}
	q, err := url.QueryUnescape(raw)
	return err == nil && q != raw && TextHasCardNumber(q)
}

// DigitsHaveCardNumber reports whether any 13 to 19 consecutive decimal
// digits of s pass the Luhn check, wherever they stand: inside a longer
// digit run or between letters. It is the strict test for identifiers
// that are logged and echoed but carry no meaning of their own (a W3C
// trace ID, a request ID): such an ID is replaced, not refused, so
// replacing a random one now and then (a random 32-digit hex trace ID
// in about 1 case of 160, a 16-digit span ID in 1 of 850) costs nothing.
// It does not allocate.
func DigitsHaveCardNumber(s string) bool {
	for i := 0; i < len(s); {
		if !isDigit(s[i]) {
			i++
			continue
		}
		start := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		run := s[start:i]
		for a := 0; a+TextCardDigitsMin <= len(run); a++ {
			for l := TextCardDigitsMin; l <= TextCardDigitsMax && a+l <= len(run); l++ {
				if Luhn(run[a : a+l]) {
					return true
				}
			}
		}
	}
	return false
}

// Hexadecimal identifiers. Read as decimal text, a random UUID held
// something that reads as a card number about 1 time in 1,000 and 32
// random hex digits 4 times in 10,000 (TestTextHasCardNumberRandomIDs),
// by runs of digits between its letters; a UUID or a metadata value
// holding one would have been refused that often. So an ASCII token
// shaped as a UUID (8-4-4-4-12 hex digits) is read segment by segment,
// a segment with a letter being a word, and an ASCII token of at least
// hexTokenBytesMin hex digits with letters in two places or more
// ("4bf92f35…") is a word. A card number hidden inside either
// ("cafe4242…babe4242") is not found: the price of not refusing UUIDs.
const (
	uuidBytes        = 36
	hexTokenBytesMin = 24
)

// hexTokenBytes returns the length of the hexadecimal word starting at
// s[i], 0 if none does: a UUID's first segment holding a letter, or a
// whole hex token (see above). Tokens start after a character that is
// not an ASCII letter or digit.
func hexTokenBytes(s string, i int) int {
	if !isHex(s[i]) || (i > 0 && isAlnum(s[i-1])) {
		return 0
	}
	if u := uuidStart(s, i); u >= 0 {
		// Within a UUID, a segment with a letter is a word.
		end := i
		for end < len(s) && isHex(s[end]) {
			end++
		}
		for k := i; k < end; k++ {
			if !isDigit(s[k]) {
				return end - i
			}
		}
		return 0
	}
	end, letterRuns := i, 0
	for end < len(s) && isAlnum(s[end]) {
		if !isHex(s[end]) {
			return 0
		}
		if !isDigit(s[end]) && (end == i || isDigit(s[end-1])) {
			letterRuns++
		}
		end++
	}
	if end-i < hexTokenBytesMin || letterRuns < 2 {
		return 0
	}
	return end - i
}

// uuidStart returns the start of the UUID (8-4-4-4-12 hex digits joined
// by '-', standing apart from letters and digits) that has a segment
// starting at s[i], or -1.
func uuidStart(s string, i int) int {
	for _, off := range [...]int{0, 9, 14, 19, 24} {
		if start := i - off; start >= 0 && isUUID(s, start) {
			return start
		}
	}
	return -1
}

func isUUID(s string, start int) bool {
	if start+uuidBytes > len(s) || (start > 0 && isAlnum(s[start-1])) ||
		(start+uuidBytes < len(s) && isAlnum(s[start+uuidBytes])) {
		return false
	}
	for k := 0; k < uuidBytes; k++ {
		c := s[start+k]
		if k == 8 || k == 13 || k == 18 || k == 23 {
			if c != '-' {
				return false
			}
		} else if !isHex(c) {
			return false
		}
	}
	return true
}

func isHex(c byte) bool { return isDigit(c) || (c|0x20 >= 'a' && c|0x20 <= 'f') }

func isAlnum(c byte) bool { return isDigit(c) || (c|0x20 >= 'a' && c|0x20 <= 'z') }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
