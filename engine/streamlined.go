package engine

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/surgepay/surgepay"
)

// Stage fallbacks: what a streamlined sale does when the stage is down.
const (
	// FallbackCapture captures synchronously, as the standard path does.
	FallbackCapture = "capture"
	// FallbackReject answers 503 stage_unavailable. The authorization
	// stays at the network for a retry with the same Idempotency-Key, which
	// reaches it again and completes the sale once the stage is back; a
	// sale without a key, which no retry can reach, has it voided.
	FallbackReject = "reject"
)

// streamlined reports whether a sale of this merchant takes the
// streamlined path.
func (e *Engine) streamlined(set surgepay.MerchantSettings, in *PaymentInput) bool {
	return set.Processing == surgepay.PathStreamlined && in.CaptureMethod == surgepay.CaptureAutomatic && e.cfg.Sealer != nil
}

// recordStreamlined stores a streamlined sale whose authorization the
// provider approved: the payment is succeeded with its capture transaction
// pending, and the capture instruction, sealed to the settlement key, is
// staged durably before the client is answered. On the embedded stage the
// staged record commits in the payment's own Write: one SQL statement. On
// an external stage (JetStream) it is published first; settlement ignores
// a record whose payment was never stored.
func (e *Engine) recordStreamlined(ctx context.Context, call *Call, p *surgepay.Payment, res *surgepay.ProviderResult, set surgepay.MerchantSettings) (*surgepay.Payment, error) {
	now := e.now()
	authKey := authorizeKey(call, p)
	captureKey := p.ID + "/capture"
	p.Path = surgepay.PathStreamlined
	p.AuthorizationRef = res.Reference
	p.AmountAuthorized = p.AmountTotal()
	p.AmountCaptured = p.AmountTotal()
	p.Transactions = append(p.Transactions,
		surgepay.Transaction{ID: surgepay.NewID("txn"), Type: surgepay.TxAuthorization, Status: surgepay.TxSucceeded,
			Amount: p.AmountTotal(), ProviderRef: res.Reference, IdempotencyKey: authKey, Created: now},
		surgepay.Transaction{ID: surgepay.NewID("txn"), Type: surgepay.TxCapture, Status: surgepay.TxPending,
			Amount: p.AmountTotal(), IdempotencyKey: captureKey, Created: now})
	p.SetStatus(surgepay.StatusSucceeded)
	p.Version = 1
	sealed, err := e.cfg.Sealer.Seal(&surgepay.CaptureInstruction{PaymentID: p.ID, MerchantID: p.MerchantID,
		Amount: p.AmountTotal(), Currency: p.Currency, AuthorizationRef: res.Reference,
		IdempotencyKey: captureKey, Authorized: now})
	if err != nil {
		return nil, fmt.Errorf("seal capture of %s: %w", p.ID, err)
	}
	rec := &surgepay.StagedRecord{ID: surgepay.NewID("stg"), MerchantID: p.MerchantID, PaymentID: p.ID,
		Sealed: sealed, Created: now}
	w := &surgepay.Write{ProviderActed: true, PaymentInsert: p}
	if set.Audit == "detailed" {
		w.Events = e.events(call, p, "", p.Transactions)
	}
	if e.cfg.Stage == nil {
		w.Staged = rec
	} else if err := e.cfg.Stage.Put(ctx, rec); err != nil {
		e.stageHealth.Fail(err, slog.String("fallback", e.cfg.StageFallback))
		return e.stageFallback(ctx, call, p, res)
	} else {
		e.stageHealth.OK()
	}
	e.attach(call, w, p, nil)
	if err := e.apply(ctx, call, w); err != nil {
		return nil, err
	}
	e.cfg.OnPayment("authorize", p)
	return p, nil
}

// stageFallback handles a stage that could not take a record: capture at
// once (the standard path's sale), or refuse (FallbackReject).
//
// A refused sale with an Idempotency-Key keeps its authorization: the
// client's retry replays it (the provider key derives from the
// Idempotency-Key) and stages it once the stage is back. Voiding it would
// let that retry replay an approved authorization the network had voided,
// and answer "succeeded" for a sale whose capture must fail. Without a key
// no retry can reach the authorization, so it is voided; a void that
// fails is logged, and the hold lapses at the network.
func (e *Engine) stageFallback(ctx context.Context, call *Call, p *surgepay.Payment, auth *surgepay.ProviderResult) (*surgepay.Payment, error) {
	if e.cfg.StageFallback == FallbackReject {
		if call.IdempotencyKey == "" {
			res, err := e.provider.Void(ctx, &surgepay.VoidRequest{IdempotencyKey: p.ID + "/void", AuthorizationRef: auth.Reference})
			if err != nil || res == nil || !res.Approved {
				reason := "declined"
				if err != nil {
					reason = err.Error()
				}
				e.log.Warn("void of a sale refused for the stage failed; the authorization lapses at the network",
					"payment", p.ID, "reason", reason)
			}
		}
		return nil, &surgepay.Error{Code: surgepay.EUNAVAILABLE, Reason: "stage_unavailable", RetryAfter: 1,
			Message: "payments are paused: the settlement stage is unavailable; retry shortly"}
	}
	// Rebuild the payment as a standard authorization, then capture it.
	q := p.Clone()
	q.Path, q.Status, q.Transactions, q.AmountCaptured = surgepay.PathStandard, "", nil, 0
	q.SetStatus(surgepay.StatusRequiresCapture)
	q.Transactions = []surgepay.Transaction{{ID: surgepay.NewID("txn"), Type: surgepay.TxAuthorization,
		Status: surgepay.TxSucceeded, Amount: q.AmountTotal(), ProviderRef: auth.Reference,
		IdempotencyKey: authorizeKey(call, p), Created: e.now()}}
	op := operation{typ: surgepay.TxCapture, amount: q.AmountTotal(), key: q.ID + "/capture"}
	res, perr := e.callProvider(ctx, q, op)
	if err := providerFailure(perr); err != nil {
		return nil, err
	}
	next, result := e.applyOutcome(q, op, res, perr)
	next.Version = 1
	from := surgepay.Status("")
	w := &surgepay.Write{ProviderActed: true, PaymentInsert: next, Events: e.events(call, next, from, next.Transactions)}
	e.attach(call, w, next, result)
	if err := e.apply(ctx, call, w); err != nil {
		return nil, err
	}
	e.cfg.OnPayment("authorize", next)
	return next, result
}
