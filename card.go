package surgepay

import (
	"context"
	"log/slog"
	"strings"
	"time"
)

// PAN is a primary account number. Its String, GoString, LogValue and
// MarshalJSON show only the last four digits, so a PAN that reaches a log,
// an error or a JSON body by mistake does not leak. Use Digits to read it.
type PAN string

// Digits returns the full number. Call it only to encrypt, fingerprint or
// send the number to a provider.
func (p PAN) Digits() string { return string(p) }

// Last4 returns the last four digits.
func (p PAN) Last4() string {
	if len(p) < 4 {
		return ""
	}
	return string(p[len(p)-4:])
}

func (p PAN) String() string               { return "PAN(****" + p.Last4() + ")" }
func (p PAN) GoString() string             { return p.String() }
func (p PAN) LogValue() slog.Value         { return slog.StringValue(p.String()) }
func (p PAN) MarshalJSON() ([]byte, error) { return []byte(`"****` + p.Last4() + `"`), nil }

// CVC is a card verification code. It is never stored and never printed.
type CVC string

func (c CVC) String() string               { return "CVC(***)" }
func (c CVC) GoString() string             { return c.String() }
func (c CVC) LogValue() slog.Value         { return slog.StringValue(c.String()) }
func (c CVC) MarshalJSON() ([]byte, error) { return []byte(`"***"`), nil }

// Value returns the code for a provider call in the same request.
func (c CVC) Value() string { return string(c) }

// Card brands.
const (
	BrandVisa       = "visa"
	BrandMastercard = "mastercard"
	BrandAmex       = "amex"
	BrandDiscover   = "discover"
	BrandJCB        = "jcb"
	BrandDiners     = "diners"
	BrandUnionPay   = "unionpay"
	BrandUnknown    = "unknown"
)

// CardInput is a card as a client submits it.
type CardInput struct {
	Number   PAN
	ExpMonth int
	ExpYear  int
	CVC      CVC
	Name     string
}

// Validate checks the number (digits, length, Luhn), expiry against now and
// the CVC's format for the brand, and returns the brand. Errors name the
// field and never contain the number.
func (c *CardInput) Validate(now time.Time) (brand string, err error) {
	n := c.Number.Digits()
	if n == "" {
		return "", Invalid("card.number", "missing", "card.number is required")
	}
	for i := 0; i < len(n); i++ {
		if n[i] < '0' || n[i] > '9' {
			return "", Invalid("card.number", "invalid_number", "card.number must contain only digits")
		}
	}
	if len(n) < 12 || len(n) > 19 {
		return "", Invalid("card.number", "invalid_number", "card.number must have 12 to 19 digits")
	}
	if !Luhn(n) {
		return "", Invalid("card.number", "invalid_number", "card.number fails the Luhn check")
	}
	if c.ExpMonth < 1 || c.ExpMonth > 12 {
		return "", Invalid("card.exp_month", "invalid_expiry_month", "card.exp_month must be 1 to 12")
	}
	if c.ExpYear < 2000 || c.ExpYear > 2099 {
		return "", Invalid("card.exp_year", "invalid_expiry_year", "card.exp_year must be a four-digit year")
	}
	if Expired(c.ExpMonth, c.ExpYear, now) {
		return "", Invalid("card.exp_year", "expired_card", "the card has expired")
	}
	brand = Brand(n)
	if c.CVC != "" {
		want := 3
		if brand == BrandAmex {
			want = 4
		}
		v := c.CVC.Value()
		if len(v) != want || strings.Trim(v, "0123456789") != "" {
			return "", Invalid("card.cvc", "invalid_cvc", "card.cvc must be %d digits", want)
		}
	}
	if err := ValidateText("billing_details.name", c.Name); err != nil {
		return "", err
	}
	return brand, nil
}

// Expired reports whether a card expiring at the end of month/year has
// expired at now (UTC).
func Expired(month, year int, now time.Time) bool {
	now = now.UTC()
	y, m := now.Year(), int(now.Month())
	return year < y || (year == y && month < m)
}

// Luhn reports whether the digit string passes the Luhn checksum.
func Luhn(digits string) bool {
	sum, double := 0, false
	for i := len(digits) - 1; i >= 0; i-- {
		d := int(digits[i] - '0')
		if double {
			d *= 2
			if d > 9 {
				d -= 9
			}
		}
		sum += d
		double = !double
	}
	return sum%10 == 0
}

// Brand detects the card brand from the leading digits (IIN ranges).
func Brand(n string) string {
	p := func(k int) int {
		v := 0
		for i := 0; i < k && i < len(n); i++ {
			v = v*10 + int(n[i]-'0')
		}
		return v
	}
	switch {
	case n[0] == '4':
		return BrandVisa
	case p(2) >= 51 && p(2) <= 55, p(4) >= 2221 && p(4) <= 2720:
		return BrandMastercard
	case p(2) == 34 || p(2) == 37:
		return BrandAmex
	case p(4) == 6011 || p(2) == 65 || (p(3) >= 644 && p(3) <= 649):
		return BrandDiscover
	case p(4) >= 3528 && p(4) <= 3589:
		return BrandJCB
	case p(2) == 36 || p(2) == 38 || (p(3) >= 300 && p(3) <= 305):
		return BrandDiners
	case p(2) == 62:
		return BrandUnionPay
	}
	return BrandUnknown
}

// PaymentMethod is a saved card. The PAN is held only encrypted
// (SealedPAN, under the vault key named inside the blob); the CVC is never
// part of it.
type PaymentMethod struct {
	ID          string
	MerchantID  string
	CustomerID  string
	Brand       string
	Last4       string
	ExpMonth    int
	ExpYear     int
	Fingerprint string
	HolderName  string
	SealedPAN   []byte // the card number in the vault; nil for a processor token
	Created     time.Time
	// Processor and ProcessorToken, for a payment method that is a
	// processor's own token (a Stripe pm_… collected by Stripe.js on the
	// merchant's page): surgepay never saw the card number. Its payments
	// go to Processor and nowhere else. Both empty for a card in the vault.
	Processor      string
	ProcessorToken string
	// ProcessorCustomer is the processor's customer the token is attached
	// to (a Stripe cus_…), named in each of its payments: a token attached
	// to a customer can be charged again, one that is not only once.
	ProcessorCustomer string
}

// TokenCard is what a processor tells of the card behind one of its
// tokens.
type TokenCard struct {
	Brand       string
	Last4       string
	ExpMonth    int
	ExpYear     int
	Fingerprint string // the processor's own, the same for the same card
	// Customer is the processor's customer the token is attached to
	// already (Stripe.js may attach it), or "".
	Customer string
}

// TokenAttacher is a TokenDescriber that can attach a token to a
// customer of its own for surgepay's customer customerID of merchantID,
// so that the token can be charged again (a Stripe pm_… is single-use
// until attached). It returns the processor's customer; retried after a
// failure, it attaches once.
type TokenAttacher interface {
	AttachToken(ctx context.Context, processor, token, merchantID, customerID string) (string, error)
}

// TokenDescriber is a Provider that can describe the card behind a token
// of processor (a router) or of its own (a connector, which ignores
// processor). A token it does not know is an EINVALID error.
type TokenDescriber interface {
	DescribeToken(ctx context.Context, processor, token string) (*TokenCard, error)
}
