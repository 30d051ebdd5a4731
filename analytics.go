package surgepay

import (
	"cmp"
	"slices"
	"time"
)

// AnalyticsCounters are a merchant's payment counters for one UTC day and
// one currency. Amounts are exact integers in the currency's minor units.
// Every counter only grows: a payment that fails after it was counted as
// captured (a staged capture declined at settlement) adds to FailedCount
// and AmountFailed; it does not take back AmountCaptured, just as a refund
// adds to AmountRefunded. So what the merchant kept of a day's captures is
// AmountCaptured - AmountRefunded - AmountFailed.
type AnalyticsCounters struct {
	// PaymentsCreated counts payments stored, whatever their outcome.
	PaymentsCreated int64
	// AuthorizedCount and AmountAuthorized count authorizations the
	// network approved (tax included).
	AuthorizedCount  int64
	AmountAuthorized int64
	// CapturedCount and AmountCaptured count captures as the API reports
	// them: a sale's at once, a manual capture's when it is made, a
	// streamlined sale's when it is answered (settlement confirms it later,
	// or FailedCount records that it did not).
	CapturedCount  int64
	AmountCaptured int64
	// DeclinedCount counts payments that failed without an authorization:
	// declined by the network, or never performed (after an unknown outcome).
	DeclinedCount int64
	// FailedCount and AmountFailed count payments that failed after their
	// authorization: a staged capture declined at settlement. AmountFailed
	// is what had been counted as captured.
	FailedCount  int64
	AmountFailed int64
	// VoidedCount and AmountVoided count authorizations voided, by the
	// amount they held.
	VoidedCount  int64
	AmountVoided int64
	// RefundedCount and AmountRefunded count refunds made.
	RefundedCount  int64
	AmountRefunded int64
}

// Add adds d to c.
func (c *AnalyticsCounters) Add(d AnalyticsCounters) {
	c.PaymentsCreated += d.PaymentsCreated
	c.AuthorizedCount += d.AuthorizedCount
	c.AmountAuthorized += d.AmountAuthorized
	c.CapturedCount += d.CapturedCount
	c.AmountCaptured += d.AmountCaptured
	c.DeclinedCount += d.DeclinedCount
	c.FailedCount += d.FailedCount
	c.AmountFailed += d.AmountFailed
	c.VoidedCount += d.VoidedCount
	c.AmountVoided += d.AmountVoided
	c.RefundedCount += d.RefundedCount
	c.AmountRefunded += d.AmountRefunded
}

// IsZero reports whether every counter is zero.
func (c AnalyticsCounters) IsZero() bool { return c == AnalyticsCounters{} }

// AnalyticsDelta is what one stored payment change adds to its merchant's
// counters of one day and currency. It rides in the payment's Write
// (Write.Analytics), so the counters move in the same transaction as the
// payment, or not at all.
type AnalyticsDelta struct {
	MerchantID string
	Date       string // the UTC day of the change, YYYY-MM-DD
	Currency   string // lower case, as on the payment
	AnalyticsCounters
}

// AnalyticsDay is a merchant's counters of one day in one currency, as
// read back.
type AnalyticsDay struct {
	Date     string // YYYY-MM-DD, UTC
	Currency string
	AnalyticsCounters
}

