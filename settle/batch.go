package settle

import (
	"context"
	"errors"
	"maps"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/groupcommit"
	"github.com/surgepay/surgepay/internal/wait"
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
	orphanIn     time.Duration // ReasonOrphanWait: until the record is an orphan
	late         bool          // ReasonStore: its result was not recorded within the batch's time
}

const (
	resultCaptured = "captured"
	resultFailed   = "failed"
	resultSettled  = "already_settled"
)

// errBatchDeadline is the cause of a batch context whose time is up.
var errBatchDeadline = errors.New("settle: the batch's time is up")

// errRecordDeadline is the cause of a batch's recording context whose time
// is up.
var errRecordDeadline = errors.New("settle: the batch's time to record results is up")

// decision is what the open/load/provider phase found out.
type decision struct {
	out outcome // final unless res is set, or ins is set and the record still to decide
	ins *surgepay.CaptureInstruction
	p   *surgepay.Payment
	res *surgepay.ProviderResult // a final provider answer to record
}

// leftRecord is a record this run left for later.
type leftRecord struct {
	payment surgepay.PaymentKey // as the record names it (see checkPending)
	times   int                 // times this run left it
	waiting bool                // released to come back soon: an UntilEmpty run waits for it
}

// batch settles the prepared batch b and acknowledges what is done. It
// closes tail once every record has started its capture or been decided
// without one (at the latest when it returns). It returns the captures
// recorded.
//
// With AckWait, the batch starts no capture later than its deadline (see
// Config.AckWait), and records no result later than AckWait - AckReserve
// after its fetch: a result not recorded by then is left for later,
// unacknowledged (ReasonStore), for its record may come back any moment;
// the provider replays its answer to that delivery, under the same key.
func (r *runner) batch(ctx context.Context, b *prepared, tail chan<- struct{}) int {
	work := context.WithoutCancel(ctx) // finish the batch on shutdown
	rec := work                        // records the results
	if r.cfg.AckWait > 0 {
		var cancel, cancelRec context.CancelFunc
		ctx, cancel = context.WithDeadlineCause(ctx, b.fetched.Add(r.cfg.AckWait-r.cfg.CallTimeout-ResultReserve), errBatchDeadline)
		defer cancel()
		rec, cancelRec = context.WithDeadlineCause(work, b.fetched.Add(r.cfg.AckWait-AckReserve), errRecordDeadline)
		defer cancelRec()
		// A store's group commit stops waiting for queue room then, instead
		// of up to groupcommit.SubmitWaitMax.
		rec = groupcommit.WithBoundedWait(rec)
	}
	tl := &batchTail{c: tail}
	tl.left.Store(int64(len(b.ds)))
	defer tl.end()
	outs := make([]outcome, len(b.recs))
	sw, many := r.cfg.Store.(surgepay.SettlementWriter)
	var wg sync.WaitGroup
	for i := range b.ds {
		wg.Go(func() {
			d := &b.ds[i]
			if d.ins == nil {
				tl.started()
			} else {
				r.sem <- struct{}{}
				r.decide(ctx, work, d, b.payments, tl.started)
				<-r.sem // the Apply below does not hold a provider slot
			}
			switch {
			case d.res == nil:
				outs[i] = d.out
			case !many:
				outs[i] = r.record(ctx, rec, d)
			}
		})
	}
	wg.Wait()
	if many {
		r.recordMany(ctx, rec, sw, b.ds, outs)
	}
	r.logLate(rec, outs)
	captured, releases := r.tally(outs)
	r.acknowledge(work, outs, releases)
	return captured
}

// batchTail closes c once left records have started: their capture begun,
// or decided without one. The batch is then in its tail, and the next one
// is fetched (see runner.loop).
type batchTail struct {
	left atomic.Int64
	once sync.Once
	c    chan<- struct{}
}

func (t *batchTail) started() {
	if t.left.Add(-1) == 0 {
		t.end()
	}
}

