// Package stagetest helps test the streamlined path: an in-memory store
// with the StagedStore capability, and a helper that makes streamlined
// sales (authorized at a provider, stored succeeded with the capture
// pending, the capture instruction sealed and staged) without the engine.
package stagetest

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/surgepay/surgepay"
)

// MemStore is an in-memory surgepay.Store holding merchants, payments,
// events and the embedded stage, with the same guards as a real store for
// what it holds. Other Store methods panic (the embedded nil interface).
// Safe for concurrent use.
type MemStore struct {
	surgepay.Store // nil: methods the settlement path does not use

	mu       sync.Mutex
	payments map[string]*surgepay.Payment
	events   map[string][]*surgepay.Event
	staged   map[string]*surgepay.StagedRecord

	// Applies counts successful Applies.
	Applies atomic.Int64
	// BeforeApply, if set, may fail a Write before it is stored.
	BeforeApply func(w *surgepay.Write) error
}

var (
	_ surgepay.Store       = (*MemStore)(nil)
	_ surgepay.StagedStore = (*MemStore)(nil)
)

// NewMemStore returns an empty MemStore.
func NewMemStore() *MemStore {
	return &MemStore{payments: map[string]*surgepay.Payment{}, events: map[string][]*surgepay.Event{},
		staged: map[string]*surgepay.StagedRecord{}}
}

// FindPayment returns a copy of the payment, ENOTFOUND if none.
func (s *MemStore) FindPayment(ctx context.Context, merchantID, id string) (*surgepay.Payment, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.payments[id]
	if !ok || p.MerchantID != merchantID {
		return nil, surgepay.NotFound("payment", "payment")
	}
	return p.Clone(), nil
}

// ListEvents returns the payment's events, oldest first.
func (s *MemStore) ListEvents(ctx context.Context, merchantID, paymentID string) ([]*surgepay.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*surgepay.Event(nil), s.events[paymentID]...), nil
}

