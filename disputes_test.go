package surgepay

import (
	"errors"
	"testing"
	"time"
)

// TestDisputeCursorRoundTrip: a cursor reads back as it was written,
// with a deadline or without; anything else is EINVALID on "after"; a
// cursor is never taken for a card number by the console's check.
func TestDisputeCursorRoundTrip(t *testing.T) {
	for _, c := range []DisputeCursor{
		{DueBy: time.Date(2026, 3, 1, 12, 0, 0, 123_456_000, time.UTC), ID: "stripe_eu:dp_1", MerchantID: "mch_1"},
		{ID: "dp_4242424242424242", MerchantID: "mch_2"}, // no deadline
	} {
		s := c.String()
		got, err := ParseDisputeCursor(s)
		if err != nil || got != c {
			t.Fatalf("ParseDisputeCursor(%q) = %+v, %v; want %+v", s, got, err, c)
		}
		if TextHasCardNumber(s) {
			t.Fatalf("cursor %q looks like a card number", s)
		}
	}
	for _, bad := range []string{"x!", "bm8", DisputeCursor{ID: "", MerchantID: "m"}.String(), "YWJjAGRwXzEAbWNoXzE"} {
		if _, err := ParseDisputeCursor(bad); ErrorCode(err) != EINVALID || errParam(err) != "after" {
			t.Fatalf("ParseDisputeCursor(%q): %v, want EINVALID on after", bad, err)
		}
	}
}

// TestDisputeCursorBefore: by deadline, unknown last, then ID, then
// merchant.
func TestDisputeCursorBefore(t *testing.T) {
	at := func(h int) time.Time { return time.Date(2026, 3, 1, h, 0, 0, 0, time.UTC) }
	order := []DisputeCursor{
		{DueBy: at(1), ID: "dp_b", MerchantID: "m1"},
		{DueBy: at(2), ID: "dp_a", MerchantID: "m2"},
		{DueBy: at(2), ID: "dp_b", MerchantID: "m1"},
		{DueBy: at(2), ID: "dp_b", MerchantID: "m2"},
		{ID: "dp_a", MerchantID: "m1"},
	}
	for i := range order {
		for j := range order {
			if got := order[i].Before(order[j]); got != (i < j) {
				t.Fatalf("%+v before %+v = %v, want %v", order[i], order[j], got, i < j)
			}
		}
	}
}

// TestDisputeQueryValidate: known states once each, a bounded limit, a
// cursor that parses.
func TestDisputeQueryValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		q     DisputeQuery
		param string // "": valid
	}{
		{"OK", DisputeQuery{Limit: 25, Statuses: DisputeStatusesNeedingResponse}, ""},
		{"OKAny", DisputeQuery{Limit: DisputeListLimitMax}, ""},
		{"ErrLimitZero", DisputeQuery{}, "limit"},
		{"ErrLimitAboveMax", DisputeQuery{Limit: DisputeListLimitMax + 1}, "limit"},
		{"ErrStatusUnknown", DisputeQuery{Limit: 1, Statuses: []string{"succeeded"}}, "status"},
		{"ErrStatusTwice", DisputeQuery{Limit: 1, Statuses: []string{DisputeWon, DisputeWon}}, "status"},
		{"ErrCursor", DisputeQuery{Limit: 1, After: "nope!"}, "after"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.q.Validate()
			if tc.param == "" {
				if err != nil {
					t.Fatalf("Validate: %v, want nil", err)
				}
				return
			}
			if ErrorCode(err) != EINVALID || errParam(err) != tc.param {
				t.Fatalf("Validate: %v, want EINVALID on %s", err, tc.param)
			}
		})
	}
}

// TestWriteValidateDisputes: a Write's disputes go with the payment
// change that records them, at most DisputesPerWriteMax.
func TestWriteValidateDisputes(t *testing.T) {
	p := &Payment{ID: "pay_1", MerchantID: "mch_1"}
	d := &Dispute{ID: "dp_1", MerchantID: "mch_1", PaymentID: "pay_1"}
	many := make([]*Dispute, DisputesPerWriteMax+1)
	for i := range many {
		many[i] = d
	}
	for _, tc := range []struct {
		name string
		w    Write
		ok   bool
	}{
		{"OK", Write{PaymentUpdate: p, Disputes: []*Dispute{d}}, true},
		{"ErrNoPayment", Write{Disputes: []*Dispute{d}}, false},
		{"ErrOtherPayment", Write{PaymentUpdate: &Payment{ID: "pay_2", MerchantID: "mch_1"}, Disputes: []*Dispute{d}}, false},
		{"ErrOtherMerchant", Write{PaymentUpdate: &Payment{ID: "pay_1", MerchantID: "mch_2"}, Disputes: []*Dispute{d}}, false},
		{"ErrNoID", Write{PaymentUpdate: p, Disputes: []*Dispute{{MerchantID: "mch_1", PaymentID: "pay_1"}}}, false},
		{"ErrTooMany", Write{PaymentUpdate: p, Disputes: many}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.w.Validate()
			if tc.ok != (err == nil) || (!tc.ok && !errors.Is(err, ErrWriteInvalid)) {
				t.Fatalf("Validate: %v, want ok %v (else ErrWriteInvalid)", err, tc.ok)
			}
		})
	}
}

// TestPaymentDisputesDeadline: a dispute's deadline is the latest one its
// transactions gave (a change without one keeps it); its payment's IDs
// and currency go with it.
func TestPaymentDisputesDeadline(t *testing.T) {
	at := func(h int) time.Time { return time.Date(2026, 3, 1, h, 0, 0, 0, time.UTC) }
	p := &Payment{ID: "pay_1", MerchantID: "mch_1", Currency: "eur", Transactions: []Transaction{
		{Type: TxDispute, ProviderRef: "dp_1", Status: DisputeWarningNeedsResponse, Created: at(1), DueBy: at(10)},
		{Type: TxDispute, ProviderRef: "dp_1", Status: DisputeNeedsResponse, Created: at(2), DueBy: at(20)},
		{Type: TxDispute, ProviderRef: "dp_1", Status: DisputeUnderReview, Created: at(3)}}}
	d := p.Dispute("dp_1")
	if d == nil || !d.DueBy.Equal(at(20)) || d.Status != DisputeUnderReview || d.MerchantID != "mch_1" ||
		d.PaymentID != "pay_1" || d.Currency != "eur" {
		t.Fatalf("Dispute(dp_1) = %+v; want under_review, due at 20:00, of pay_1 in eur", d)
	}
}

// errParam is the Param of a domain error, "" for another.
func errParam(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Param
	}
	return ""
}
