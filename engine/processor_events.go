package engine

import (
	"context"
	"crypto/sha256"
	"errors"
	"net/http"
	"strings"

	"github.com/surgepay/surgepay"
)

// What ApplyProcessorEvent did with an event.
const (
	EventApplied        = "applied"         // the payment changed
	EventUnchanged      = "unchanged"       // verified and read; the payment already says so
	EventDuplicate      = "duplicate"       // this event id was applied before
	EventIgnored        = "ignored"         // a type surgepay does not act on
	EventUnknownPayment = "unknown_payment" // no payment of surgepay's carries that reference
)

// processorEventAttemptsMax bounds re-applying an event after losing a
// version race to another writer of the payment.
const processorEventAttemptsMax = 5

// ApplyProcessorEvent verifies a processor's webhook and applies it to
// the payment it names (docs/processors.md):
//   - a PaymentIntent's outcome resolves a payment in processing, through
//     the same lookup as the reconciler; a PaymentIntent the processor
//     cancelled (an authorization that expired, a cancel in its dashboard)
//     cancels a payment still in requires_capture;
//   - a refund made at the processor (its dashboard) adds a refund of the
//     difference to surgepay's payment;
//   - a dispute (chargeback) adds a dispute transaction: a new dispute
//     is added beside the payment's others, a change to one is found by
//     the dispute's id; the payment's status stays as it is. Its row of
//     the store's disputes table (the console's list, with its deadline)
//     is written in the same Write (surgepay.Write.Disputes).
//
// Each change writes audit events, so the merchant's own signed webhook
// follows (payment.disputed, payment.dispute_updated, payment.refunded,
// payment.canceled). An event is applied once: its id is kept as an
// idempotency record of the payment's merchant; and every change is also
// idempotent by state, for an event redelivered after the records expire.
// A bad signature is EINVALID; an unknown processor ENOTFOUND.
// AcceptsProcessorEvents reports whether the provider takes webhooks for
// a processor of this name (a configured one that parses events).
func (e *Engine) AcceptsProcessorEvents(processor string) bool {
	return surgepay.AcceptsEvents(e.provider, processor)
}

func (e *Engine) ApplyProcessorEvent(ctx context.Context, processor string, payload []byte, header http.Header) (string, error) {
	ep, ok := e.provider.(surgepay.EventParser)
	if !ok {
		return "", surgepay.NotFound("processor", "processor")
	}
	ev, err := ep.ParseEvent(processor, payload, header)
	if err != nil {
		return "", err
	}
	if ev.Kind == "" || ev.PaymentRef == "" {
		return EventIgnored, nil
	}
	p, err := e.findEventPayment(ctx, ev)
	if surgepay.ErrorCode(err) == surgepay.ENOTFOUND {
		e.log.Info("processor event for no payment of surgepay's", "processor", processor, "event", ev.ID, "kind", ev.Kind)
		return EventUnknownPayment, nil
	} else if err != nil {
		return "", err
	}
	key := "processor_event/" + processor + "/" + ev.ID
	if _, err := e.store.FindIdempotency(ctx, p.MerchantID, key); err == nil {
		return EventDuplicate, nil
	} else if surgepay.ErrorCode(err) != surgepay.ENOTFOUND {
		return "", err
	}
	if ev.Kind == surgepay.ProcessorEventPayment && ev.Status != "canceled" {
		return e.applyOutcomeEvent(ctx, p)
	}
	if ev.Kind == surgepay.ProcessorEventRefunded {
		// The event's total includes refunds surgepay made itself and may
		// be recording at this moment (on another node): only what was
		// refunded outside surgepay is applied, asked of the processor.
		o, ok := e.provider.(surgepay.OutsideRefunder)
		if !ok {
			return EventIgnored, nil
		}
		if ev.AmountRefunded, err = o.RefundedOutside(ctx, p.AuthorizationRef); err != nil {
			return "", &surgepay.Error{Code: surgepay.EUNAVAILABLE, Reason: "provider_unavailable", RetryAfter: 1,
				Message: "the processor did not say what was refunded; the event will be retried"}
		}
		// A partial capture releases the rest of the authorization, which
		// Stripe records as a refund on the charge (localstripe does the
		// same): not a refund of captured money.
		if p.AmountCaptured > 0 && p.AmountCaptured < p.AmountAuthorized {
			ev.AmountRefunded = max(ev.AmountRefunded-(p.AmountAuthorized-p.AmountCaptured), 0)
		}
	}
	unlock := e.payLocks.lock(p.MerchantID + "\x00" + p.ID)
	defer unlock()
	call := &Call{MerchantID: p.MerchantID, KeyID: "processor:" + processor, RequestID: "processor_event:" + ev.ID}
	for attempt := 0; ; attempt++ {
		if p, err = e.store.FindPayment(ctx, p.MerchantID, p.ID); err != nil {
			return "", err
		}
		next, events := e.eventChange(call, p, ev, key)
		if next == nil {
			return EventUnchanged, nil
		}
		w := &surgepay.Write{PaymentUpdate: next, Events: events,
			Idempotency: &surgepay.IdempotencyRecord{MerchantID: p.MerchantID, Key: key, RequestHash: sha256.Sum256(payload),
				StatusCode: http.StatusOK, Body: []byte(`{"received":true}`), Created: e.now()}}
		w.Disputes = changedDisputes(p, next)
		e.countAnalytics(w, p, next)
		err := e.commit(ctx, w)
		if err == nil {
			return EventApplied, nil
		}
		if errors.Is(err, surgepay.ErrIdempotencyKeyExists) {
			return EventDuplicate, nil
		}
		if !errors.Is(err, surgepay.ErrConcurrentUpdate) || attempt+1 >= processorEventAttemptsMax {
			return "", err
		}
	}
}

