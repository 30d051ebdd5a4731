package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/surgepay/surgepay"
)

// The operators' console (package console) reads through these: searches
// of the store's OperatorSearcher capability, and lookups by the
// identifiers an operator is given (a processor's reference, a client's
// Idempotency-Key). Its actions are the API's (CapturePayment,
// VoidPayment, RefundPayment, ResendWebhookDelivery) with Call.Operator
// set.

// operatorSearcher returns the store, or the store it decorates, as an
// OperatorSearcher.
func (e *Engine) operatorSearcher() (surgepay.OperatorSearcher, error) {
	s := e.store
	for {
		if o, ok := s.(surgepay.OperatorSearcher); ok {
			return o, nil
		}
		u, ok := s.(interface{ Unwrap() surgepay.Store })
		if !ok {
			return nil, &surgepay.Error{Code: surgepay.EUNAVAILABLE, Reason: "store_unavailable",
				Message: "this server's store cannot search payments"}
		}
		s = u.Unwrap()
	}
}

// SearchPayments returns a page of one merchant's payments that q
// selects (see surgepay.OperatorSearcher); q.Validate's errors first.
func (e *Engine) SearchPayments(ctx context.Context, q surgepay.PaymentSearch) (*surgepay.PaymentSearchPage, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	s, err := e.operatorSearcher()
	if err != nil {
		return nil, err
	}
	return s.SearchPayments(ctx, q)
}

// FindCustomersByEmail returns a merchant's newest customers of that
// email (see surgepay.OperatorSearcher).
func (e *Engine) FindCustomersByEmail(ctx context.Context, merchantID, email string) ([]*surgepay.Customer, error) {
	s, err := e.operatorSearcher()
	if err != nil {
		return nil, err
	}
	return s.FindCustomersByEmail(ctx, merchantID, email)
}

// processorNames returns the names of the configured processors, when
// the provider is a router (or decorates one); none otherwise.
func (e *Engine) processorNames() []string {
	p := e.provider
	for {
		if r, ok := p.(interface{ Processors() []string }); ok {
			return r.Processors()
		}
		u, ok := p.(interface{ Unwrap() surgepay.Provider })
		if !ok {
			return nil
		}
		p = u.Unwrap()
	}
}

// processorRefsMax bounds the references FindPaymentByRef probes.
const processorRefsMax = 64

// FindPaymentByRef returns the payment, of any merchant, authorized at a
// configured processor as ref: qualified ("stripe_eu:pi_…"), or as the
// processor shows it ("pi_…"), probed under each processor's name. One
// probe of an index each. ENOTFOUND when none has it, or the store cannot
// find payments by reference: a payment of the default provider alone
// ([provider], no [processors]) is found by the search's scan.
func (e *Engine) FindPaymentByRef(ctx context.Context, ref string) (*surgepay.Payment, error) {
	finder, ok := e.store.(surgepay.PaymentByRefFinder)
	if !ok || ref == "" {
		return nil, surgepay.NotFound("ref", "payment")
	}
	refs := []string{ref}
	if !strings.Contains(ref, ":") {
		refs = refs[:0]
		for _, n := range e.processorNames() {
			refs = append(refs, n+":"+ref)
		}
	}
	for _, r := range refs[:min(len(refs), processorRefsMax)] {
		p, err := finder.FindPaymentByRef(ctx, r)
		if surgepay.ErrorCode(err) == surgepay.ENOTFOUND {
			continue
		}
		return p, err
	}
	return nil, surgepay.NotFound("ref", "payment")
}

// FindPaymentByIdempotencyKey returns the payment whose stored answer
// the merchant's idempotency record of key holds (a create, capture,
// void or refund answered with the payment); ENOTFOUND if there is no
// record (never used, or purged after idempotency_retention) or it holds
// no payment (a declined create holds an error).
func (e *Engine) FindPaymentByIdempotencyKey(ctx context.Context, merchantID, key string) (*surgepay.Payment, error) {
	rec, err := e.store.FindIdempotency(ctx, merchantID, e.IdempotencyKey(key))
	if err != nil {
		return nil, err
	}
	var body struct {
		ID     string `json:"id"`
		Object string `json:"object"`
	}
	if json.Unmarshal(rec.Body, &body) != nil || body.Object != "payment" || body.ID == "" {
		return nil, surgepay.NotFound("idempotency_key", "payment")
	}
	return e.store.FindPayment(ctx, merchantID, body.ID)
}

// operatorAudit returns the audit row of an operator's operation on p
// (its last transaction), or none for an API call.
func (e *Engine) operatorAudit(call *Call, p *surgepay.Payment) []*surgepay.AuditEvent {
	if call.Operator == "" || len(p.Transactions) == 0 {
		return nil
	}
	tx := p.Transactions[len(p.Transactions)-1]
	action := map[string]string{surgepay.TxCapture: surgepay.AuditPaymentCaptured, surgepay.TxVoid: surgepay.AuditPaymentVoided,
		surgepay.TxRefund: surgepay.AuditPaymentRefunded}[tx.Type]
	if action == "" {
		return nil
	}
	detail := fmt.Sprintf("amount=%d currency=%s outcome=%s transaction=%s", tx.Amount, p.Currency, tx.Status, tx.ID)
	if tx.DeclineCode != "" {
		detail += " decline_code=" + tx.DeclineCode
	}
	return []*surgepay.AuditEvent{e.operatorEvent(call, action, p.MerchantID, p.ID, detail)}
}

// operatorResendAudit returns the audit row of an operator's resend of
// delivery id (d), or none for an API call.
func (e *Engine) operatorResendAudit(call *Call, d *surgepay.WebhookDeliveryInfo, id string) []*surgepay.AuditEvent {
	if call.Operator == "" {
		return nil
	}
	detail := fmt.Sprintf("delivery=%s event=%s type=%s resends=%d", id, d.EventID, d.Type, d.Resends+1)
	return []*surgepay.AuditEvent{e.operatorEvent(call, surgepay.AuditWebhookResent, call.MerchantID, d.PaymentID, detail)}
}

func (e *Engine) operatorEvent(call *Call, action, merchantID, objectID, detail string) *surgepay.AuditEvent {
	return e.audit(WithActor(context.Background(), call.Operator), action, merchantID, objectID, detail)
}
