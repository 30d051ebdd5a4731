// Package sim is surgepay's card-network simulator: a surgepay.Provider that
// behaves like a real network, in process (New) or over HTTP (NewHandler,
// NewClient, and Main for the `surgepay simulator` command). It is a
// product feature for development, demos and load tests, not a test fake.
//
// It keeps what a network keeps: every operation under its idempotency key
// (a repeated key with the same parameters replays the first result; with
// different ones it is refused, NotPerformed with ErrKeyReused), and the
// money state of every authorization (authorized, captured once, voided,
// refunded). A request that breaks the money rules is declined with
// DeclineInvalidRequest and changes nothing.
//
// Test card numbers choose declines, and amounts choose faults:
//
//	4242424242424242, 5555555555554444, 378282246310005, any other Luhn-valid number   approved
//	4000000000000002  generic_decline      4000000000009995  insufficient_funds
//	4000000000000069  expired_card         4000000000000127  incorrect_cvc
//	4000000000000119  processing_error     4000000000000259  authorizes; every capture declined
//
// 3-D Secure cards (Card3DSChallenge, ...): with a ReturnURL (a browser's
// payment) a challenge card answers RequiresAction and its ActionURL, a
// page of Pages, where the cardholder authenticates or fails; without one
// it is declined authentication_required:
//
//	4000000000003220  challenge; then approved, or authentication_failed
//	4000008400001629  challenge; then generic_decline, or authentication_failed
//	4000000000003055  frictionless: approved at once
//	4000000000003238  not enrolled: approved at once
//	4000008400001280  authentication_unavailable at once
//
//	9101  timeout before the network: NotPerformed (ErrTimeout) after TimeoutLatency
//	9102  performed and stored, answer lost: Unknown (ErrAnswerLost)
//	9103  rate limited: NotPerformed (ErrRateLimited)
//	9104  declined, generic_decline
//	9105  a sale approved, then disputed: a signed webhook to OnEvent's sink
//
// Config adds a latency distribution and random faults at given rates, and
// can change at run time (SetConfig, PUT /v1/config). Effects and
// TotalEffects report what the network actually did, so tests can assert
// "charged exactly once".
//
// A challenge is held apart from the records until it ends: the
// cardholder's choice, or ChallengeTTL passing (abandoned,
// authentication_failed); only then is the authorization performed,
// stored under its key and counted. At most ChallengesMax are held.
//
// Limits: state is in memory and lost on restart (references carry a
// per-process tag, so a restarted simulator declines old ones as unknown).
// At most Config.RecordsMax operations are kept, each for at most
// Config.Retention; beyond either the oldest are forgotten (evicted or
// expired), so a replay of a forgotten key performs again and a capture,
// void or refund of a forgotten authorization is declined as unknown. The simulator never checks card expiry dates or CVCs against
// anything: only the test numbers decide. docs/simulator.md is the
// operator's guide.
package sim