// Apply stores the parts of w that MemStore holds, atomically.
func (s *MemStore) Apply(ctx context.Context, w *surgepay.Write) error {
	if s.BeforeApply != nil {
		if err := s.BeforeApply(w); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := w.PaymentInsert; p != nil {
		if _, ok := s.payments[p.ID]; ok {
			return fmt.Errorf("memstore: payment %s exists", p.ID)
		}
	}
	if p := w.PaymentUpdate; p != nil {
		old, ok := s.payments[p.ID]
		if !ok {
			return surgepay.NotFound("payment", "payment")
		}
		if old.Version != p.Version-1 {
			return surgepay.Conflict("concurrent_update", "payment %s changed", p.ID)
		}
	}
	if p := w.PaymentInsert; p != nil {
		s.payments[p.ID] = p.Clone()
	}
	if p := w.PaymentUpdate; p != nil {
		s.payments[p.ID] = p.Clone()
	}
	for _, e := range w.Events {
		s.events[e.PaymentID] = append(s.events[e.PaymentID], e)
	}
	if r := w.Staged; r != nil {
		s.staged[r.ID] = r
	}
	for _, id := range w.StagedAck {
		delete(s.staged, id)
	}
	s.Applies.Add(1)
	return nil
}

// FetchStaged returns up to limit staged records with IDs after afterID.
func (s *MemStore) FetchStaged(ctx context.Context, afterID string, limit int) ([]*surgepay.StagedRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*surgepay.StagedRecord
	for id, r := range s.staged {
		if id > afterID {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// StagedBacklog returns the staged records and the oldest's creation time.
func (s *MemStore) StagedBacklog(ctx context.Context) (int, time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var oldest time.Time
	for _, r := range s.staged {
		if oldest.IsZero() || r.Created.Before(oldest) {
			oldest = r.Created
		}
	}
	return len(s.staged), oldest, nil
}

// ListMerchants returns a merchant for each merchant ID among the stored
// payments (the settlement check of pending captures lists them).
func (s *MemStore) ListMerchants(ctx context.Context) ([]*surgepay.Merchant, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[string]bool{}
	var out []*surgepay.Merchant
	for _, p := range s.payments {
		if !seen[p.MerchantID] {
			seen[p.MerchantID] = true
			out = append(out, &surgepay.Merchant{ID: p.MerchantID})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// ListPayments lists the merchant's payments that pass f, newest first, as
// the stores do.
func (s *MemStore) ListPayments(ctx context.Context, merchantID string, f surgepay.PaymentFilter) ([]*surgepay.Payment, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*surgepay.Payment
	for _, p := range s.payments {
		switch {
		case p.MerchantID != merchantID, f.Status != "" && p.Status != f.Status,
			f.CustomerID != "" && p.CustomerID != f.CustomerID,
			!f.CreatedGTE.IsZero() && p.Created.Before(f.CreatedGTE),
			!f.CreatedBefore.IsZero() && !p.Created.Before(f.CreatedBefore),
			f.StartingAfter != "" && p.ID >= f.StartingAfter:
			continue
		}
		out = append(out, p.Clone())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID > out[j].ID })
	limit := f.Limit
	if limit <= 0 {
		limit = surgepay.ListLimitMax
	}
	if len(out) > limit {
		return out[:limit], true, nil
	}
	return out, false, nil
}

// Close does nothing.
func (s *MemStore) Close() error { return nil }

// Sale describes a streamlined sale to make.
type Sale struct {
	MerchantID string
	Amount     int64
	Currency   string // default "usd"
	Card       surgepay.PAN
}

// Staged is a streamlined sale made by MakeSale.
type Staged struct {
	Payment *surgepay.Payment
	Record  *surgepay.StagedRecord
}

// MakeSale authorizes s at prov (Capture false; an unknown outcome is
// looked up), stores the payment as the engine's streamlined path does
// (succeeded, capture transaction pending) and stages the sealed capture
// instruction: in the payment's Write when stage is nil (the embedded
// stage), else at stage before the Write, as the engine does.
func MakeSale(ctx context.Context, store surgepay.Store, prov surgepay.Provider, sealer surgepay.Sealer, stage surgepay.Stage, s Sale) (*Staged, error) {
	if s.Currency == "" {
		s.Currency = "usd"
	}
	now := time.Now().UTC()
	p := &surgepay.Payment{ID: surgepay.NewID("pay"), MerchantID: s.MerchantID, Amount: s.Amount, Currency: s.Currency,
		CaptureMethod: surgepay.CaptureAutomatic, Created: now, Updated: now}
	authKey, captureKey := p.ProviderKey(surgepay.TxAuthorization), p.ProviderKey(surgepay.TxCapture)
	res, err := prov.Authorize(ctx, &surgepay.AuthorizeRequest{IdempotencyKey: authKey, MerchantID: s.MerchantID,
		PaymentID: p.ID, Amount: s.Amount, Currency: s.Currency,
		Card: surgepay.ProviderCard{Number: s.Card, ExpMonth: 12, ExpYear: now.Year() + 2, CVC: "123"}})
	if surgepay.IsUnknown(err) {
		res, err = prov.Lookup(ctx, authKey)
	}
	if err != nil {
		return nil, fmt.Errorf("authorize: %w", err)
	}
	if !res.Approved {
		return nil, fmt.Errorf("authorize: declined %s", res.DeclineCode)
	}
	p.Path, p.AuthorizationRef = surgepay.PathStreamlined, res.Reference
	p.AmountAuthorized, p.AmountCaptured = p.AmountTotal(), p.AmountTotal()
	p.Transactions = []surgepay.Transaction{
		{ID: surgepay.NewID("txn"), Type: surgepay.TxAuthorization, Status: surgepay.TxSucceeded, Amount: p.AmountTotal(),
			ProviderRef: res.Reference, IdempotencyKey: authKey, Created: now},
		{ID: surgepay.NewID("txn"), Type: surgepay.TxCapture, Status: surgepay.TxPending, Amount: p.AmountTotal(),
			IdempotencyKey: captureKey, Created: now}}
	p.SetStatus(surgepay.StatusSucceeded)
	p.Version = 1
	sealed, err := sealer.Seal(&surgepay.CaptureInstruction{PaymentID: p.ID, MerchantID: p.MerchantID, Amount: p.AmountTotal(),
		Currency: p.Currency, AuthorizationRef: res.Reference, IdempotencyKey: captureKey, Authorized: now})
	if err != nil {
		return nil, err
	}
	rec := &surgepay.StagedRecord{ID: surgepay.NewID("stg"), MerchantID: p.MerchantID, PaymentID: p.ID, Sealed: sealed, Created: now}
	w := &surgepay.Write{PaymentInsert: p}
	if stage == nil {
		w.Staged = rec
	} else if err := stage.Put(ctx, rec); err != nil {
		return nil, fmt.Errorf("stage: %w", err)
	}
	if err := store.Apply(ctx, w); err != nil {
		return nil, fmt.Errorf("store sale: %w", err)
	}
	return &Staged{Payment: p, Record: rec}, nil
}

// NewMerchant stores a merchant, for stores that check the reference.
func NewMerchant(ctx context.Context, store surgepay.Store) (*surgepay.Merchant, error) {
	m := &surgepay.Merchant{ID: surgepay.NewID("mer"), Name: "Settlement test", Created: time.Now().UTC()}
	if _, ok := store.(*MemStore); ok {
		return m, nil
	}
	return m, store.Apply(ctx, &surgepay.Write{Merchant: m})
}
