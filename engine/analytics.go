package engine

import (
	"context"

	"github.com/surgepay/surgepay"
)

// countAnalytics adds to w what storing next over prev (nil: a new
// payment) adds to the merchant's daily counters, unless the merchant's
// analytics are "off" when the change is stored. The deltas commit with w
// or not at all, so a Write refused by a guard counts nothing, and an
// operation retried after losing a version race counts once.
func (e *Engine) countAnalytics(w *surgepay.Write, prev, next *surgepay.Payment) {
	if e.SettingsFor(next.MerchantID).Analytics == "off" {
		return
	}
	if d, ok := surgepay.AnalyticsOf(prev, next, e.now()); ok {
		w.Analytics = append(w.Analytics, d)
	}
}

// Analytics returns the call's merchant's counters for the days of q, one
// per day and currency that saw a change. It returns EINVALID naming the
// field for a bad query (see surgepay.AnalyticsQuery.Validate).
func (e *Engine) Analytics(ctx context.Context, call *Call, q surgepay.AnalyticsQuery) ([]*surgepay.AnalyticsDay, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	return e.store.ListAnalytics(ctx, call.MerchantID, q)
}
