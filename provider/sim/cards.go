package sim

import "github.com/surgepay/surgepay"

// cardDeclines maps Stripe-style test card numbers to the decline code of
// every authorization with them. Any other number that passes Luhn is
// approved. docs/simulator.md carries the same table.
var cardDeclines = map[string]string{
	"4000000000000002": surgepay.DeclineGeneric,
	"4000000000009995": surgepay.DeclineInsufficientFunds,
	"4000000000000069": surgepay.DeclineExpiredCard,
	"4000000000000127": surgepay.DeclineIncorrectCVC,
	"4000000000000119": surgepay.DeclineProcessingError,
}

// cardCaptureDeclined authorizes but declines every capture (and every
// sale) with surgepay.DeclineGeneric: a settlement failure.
const cardCaptureDeclined = "4000000000000259"
