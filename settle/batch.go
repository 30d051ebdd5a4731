package settle

import (
	"context"
	"errors"
	"sync"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/stage"
)

// outcome is what became of one record in a batch.
type outcome struct {
	rec          *surgepay.StagedRecord
	ack          bool   // acknowledge at the stage
	ackedInWrite bool   // already removed by the result Write (embedded stage)
	reason       string // failure reason, "" if none
	result       string // resultCaptured, resultFailed, resultSettled or ""
	currency     string
	amount       int64
}

const (
	resultCaptured = "captured"
	resultFailed   = "failed"
	resultSettled  = "already_settled"
)

// decision is what the open/load/provider phase found out.
type decision struct {
	out outcome // final unless res is set
	ins *surgepay.CaptureInstruction
	p   *surgepay.Payment
	res *surgepay.ProviderResult // a final provider answer to record
}

// batch settles recs and acknowledges what is done. It returns the
// captures recorded.
func (r *runner) batch(ctx context.Context, recs []*surgepay.StagedRecord) int {
	work := context.WithoutCancel(ctx) // finish the batch on shutdown
	outs := make([]outcome, len(recs))
	var wg sync.WaitGroup
	for i, rec := range recs {
		wg.Go(func() {
			r.sem <- struct{}{}
			d := r.decide(ctx, work, rec)
			<-r.sem // the Apply below does not hold a provider slot
			if d.res != nil {
				outs[i] = r.record(ctx, work, d)
			} else {
				outs[i] = d.out
			}
		})
	}
	wg.Wait()
	r.acknowledge(work, outs)
	return r.tally(outs)
}

// decide opens rec, loads its payment and, when it still has a staged
// capture, captures it at the provider. ctx ends retries; work carries the
// calls.
func (r *runner) decide(ctx, work context.Context, rec *surgepay.StagedRecord) decision {
	log := r.cfg.Logger
	leave := func(reason string) decision { return decision{out: outcome{rec: rec, reason: reason}} }
	ins, err := r.cfg.Opener.Open(rec.Sealed)
	if err != nil {
		if errors.Is(err, stage.ErrWrongKey) || errors.Is(err, stage.ErrVersion) {
			log.Error("settle: record not for this settlement key; left at the stage", "record", rec.ID, "err", err.Error())
			return leave(ReasonWrongKey)
		}
		log.Error("settle: tampered record acknowledged, not captured", "record", rec.ID)
		return decision{out: outcome{rec: rec, ack: true, reason: ReasonTampered}}
	}
	if ins.PaymentID != rec.PaymentID || ins.MerchantID != rec.MerchantID {
		log.Warn("settle: record headers disagree with the sealed instruction; using the instruction", "record", rec.ID, "payment", ins.PaymentID)
	}
	p, err := r.cfg.Store.FindPayment(work, ins.MerchantID, ins.PaymentID)
	if surgepay.ErrorCode(err) == surgepay.ENOTFOUND {
		// The later of the two times: a record is never called an orphan early.
		born := ins.Authorized
		if rec.Created.After(born) {
			born = rec.Created
		}
		if r.cfg.Now().Sub(born) < r.cfg.OrphanGrace {
			return leave(ReasonOrphanWait)
		}
		log.Warn("settle: orphan record acknowledged: its payment was never stored", "record", rec.ID, "payment", ins.PaymentID)
		return decision{out: outcome{rec: rec, ack: true, reason: ReasonOrphan}}
	}
	if err != nil {
		log.Error("settle: load payment", "record", rec.ID, "payment", ins.PaymentID, "err", err.Error())
		return leave(ReasonStore)
	}
	if p.StagedCapture() == nil {
		return decision{out: outcome{rec: rec, ack: true, result: resultSettled}}
	}
	if why := mismatch(ins, p); why != "" {
		log.Error("settle: instruction disagrees with the payment; left at the stage", "record", rec.ID, "payment", p.ID, "field", why)
		return leave(ReasonMismatch)
	}
	res, reason := r.capture(ctx, work, ins)
	if res == nil {
		return leave(reason)
	}
	return decision{ins: ins, p: p, res: res, out: outcome{rec: rec}}
}

// mismatch returns the first field in which ins disagrees with the staged
// capture of p, or "". Whoever holds the public key can seal; the stored
// payment is the truth.
func mismatch(ins *surgepay.CaptureInstruction, p *surgepay.Payment) string {
	t := p.StagedCapture()
	switch {
	case ins.Amount != t.Amount:
		return "amount"
	case ins.Currency != p.Currency:
		return "currency"
	case ins.AuthorizationRef != p.AuthorizationRef:
		return "authorization_ref"
	case t.IdempotencyKey != "" && ins.IdempotencyKey != t.IdempotencyKey:
		return "idempotency_key"
	}
	return ""
}

