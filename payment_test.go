package surgepay

import (
	"testing"
)

// allowed is the state machine as documented in docs/state-machine.md; the
// test fails if the code and the document drift apart.
var allowed = map[[2]Status]bool{
	{"", StatusRequiresCapture}: true, {"", StatusSucceeded}: true, {"", StatusFailed}: true, {"", StatusProcessing}: true,
	{StatusRequiresCapture, StatusSucceeded}: true, {StatusRequiresCapture, StatusCanceled}: true, {StatusRequiresCapture, StatusProcessing}: true,
	{StatusSucceeded, StatusFailed}: true, {StatusSucceeded, StatusPartiallyRefunded}: true, {StatusSucceeded, StatusRefunded}: true, {StatusSucceeded, StatusProcessing}: true,
	{StatusPartiallyRefunded, StatusPartiallyRefunded}: true, {StatusPartiallyRefunded, StatusRefunded}: true, {StatusPartiallyRefunded, StatusProcessing}: true,
	{StatusProcessing, StatusRequiresCapture}: true, {StatusProcessing, StatusSucceeded}: true, {StatusProcessing, StatusFailed}: true,
	{StatusProcessing, StatusCanceled}: true, {StatusProcessing, StatusPartiallyRefunded}: true, {StatusProcessing, StatusRefunded}: true,
	// Browser checkout (docs/checkout.md).
	{"", StatusRequiresPaymentMethod}: true, {StatusRequiresPaymentMethod, StatusRequiresPaymentMethod}: true,
	{StatusRequiresPaymentMethod, StatusRequiresCapture}: true, {StatusRequiresPaymentMethod, StatusSucceeded}: true,
	{StatusRequiresPaymentMethod, StatusProcessing}: true, {StatusRequiresPaymentMethod, StatusCanceled}: true,
	{StatusProcessing, StatusRequiresPaymentMethod}: true,
	// 3-D Secure.
	{StatusProcessing, StatusRequiresAction}: true, {StatusRequiresAction, StatusRequiresPaymentMethod}: true,
	{StatusRequiresAction, StatusRequiresCapture}: true, {StatusRequiresAction, StatusSucceeded}: true,
}

func TestCanTransitionEveryPair(t *testing.T) {
	from := append([]Status{""}, Statuses...)
	for _, f := range from {
		for _, to := range Statuses {
			if got, want := CanTransition(f, to), allowed[[2]Status{f, to}]; got != want {
				t.Errorf("CanTransition(%q, %q) = %v, want %v", f, to, got, want)
			}
		}
	}
}

func TestTerminalStatusesHaveNoExit(t *testing.T) {
	for _, s := range Statuses {
		for _, to := range Statuses {
			if s.Terminal() && CanTransition(s, to) {
				t.Errorf("terminal %s may move to %s", s, to)
			}
		}
	}
}

func TestSetStatusPanicsOnIllegalTransition(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("SetStatus(refunded → succeeded) did not panic")
		}
	}()
	p := &Payment{Status: StatusRefunded}
	p.SetStatus(StatusSucceeded)
}

func TestCheckCapture(t *testing.T) {
	auth := func() *Payment { return &Payment{Status: StatusRequiresCapture, AmountAuthorized: 2500} }
	tests := []struct {
		name   string
		p      *Payment
		amount int64
		want   int64
		reason string
	}{
		{"Full", auth(), 0, 2500, ""},
		{"Partial", auth(), 1000, 1000, ""},
		{"Exact", auth(), 2500, 2500, ""},
		{"ErrOverCapture", auth(), 12000, 0, "amount_exceeds_authorized"}, // Kill Bill took 120 on 25
		{"ErrOneMore", auth(), 2501, 0, "amount_exceeds_authorized"},
		{"ErrNegative", auth(), -1, 0, "amount_too_small"},
		{"ErrCaptured", &Payment{Status: StatusSucceeded, AmountAuthorized: 2500}, 0, 0, "illegal_transition"},
		{"ErrCanceled", &Payment{Status: StatusCanceled, AmountAuthorized: 2500}, 0, 0, "illegal_transition"},
		{"ErrFailed", &Payment{Status: StatusFailed}, 0, 0, "illegal_transition"},
		{"ErrProcessing", &Payment{Status: StatusProcessing}, 0, 0, "illegal_transition"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.p.CheckCapture(tt.amount)
			if ErrorReason(err) != tt.reason || got != tt.want {
				t.Fatalf("got (%d, %v), want (%d, reason %q)", got, err, tt.want, tt.reason)
			}
		})
	}
}

func TestCheckRefundAddsUp(t *testing.T) {
	p := &Payment{Status: StatusSucceeded, AmountAuthorized: 1000, AmountCaptured: 800}
	for _, amt := range []int64{300, 300} {
		got, err := p.CheckRefund(amt)
		if err != nil || got != amt {
			t.Fatalf("refund %d: got (%d, %v)", amt, got, err)
		}
		p.AmountRefunded += got
		p.Transactions = append(p.Transactions, Transaction{Type: TxRefund, Amount: got})
		p.SetStatus(p.StatusAfterRefund())
	}
	if p.Status != StatusPartiallyRefunded {
		t.Fatalf("status %s, want partially_refunded", p.Status)
	}
	if _, err := p.CheckRefund(201); ErrorReason(err) != "amount_exceeds_refundable" {
		t.Fatalf("over-refund: got %v, want amount_exceeds_refundable", err)
	}
	rest, err := p.CheckRefund(0)
	if err != nil || rest != 200 {
		t.Fatalf("rest: got (%d, %v), want 200", rest, err)
	}
	p.AmountRefunded += rest
	p.SetStatus(p.StatusAfterRefund())
	if p.Status != StatusRefunded || p.AmountRefunded != p.AmountCaptured {
		t.Fatalf("got %s refunded %d of %d", p.Status, p.AmountRefunded, p.AmountCaptured)
	}
	if _, err := p.CheckRefund(1); ErrorReason(err) != "illegal_transition" {
		t.Fatalf("refund after full refund: got %v, want illegal_transition", err)
	}
}

func TestCheckVoid(t *testing.T) {
	for _, s := range Statuses {
		err := (&Payment{Status: s}).CheckVoid()
		if (s == StatusRequiresCapture) != (err == nil) {
			t.Errorf("void in %s: got %v", s, err)
		}
	}
}

func TestProviderKeyIsDeterministic(t *testing.T) {
	p := &Payment{ID: "pay_1"}
	if k := p.ProviderKey(TxCapture); p.ProviderKey(TxCapture) != k || k != "pay_1/capture" {
		t.Fatalf("capture key %q", p.ProviderKey(TxCapture))
	}
	k1 := p.ProviderKey(TxRefund)
	p.Transactions = append(p.Transactions, Transaction{Type: TxRefund})
	if k2 := p.ProviderKey(TxRefund); k1 == k2 {
		t.Fatalf("second refund reuses key %q", k1)
	}
}
