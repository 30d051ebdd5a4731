package main

import (
	"context"
	"time"
)

// checkAnalytics compares the merchant's analytics counters, summed over
// the run's days, with the payments the server holds after the SIGKILLs:
// the counters commit with the payments, so they match exactly, neither a
// payment acknowledged and not counted nor one counted and not stored.
func (r *crashRun) checkAnalytics(ctx context.Context) {
	type counters struct {
		PaymentsCreated  int64 `json:"payments_created"`
		AuthorizedCount  int64 `json:"authorized_count"`
		AmountAuthorized int64 `json:"amount_authorized"`
		CapturedCount    int64 `json:"captured_count"`
		AmountCaptured   int64 `json:"amount_captured"`
		DeclinedCount    int64 `json:"declined_count"`
		VoidedCount      int64 `json:"voided_count"`
		AmountVoided     int64 `json:"amount_voided"`
		RefundedCount    int64 `json:"refunded_count"`
		AmountRefunded   int64 `json:"amount_refunded"`
	}
	var want counters
	for _, p := range r.listAll(ctx) {
		want.PaymentsCreated++
		if p.Status == "failed" || p.Status == "processing" {
			continue // checkNetwork reports these: the simulator approves everything
		}
		want.AuthorizedCount++
		want.AmountAuthorized += p.AmountTotal
		if p.AmountCaptured > 0 {
			want.CapturedCount++
			want.AmountCaptured += p.AmountCaptured
		}
		if p.Status == "canceled" {
			want.VoidedCount++
			want.AmountVoided += p.AmountTotal
		}
		for _, tx := range p.Transactions {
			if tx.Type == "refund" && tx.Status == "succeeded" {
				want.RefundedCount++
			}
		}
		want.AmountRefunded += p.AmountRefunded
	}
	now := time.Now().UTC()
	var list struct {
		Data []counters `json:"data"`
	}
	r.api.must(r.t, "GET", "/v1/analytics?from="+now.AddDate(0, 0, -1).Format(time.DateOnly)+"&to="+
		now.AddDate(0, 0, 1).Format(time.DateOnly), "", nil, 200, &list)
	var got counters
	for _, d := range list.Data {
		got.PaymentsCreated += d.PaymentsCreated
		got.AuthorizedCount += d.AuthorizedCount
		got.AmountAuthorized += d.AmountAuthorized
		got.CapturedCount += d.CapturedCount
		got.AmountCaptured += d.AmountCaptured
		got.DeclinedCount += d.DeclinedCount
		got.VoidedCount += d.VoidedCount
		got.AmountVoided += d.AmountVoided
		got.RefundedCount += d.RefundedCount
		got.AmountRefunded += d.AmountRefunded
	}
	if got != want {
		r.errorf("analytics counters after SIGKILLs differ from the payments stored:\ncounters %+v\npayments %+v", got, want)
	}
	r.t.Logf("analytics: %d payments created, %d captured, %d voided, %d refunds", got.PaymentsCreated,
		got.CapturedCount, got.VoidedCount, got.RefundedCount)
}
