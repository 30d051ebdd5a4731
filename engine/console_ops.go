package engine

import (
	"context"
	"slices"
	"time"

	"github.com/surgepay/surgepay"
)

// The operators' console's operations views (package console) read
// through these: the staged captures waiting for settlement, the
// payments whose outcome the reconciler has yet to learn, and the names
// of the configured processors. All are reads; none changes anything.

// Stage kinds, as StagedBacklog reports them.
const (
	StageOff       = "off"       // no stage: the streamlined path is off and the store holds none
	StageEmbedded  = "embedded"  // the records are rows of the store (surgepay.StagedStore)
	StageJetStream = "jetstream" // the records are at NATS JetStream (Config.Stage)
)

// StagedSampleMax bounds the staged records StagedBacklog opens the
// payments of (one FetchStaged and one FindPayments): the oldest, whose
// amounts and authorization times it sums. A backlog during an event
// holds millions; the oldest are the ones nearest their deadline.
const StagedSampleMax = 1000

// StagedBacklog is the stage's backlog as StagedBacklog reads it.
type StagedBacklog struct {
	Kind string // StageOff, StageEmbedded or StageJetStream
	// PathOff is true when this server stages nothing new (no settlement
	// public key); records staged before may still wait at the store.
	PathOff bool
	Depth   int       // records waiting for settlement (JetStream: delivered or not)
	Oldest  time.Time // when the oldest was staged; zero if none
	// Sampled is how many of the oldest records were matched to their
	// payments (at most StagedSampleMax); 0 for JetStream, whose records
	// cannot be read without delivering them to this reader, and sealed.
	Sampled int
	// Amounts sums the staged captures of the Sampled records by currency
	// (minor units); complete only when Sampled == Depth.
	Amounts map[string]int64
	// OldestAuthorized is the earliest authorization among the Sampled
	// records' payments (the nearest authorization deadline is this plus
	// the processor's authorization lifetime); zero if none was sampled.
	OldestAuthorized time.Time
	// Missing counts sampled records whose payment has no staged capture
	// (settled since the count, or not committed: see settle's orphans).
	Missing int
}

// stageBacklogger is the external stage's count (jetstream.Stage has it).
type stageBacklogger interface {
	Backlog(ctx context.Context) (int, time.Time, error)
}

// storeAs returns the store, or the store it decorates, as a T.
func storeAs[T any](s surgepay.Store) (T, bool) {
	for {
		if t, ok := s.(T); ok {
			return t, true
		}
		u, ok := s.(interface{ Unwrap() surgepay.Store })
		if !ok {
			var zero T
			return zero, false
		}
		s = u.Unwrap()
	}
}

// StagedBacklog returns the staged captures waiting for settlement at
// the stage this engine stages to: their count and the oldest's time
// (the stage's own count, as /metrics reads it), and for the embedded
// stage the amounts and authorization times of the oldest
// StagedSampleMax, read with two statements. The embedded count reads
// the whole table (SQLite: about a second for 3 million records).
// EUNAVAILABLE if the stage cannot count.
func (e *Engine) StagedBacklog(ctx context.Context) (*StagedBacklog, error) {
	pathOff := e.cfg.Sealer == nil
	if e.cfg.Stage != nil {
		b, ok := e.cfg.Stage.(stageBacklogger)
		if !ok {
			return nil, stageUnavailable("this server's stage cannot count its records")
		}
		n, oldest, err := b.Backlog(ctx)
		if err != nil {
			e.log.Warn("console: count the stage's backlog", "err", err.Error())
			return nil, stageUnavailable("the stage (JetStream) did not answer; the server's log has the detail")
		}
		return &StagedBacklog{Kind: StageJetStream, PathOff: pathOff, Depth: n, Oldest: oldest}, nil
	}
	st, ok := storeAs[surgepay.StagedStore](e.store)
	if !ok {
		if pathOff {
			return &StagedBacklog{Kind: StageOff, PathOff: true}, nil
		}
		return nil, stageUnavailable("this server's store holds no stage")
	}
	n, oldest, err := st.StagedBacklog(ctx)
	if err != nil {
		return nil, err
	}
	out := &StagedBacklog{Kind: StageEmbedded, PathOff: pathOff, Depth: n, Oldest: oldest, Amounts: map[string]int64{}}
	if n == 0 {
		return out, nil
	}
	return out, e.sampleStaged(ctx, st, out)
}

// sampleStaged sums the oldest StagedSampleMax records' captures.
func (e *Engine) sampleStaged(ctx context.Context, st surgepay.StagedStore, out *StagedBacklog) error {
	finder, ok := storeAs[surgepay.PaymentsFinder](e.store)
	if !ok {
		return nil // the count and the oldest stand; the page says nothing was sampled
	}
	recs, err := st.FetchStaged(ctx, "", StagedSampleMax)
	if err != nil {
		return err
	}
	keys := make([]surgepay.PaymentKey, len(recs))
	for i, r := range recs {
		keys[i] = surgepay.PaymentKey{MerchantID: r.MerchantID, ID: r.PaymentID}
	}
	ps, err := finder.FindPayments(ctx, keys)
	if err != nil {
		return err
	}
	out.Sampled, out.Missing = len(recs), len(recs)
	for _, p := range ps {
		tx := p.StagedCapture()
		if tx == nil {
			continue
		}
		out.Missing--
		out.Amounts[p.Currency] += tx.Amount
		if at := authorizedAt(p); !at.IsZero() && (out.OldestAuthorized.IsZero() || at.Before(out.OldestAuthorized)) {
			out.OldestAuthorized = at
		}
	}
	return nil
}

// authorizedAt returns when p's authorization was made; zero if none.
func authorizedAt(p *surgepay.Payment) time.Time {
	for _, t := range p.Transactions {
		if t.Type == surgepay.TxAuthorization && t.Status == surgepay.TxSucceeded {
			return t.Created
		}
	}
	return time.Time{}
}

func stageUnavailable(msg string) error {
	return &surgepay.Error{Code: surgepay.EUNAVAILABLE, Reason: "stage_unavailable", Message: msg}
}

// UnknownOutcomesMax bounds ListUnknownOutcomes: both stores' bound of
// ListProcessing.
const UnknownOutcomesMax = 1000

// ListUnknownOutcomes returns up to limit (1 to UnknownOutcomesMax)
// payments of any merchant in processing, oldest first: the reconciler's
// own query (ReconcileOnce looks at the first ReconcileBatchMax of them
// each pass). One statement.
func (e *Engine) ListUnknownOutcomes(ctx context.Context, limit int) ([]*surgepay.Payment, error) {
	if limit < 1 || limit > UnknownOutcomesMax {
		return nil, surgepay.Invalid("limit", "invalid_value", "limit must be 1 to %d", UnknownOutcomesMax)
	}
	return e.store.ListProcessing(ctx, limit, "")
}

// ProcessorNames returns the names of the configured processors
// ([processors] and "default"), sorted; none when the provider is not a
// router (the [provider] section alone).
func (e *Engine) ProcessorNames() []string {
	names := slices.Clone(e.processorNames())
	slices.Sort(names)
	return names
}
