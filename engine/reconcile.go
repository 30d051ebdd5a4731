package engine

import (
	"context"
	"time"

	"github.com/surgepay/surgepay"
)

// systemCall is the actor of background work in the audit trail.
func systemCall(merchantID string) *Call {
	return &Call{MerchantID: merchantID, KeyID: "system", RequestID: "reconcile"}
}

// ReconcileBatchMax bounds the payments one reconcile pass looks at.
const ReconcileBatchMax = 100

// ReconcileOnce resolves payments left in processing by an unknown provider
// outcome: it looks each pending operation up by its idempotency key and
// moves the payment to the outcome. An operation the provider never
// performed fails (authorization) or returns the payment to its previous
// status (capture, void, refund), from where the client may retry it.
// Still-unknown outcomes are left for the next pass. Payments awaiting a
// shopper's authentication (requires_action) take a quarter of a pass at
// most, a page of them each pass, oldest first, going on from where the
// last pass stopped and back to the oldest after the newest: however
// many there are, each is looked up in turn. It returns how many payments
// it resolved.
func (e *Engine) ReconcileOnce(ctx context.Context) (int, error) {
	after := ""
	if p := e.actionsAfter.Load(); p != nil {
		after = *p
	}
	ps, err := e.store.ListProcessing(ctx, ReconcileBatchMax, after)
	if err != nil {
		return 0, err
	}
	next, actions := "", 0
	for _, p := range ps {
		if p.Status == surgepay.StatusRequiresAction {
			next, actions = p.ID, actions+1
		}
	}
	if actions < surgepay.RequiresActionListed(ReconcileBatchMax) {
		next = "" // the page was the last: the next pass starts again from the oldest
	}
	e.actionsAfter.Store(&next)
	n := 0
	for _, p := range ps {
		ok, err := e.reconcile(ctx, p.MerchantID, p.ID)
		if err != nil {
			e.log.Warn("reconcile payment", "payment", p.ID, "err", err)
			continue
		}
		if ok {
			n++
		}
	}
	return n, nil
}

func (e *Engine) reconcile(ctx context.Context, merchantID, id string) (bool, error) {
	unlock := e.payLocks.lock(merchantID + "\x00" + id)
	defer unlock()
	p, err := e.store.FindPayment(ctx, merchantID, id)
	if err != nil || p.Pending == nil {
		return false, err
	}
	switch p.Status {
	case surgepay.StatusRequiresAction:
		// A shopper's authentication: looked up once old enough to have
		// been abandoned (or finished without a return), and cancelled at
		// the processor once surely abandoned.
		q := pendingQuery(p)
		if e.now().Before(q.Attempted.Add(ActionReconcileAfter)) {
			return false, nil
		}
		cancel := ""
		if !e.now().Before(q.Attempted.Add(ActionAbandonAfter)) {
			cancel = abandonedMessage
		}
		next, err := e.applyAction(ctx, p, cancel)
		return next != nil, err
	case surgepay.StatusProcessing:
	default:
		return false, nil
	}
	if q := pendingQuery(p); p.Pending.From == surgepay.StatusRequiresPaymentMethod && e.now().Before(q.Attempted.Add(ConfirmReconcileGrace)) {
		return false, nil // a browser's confirm stored before its call, which may still run (ConfirmPayment)
	}
	res, lerr := surgepay.LookupOperation(ctx, e.provider, pendingQuery(p))
	if lerr != nil && !surgepay.IsNotPerformed(lerr) {
		return false, nil // still unknown
	}
	next := resolvePending(p, res, e.now())
	call := systemCall(merchantID)
	events := []*surgepay.Event{{ID: surgepay.NewID("evt"),
		PaymentID: p.ID, MerchantID: merchantID, Type: "reconcile", FromStatus: p.Status, ToStatus: next.Status,
		Amount: p.Pending.Amount, ActorKeyID: call.KeyID, RequestID: call.RequestID, Created: next.Updated}}
	if p.Pending.CaptureLater && next.Status == surgepay.StatusRequiresCapture {
		next, events = e.completeSale(ctx, call, next, events)
		next.Version = p.Version + 1
	}
	w := &surgepay.Write{ProviderActed: true, PaymentUpdate: next, Events: events}
	e.countAnalytics(w, p, next)
	if err := e.commit(ctx, w); err != nil {
		return false, err
	}
	return true, nil
}

