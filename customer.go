package surgepay

import (
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Customer is a merchant's customer.
type Customer struct {
	ID          string
	MerchantID  string
	Name        string
	Email       string
	Description string
	Metadata    map[string]string
	Created     time.Time
	Updated     time.Time
	Version     int64 // incremented by every update; guards concurrent writes.
}

// CustomerUpdate holds the fields a client may change; nil means unchanged.
type CustomerUpdate struct {
	Name        *string
	Email       *string
	Description *string
	Metadata    map[string]string // merged; a key set to "" is removed.
}

// Validate checks the customer's fields.
func (c *Customer) Validate() error {
	if err := ValidateText("name", c.Name); err != nil {
		return err
	}
	if err := ValidateText("description", c.Description); err != nil {
		return err
	}
	if err := ValidateEmail("email", c.Email); err != nil {
		return err
	}
	return ValidateMetadata("metadata", c.Metadata)
}

// Apply changes c by u and validates the result.
func (c *Customer) Apply(u *CustomerUpdate) error {
	if u.Name != nil {
		c.Name = *u.Name
	}
	if u.Email != nil {
		c.Email = *u.Email
	}
	if u.Description != nil {
		c.Description = *u.Description
	}
	if len(u.Metadata) > 0 && c.Metadata == nil {
		c.Metadata = make(map[string]string, len(u.Metadata))
	}
	for k, v := range u.Metadata {
		if v == "" {
			delete(c.Metadata, k)
		} else {
			c.Metadata[k] = v
		}
	}
	return c.Validate()
}

// ValidateText checks a free-text field: valid UTF-8, bounded, no NUL, no
// card number (CardNumberInText).
func ValidateText(param, s string) error {
	switch {
	case len(s) > TextBytesMax:
		return Invalid(param, "too_long", "%s must be at most %d bytes", param, TextBytesMax)
	case !utf8.ValidString(s) || strings.ContainsRune(s, 0):
		return Invalid(param, "invalid_text", "%s must be valid UTF-8 text", param)
	case TextHasCardNumber(s):
		return CardNumberInText(param)
	}
	return nil
}

// ValidateEmail checks an optional email address loosely: one @ with text on
// both sides, no spaces. Delivery is not the engine's concern.
func ValidateEmail(param, s string) error {
	if s == "" {
		return nil
	}
	if err := ValidateText(param, s); err != nil {
		return err
	}
	at := strings.IndexByte(s, '@')
	if at < 1 || at == len(s)-1 || strings.ContainsAny(s, " \t\r\n") || strings.Count(s, "@") != 1 {
		return Invalid(param, "invalid_email", "%s must be an email address", param)
	}
	return nil
}

// ValidateMetadata checks the bounds of a metadata map, that no key or
// value holds a control character (a NUL cuts a C string short in whatever
// reads the metadata downstream, a line feed forges log lines), and that
// none holds a card number (a key that does is not named in the error, nor
// is a key holding a control character).
func ValidateMetadata(param string, m map[string]string) error {
	if len(m) > MetadataKeysMax {
		return Invalid(param, "too_many_keys", "%s may have at most %d keys", param, MetadataKeysMax)
	}
	for k, v := range m {
		if k == "" || len(k) > MetadataKeyBytesMax || !utf8.ValidString(k) {
			return Invalid(param, "invalid_key", "%s keys must be 1 to %d bytes of UTF-8", param, MetadataKeyBytesMax)
		}
		if TextHasControl(k) {
			return Invalid(param, "invalid_characters", "%s keys must not hold control characters", param)
		}
		if TextHasCardNumber(k) {
			return CardNumberInText(param)
		}
		if len(v) > MetadataValueBytesMax || !utf8.ValidString(v) {
			return Invalid(param+"."+k, "invalid_value", "metadata values must be at most %d bytes of UTF-8", MetadataValueBytesMax)
		}
		if TextHasControl(v) {
			return Invalid(param+"."+k, "invalid_characters", "metadata values must not hold control characters")
		}
		if TextHasCardNumber(v) {
			return CardNumberInText(param + "." + k)
		}
	}
	return nil
}

// TextHasControl reports whether s holds a C0 or C1 control character
// (NUL, tab and line feed included).
func TextHasControl(s string) bool {
	return strings.ContainsFunc(s, unicode.IsControl)
}

// TextHasHidden reports whether s holds a character that hides or changes
// what a reader sees: a control character (TextHasControl) or a Unicode
// format character (category Cf: the bidirectional embeddings, overrides
// and marks, zero-width spaces and joiners, the soft hyphen, the byte
// order mark). Names shown to people refuse them: "pay\u200bpal" reads as
// "paypal".
func TextHasHidden(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) })
}
