package api

import (
	"strings"

	"github.com/surgepay/surgepay"
)

// errorWithoutCardNumber returns e, or a copy of e that does not repeat a
// card number: error messages and params echo what the client sent (an
// unknown JSON field's name, a path in a 404, an ID in "no such …"), and
// one that held a card number answered it back in clear, and into any
// proxy's or client's log (issue 34 item 5). The copy keeps the code and
// the reason, and the param up to the part that held the number.
func errorWithoutCardNumber(e *surgepay.Error) *surgepay.Error {
	if !surgepay.TextHasCardNumber(e.Message) && !surgepay.TextHasCardNumber(e.Param) {
		return e
	}
	c := *e
	c.Param = paramWithoutCardNumber(e.Param)
	c.Message = "the request holds what looks like a card number outside card.number (" + e.Reason +
		"; the value is not repeated); card numbers are accepted only in card.number"
	return &c
}

// paramWithoutCardNumber drops the trailing parts of a dotted param
// ("metadata.4242…") until what is left holds no card number.
func paramWithoutCardNumber(param string) string {
	for surgepay.TextHasCardNumber(param) {
		i := strings.LastIndexByte(param, '.')
		if i < 0 {
			return ""
		}
		param = param[:i]
	}
	return param
}
