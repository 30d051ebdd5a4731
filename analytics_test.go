package surgepay

import (
	"testing"
	"time"
)

var analyticsAt = time.Date(2026, 3, 1, 23, 59, 59, 0, time.FixedZone("UTC-1", -3600)) // 2026-03-02 in UTC

func pay(status Status, authorized, captured, refunded int64) *Payment {
	return &Payment{ID: "pay_1", MerchantID: "mer_1", Currency: "eur", Status: status,
		AmountAuthorized: authorized, AmountCaptured: captured, AmountRefunded: refunded}
}

func TestAnalyticsOf(t *testing.T) {
	tests := []struct {
		name       string
		prev, next *Payment
		want       AnalyticsCounters // zero: no delta
	}{
		{"Sale", nil, pay(StatusSucceeded, 1000, 1000, 0),
			AnalyticsCounters{PaymentsCreated: 1, AuthorizedCount: 1, AmountAuthorized: 1000, CapturedCount: 1, AmountCaptured: 1000}},
		{"Authorization", nil, pay(StatusRequiresCapture, 1000, 0, 0),
			AnalyticsCounters{PaymentsCreated: 1, AuthorizedCount: 1, AmountAuthorized: 1000}},
		{"Declined", nil, pay(StatusFailed, 0, 0, 0), AnalyticsCounters{PaymentsCreated: 1, DeclinedCount: 1}},
		{"UnknownOutcome", nil, pay(StatusProcessing, 0, 0, 0), AnalyticsCounters{PaymentsCreated: 1}},
		{"PartialCapture", pay(StatusRequiresCapture, 1000, 0, 0), pay(StatusSucceeded, 1000, 600, 0),
			AnalyticsCounters{CapturedCount: 1, AmountCaptured: 600}},
		{"CaptureDeclinedLeavesPayment", pay(StatusRequiresCapture, 1000, 0, 0), pay(StatusRequiresCapture, 1000, 0, 0),
			AnalyticsCounters{}},
		{"Void", pay(StatusRequiresCapture, 1000, 0, 0), pay(StatusCanceled, 1000, 0, 0),
			AnalyticsCounters{VoidedCount: 1, AmountVoided: 1000}},
		{"PartialRefund", pay(StatusSucceeded, 1000, 1000, 0), pay(StatusPartiallyRefunded, 1000, 1000, 300),
			AnalyticsCounters{RefundedCount: 1, AmountRefunded: 300}},
		{"SecondRefund", pay(StatusPartiallyRefunded, 1000, 1000, 300), pay(StatusRefunded, 1000, 1000, 1000),
			AnalyticsCounters{RefundedCount: 1, AmountRefunded: 700}},
		{"StagedCaptureSettled", pay(StatusSucceeded, 1000, 1000, 0), pay(StatusSucceeded, 1000, 1000, 0),
			AnalyticsCounters{}},
		{"StagedCaptureDeclined", pay(StatusSucceeded, 1000, 1000, 0), pay(StatusFailed, 1000, 0, 0),
			AnalyticsCounters{FailedCount: 1, AmountFailed: 1000}},
		{"ReconciledSale", pay(StatusProcessing, 0, 0, 0), pay(StatusSucceeded, 1000, 1000, 0),
			AnalyticsCounters{AuthorizedCount: 1, AmountAuthorized: 1000, CapturedCount: 1, AmountCaptured: 1000}},
		{"ReconciledNotPerformed", pay(StatusProcessing, 0, 0, 0), pay(StatusFailed, 0, 0, 0),
			AnalyticsCounters{DeclinedCount: 1}},
		{"ReconciledVoid", pay(StatusProcessing, 1000, 0, 0), pay(StatusCanceled, 1000, 0, 0),
			AnalyticsCounters{VoidedCount: 1, AmountVoided: 1000}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, ok := AnalyticsOf(tt.prev, tt.next, analyticsAt)
			if ok != !tt.want.IsZero() {
				t.Fatalf("ok = %v, want %v (delta %+v)", ok, !tt.want.IsZero(), d)
			}
			if d.AnalyticsCounters != tt.want {
				t.Errorf("got %+v, want %+v", d.AnalyticsCounters, tt.want)
			}
			if ok && (d.MerchantID != "mer_1" || d.Date != "2026-03-02" || d.Currency != "eur") {
				t.Errorf("key %s %s %s, want mer_1 2026-03-02 eur", d.MerchantID, d.Date, d.Currency)
			}
		})
	}
}