func (t *batchTail) end() { t.once.Do(func() { close(t.c) }) }

// logLate logs, once per batch, the results not recorded within the
// batch's time.
func (r *runner) logLate(rec context.Context, outs []outcome) {
	late := 0
	for _, o := range outs {
		if o.late {
			late++
		}
	}
	if late > 0 {
		r.cfg.Logger.Warn("settle: results not recorded within the batch's time (AckWait); their records are left for later "+
			"and the provider replays each answer to the next delivery", "records", late, "err", context.Cause(rec).Error())
	}
}

// open opens every record, on every CPU. A record that does not open is
// decided: its decision has no instruction.
func (r *runner) open(recs []*surgepay.StagedRecord) []decision {
	ds := make([]decision, len(recs))
	n := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	for w := range n {
		wg.Go(func() {
			for i := w; i < len(recs); i += n {
				ds[i] = r.openOne(recs[i])
			}
		})
	}
	wg.Wait()
	return ds
}

func (r *runner) openOne(rec *surgepay.StagedRecord) decision {
	log := r.cfg.Logger
	ins, err := r.cfg.Opener.Open(rec.Sealed)
	if err != nil {
		if errors.Is(err, stage.ErrWrongKey) || errors.Is(err, stage.ErrVersion) {
			log.Error("settle: record not for this settlement key; left at the stage", "record", rec.ID, "err", err.Error())
			return decision{out: outcome{rec: rec, reason: ReasonWrongKey}}
		}
		// Left for an operator, like a mismatch: acknowledging it would
		// delete the only trace of a capture still pending. Its cleartext
		// fields (payment, merchant) are not authenticated: it is logged
		// by record ID only, and no payment is touched.
		log.Error("settle: tampered record left at the stage for an operator; never captured", "record", rec.ID)
		return decision{out: outcome{rec: rec, reason: ReasonTampered}}
	}
	if ins.PaymentID != rec.PaymentID || ins.MerchantID != rec.MerchantID {
		log.Warn("settle: record headers disagree with the sealed instruction; using the instruction", "record", rec.ID, "payment", ins.PaymentID)
	}
	return decision{ins: ins, out: outcome{rec: rec}}
}

// preload reads the payments of ds in one statement when the store has
// the PaymentsFinder capability; nil otherwise, or if the read fails, and
// then each record reads its own.
func (r *runner) preload(ctx context.Context, ds []decision) map[surgepay.PaymentKey]*surgepay.Payment {
	pf, ok := r.cfg.Store.(surgepay.PaymentsFinder)
	if !ok {
		return nil
	}
	keys := make([]surgepay.PaymentKey, 0, len(ds))
	for _, d := range ds {
		if d.ins != nil {
			keys = append(keys, surgepay.PaymentKey{MerchantID: d.ins.MerchantID, ID: d.ins.PaymentID})
		}
	}
	if len(keys) == 0 {
		return nil
	}
	ps, err := pf.FindPayments(ctx, keys)
	if err != nil {
		r.cfg.Logger.Warn("settle: load the batch's payments; loading them one by one", "payments", len(keys), "err", err.Error())
		return nil
	}
	m := make(map[surgepay.PaymentKey]*surgepay.Payment, len(ps))
	for _, p := range ps {
		m[surgepay.PaymentKey{MerchantID: p.MerchantID, ID: p.ID}] = p
	}
	return m
}

// decide loads the payment of d's opened instruction (from payments when
// preloaded) and, when it still has a staged capture, captures it at the
// provider; it sets d.out, or d.res to record. It calls started once, when
// the capture is about to start or d is decided without one. ctx ends
// retries; work carries the calls.
func (r *runner) decide(ctx, work context.Context, d *decision, payments map[surgepay.PaymentKey]*surgepay.Payment, started func()) {
	ins := d.ins
	p := r.ready(ctx, work, d, payments)
	started()
	if p == nil {
		return
	}
	res, reason := r.capture(ctx, work, ins)
	if res == nil {
		d.out = outcome{rec: d.out.rec, reason: reason}
		return
	}
	d.ins, d.p, d.res = ins, p, res
}