// pendingQuery describes p's pending operation for a lookup.
func pendingQuery(p *surgepay.Payment) *surgepay.LookupQuery {
	q := &surgepay.LookupQuery{Key: p.Pending.IdempotencyKey, Operation: p.Pending.Type, Processor: p.Pending.Processor,
		MerchantID: p.MerchantID, AuthorizationRef: p.AuthorizationRef, Reference: p.Pending.Reference,
		Amount: p.Pending.Amount, Currency: p.Currency}
	for i := range p.Transactions {
		if p.Transactions[i].ID == p.Pending.TxID {
			q.Attempted = p.Transactions[i].Created
		}
	}
	return q
}

// completeSale captures an authorization the streamlined path sent as
// authorize-only and whose outcome was resolved late: the client asked for
// a sale. A capture the provider did not perform leaves the payment in
// requires_capture, from where it can be captured or voided.
func (e *Engine) completeSale(ctx context.Context, call *Call, p *surgepay.Payment, events []*surgepay.Event) (*surgepay.Payment, []*surgepay.Event) {
	op := operation{typ: surgepay.TxCapture, amount: p.AmountAuthorized, key: p.ID + "/capture"}
	res, perr := e.callProvider(ctx, p, op)
	if providerFailure(perr) != nil {
		e.log.Warn("capture after reconciliation not performed", "payment", p.ID)
		return p, events
	}
	next, _ := e.applyOutcome(p, op, res, perr)
	return next, append(events, e.events(call, next, p.Status, next.Transactions[len(p.Transactions):])...)
}

// resolvePending applies a looked-up outcome (res nil: not performed) to a
// payment in processing.
func resolvePending(p *surgepay.Payment, res *surgepay.ProviderResult, now time.Time) *surgepay.Payment {
	next := p.Clone()
	next.Version++
	next.Updated = now
	pend := next.Pending
	next.Pending = nil
	tx := &next.Transactions[len(next.Transactions)-1]
	for i := range next.Transactions {
		if next.Transactions[i].ID == pend.TxID {
			tx = &next.Transactions[i]
		}
	}
	switch {
	case res != nil && res.Approved:
		tx.Status, tx.ProviderRef = surgepay.TxSucceeded, res.Reference
		if pend.Type == surgepay.TxAuthorization {
			next.AuthorizationRef, next.AmountAuthorized = res.Reference, pend.Amount
			if pend.Capture {
				next.AmountCaptured = pend.Amount
				next.SetStatus(surgepay.StatusSucceeded)
			} else {
				next.SetStatus(surgepay.StatusRequiresCapture)
			}
			return next
		}
		next.Status = pend.From // processing → From is legal; applyApproved checks the rest
		applyApproved(next, pend.Type, pend.Amount)
	default:
		tx.Status = surgepay.TxFailed
		if res != nil {
			tx.ProviderRef, tx.DeclineCode, tx.Message = res.Reference, res.DeclineCode, declineMessage(res)
		} else {
			tx.Message = "the card network did not perform the operation"
		}
		switch {
		case pend.Type == surgepay.TxAuthorization && pend.From == surgepay.StatusRequiresPaymentMethod:
			// A browser's confirm: the shopper may try again.
			next.DeclineCode, next.FailureMessage = tx.DeclineCode, tx.Message
			next.SetStatus(surgepay.StatusRequiresPaymentMethod)
		case pend.Type == surgepay.TxAuthorization:
			next.DeclineCode, next.FailureMessage = tx.DeclineCode, tx.Message
			next.SetStatus(surgepay.StatusFailed)
		default:
			next.SetStatus(pend.From)
		}
	}
	return next
}

// RunReconciler runs ReconcileOnce every interval until ctx ends, on the
// node that holds the lease "reconciler" when the store is shared (see
// Lease): one node reconciles at a time, another takes over within
// max(3 × interval, LeaseTTLMin) of its stopping.
func (e *Engine) RunReconciler(ctx context.Context, interval time.Duration) {
	RunEvery(ctx, interval, e.NewLease("reconciler", interval), func(ctx context.Context) {
		if _, err := e.ReconcileOnce(ctx); err != nil {
			e.log.Warn("reconcile", "err", err)
		}
	})
}