// TestAnalyticsOfFailStagedCapture derives the settlement decline from the
// payment methods settlement uses, not from hand-made amounts.
func TestAnalyticsOfFailStagedCapture(t *testing.T) {
	p := pay(StatusSucceeded, 700, 700, 0)
	p.Transactions = []Transaction{{Type: TxAuthorization, Status: TxSucceeded, Amount: 700},
		{Type: TxCapture, Status: TxPending, Amount: 700}}
	next := p.Clone()
	if !next.FailStagedCapture("insufficient_funds", "declined", analyticsAt) {
		t.Fatal("no staged capture")
	}
	d, _ := AnalyticsOf(p, next, analyticsAt)
	if want := (AnalyticsCounters{FailedCount: 1, AmountFailed: 700}); d.AnalyticsCounters != want {
		t.Errorf("got %+v, want %+v", d.AnalyticsCounters, want)
	}
	settled := p.Clone()
	settled.SettleCapture("ref", analyticsAt)
	if d, ok := AnalyticsOf(p, settled, analyticsAt); ok {
		t.Errorf("a settled capture moved counters: %+v", d)
	}
}

func TestMergeAnalytics(t *testing.T) {
	d := func(m, date, cur string, created, amount int64) AnalyticsDelta {
		return AnalyticsDelta{MerchantID: m, Date: date, Currency: cur,
			AnalyticsCounters: AnalyticsCounters{PaymentsCreated: created, AmountCaptured: amount}}
	}
	got := MergeAnalytics([]AnalyticsDelta{d("b", "2026-01-01", "usd", 1, 5), d("a", "2026-01-02", "usd", 1, 1),
		d("a", "2026-01-01", "usd", 1, 2), d("b", "2026-01-01", "usd", 1, 7), d("a", "2026-01-01", "eur", 0, 0),
		d("a", "2026-01-01", "usd", 0, 3)})
	want := []AnalyticsDelta{d("a", "2026-01-01", "usd", 1, 5), d("a", "2026-01-02", "usd", 1, 1), d("b", "2026-01-01", "usd", 2, 12)}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("row %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestAnalyticsQueryValidate(t *testing.T) {
	tests := []struct {
		name                     string
		q                        AnalyticsQuery
		param, reason, wantCurCy string
	}{
		{"OK", AnalyticsQuery{From: "2026-01-01", To: "2026-01-01"}, "", "", ""},
		{"OKYear", AnalyticsQuery{From: "2024-01-01", To: "2024-12-31", Currency: "USD"}, "", "", "usd"},
		{"ErrFromMissing", AnalyticsQuery{To: "2026-01-01"}, "from", "missing", ""},
		{"ErrToMissing", AnalyticsQuery{From: "2026-01-01"}, "to", "missing", ""},
		{"ErrFromFormat", AnalyticsQuery{From: "2026-1-1", To: "2026-01-01"}, "from", "invalid_value", ""},
		{"ErrToNotADate", AnalyticsQuery{From: "2026-01-01", To: "2026-02-30"}, "to", "invalid_value", ""},
		{"ErrToBeforeFrom", AnalyticsQuery{From: "2026-01-02", To: "2026-01-01"}, "to", "invalid_range", ""},
		{"ErrRangeTooLong", AnalyticsQuery{From: "2025-01-01", To: "2026-01-02"}, "to", "range_too_long", ""},
		{"ErrCurrency", AnalyticsQuery{From: "2026-01-01", To: "2026-01-01", Currency: "usdx"}, "currency", "currency_unknown", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.q.Validate()
			if tt.param == "" {
				if err != nil || tt.q.Currency != tt.wantCurCy {
					t.Fatalf("got %v, currency %q; want nil, %q", err, tt.q.Currency, tt.wantCurCy)
				}
				return
			}
			e, ok := err.(*Error)
			if !ok || e.Code != EINVALID || e.Param != tt.param || e.Reason != tt.reason {
				t.Fatalf("got %v, want invalid %s %s", err, tt.param, tt.reason)
			}
		})
	}
}