// ready returns the payment of d's instruction if its capture may start
// now: the payment is stored and still has the staged capture ins
// describes, the batch's time is not up and, under RateMax, the capture's
// turn has come. Otherwise it decides d (sets d.out) and returns nil.
func (r *runner) ready(ctx, work context.Context, d *decision, payments map[surgepay.PaymentKey]*surgepay.Payment) *surgepay.Payment {
	log := r.cfg.Logger
	ins, rec := d.ins, d.out.rec
	d.ins = nil
	leave := func(reason string) { d.out = outcome{rec: rec, reason: reason} }
	p, err := r.load(work, ins, payments)
	if surgepay.ErrorCode(err) == surgepay.ENOTFOUND {
		// The later of the two times: a record is never called an orphan early.
		born := ins.Authorized
		if rec.Created.After(born) {
			born = rec.Created
		}
		if age := r.cfg.Now().Sub(born); age < r.cfg.OrphanGrace {
			leave(ReasonOrphanWait)
			d.out.orphanIn = r.cfg.OrphanGrace - age
			return nil
		}
		log.Warn("settle: orphan record acknowledged: its payment was never stored", "record", rec.ID, "payment", ins.PaymentID)
		d.out = outcome{rec: rec, ack: true, reason: ReasonOrphan}
		return nil
	}
	if err != nil {
		log.Error("settle: load payment", "record", rec.ID, "payment", ins.PaymentID, "err", err.Error())
		leave(ReasonStore)
		return nil
	}
	if p.StagedCapture() == nil {
		d.out = outcome{rec: rec, ack: true, result: resultSettled}
		return nil
	}
	r.checkExpiry(ins)
	if why := mismatch(ins, p); why != "" {
		log.Error("settle: instruction disagrees with the payment; left at the stage", "record", rec.ID, "payment", p.ID, "field", why)
		leave(ReasonMismatch)
		return nil
	}
	if context.Cause(ctx) == errBatchDeadline {
		leave(ReasonDeadline)
		return nil
	}
	if r.limiter != nil {
		if err := r.limiter.Wait(ctx); err != nil {
			// The batch's time would run out before the capture's turn, or
			// the run is ending: nothing was done, the record goes back to
			// the stage at once (not counted as left).
			leave(ReasonDeadline)
			return nil
		}
	}
	return p
}