// AnalyticsOf returns the delta of storing next over prev (nil for a new
// payment) at time at, and false if the change moves no counter (a declined
// capture, refund or void leaves the payment as it was; settlement
// confirming a staged capture counted it already). It derives the delta
// from the payment's status and amounts, not from its transactions, so
// that every path counts alike: a sale whose unknown outcome reconciliation
// resolves has no capture transaction, only AmountCaptured.
func AnalyticsOf(prev, next *Payment, at time.Time) (AnalyticsDelta, bool) {
	var was Payment // a new payment: status "", no amounts
	if prev != nil {
		was = *prev
	}
	var c AnalyticsCounters
	if prev == nil {
		c.PaymentsCreated = 1
	}
	if d := next.AmountAuthorized - was.AmountAuthorized; d > 0 {
		c.AuthorizedCount, c.AmountAuthorized = 1, d
	}
	if d := next.AmountCaptured - was.AmountCaptured; d > 0 {
		c.CapturedCount, c.AmountCaptured = 1, d
	}
	if d := next.AmountRefunded - was.AmountRefunded; d > 0 {
		c.RefundedCount, c.AmountRefunded = 1, d
	}
	if next.Status == StatusRequiresPaymentMethod && len(next.Transactions) > len(was.Transactions) {
		c.DeclinedCount = 1 // a browser's confirm declined; the shopper may try again
	}
	if next.Status == StatusCanceled && was.Status != StatusCanceled && next.AmountAuthorized > 0 {
		c.VoidedCount, c.AmountVoided = 1, next.AmountAuthorized
	}
	if next.Status == StatusFailed && was.Status != StatusFailed {
		if was.AmountAuthorized > 0 {
			c.FailedCount, c.AmountFailed = 1, was.AmountCaptured
		} else {
			c.DeclinedCount = 1
		}
	}
	if c.IsZero() {
		return AnalyticsDelta{}, false
	}
	return AnalyticsDelta{MerchantID: next.MerchantID, Date: at.UTC().Format(time.DateOnly),
		Currency: next.Currency, AnalyticsCounters: c}, true
}

// MergeAnalytics sums deltas by (merchant, date, currency) and returns one
// per key, sorted by key, without zero ones: what a group commit applies in
// one statement, its rows in one order so that concurrent batches lock
// them in one order.
func MergeAnalytics(ds []AnalyticsDelta) []AnalyticsDelta {
	out := make([]AnalyticsDelta, 0, len(ds))
	for _, d := range ds {
		if !d.IsZero() {
			out = append(out, d)
		}
	}
	slices.SortFunc(out, compareAnalyticsKey)
	n := 0
	for i := range out {
		if n > 0 && compareAnalyticsKey(out[n-1], out[i]) == 0 {
			out[n-1].Add(out[i].AnalyticsCounters)
			continue
		}
		out[n] = out[i]
		n++
	}
	return out[:n]
}

func compareAnalyticsKey(a, b AnalyticsDelta) int {
	return cmp.Or(cmp.Compare(a.MerchantID, b.MerchantID), cmp.Compare(a.Date, b.Date),
		cmp.Compare(a.Currency, b.Currency))
}

// AnalyticsQuery selects a merchant's counters: the days From to To
// (YYYY-MM-DD, UTC, both included) and, if set, one currency.
type AnalyticsQuery struct {
	From, To string
	Currency string
}

// Validate checks q and canonicalises its currency. The range must hold at
// most AnalyticsDaysMax days, which bounds the answer (one row per day and
// currency that saw a change).
func (q *AnalyticsQuery) Validate() error {
	from, err := parseDate("from", q.From)
	if err != nil {
		return err
	}
	to, err := parseDate("to", q.To)
	if err != nil {
		return err
	}
	switch days := int(to.Sub(from)/(24*time.Hour)) + 1; {
	case days < 1:
		return Invalid("to", "invalid_range", "to must not be before from")
	case days > AnalyticsDaysMax:
		return Invalid("to", "range_too_long", "from and to may span at most %d days", AnalyticsDaysMax)
	}
	if q.Currency != "" {
		cur, err := ValidateCurrency("currency", q.Currency)
		if err != nil {
			return err
		}
		q.Currency = cur
	}
	return nil
}

// parseDate parses a YYYY-MM-DD day; param names the field.
func parseDate(param, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, Invalid(param, "missing", "%s is required (YYYY-MM-DD)", param)
	}
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		return time.Time{}, Invalid(param, "invalid_value", "%s must be a date as YYYY-MM-DD", param)
	}
	return t, nil
}