// capture asks the provider to capture, keeping the three outcomes apart:
// a result (approved or declined) is returned; not performed is retried
// RetryMax times with backoff; unknown is looked up by key, never retried
// blindly. With no result it returns the reason the record is left.
func (r *runner) capture(ctx, work context.Context, ins *surgepay.CaptureInstruction) (*surgepay.ProviderResult, string) {
	req := &surgepay.CaptureRequest{IdempotencyKey: ins.IdempotencyKey, AuthorizationRef: ins.AuthorizationRef,
		Amount: ins.Amount, Currency: ins.Currency}
	for attempt := 0; ; attempt++ {
		res, err := r.cfg.Provider.Capture(work, req)
		if err == nil {
			return res, ""
		}
		if surgepay.IsUnknown(err) {
			res, err = r.lookup(ctx, work, ins.IdempotencyKey)
			if err == nil {
				return res, ""
			}
			if surgepay.IsUnknown(err) {
				r.cfg.Logger.Warn("settle: capture outcome unknown; left for a later run", "payment", ins.PaymentID, "err", err.Error())
				return nil, ReasonUnknown
			}
			// Not performed: the capture did not happen; retrying the same key is safe.
		}
		if errors.Is(err, surgepay.ErrKeyReused) {
			r.cfg.Logger.Error("settle: provider refused the capture key's parameters", "payment", ins.PaymentID, "err", err.Error())
			return nil, ReasonKeyReused
		}
		if attempt >= r.cfg.RetryMax || !sleep(ctx, r.cfg.RetryBackoff<<attempt) {
			return nil, ReasonRetryLater
		}
	}
}

// lookup resolves an unknown capture by its key. An answer for another
// operation under the key is unknown.
func (r *runner) lookup(ctx, work context.Context, key string) (*surgepay.ProviderResult, error) {
	var err error
	for try := 0; try < lookupTriesMax; try++ {
		if try > 0 && !sleep(ctx, r.cfg.RetryBackoff<<(try-1)) {
			break
		}
		var res *surgepay.ProviderResult
		res, err = r.cfg.Provider.Lookup(work, key)
		if err == nil {
			if res.Operation != "" && res.Operation != surgepay.TxCapture {
				return nil, &surgepay.ProviderError{Outcome: surgepay.Unknown, Op: "lookup",
					Err: errors.New("the key names a " + res.Operation + ", not a capture")}
			}
			return res, nil
		}
		if !surgepay.IsUnknown(err) {
			return nil, err
		}
	}
	return nil, err
}

// record stores the provider's answer on the payment: one Write, issued
// concurrently with the rest of the batch so the store group-commits them.
// A concurrent update reloads the payment and tries again.
func (r *runner) record(ctx, work context.Context, d decision) outcome {
	out := d.out
	p := d.p
	for try := 0; ; try++ {
		next := p.Clone()
		now := r.cfg.Now()
		typ := EventCapture
		if d.res.Approved {
			next.SettleCapture(d.res.Reference, now)
		} else {
			typ = EventCaptureFailed
			next.FailStagedCapture(declineCode(d.res), d.res.Message, now)
		}
		w := &surgepay.Write{PaymentUpdate: next, Events: []*surgepay.Event{{ID: surgepay.NewID("evt"),
			PaymentID: p.ID, MerchantID: p.MerchantID, Type: typ, FromStatus: p.Status, ToStatus: next.Status,
			Amount: d.ins.Amount, ActorKeyID: Actor, RequestID: out.rec.ID, Created: now}}}
		if r.inWrite != nil {
			w.StagedAck = []string{out.rec.ID}
		}
		err := r.cfg.Store.Apply(work, w)
		if err == nil {
			out.ack, out.ackedInWrite = true, r.inWrite != nil
			out.currency, out.amount = p.Currency, d.ins.Amount
			out.result = resultCaptured
			if !d.res.Approved {
				out.result, out.reason = resultFailed, ReasonDeclined+declineCode(d.res)
			}
			return out
		}
		retry := false
		switch {
		case surgepay.ErrorReason(err) == "concurrent_update" && try < conflictRetryMax:
			q, ferr := r.cfg.Store.FindPayment(work, p.MerchantID, p.ID)
			if ferr != nil {
				err = ferr
				break
			}
			if q.StagedCapture() == nil { // settled by someone else meanwhile
				out.ack, out.result = true, resultSettled
				return out
			}
			p, retry = q, true
		case surgepay.ErrorCode(err) == surgepay.EUNAVAILABLE && try < conflictRetryMax:
			retry = sleep(ctx, r.cfg.RetryBackoff<<try)
		}
		if !retry {
			// The provider's answer is kept under its key: a later run
			// replays it and records it then.
			r.cfg.Logger.Error("settle: record result", "record", out.rec.ID, "payment", p.ID, "err", err.Error())
			out.reason = ReasonStore
			return out
		}
	}
}

func declineCode(res *surgepay.ProviderResult) string {
	if res.DeclineCode == "" {
		return surgepay.DeclineGeneric
	}
	return res.DeclineCode
}

// acknowledge removes what is done from the stage, only now that every
// result is durable.
func (r *runner) acknowledge(ctx context.Context, outs []outcome) {
	var acks, inWrite []*surgepay.StagedRecord
	for _, o := range outs {
		switch {
		case o.ackedInWrite:
			inWrite = append(inWrite, o.rec)
		case o.ack:
			acks = append(acks, o.rec)
		}
	}
	if len(inWrite) > 0 {
		r.inWrite.AckedInWrite(inWrite)
	}
	if len(acks) > 0 {
		if err := r.cfg.Consumer.Ack(ctx, acks); err != nil {
			// Harmless: the records come back and are acknowledged then.
			r.cfg.Logger.Warn("settle: acknowledge", "records", len(acks), "err", err.Error())
		}
	}
}

// tally adds the batch to the report and returns its captures.
func (r *runner) tally(outs []outcome) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	captured := 0
	for _, o := range outs {
		r.rep.add(o)
		if o.ack {
			delete(r.left, o.rec.ID)
		} else {
			r.left[o.rec.ID] = struct{}{}
		}
		if o.result == resultCaptured {
			captured++
		}
	}
	return captured
}
