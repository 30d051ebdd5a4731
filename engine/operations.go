package engine

import (
	"context"
	"errors"

	"github.com/surgepay/surgepay"
)

// operation is a capture, void or refund being applied to a payment.
type operation struct {
	typ    string // TxCapture, TxVoid or TxRefund
	amount int64
	key    string // provider idempotency key
	// local: nothing to ask the processor (the void of a payment that
	// awaits a card, which nothing authorized): approved at once.
	local bool
}

// CapturePayment captures amount (0: all) of an authorized payment. A
// payment is captured once; a partial capture releases the rest.
func (e *Engine) CapturePayment(ctx context.Context, call *Call, id string, amount int64) (*surgepay.Payment, error) {
	return e.operate(ctx, call, id, func(p *surgepay.Payment) (operation, error) {
		amt, err := p.CheckCapture(amount)
		return operation{typ: surgepay.TxCapture, amount: amt, key: p.ID + "/capture"}, err
	})
}

// VoidPayment cancels an uncaptured authorization, or a payment still
// awaiting a browser's card (no processor call: nothing was authorized).
func (e *Engine) VoidPayment(ctx context.Context, call *Call, id string) (*surgepay.Payment, error) {
	return e.operate(ctx, call, id, func(p *surgepay.Payment) (operation, error) {
		if p.Status == surgepay.StatusRequiresPaymentMethod {
			return operation{typ: surgepay.TxVoid, key: p.ID + "/void", local: true}, nil
		}
		return operation{typ: surgepay.TxVoid, key: p.ID + "/void"}, p.CheckVoid()
	})
}

// RefundPayment returns amount (0: all that remains) of a captured payment.
// Refunds may repeat until the captured amount is refunded.
func (e *Engine) RefundPayment(ctx context.Context, call *Call, id string, amount int64) (*surgepay.Payment, error) {
	return e.operate(ctx, call, id, func(p *surgepay.Payment) (operation, error) {
		amt, err := p.CheckRefund(amount)
		key := p.ProviderKey(surgepay.TxRefund)
		if call.IdempotencyKey != "" {
			// A retry of this request after a crash sends the same key.
			key = p.ID + "/refund/" + call.keyDigest()
		}
		return operation{typ: surgepay.TxRefund, amount: amt, key: key}, err
	})
}

// operate runs one operation on a stored payment: check the state machine,
// call the provider, store the outcome. Operations on one payment are
// serialised on this node; across nodes the payment's version guards the
// write, and a lost race after the provider acted re-applies the outcome to
// the fresh payment, so an effect at the network is never left unrecorded.
func (e *Engine) operate(ctx context.Context, call *Call, id string, plan func(*surgepay.Payment) (operation, error)) (*surgepay.Payment, error) {
	var out *surgepay.Payment
	err := e.idempotent(ctx, call, func() error {
		unlock := e.payLocks.lock(call.MerchantID + "\x00" + id)
		defer unlock()
		p, err := e.store.FindPayment(ctx, call.MerchantID, id)
		if err != nil {
			return err
		}
		op, err := plan(p)
		if err != nil {
			return err
		}
		var res *surgepay.ProviderResult
		var perr error
		if op.local {
			res = &surgepay.ProviderResult{Approved: true}
		} else {
			res, perr = e.callProvider(ctx, p, op)
		}
		if err := providerFailure(perr); err != nil {
			return err
		}
		var rerr error
		out, rerr = e.recordOperation(ctx, call, p, op, res, perr)
		return rerr
	})
	return out, err
}

func (e *Engine) callProvider(ctx context.Context, p *surgepay.Payment, op operation) (*surgepay.ProviderResult, error) {
	var res *surgepay.ProviderResult
	var err error
	switch op.typ {
	case surgepay.TxCapture:
		res, err = e.provider.Capture(ctx, &surgepay.CaptureRequest{IdempotencyKey: op.key,
			AuthorizationRef: p.AuthorizationRef, Amount: op.amount, Currency: p.Currency})
	case surgepay.TxVoid:
		res, err = e.provider.Void(ctx, &surgepay.VoidRequest{IdempotencyKey: op.key, AuthorizationRef: p.AuthorizationRef})
	case surgepay.TxRefund:
		res, err = e.provider.Refund(ctx, &surgepay.RefundRequest{IdempotencyKey: op.key,
			AuthorizationRef: p.AuthorizationRef, Amount: op.amount, Currency: p.Currency})
	}
	if surgepay.IsUnknown(err) {
		// Attempted is when the call returned: its last attempt may still
		// be executing at the processor, so a lookup that finds nothing
		// proves nothing until the processor's lag has passed since then.
		res, err = e.lookup(ctx, &surgepay.LookupQuery{Key: op.key, Operation: op.typ, Processor: surgepay.ProcessorOf(err),
			MerchantID: p.MerchantID, AuthorizationRef: p.AuthorizationRef, Amount: op.amount, Currency: p.Currency,
			Attempted: e.now()})
	}
	return res, err
}

