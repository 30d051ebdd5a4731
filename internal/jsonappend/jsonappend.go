// Package jsonappend writes JSON into a byte slice exactly as
// encoding/json's Marshal would, for the few values written on every
// request (a payment's answer, a sale's stored transactions), where
// reflection cost a few percent of the server's CPU. Each user holds its
// output to json.Marshal with a randomized test.
package jsonappend

import (
	"slices"
	"strconv"
	"unicode/utf8"
)

// Int appends name (`,"field":`) and v.
func Int(b []byte, name string, v int64) []byte {
	return strconv.AppendInt(append(b, name...), v, 10)
}

// Optional appends name and s unless s is empty (omitempty).
func Optional(b []byte, name, s string) []byte {
	if s == "" {
		return b
	}
	return String(append(b, name...), s)
}

// Map appends m as json.Marshal does: null if nil, keys sorted.
func Map(b []byte, m map[string]string) []byte {
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
		b = String(b, k)
		b = append(b, ':')
		b = String(b, m[k])
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

// String appends s quoted as encoding/json does with HTML escaping (its
// default).
func String(b []byte, s string) []byte {
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