// applyOutcomeEvent resolves a payment in processing by looking its
// operation up, as the reconciler does; the event itself is not trusted
// for the outcome, the processor's answer to the lookup is.
func (e *Engine) applyOutcomeEvent(ctx context.Context, p *surgepay.Payment) (string, error) {
	if p.Status != surgepay.StatusProcessing {
		return EventUnchanged, nil
	}
	ok, err := e.reconcile(ctx, p.MerchantID, p.ID)
	if err != nil || !ok {
		return EventUnchanged, err
	}
	return EventApplied, nil
}

// eventChange returns p as ev changes it, with its audit events, or nil
// if p already reflects ev.
func (e *Engine) eventChange(call *Call, p *surgepay.Payment, ev *surgepay.ProcessorEvent, key string) (*surgepay.Payment, []*surgepay.Event) {
	next := p.Clone()
	next.Version++
	next.Updated = e.now()
	var typ string
	var amount int64
	switch ev.Kind {
	case surgepay.ProcessorEventPayment: // canceled at the processor
		if p.Status != surgepay.StatusRequiresCapture {
			return nil, nil
		}
		typ = surgepay.TxVoid
		next.Transactions = append(next.Transactions, surgepay.Transaction{ID: surgepay.NewID("txn"), Type: surgepay.TxVoid,
			Status: surgepay.TxSucceeded, ProviderRef: p.AuthorizationRef, IdempotencyKey: key,
			Message: "cancelled at the processor", Created: next.Updated})
		next.SetStatus(surgepay.StatusCanceled)
	case surgepay.ProcessorEventRefunded: // ev.AmountRefunded: refunded outside surgepay, in all
		amount = min(ev.AmountRefunded-refundedOutside(p), p.AmountRefundable())
		if amount <= 0 || (p.Status != surgepay.StatusSucceeded && p.Status != surgepay.StatusPartiallyRefunded) {
			return nil, nil
		}
		typ = surgepay.TxRefund
		next.Transactions = append(next.Transactions, surgepay.Transaction{ID: surgepay.NewID("txn"), Type: surgepay.TxRefund,
			Status: surgepay.TxSucceeded, Amount: amount, ProviderRef: p.AuthorizationRef, IdempotencyKey: key,
			Message: "refunded at the processor", Created: next.Updated})
		next.AmountRefunded += amount
		next.SetStatus(next.StatusAfterRefund())
	default: // a dispute
		// Each change of a dispute is a dispute transaction of its own,
		// found by the dispute's id: a second dispute on the payment is
		// added beside the first (which may be closed, lost), never over
		// it, and each dispute keeps its history.
		ref := p.AuthorizationRef[:len(p.AuthorizationRef)-len(refTail(p.AuthorizationRef))] + ev.DisputeID
		typ, amount = surgepay.ProcessorEventDisputeCreated, ev.Amount
		if d := p.Dispute(ref); d != nil {
			if d.Status == ev.Status && d.Amount == ev.Amount && (ev.DueBy.IsZero() || ev.DueBy.Equal(d.DueBy)) {
				return nil, nil
			}
			typ = ev.Kind
			if ev.Kind == surgepay.ProcessorEventDisputeCreated {
				typ = surgepay.ProcessorEventDisputeUpdated
			}
		}
		next.Transactions = append(next.Transactions, surgepay.Transaction{ID: surgepay.NewID("txn"), Type: surgepay.TxDispute,
			Status: ev.Status, Amount: ev.Amount, ProviderRef: ref, IdempotencyKey: key, Message: ev.Reason,
			Created: next.Updated, DueBy: ev.DueBy.UTC()})
	}
	return next, []*surgepay.Event{{ID: surgepay.NewID("evt"), PaymentID: p.ID, MerchantID: p.MerchantID, Type: typ,
		FromStatus: p.Status, ToStatus: next.Status, Amount: amount, ActorKeyID: call.KeyID, RequestID: call.RequestID,
		Created: next.Updated}}
}

