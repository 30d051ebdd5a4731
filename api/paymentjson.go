package api

import (
	"slices"
	"strconv"
	"unicode/utf8"
)

// appendPaymentJSON appends p as json.Marshal writes it: the fields in
// their order, omitempty as tagged, map keys sorted, strings escaped the
// same way (HTML-safe, invalid UTF-8 as U+FFFD, U+2028 and U+2029
// escaped). Every sale renders one payment, stored as its idempotent
// answer and sent; reflection took 3 % of the server's CPU at 5,000
// sales/s (bench/RESULTS.md, issue 14 session 20).
// TestPaymentJSONMatchesMarshal holds it to json.Marshal; a field added
// to paymentJSON (or the types it holds) must be added here too, which
// that test catches.
func appendPaymentJSON(b []byte, p *paymentJSON) []byte {
	b = append(b, `{"id":`...)
	b = appendJSONString(b, p.ID)
	b = append(b, `,"object":`...)
	b = appendJSONString(b, p.Object)
	b = append(b, `,"status":`...)
	b = appendJSONString(b, p.Status)
	b = appendJSONInt(b, `,"amount":`, p.Amount)
	b = appendJSONInt(b, `,"amount_tax":`, p.AmountTax)
	b = appendJSONInt(b, `,"amount_total":`, p.AmountTotal)
	b = appendJSONInt(b, `,"amount_capturable":`, p.AmountCapturable)
	b = appendJSONInt(b, `,"amount_captured":`, p.AmountCaptured)
	b = appendJSONInt(b, `,"amount_refunded":`, p.AmountRefunded)
	b = append(b, `,"currency":`...)
	b = appendJSONString(b, p.Currency)
	b = append(b, `,"capture_method":`...)
	b = appendJSONString(b, p.CaptureMethod)
	b = append(b, `,"customer":`...)
	b = appendJSONString(b, p.Customer)
	b = append(b, `,"payment_method":`...)
	b = appendJSONString(b, p.PaymentMethod)
	b = append(b, `,"description":`...)
	b = appendJSONString(b, p.Description)
	b = append(b, `,"metadata":`...)
	b = appendJSONMap(b, p.Metadata)
	b = append(b, `,"tax":`...)
	if t := p.Tax; t == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, `{"country":`...)
		b = appendJSONString(b, t.Country)
		b = appendJSONOptional(b, `,"region":`, t.Region)
		b = appendJSONOptional(b, `,"postal_code":`, t.PostalCode)
		b = appendJSONOptional(b, `,"category":`, t.Category)
		b = appendJSONInt(b, `,"rate_bps":`, int64(t.RateBPS))
		b = append(b, '}')
	}
	b = appendJSONOptional(b, `,"decline_code":`, p.DeclineCode)
	b = appendJSONOptional(b, `,"failure_message":`, p.FailureMessage)
	b = append(b, `,"transactions":`...)
	if p.Transactions == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range p.Transactions {
			t := &p.Transactions[i]
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"id":`...)
			b = appendJSONString(b, t.ID)
			b = append(b, `,"type":`...)
			b = appendJSONString(b, t.Type)
			b = append(b, `,"status":`...)
			b = appendJSONString(b, t.Status)
			b = appendJSONInt(b, `,"amount":`, t.Amount)
			b = appendJSONOptional(b, `,"provider_reference":`, t.ProviderReference)
			b = appendJSONOptional(b, `,"decline_code":`, t.DeclineCode)
			b = appendJSONOptional(b, `,"message":`, t.Message)
			b = appendJSONInt(b, `,"created":`, t.Created)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if d := p.Dispute; d != nil {
		b = append(b, `,"dispute":{"id":`...)
		b = appendJSONString(b, d.ID)
		b = append(b, `,"status":`...)
		b = appendJSONString(b, d.Status)
		b = appendJSONInt(b, `,"amount":`, d.Amount)
		b = appendJSONOptional(b, `,"reason":`, d.Reason)
		b = append(b, '}')
	}
	b = appendJSONInt(b, `,"created":`, p.Created)
	return append(b, '}')
}

func appendJSONInt(b []byte, name string, v int64) []byte {
	return strconv.AppendInt(append(b, name...), v, 10)
}

// appendJSONOptional appends name and s unless s is empty (omitempty).
func appendJSONOptional(b []byte, name, s string) []byte {
	if s == "" {
		return b
	}
	return appendJSONString(append(b, name...), s)
}

// appendJSONMap appends m as json.Marshal does: null if nil, keys sorted.
func appendJSONMap(b []byte, m map[string]string) []byte {
	if m == nil {
		return append(b, "null"...)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, k)
		b = append(b, ':')
		b = appendJSONString(b, m[k])
	}
	return append(b, '}')
}

const jsonHex = "0123456789abcdef"

// jsonSafe holds the bytes a JSON string keeps as they are: ASCII from
// 0x20 but '"', '\\' and HTML's '<', '>', '&'.
var jsonSafe = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// appendJSONString appends s quoted as encoding/json does with HTML
// escaping (its default).
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if jsonSafe[c] {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', jsonHex[c>>4], jsonHex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', jsonHex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
