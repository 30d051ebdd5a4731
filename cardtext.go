package surgepay

// Card numbers outside card fields. A card number belongs in card.number
// only, where it is encrypted at rest and never logged; one pasted into a
// description, a name, metadata or a header would be stored, logged and
// returned in clear. Like Stripe, surgepay refuses such text.

// Card numbers, by length in digits. TextCardDigitsMin is 13: the shortest
// numbers issued today (old Visa) have 13 digits; a 12-digit run in text is
// far more often a phone or an order number than a card.
const (
	TextCardDigitsMin = 13
	TextCardDigitsMax = 19
	// textCardSeparatorsMax bounds the separators between two digit groups
	// of one number ("4111 - 1111" has three).
	textCardSeparatorsMax = 3
	// textCardGroupDigitsMax bounds each group of a number written in
	// groups: cards are printed 4-4-4-4, 4-6-5 or 4-4-4-4-3. A UUID's
	// 4-12 tail ("-8123-446655440000") read as one number refused about
	// 1 in 5,000 random UUIDs as Idempotency-Keys before this bound.
	textCardGroupDigitsMax = 6
)

// ReasonCardNumberInText is the error reason of text that holds a card
// number.
const ReasonCardNumberInText = "card_number_in_text"

// CardNumberInText returns the EINVALID error for a field that holds a
// card number. The message names the field and never echoes its value.
func CardNumberInText(param string) *Error {
	return Invalid(param, ReasonCardNumberInText,
		"%s looks like it holds a card number (13 to 19 digits passing the Luhn check); card numbers are accepted only in card.number", param)
}

// isCardSeparator reports the characters people put between the digit
// groups of a card number: space, tab, '-', '.', '_', '/', ',', ':', and
// the two bytes of a no-break space (U+00A0 in UTF-8, C2 A0; the
// separator bound of 3 counts it as two). Not '+': it starts phone
// numbers, and a list of them ("…0958, +44 20…") would join into runs
// that pass Luhn one time in ten.
func isCardSeparator(c byte) bool {
	switch c {
	case ' ', '\t', '-', '.', '_', '/', ',', ':', 0xc2, 0xa0:
		return true
	}
	return false
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isAlnum(c byte) bool { return isDigit(c) || (c|0x20 >= 'a' && c|0x20 <= 'z') }

// TextHasCardNumber reports whether s holds something that reads as a card
// number: 13 to 19 digits, in one group or in several groups joined by up
// to three separators (space, '-', '.', '_', '/') in groups of at most 6
// digits, passing the Luhn check, and not glued to a letter or a digit on
// either side. Any run of
// consecutive groups counts, so "order 12 4111 1111 1111 1111" is caught
// by its last four groups; a group of more than 19 digits is one long
// number, not a card. The rule that the number stands apart from letters
// keeps random identifiers (UUIDs, hex request IDs) from reading as cards
// where their digits happen to line up; TestTextHasCardNumberRandomIDs
// measures what is left. It does not allocate, and a string with fewer
// than 13 digits costs one pass over its bytes.
func TextHasCardNumber(s string) bool {
	digits := 0
	for i := 0; i < len(s); i++ {
		if isDigit(s[i]) {
			digits++
		}
	}
	if digits < TextCardDigitsMin {
		return false
	}
	// groups holds the [start, end) of each digit group of the current
	// sequence; a sequence is at most 19 digits' worth of groups that
	// matter, but it may hold more groups, so it is scanned as a window.
	var groups [TextCardDigitsMax][2]int
	n := 0 // groups in the window
	for i := 0; i < len(s); {
		if !isDigit(s[i]) {
			i++
			continue
		}
		start := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		joined := n > 0 && start-groups[n-1][1] <= textCardSeparatorsMax && allSeparators(s[groups[n-1][1]:start])
		if !joined {
			n = 0
		}
		if n == len(groups) {
			copy(groups[:], groups[1:])
			n--
		}
		groups[n] = [2]int{start, i}
		n++
		if endsCardNumber(s, groups[:n]) {
			return true
		}
	}
	return false
}

func allSeparators(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isCardSeparator(s[i]) {
			return false
		}
	}
	return true
}

// endsCardNumber reports whether some run of groups ending with the last
// one is a card number standing apart from letters and digits.
func endsCardNumber(s string, groups [][2]int) bool {
	last := groups[len(groups)-1]
	if last[1] < len(s) && isAlnum(s[last[1]]) {
		return false
	}
	// The Luhn sum is built from the right, a group at a time, as the
	// candidate grows leftwards.
	total, widest, sum := 0, 0, 0
	for j := len(groups) - 1; j >= 0; j-- {
		g := groups[j]
		widest = max(widest, g[1]-g[0])
		if total+g[1]-g[0] > TextCardDigitsMax || (j < len(groups)-1 && widest > textCardGroupDigitsMax) {
			return false
		}
		for k := g[1] - 1; k >= g[0]; k-- {
			d := int(s[k] - '0')
			if total%2 == 1 {
				if d *= 2; d > 9 {
					d -= 9
				}
			}
			sum += d
			total++
		}
		if total >= TextCardDigitsMin && sum%10 == 0 && (g[0] == 0 || !isAlnum(s[g[0]-1])) {
			return true
		}
	}
	return false
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
