package sim

import "github.com/surgepay/surgepay"

// 3-D Secure test cards, Stripe's numbers where Stripe has one, so that a
// test written against the simulator reads like one against Stripe's test
// mode. docs/simulator.md carries the same table.
const (
	// Card3DSChallenge: the issuer asks for a challenge; the cardholder
	// authenticates (approved, as any card) or fails
	// (surgepay.DeclineAuthenticationFailed) on the challenge page.
	Card3DSChallenge = "4000000000003220"
	// Card3DSChallengeDeclined: a challenge, then, once authenticated, the
	// issuer declines the authorization with surgepay.DeclineGeneric.
	Card3DSChallengeDeclined = "4000008400001629"
	// Card3DSFrictionless: authenticated without a challenge (the issuer's
	// risk check is enough): approved at once, no RequiresAction.
	Card3DSFrictionless = "4000000000003055"
	// Card3DSNotEnrolled: the card takes no part in 3-D Secure: approved
	// without authentication, as 4242424242424242 is.
	Card3DSNotEnrolled = "4000000000003238"
	// Card3DSUnavailable: the issuer's authentication service does not
	// answer: declined surgepay.DeclineAuthenticationUnavailable at once,
	// nothing charged (Stripe's 4000008400001280 fails the same way).
	Card3DSUnavailable = "4000008400001280"
)

// secure is what 3-D Secure does for a card.
type secure uint8

const (
	secureNone         secure = iota // not a 3-D Secure test card: no authentication.
	secureNotEnrolled                // named for the docs and tests; as secureNone.
	secureFrictionless               // authenticated without the cardholder: as secureNone.
	secureChallenge                  // the cardholder must pass a challenge first.
	secureUnavailable                // authentication cannot happen: declined at once.
)

// card is what a test card number decides: the decline code of every
// authorization with it ("" approves), after any 3-D Secure.
type card struct {
	decline string
	secure  secure
}

// cards maps the Stripe-style test card numbers to what they decide. Any
// other number that passes Luhn is approved without authentication. One
// map, so that an ordinary authorization looks its number up once.
var cards = map[string]card{
	"4000000000000002": {decline: surgepay.DeclineGeneric},
	"4000000000009995": {decline: surgepay.DeclineInsufficientFunds},
	"4000000000000069": {decline: surgepay.DeclineExpiredCard},
	"4000000000000127": {decline: surgepay.DeclineIncorrectCVC},
	"4000000000000119": {decline: surgepay.DeclineProcessingError},

	Card3DSChallenge:         {secure: secureChallenge},
	Card3DSChallengeDeclined: {secure: secureChallenge, decline: surgepay.DeclineGeneric},
	Card3DSFrictionless:      {secure: secureFrictionless},
	Card3DSNotEnrolled:       {secure: secureNotEnrolled},
	Card3DSUnavailable:       {secure: secureUnavailable},
}

// cardCaptureDeclined authorizes but declines every capture (and every
// sale) with surgepay.DeclineGeneric: a settlement failure.
const cardCaptureDeclined = "4000000000000259"
