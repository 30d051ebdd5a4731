package surgepay

import (
	"reflect"
	"testing"
	"time"
)

// TestWebhookEventTypeDisputes: a dispute's audit events name the
// merchant's webhook, whatever the payment's status (it does not move).
func TestWebhookEventTypeDisputes(t *testing.T) {
	p := &Payment{Status: StatusSucceeded}
	tests := []struct{ op, want string }{
		{ProcessorEventDisputeCreated, WebhookPaymentDisputed},
		{ProcessorEventDisputeUpdated, WebhookPaymentDispute},
		{ProcessorEventDisputeClosed, WebhookPaymentDispute},
		{TxRefund, WebhookPaymentUpdated}, // no refund transaction on p: an update
	}
	for _, tt := range tests {
		ev := []*Event{{Type: tt.op, FromStatus: StatusSucceeded, ToStatus: StatusSucceeded}}
		if got := WebhookEventType(ev, p); got != tt.want {
			t.Errorf("%s: got %s, want %s", tt.op, got, tt.want)
		}
	}
}

// TestPaymentDisputesSecondKeepsFirst: a payment keeps every dispute, in
// the order they were opened, each in its latest state; a second dispute
// replaced the first (lost) one on the payment.
func TestPaymentDisputesSecondKeepsFirst(t *testing.T) {
	at := func(s int64) time.Time { return time.Unix(s, 0).UTC() }
	p := &Payment{Transactions: []Transaction{{Type: TxAuthorization},
		{Type: TxDispute, ProviderRef: "s:dp_1", Status: "needs_response", Amount: 1000, Message: "fraudulent", Created: at(10)},
		{Type: TxRefund},
		{Type: TxDispute, ProviderRef: "s:dp_1", Status: "lost", Amount: 1000, Created: at(20)},
		{Type: TxDispute, ProviderRef: "s:dp_2", Status: "needs_response", Amount: 400, Message: "duplicate", Created: at(30)},
		{Type: TxDispute, ProviderRef: "s:dp_2", Status: "under_review", Amount: 300, Message: "duplicate", Created: at(40)}}}
	want := []Dispute{
		{ID: "s:dp_1", Status: "lost", Reason: "fraudulent", Amount: 1000, Created: at(10), Updated: at(20)},
		{ID: "s:dp_2", Status: "under_review", Reason: "duplicate", Amount: 300, Created: at(30), Updated: at(40)},
	}
	if got := p.Disputes(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Disputes: got %+v, want %+v", got, want)
	}
	if d := p.Dispute("s:dp_1"); d == nil || d.Status != "lost" {
		t.Fatalf("Dispute(s:dp_1): got %+v, want the lost one", d)
	}
	if d := p.Dispute("s:dp_3"); d != nil {
		t.Fatalf("Dispute(s:dp_3): got %+v, want nil", d)
	}
	if ds := (&Payment{}).Disputes(); ds != nil {
		t.Fatalf("Disputes of a payment without one: got %+v, want none", ds)
	}
}

// TestPaymentDisputesChangedInPlace: a payment written by an earlier
// version holds one transaction per dispute, changed in place; it reads
// as that dispute, created and updated at once.
func TestPaymentDisputesChangedInPlace(t *testing.T) {
	created := time.Unix(10, 0).UTC()
	p := &Payment{Transactions: []Transaction{{Type: TxDispute, ProviderRef: "s:dp_1", Status: "won", Amount: 1000,
		Message: "fraudulent", Created: created}}}
	want := []Dispute{{ID: "s:dp_1", Status: "won", Reason: "fraudulent", Amount: 1000, Created: created, Updated: created}}
	if got := p.Disputes(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Disputes: got %+v, want %+v", got, want)
	}
}