// recordOperationAttemptsMax bounds re-applying an outcome after losing a
// version race to another node.
const recordOperationAttemptsMax = 5

func (e *Engine) recordOperation(ctx context.Context, call *Call, p *surgepay.Payment, op operation, res *surgepay.ProviderResult, perr error) (*surgepay.Payment, error) {
	for attempt := 0; ; attempt++ {
		if hasTransaction(p, op.key) {
			if call.IdempotencyKey != "" {
				// A retry of a request already recorded: replay its stored
				// answer rather than the payment as it is now.
				return nil, surgepay.Conflict(surgepay.ReasonIdempotencyKeyExists, "this request was already processed")
			}
			return p, nil // another node recorded this very operation
		}
		next, result := e.applyOutcome(p, op, res, perr)
		w := &surgepay.Write{ProviderActed: true, PaymentUpdate: next, Events: e.events(call, next, p.Status, next.Transactions[len(p.Transactions):]),
			Audit: e.operatorAudit(call, next)}
		e.countAnalytics(w, p, next)
		e.attach(call, w, next, result)
		err := e.apply(ctx, call, w)
		if err == nil {
			e.cfg.OnPayment(opName(op.typ), next)
			return next, result
		}
		if !errors.Is(err, surgepay.ErrConcurrentUpdate) || attempt+1 >= recordOperationAttemptsMax {
			if perr == nil && res != nil && res.Approved {
				e.log.Error("provider operation performed but not recorded", "payment", p.ID,
					"operation", op.typ, "provider_key", op.key, "err", err)
			}
			return nil, err
		}
		call.RenderedBody, call.RenderedStatus = nil, 0
		if p, err = e.store.FindPayment(ctx, call.MerchantID, p.ID); err != nil {
			return nil, err
		}
		if !legalOutcome(p, op, res, perr) {
			e.log.Error("provider outcome no longer applies to the payment", "payment", p.ID,
				"operation", op.typ, "status", p.Status)
			return nil, surgepay.Conflict(surgepay.ReasonConcurrentUpdate, "the payment changed concurrently; retrieve it and retry")
		}
	}
}

func hasTransaction(p *surgepay.Payment, key string) bool {
	for i := range p.Transactions {
		if p.Transactions[i].IdempotencyKey == key {
			return true
		}
	}
	return false
}

// legalOutcome reports whether the outcome can still be applied to p.
func legalOutcome(p *surgepay.Payment, op operation, res *surgepay.ProviderResult, perr error) bool {
	if perr != nil {
		return CanTransitionTo(p, surgepay.StatusProcessing)
	}
	if !res.Approved {
		return true
	}
	switch op.typ {
	case surgepay.TxCapture, surgepay.TxVoid:
		return p.Status == surgepay.StatusRequiresCapture || (op.local && p.Status == surgepay.StatusRequiresPaymentMethod)
	default:
		return p.AmountRefundable() >= op.amount
	}
}

// CanTransitionTo reports whether p may move to s.
func CanTransitionTo(p *surgepay.Payment, s surgepay.Status) bool {
	return surgepay.CanTransition(p.Status, s)
}

// applyOutcome returns the payment after the operation's outcome, and the
// error the client sees (a decline) if any.
func (e *Engine) applyOutcome(p *surgepay.Payment, op operation, res *surgepay.ProviderResult, perr error) (*surgepay.Payment, error) {
	next := p.Clone()
	next.Version++
	next.Updated = e.now()
	tx := surgepay.Transaction{ID: surgepay.NewID("txn"), Type: op.typ, Amount: op.amount, IdempotencyKey: op.key, Created: next.Updated}
	var result error
	switch {
	case perr != nil:
		tx.Status = surgepay.TxPending
		next.Pending = &surgepay.Pending{Type: op.typ, Amount: op.amount, IdempotencyKey: op.key, From: p.Status, TxID: tx.ID,
			Processor: surgepay.ProcessorOf(perr)}
		next.SetStatus(surgepay.StatusProcessing)
	case res.Approved:
		tx.Status, tx.ProviderRef = surgepay.TxSucceeded, res.Reference
		applyApproved(next, op.typ, op.amount)
	default:
		tx.Status, tx.ProviderRef, tx.DeclineCode, tx.Message = surgepay.TxFailed, res.Reference, res.DeclineCode, declineMessage(res)
		result = declined(next, res)
	}
	next.Transactions = append(next.Transactions, tx)
	return next, result
}

// applyApproved moves p by an approved operation.
func applyApproved(p *surgepay.Payment, typ string, amount int64) {
	switch typ {
	case surgepay.TxCapture:
		p.AmountCaptured = amount
		p.SetStatus(surgepay.StatusSucceeded)
	case surgepay.TxVoid:
		p.SetStatus(surgepay.StatusCanceled)
	case surgepay.TxRefund:
		p.AmountRefunded += amount
		p.SetStatus(p.StatusAfterRefund())
	}
}

// opName is the name of an operation in metrics.
func opName(typ string) string {
	if typ == surgepay.TxAuthorization {
		return "authorize"
	}
	return typ
}
