package telemetry

import (
	"context"
	"log/slog"
	"regexp"
	"runtime/debug"

	"github.com/surgepay/surgepay"
)

// Card numbers have 12 to 19 digits, printed plain or in groups separated
// by spaces, dashes, dots, underscores or slashes.
const (
	panDigitsMin = 12
	panDigitsMax = 19
)

var panRun = regexp.MustCompile(`\d(?:[ ._/-]?\d){11,}`)

// Redacted replaces a run of card-number length.
const Redacted = "[redacted]"

// Redact returns s with every run of 12 to 19 digits (optionally grouped
// by single spaces, dashes, dots, underscores or slashes), and every card
// number the request guard would refuse (surgepay.TextHasCardNumber:
// digits of any script, groups joined by up to four separators of any
// kind), replaced by "[redacted]": whatever a card number might be doing
// in a panic value, an error from a dependency or a span attribute, it
// does not leave the process. An unbroken run of more than 19 digits is
// not a card number and is kept; a longer grouped run is redacted whole.
// Strings without such a run are returned as they are, without
// allocating.
func Redact(s string) string {
	if mayHoldDigitRun(s) {
		s = panRun.ReplaceAllStringFunc(s, func(m string) string {
			// An unbroken run of more than 19 digits is not a card number; a
			// longer grouped run may be one followed by other numbers.
			if n := countDigits(m); n > panDigitsMax && n == len(m) {
				return m
			}
			return Redacted
		})
	}
	// What the request guard reads as a card number beyond that: digits
	// of any script, and groups joined by up to four separators of any
	// kind (cardtext.go).
	return surgepay.RedactCardText(s, Redacted)
}

// mayHoldPAN reports whether Redact may change s: the gate of the
// redacting log handler and span exporter.
func mayHoldPAN(s string) bool {
	return mayHoldDigitRun(s) || surgepay.TextHasCardNumber(s)
}

// mayHoldDigitRun reports whether s has 12 ASCII digits with at most
// single separators between them: a cheap scan before the regular
// expression.
func mayHoldDigitRun(s string) bool {
	run, sep := 0, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			run++
			sep = false
			if run >= panDigitsMin {
				return true
			}
		case (c == ' ' || c == '-' || c == '.' || c == '_' || c == '/') && run > 0 && !sep:
			sep = true
		default:
			run, sep = 0, false
		}
	}
	return false
}

func countDigits(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] >= '0' && s[i] <= '9' {
			n++
		}
	}
	return n
}

var stackArgs = regexp.MustCompile(`\((?:0x[0-9a-f]+|\.\.\.|\{[^)]*\}|, )*\)`)

// Stack returns the current goroutine's stack with the argument words of
// every frame removed ("f(0xc000012345, 0x10)" becomes "f(...)") and card
// numbers redacted, so it can be logged after a panic.
func Stack() string {
	return Redact(stackArgs.ReplaceAllString(string(debug.Stack()), "(...)"))
}

// RedactingHandler wraps h so that no log record carries a run of 12 to 19
// digits (grouped as Redact says): the message and every string attribute (and error, and
// fmt.Stringer) are passed through Redact. It is the last line of defence:
// surgepay.PAN and surgepay.CVC already redact themselves. The check costs a
// byte scan per string; only a string that fails it pays for the rewrite.
func RedactingHandler(h slog.Handler) slog.Handler {
	if rh, ok := h.(*redactingHandler); ok {
		return rh
	}
	return &redactingHandler{next: h}
}

type redactingHandler struct{ next slog.Handler }

func (h *redactingHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

func (h *redactingHandler) Handle(ctx context.Context, r slog.Record) error {
	dirty := mayHoldPAN(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		dirty = dirty || attrMayHoldPAN(a)
		return !dirty
	})
	if !dirty {
		return h.next.Handle(ctx, r)
	}
	clean := slog.NewRecord(r.Time, r.Level, Redact(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		clean.AddAttrs(redactAttr(a))
		return true
	})
	return h.next.Handle(ctx, clean)
}

func (h *redactingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	out := make([]slog.Attr, len(as))
	for i, a := range as {
		out[i] = redactAttr(a)
	}
	return &redactingHandler{next: h.next.WithAttrs(out)}
}

func (h *redactingHandler) WithGroup(name string) slog.Handler {
	return &redactingHandler{next: h.next.WithGroup(name)}
}

func redactAttr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		if s := v.String(); mayHoldPAN(s) {
			return slog.String(a.Key, Redact(s))
		}
	case slog.KindGroup:
		g := v.Group()
		out := make([]slog.Attr, len(g))
		for i, ga := range g {
			out[i] = redactAttr(ga)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(out...)}
	case slog.KindAny:
		var s string
		switch x := v.Any().(type) {
		case error:
			s = x.Error()
		case interface{ String() string }:
			s = x.String()
		default:
			return slog.Attr{Key: a.Key, Value: v}
		}
		if mayHoldPAN(s) {
			return slog.String(a.Key, Redact(s))
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}

// attrMayHoldPAN is redactAttr's check without the rewrite.
func attrMayHoldPAN(a slog.Attr) bool {
	v := a.Value
	switch v.Kind() {
	case slog.KindString:
		return mayHoldPAN(v.String())
	case slog.KindInt64, slog.KindUint64, slog.KindFloat64, slog.KindBool, slog.KindDuration, slog.KindTime:
		return false
	}
	return true // groups, LogValuers and Any: let redactAttr look inside
}
