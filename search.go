package surgepay

import (
	"context"
	"encoding/binary"
	"time"
)

// Bounds of the operators' searches (the console, docs/console.md).
const (
	// PaymentSearchLimitMax bounds a page of a payment search.
	PaymentSearchLimitMax = ListLimitMax
	// PaymentSearchExamineMax bounds the payments one SearchPayments call
	// reads to fill a page: a filter without an index (an amount, a
	// card's last 4, a processor reference) is a scan, newest first, that
	// stops there and says where to go on (PaymentSearchPage.Next). At
	// 10,000 rows a statement stays in the milliseconds, so no read holds
	// the embedded store's WAL checkpoints back for long
	// (docs/architecture.md), and the write tables get no index whose
	// bytes every sale would pay for.
	PaymentSearchExamineMax = 10_000
	// PaymentSearchCardsMax bounds the cards a search by a card's last 4
	// follows through the index of cards by last 4 to their customers'
	// payments (and those payments by PaymentSearchExamineMax); beyond
	// either, the search is the bounded scan. A merchant with 10 million
	// saved cards has about 1,000 of each last 4.
	PaymentSearchCardsMax = 2_000
	// CustomersByEmailMax bounds the customers FindCustomersByEmail
	// returns.
	CustomersByEmailMax = 10
	// PaymentSearchIDMargin widens the range of IDs a date range reads:
	// an ID holds the time it was made (NewID), and a payment's Created is
	// within moments of it; a retried create that adopts the ID of its
	// first attempt (docs/architecture.md) can be older by as much as
	// the retry's delay. Created itself is then compared exactly.
	PaymentSearchIDMargin = 10 * time.Minute
)

// OperatorConnsMax is the size of the stores' pool of connections for
// the operators' searches (OperatorSearcher), apart from the API's: a
// search never waits for the API's connections, nor the API for a
// search's. One: the searches run one at a time, so they take at most
// one core (SQLite runs in the server's process, PostgreSQL in one
// backend) whatever the operators do; with 4 operators searching in a
// loop on a pool of 2, the API's p99 was 4.2 times its own on 2 cores
// (bench/RESULTS.md). The console's own bound (ConsoleInflightMax)
// bounds the requests waiting for it.
const OperatorConnsMax = 1

// PaymentSearch selects one merchant's payments for an operator. Zero
// fields do not filter. Status and the dates narrow the range of the
// index read; the other filters are checked on each payment read, at
// most ExamineMax of them per call.
type PaymentSearch struct {
	MerchantID string // required
	Status     Status
	// AmountGTE and AmountLTE bound the payment's total (Amount plus
	// AmountTax), in minor units; 0 does not bound.
	AmountGTE, AmountLTE int64
	// Last4 is the last 4 digits of the payment's card (a payment method
	// deleted since is not found by it).
	Last4 string
	// Ref is a processor's reference of the authorization, qualified
	// ("stripe_eu:pi_…") or as the processor shows it ("pi_…").
	Ref string
	// CreatedGTE and CreatedBefore bound Created (from inclusive, to
	// exclusive).
	CreatedGTE, CreatedBefore time.Time
	// StartingAfter returns payments older than this payment ID (a
	// PaymentSearchPage.Next).
	StartingAfter string
	Limit         int // 1..PaymentSearchLimitMax
	// ExamineMax bounds the payments read: 1..PaymentSearchExamineMax, 0
	// for PaymentSearchExamineMax.
	ExamineMax int
}

// Validate checks q's bounds (the console names its own fields first).
func (q *PaymentSearch) Validate() error {
	switch {
	case q.MerchantID == "":
		return Invalid("merchant", "parameter_missing", "merchant is required")
	case q.Limit < 1 || q.Limit > PaymentSearchLimitMax:
		return Invalid("limit", "invalid_value", "limit must be from 1 to %d", PaymentSearchLimitMax)
	case q.ExamineMax < 0 || q.ExamineMax > PaymentSearchExamineMax:
		return Invalid("examine", "invalid_value", "examine must be from 1 to %d", PaymentSearchExamineMax)
	case q.Status != "" && !q.Status.Valid():
		return Invalid("status", "invalid_value", "status %q is not a payment status", q.Status)
	case q.AmountGTE < 0 || q.AmountLTE < 0:
		return Invalid("amount", "invalid_value", "amounts are not negative")
	}
	return nil
}

// Examine returns the bound on payments read: ExamineMax, or
// PaymentSearchExamineMax for 0.
func (q *PaymentSearch) Examine() int {
	if q.ExamineMax <= 0 {
		return PaymentSearchExamineMax
	}
	return q.ExamineMax
}

// IDRange returns the bounds of the payment IDs q reads, from inclusive
// to exclusive ("" for none): the dates widened by
// PaymentSearchIDMargin, and StartingAfter.
func (q *PaymentSearch) IDRange() (from, before string) {
	if !q.CreatedGTE.IsZero() {
		from = IDAt("pay", q.CreatedGTE.Add(-PaymentSearchIDMargin))
	}
	if !q.CreatedBefore.IsZero() {
		before = IDAt("pay", q.CreatedBefore.Add(PaymentSearchIDMargin))
	}
	if q.StartingAfter != "" && (before == "" || q.StartingAfter < before) {
		before = q.StartingAfter
	}
	return from, before
}

// PaymentSearchPage is a page of a payment search.
type PaymentSearchPage struct {
	Payments []*Payment // newest first
	// Next is where the search goes on (the next call's StartingAfter);
	// "" when it is done.
	Next string
	// Bounded is true when the page stopped at ExamineMax payments read
	// before it was full: Next goes on from the last one read, and older
	// matches may follow.
	Bounded bool
}

// OperatorSearcher is the optional capability of a store that serves the
// operators' console its searches, each a few bounded statements.
type OperatorSearcher interface {
	// SearchPayments returns a page of the payments q selects (q is
	// valid), newest first. With Last4, through the index of cards by
	// last 4 when at most PaymentSearchCardsMax cards, and at most
	// q.Examine() payments of their customers in the range, lead there.
	// Else it reads at most q.Examine() payments in the range of q's
	// merchant, status and dates: when these run out before the page is
	// full, Bounded is set and Next is the last one read.
	SearchPayments(ctx context.Context, q PaymentSearch) (*PaymentSearchPage, error)
	// FindCustomersByEmail returns up to CustomersByEmailMax of a
	// merchant's customers whose email is email (ASCII case ignored),
	// newest first, through the index of emails.
	FindCustomersByEmail(ctx context.Context, merchantID, email string) ([]*Customer, error)
}

// IDAt returns the smallest ID of prefix that NewID could make at t: IDs
// of a prefix made before t sort before it, those made at or after t do
// not.
func IDAt(prefix string, t time.Time) string {
	ms := uint64(max(t.UnixMilli(), 0))
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], ms<<16)
	hi, lo := binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])
	var digits [26]byte
	for i := 25; i >= 0; i-- {
		digits[i] = crockford[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return prefix + "_" + string(digits[:])
}
