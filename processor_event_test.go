package surgepay

import "testing"

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

func TestPaymentDispute(t *testing.T) {
	p := &Payment{Transactions: []Transaction{{Type: TxAuthorization}, {Type: TxDispute, ProviderRef: "s:dp_1", Status: "lost"},
		{Type: TxRefund}, {Type: TxDispute, ProviderRef: "s:dp_2", Status: "needs_response"}}}
	if d := p.Dispute(); d == nil || d.ProviderRef != "s:dp_2" {
		t.Fatalf("Dispute: got %+v, want the latest, s:dp_2", d)
	}
	if d := (&Payment{}).Dispute(); d != nil {
		t.Fatalf("Dispute of a payment without one: %+v", d)
	}
}
