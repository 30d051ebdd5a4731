package api

import (
	"net/http"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/engine"
)

// GET /v1/analytics: the merchant's daily payment counters (see
// docs/analytics.md).

// analyticsDayJSON is one day's counters in one currency. Amounts are
// integers in the currency's minor unit.
type analyticsDayJSON struct {
	Object           string `json:"object"`
	Date             string `json:"date"`
	Currency         string `json:"currency"`
	PaymentsCreated  int64  `json:"payments_created"`
	AuthorizedCount  int64  `json:"authorized_count"`
	AmountAuthorized int64  `json:"amount_authorized"`
	CapturedCount    int64  `json:"captured_count"`
	AmountCaptured   int64  `json:"amount_captured"`
	DeclinedCount    int64  `json:"declined_count"`
	FailedCount      int64  `json:"failed_count"`
	AmountFailed     int64  `json:"amount_failed"`
	VoidedCount      int64  `json:"voided_count"`
	AmountVoided     int64  `json:"amount_voided"`
	RefundedCount    int64  `json:"refunded_count"`
	AmountRefunded   int64  `json:"amount_refunded"`
}

func analyticsDayOf(d *surgepay.AnalyticsDay) analyticsDayJSON {
	c := &d.AnalyticsCounters
	return analyticsDayJSON{Object: "analytics_day", Date: d.Date, Currency: d.Currency,
		PaymentsCreated: c.PaymentsCreated, AuthorizedCount: c.AuthorizedCount, AmountAuthorized: c.AmountAuthorized,
		CapturedCount: c.CapturedCount, AmountCaptured: c.AmountCaptured, DeclinedCount: c.DeclinedCount,
		FailedCount: c.FailedCount, AmountFailed: c.AmountFailed, VoidedCount: c.VoidedCount,
		AmountVoided: c.AmountVoided, RefundedCount: c.RefundedCount, AmountRefunded: c.AmountRefunded}
}

// getAnalytics answers ?from=YYYY-MM-DD&to=YYYY-MM-DD[&currency=usd]: one
// row per day and currency with a change, by date then currency, in one
// page (the range spans at most surgepay.AnalyticsDaysMax days).
func (s *Server) getAnalytics(w http.ResponseWriter, r *http.Request, call *engine.Call) error {
	q := r.URL.Query()
	days, err := s.eng.Analytics(r.Context(), call,
		surgepay.AnalyticsQuery{From: q.Get("from"), To: q.Get("to"), Currency: q.Get("currency")})
	if err != nil {
		return err
	}
	return s.write(w, r, nil, listOf(days, false, analyticsDayOf), nil)
}