// load returns the payment of ins: from payments when preloaded, else from
// the store. A payment the preload did not find is read again now: the
// preload may have run a whole batch earlier, before the payment committed,
// and "not found" decides whether a record is an orphan, never captured.
func (r *runner) load(ctx context.Context, ins *surgepay.CaptureInstruction, payments map[surgepay.PaymentKey]*surgepay.Payment) (*surgepay.Payment, error) {
	if p, ok := payments[surgepay.PaymentKey{MerchantID: ins.MerchantID, ID: ins.PaymentID}]; ok {
		return p, nil
	}
	return r.cfg.Store.FindPayment(ctx, ins.MerchantID, ins.PaymentID)
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
// blindly. With no result it returns the reason the record is left. Each
// call is bounded by CallTimeout.
func (r *runner) capture(ctx, work context.Context, ins *surgepay.CaptureInstruction) (*surgepay.ProviderResult, string) {
	req := &surgepay.CaptureRequest{IdempotencyKey: ins.IdempotencyKey, AuthorizationRef: ins.AuthorizationRef,
		Amount: ins.Amount, Currency: ins.Currency}
	for attempt := 0; ; attempt++ {
		call, cancel := context.WithTimeout(work, r.cfg.CallTimeout)
		sent := time.Now()
		res, err := r.cfg.Provider.Capture(call, req)
		cancel()
		if err == nil {
			return res, ""
		}
		if surgepay.IsUnknown(err) {
			res, err = r.lookup(ctx, work, &surgepay.LookupQuery{Key: ins.IdempotencyKey, Operation: surgepay.TxCapture,
				Processor: surgepay.ProcessorOf(err), MerchantID: ins.MerchantID, AuthorizationRef: ins.AuthorizationRef,
				Amount: ins.Amount, Currency: ins.Currency, Attempted: sent})
			if err == nil {
				return res, ""
			}
			if surgepay.IsUnknown(err) {
				r.cfg.Logger.Warn("settle: capture outcome unknown; left for later", "payment", ins.PaymentID, "err", err.Error())
				return nil, ReasonUnknown
			}
			// Not performed: the capture did not happen; retrying the same key is safe.
		}
		if errors.Is(err, surgepay.ErrKeyReused) {
			r.cfg.Logger.Error("settle: provider refused the capture key's parameters", "payment", ins.PaymentID, "err", err.Error())
			return nil, ReasonKeyReused
		}
		if attempt >= r.cfg.RetryMax || wait.Sleep(ctx, r.cfg.RetryBackoff<<attempt) != nil {
			return nil, ReasonRetryLater
		}
	}
}

// lookup resolves an unknown capture by its key, while ctx lasts. An
// answer for another operation under the key is unknown.
func (r *runner) lookup(ctx, work context.Context, q *surgepay.LookupQuery) (*surgepay.ProviderResult, error) {
	err := error(&surgepay.ProviderError{Outcome: surgepay.Unknown, Op: "lookup", Err: context.Cause(ctx)})
	for try := 0; try < lookupTriesMax; try++ {
		if ctx.Err() != nil || (try > 0 && wait.Sleep(ctx, r.cfg.RetryBackoff<<(try-1)) != nil) {
			break
		}
		call, cancel := context.WithTimeout(work, r.cfg.CallTimeout)
		var res *surgepay.ProviderResult
		res, err = surgepay.LookupOperation(call, r.cfg.Provider, q)
		cancel()
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

// resultWrite returns the Write that records d's provider answer on p.
func (r *runner) resultWrite(d *decision, p *surgepay.Payment) *surgepay.Write {
	next := p.Clone()
	now := r.cfg.Now()
	typ := EventCapture
	if d.res.Approved {
		next.SettleCapture(d.res.Reference, now)
	} else {
		typ = EventCaptureFailed
		next.FailStagedCapture(declineCode(d.res), d.res.Message, now)
	}
	w := &surgepay.Write{ProviderActed: true, PaymentUpdate: next, Events: []*surgepay.Event{{ID: surgepay.NewID("evt"),
		PaymentID: p.ID, MerchantID: p.MerchantID, Type: typ, FromStatus: p.Status, ToStatus: next.Status,
		Amount: d.ins.Amount, ActorKeyID: Actor, RequestID: d.out.rec.ID, Created: now}}}
	if r.inWrite != nil {
		w.StagedAck = []string{d.out.rec.ID}
	}
	if r.counts(d, p) {
		if delta, ok := surgepay.AnalyticsOf(p, next, now); ok {
			w.Analytics = []surgepay.AnalyticsDelta{delta}
		}
	}
	return w
}

// counts reports whether the result Write of d on p carries an analytics
// delta: a declined capture of a merchant whose analytics are on.
func (r *runner) counts(d *decision, p *surgepay.Payment) bool {
	return !d.res.Approved && r.cfg.Analytics != nil && r.cfg.Analytics(p.MerchantID)
}

// recorded returns the outcome of d once its result Write on p is durable.
func (r *runner) recorded(d *decision, p *surgepay.Payment) outcome {
	out := d.out
	out.ack, out.ackedInWrite = true, r.inWrite != nil
	out.currency, out.amount = p.Currency, d.ins.Amount
	out.result = resultCaptured
	if !d.res.Approved {
		out.result, out.reason = resultFailed, ReasonDeclined+declineCode(d.res)
	}
	return out
}

// record stores the provider's answer on the payment: one Write, issued
// concurrently with the rest of the batch so the store group-commits them.
// A concurrent update reloads the payment and tries again. ctx ends
// retries; rec carries the store calls, and once it ends no Write is
// issued: the result is left for later (late).
func (r *runner) record(ctx, rec context.Context, d *decision) outcome {
	out := d.out
	p := d.p
	for try := 0; ; try++ {
		if rec.Err() != nil {
			out.reason, out.late = ReasonStore, true
			return out
		}
		err := r.cfg.Store.Apply(rec, r.resultWrite(d, p))
		if err == nil {
			return r.recorded(d, p)
		}
		retry := false
		switch {
		case errors.Is(err, surgepay.ErrConcurrentUpdate) && try < conflictRetryMax:
			q, ferr := r.cfg.Store.FindPayment(rec, p.MerchantID, p.ID)
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
			retry = wait.Sleep(ctx, r.cfg.RetryBackoff<<try) == nil
		}
		if !retry {
			// The provider's answer is kept under its key: a later
			// delivery replays it and records it then.
			out.reason, out.late = ReasonStore, rec.Err() != nil
			if !out.late { // late ones are logged together, by batch
				r.cfg.Logger.Error("settle: record result", "record", out.rec.ID, "payment", p.ID, "err", err.Error())
			}
			return out
		}
	}
}

// recordMany stores the provider answers of ds with sw: up to
// settlementStatementsMax statements at once, each for at least
// settlementChunkMin results. A result it did not store (the payment
// changed meanwhile, a second record of one payment, an error) goes
// through record, one Write each, which reloads a changed payment; so does
// a result with an analytics delta (a declined capture), which
// ApplySettlements does not store. ctx and rec are as for record.
func (r *runner) recordMany(ctx, rec context.Context, sw surgepay.SettlementWriter, ds []decision, outs []outcome) {
	var many, solo []int
	seen := map[surgepay.PaymentKey]bool{}
	for i := range ds {
		if ds[i].res == nil {
			continue
		}
		k := surgepay.PaymentKey{MerchantID: ds[i].p.MerchantID, ID: ds[i].p.ID}
		if seen[k] || r.counts(&ds[i], ds[i].p) {
			solo = append(solo, i)
		} else {
			many = append(many, i)
		}
		seen[k] = true
	}
	if rec.Err() != nil { // too late: record leaves each for later
		many, solo = nil, append(solo, many...)
	}
	size := max(settlementChunkMin, (len(many)+settlementStatementsMax-1)/settlementStatementsMax)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for chunk := range slices.Chunk(many, max(size, 1)) {
		wg.Go(func() {
			ws := make([]*surgepay.Write, len(chunk))
			for j, i := range chunk {
				ws[j] = r.resultWrite(&ds[i], ds[i].p)
			}
			stored, err := sw.ApplySettlements(rec, ws)
			if err != nil && rec.Err() == nil { // late ones are logged together, by batch
				r.cfg.Logger.Warn("settle: record results; recording them one by one", "results", len(ws), "err", err.Error())
			}
			for j, i := range chunk {
				if err == nil && stored[j] {
					outs[i] = r.recorded(&ds[i], ds[i].p)
					continue
				}
				mu.Lock()
				solo = append(solo, i)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, i := range solo {
		wg.Go(func() { outs[i] = r.record(ctx, rec, &ds[i]) })
	}
	wg.Wait()
}

func declineCode(res *surgepay.ProviderResult) string {
	if res.DeclineCode == "" {
		return surgepay.DeclineGeneric
	}
	return res.DeclineCode
}

// tally adds the batch to the report and to the records left for later,
// and returns its captures and the records to release, by delay.
func (r *runner) tally(outs []outcome) (int, map[time.Duration][]*surgepay.StagedRecord) {
	r.mu.Lock()
	defer r.mu.Unlock()
	captured := 0
	releases := map[time.Duration][]*surgepay.StagedRecord{}
	for _, o := range outs {
		r.rep.add(o)
		switch {
		case o.ack:
			delete(r.left, o.rec.ID)
		case o.reason == ReasonDeadline:
			releases[0] = append(releases[0], o.rec) // not tried: not left
		default:
			l := r.left[o.rec.ID]
			if l == nil {
				l = &leftRecord{}
				if o.reason != ReasonTampered && o.reason != ReasonWrongKey {
					// The record opened: its payment is the one it names (a
					// sealed record that did not open names an unverified
					// one, which must not hide that payment from checkPending).
					l.payment = surgepay.PaymentKey{MerchantID: o.rec.MerchantID, ID: o.rec.PaymentID}
				}
				r.left[o.rec.ID] = l
			}
			delay, soon := r.redelivery(o, l.times)
			l.times++
			l.waiting = soon && r.releaser != nil && l.times <= LeftRedeliveriesMax
			releases[delay] = append(releases[delay], o.rec)
		}
		if o.result == resultCaptured {
			captured++
		}
	}
	return captured, releases
}

// redelivery returns when a record left for later for the times-th time
// (from 0) should come back, and whether it should come back soon: the
// backoff RetryBackoff << times, at most RedeliveryDelayMax, and for a
// record whose payment is not stored yet, at most until it would be an
// orphan. Records left for an operator (tampered, mismatch, wrong key, key
// reused) come back after RedeliveryDelayMax.
func (r *runner) redelivery(o outcome, times int) (time.Duration, bool) {
	switch o.reason {
	case ReasonRetryLater, ReasonUnknown, ReasonStore, ReasonOrphanWait:
	default:
		return RedeliveryDelayMax, false
	}
	d := r.cfg.RetryBackoff
	for range times {
		if d >= RedeliveryDelayMax {
			break
		}
		d *= 2
	}
	d = min(d, RedeliveryDelayMax)
	if o.reason == ReasonOrphanWait && o.orphanIn > 0 {
		d = min(d, o.orphanIn)
	}
	return d, true
}

// acknowledge removes what is done from the stage, only now that every
// result is durable, and releases what is left for later.
func (r *runner) acknowledge(ctx context.Context, outs []outcome, releases map[time.Duration][]*surgepay.StagedRecord) {
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
	if r.releaser == nil {
		return // they come back after the stage's AckWait
	}
	for _, delay := range slices.Sorted(maps.Keys(releases)) {
		if err := r.releaser.Release(ctx, releases[delay], delay); err != nil {
			// They come back after the stage's AckWait instead.
			r.cfg.Logger.Warn("settle: release records left for later", "records", len(releases[delay]), "err", err.Error())
		}
	}
}

// checkExpiry counts and logs a capture attempted near or past its
// authorization's deadline (Config.AuthorizationLifetime).
func (r *runner) checkExpiry(ins *surgepay.CaptureInstruction) {
	if ins.Authorized.IsZero() {
		return
	}
	left := ins.Authorized.Add(r.cfg.AuthorizationLifetime).Sub(r.cfg.Now())
	switch {
	case left <= 0:
		r.pastExpiry.Add(1)
		r.cfg.Logger.Warn("settle: capturing an authorization past its processor's lifetime; it may have been released",
			"payment", ins.PaymentID, "authorized", ins.Authorized, "past_by", (-left).Round(time.Minute).String())
	case left <= r.cfg.ExpiryWarning:
		r.nearExpiry.Add(1)
		r.cfg.Logger.Warn("settle: capturing an authorization near its processor's lifetime",
			"payment", ins.PaymentID, "authorized", ins.Authorized, "left", left.Round(time.Minute).String())
	}
}