// changedDisputes returns the disputes of next that p does not have in
// the same state: what the store's table of disputes is to be told, in
// the transaction of the payment's change (surgepay.Write.Disputes).
func changedDisputes(p, next *surgepay.Payment) []*surgepay.Dispute {
	var out []*surgepay.Dispute
	for _, d := range next.Disputes() {
		if was := p.Dispute(d.ID); was == nil || *was != d {
			out = append(out, &d)
		}
	}
	return out
}

// refTail is the processor's own part of a qualified reference: "pi_1" of
// "stripe_eu:pi_1".
func refTail(ref string) string {
	for i := 0; i < len(ref); i++ {
		if ref[i] == ':' {
			return ref[i+1:]
		}
	}
	return ref
}

// refundedOutside sums the refunds already recorded from the processor's
// webhooks (refunds made outside surgepay).
func refundedOutside(p *surgepay.Payment) int64 {
	var sum int64
	for _, t := range p.Transactions {
		if t.Type == surgepay.TxRefund && t.Status == surgepay.TxSucceeded && strings.HasPrefix(t.IdempotencyKey, "processor_event/") {
			sum += t.Amount
		}
	}
	return sum
}

// findEventPayment finds the payment an event names: by surgepay's own IDs
// when the processor knows them (the simulator), whose reference must
// then be the event's; else by the processor's reference.
func (e *Engine) findEventPayment(ctx context.Context, ev *surgepay.ProcessorEvent) (*surgepay.Payment, error) {
	if ev.MerchantID != "" && ev.PaymentID != "" {
		p, err := e.store.FindPayment(ctx, ev.MerchantID, ev.PaymentID)
		if err != nil {
			return nil, err
		}
		if refTail(p.AuthorizationRef) != refTail(ev.PaymentRef) {
			return nil, surgepay.NotFound("reference", "payment")
		}
		return p, nil
	}
	finder, ok := e.store.(surgepay.PaymentByRefFinder)
	if !ok {
		return nil, &surgepay.Error{Code: surgepay.EUNAVAILABLE, Reason: "store_unavailable", RetryAfter: 1,
			Message: "this server's store cannot find payments by reference"}
	}
	return finder.FindPaymentByRef(ctx, ev.PaymentRef)
}
