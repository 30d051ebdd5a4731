package stage

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/surgepay/surgepay"
)

// AcksInWrite is the optional capability of a StageConsumer whose records
// live in the store itself (the embedded stage): settlement removes a
// record in the same Write as its payment's result, by listing its ID in
// Write.StagedAck, instead of calling Ack, and then calls AckedInWrite once
// that Write is durable.
type AcksInWrite interface {
	surgepay.StageConsumer
	// AckedInWrite tells the consumer that recs were removed by durable
	// Writes.
	AckedInWrite(recs []*surgepay.StagedRecord)
}

// Releaser is the optional capability of a StageConsumer that takes a
// fetched record back before its AckWait ends: settlement releases the
// records it leaves for later (the network did not perform the capture,
// the outcome is unknown, the payment is not stored yet) with its backoff,
// so that they come back after that delay instead of after AckWait.
type Releaser interface {
	surgepay.StageConsumer
	// Release hands recs back, to be delivered again after delay (0: at
	// once). A record not released is delivered again after AckWait.
	Release(ctx context.Context, recs []*surgepay.StagedRecord, delay time.Duration) error
}

// Embedded stage defaults.
const (
	// EmbeddedAckWaitDefault is how long a fetched record stays handed out
	// before it is delivered again if not acknowledged.
	EmbeddedAckWaitDefault = 30 * time.Second
	// embeddedPoll spaces store reads while Fetch waits for records.
	embeddedPoll = 50 * time.Millisecond
	// embeddedInflightMax bounds records handed out and not acknowledged.
	embeddedInflightMax = 100_000
	// embeddedScanPagesMax bounds the store reads of one Fetch.
	embeddedScanPagesMax = 8
)

// Embedded consumes the embedded stage: staged records stored with their
// payments by a store with the surgepay.StagedStore capability. It hands
// records out oldest first and remembers, in memory, those handed out and
// not yet acknowledged; after AckWait, or the delay they were released
// with, they are handed out again.
//
// One Embedded per store: two settlement processes on one embedded store
// would both hand out every record (harmless, since settlement is
// idempotent, but wasted work). Safe for concurrent use.
type Embedded struct {
	store   surgepay.Store
	staged  surgepay.StagedStore
	ackWait time.Duration
	now     func() time.Time

	mu       sync.Mutex
	cursor   string // the scan continues after this ID; "" starts over
	inflight map[string]*flight
}

type flight struct {
	rec *surgepay.StagedRecord
	due time.Time // handed out again from then: AckWait after delivery, or as released
}

var (
	_ surgepay.StageConsumer = (*Embedded)(nil)
	_ AcksInWrite            = (*Embedded)(nil)
	_ Releaser               = (*Embedded)(nil)
)

// NewEmbedded returns the consumer of store's embedded stage. ackWait 0
// means EmbeddedAckWaitDefault. The store must have the StagedStore
// capability.
func NewEmbedded(store surgepay.Store, ackWait time.Duration) (*Embedded, error) {
	ss, ok := store.(surgepay.StagedStore)
	if !ok {
		return nil, errors.New("stage: this store cannot hold the embedded stage (no StagedStore capability); use stage = \"jetstream\"")
	}
	if ackWait <= 0 {
		ackWait = EmbeddedAckWaitDefault
	}
	return &Embedded{store: store, staged: ss, ackWait: ackWait, now: time.Now, inflight: map[string]*flight{}}, nil
}

// Fetch returns up to limit records, waiting at most wait for the first:
// records due again (handed out longer than AckWait ago, or released and
// their delay over) first, then records never handed out, oldest first.
// The scan starts over from the oldest record whenever it reaches the
// newest, so a record that committed after a newer one was handed out is
// still found.
func (e *Embedded) Fetch(ctx context.Context, limit int, wait time.Duration) ([]*surgepay.StagedRecord, error) {
	if limit < 1 {
		return nil, errors.New("stage: fetch max must be positive")
	}
	deadline := e.now().Add(wait)
	for {
		recs, err := e.fetch(ctx, limit)
		if err != nil || len(recs) > 0 {
			return recs, err
		}
		left := deadline.Sub(e.now())
		if left <= 0 {
			return nil, nil
		}
		t := time.NewTimer(min(left, embeddedPoll))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

func (e *Embedded) fetch(ctx context.Context, limit int) ([]*surgepay.StagedRecord, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.now()
	var out []*surgepay.StagedRecord
	for _, f := range e.inflight {
		if len(out) == limit {
			return out, nil
		}
		if !now.Before(f.due) {
			f.due = now.Add(e.ackWait)
			out = append(out, f.rec)
		}
	}
	for page := 0; page < embeddedScanPagesMax && len(out) < limit && len(e.inflight) < embeddedInflightMax; page++ {
		n := limit - len(out)
		recs, err := e.staged.FetchStaged(ctx, e.cursor, n)
		if err != nil {
			return out, err // what is in out is in flight and comes back after AckWait
		}
		for _, r := range recs {
			e.cursor = r.ID
			if _, busy := e.inflight[r.ID]; busy {
				continue
			}
			e.inflight[r.ID] = &flight{rec: r, due: now.Add(e.ackWait)}
			out = append(out, r)
		}
		if len(recs) < n {
			e.cursor = "" // reached the newest: start over next time
			break
		}
	}
	return out, nil
}

// Ack removes recs from the store in one Write.
func (e *Embedded) Ack(ctx context.Context, recs []*surgepay.StagedRecord) error {
	if len(recs) == 0 {
		return nil
	}
	ids := make([]string, len(recs))
	for i, r := range recs {
		ids[i] = r.ID
	}
	if err := e.store.Apply(ctx, &surgepay.Write{StagedAck: ids}); err != nil {
		return err
	}
	e.AckedInWrite(recs)
	return nil
}

// Release hands recs out again after delay instead of after AckWait. A
// record not handed out by this Embedded is ignored.
func (e *Embedded) Release(ctx context.Context, recs []*surgepay.StagedRecord, delay time.Duration) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	due := e.now().Add(max(delay, 0))
	for _, r := range recs {
		if f, ok := e.inflight[r.ID]; ok {
			f.due = due
		}
	}
	return nil
}

// AckedInWrite forgets recs, removed by a durable Write.
func (e *Embedded) AckedInWrite(recs []*surgepay.StagedRecord) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, r := range recs {
		delete(e.inflight, r.ID)
	}
}

// Backlog returns the store's staged records (handed out or not) and the
// creation time of the oldest.
func (e *Embedded) Backlog(ctx context.Context) (int, time.Time, error) {
	return e.staged.StagedBacklog(ctx)
}
