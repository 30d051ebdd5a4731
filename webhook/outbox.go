// Package webhook delivers payment events to merchants' endpoints.
//
// The Outbox (surgepay.WebhookOutbox) runs in the write path: for a Write
// that changes a payment of a merchant with at least one endpoint, it
// renders the event once (the JSON body every endpoint receives) and sets
// Write.Webhook, which the store turns into one outbox row per endpoint in
// the Write's own transaction. It knows which merchants have endpoints
// from memory (loaded at start, refreshed every EndpointsRefreshInterval,
// updated at once for changes made on this node), so that the common case,
// a merchant without endpoints, costs no SQL at all.
//
// The Dispatcher runs beside the API: it claims due deliveries in bounded
// batches, POSTs them signed (see Signature) from a bounded pool of
// workers, and records the outcomes; failures are retried with exponential
// backoff and jitter up to Config.AttemptsMax attempts, then kept as
// failed. Delivery is at least once: a receiver de-duplicates on the event
// ID (header Surgepay-Event-Id). A claim takes no more deliveries of one
// endpoint than it has room for (Config.EndpointInflightMax in flight, one
// for an endpoint that keeps failing), so a slow or dead endpoint holds a
// few workers, not all, and the others' deliveries go on.
//
// For operators (issue 13 item 6), every result also counts in its
// endpoint's health (failures in a row, last success and error); a
// succeeded delivery is kept for Config.DeliveredRetention, so that it is
// listed and can be resent (surgepay.Write.WebhookResend, queued for the
// Dispatcher like any delivery); and during the overlap window of a
// rolled secret each delivery carries a v1 signature under each secret
// (Signature).
//
// Limits, admitted: an endpoint created on another node is seen by this
// node's Outbox within EndpointsRefreshInterval, and the changes it makes
// meanwhile are not queued for it. The bound per endpoint is per node (n
// nodes may send n times as many at once), and as many failing endpoints
// as there are workers still hold every worker, one each. A claim steps
// over the due deliveries of the endpoints at their bound in its index
// scan, so its cost grows with their backlog: that of an endpoint slower
// than its events arrive, such as one whose requests time out (an endpoint
// that refuses at once is tried promptly, and its deliveries wait for
// their retries, not due).
package webhook

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/surgepay/surgepay"
)

// EndpointsRefreshInterval is how often an Outbox reloads which merchants
// have endpoints (one SELECT DISTINCT of the endpoints' merchants).
const EndpointsRefreshInterval = 10 * time.Second

// OutboxConfig configures an Outbox.
type OutboxConfig struct {
	// Store holds the endpoints. Required.
	Store surgepay.WebhookStore
	// RenderPayment returns a payment as the API renders it, for the
	// event's data.object (api.PaymentObject). Default: the payment's ID,
	// status, amounts and currency.
	RenderPayment func(*surgepay.Payment) any
	// Logger. Default: discard.
	Logger *slog.Logger
}

// Outbox implements surgepay.WebhookOutbox. Safe for concurrent use.
type Outbox struct {
	cfg OutboxConfig
	has atomic.Pointer[map[string]struct{}] // merchants with endpoints; replaced, never changed

	mu    sync.Mutex // serialises replacing has
	gen   uint64     // counts local changes
	local []change   // local changes that a running refresh may not have seen
	wake  chan struct{}
	// loaded is false until a Refresh succeeds: until then every merchant
	// may have endpoints, and the store's fan-out statement decides (one
	// statement more per change, none lost).
	loaded atomic.Bool
}

type change struct {
	gen      uint64
	merchant string
	has      bool
}

var _ surgepay.WebhookOutbox = (*Outbox)(nil)

// NewOutbox returns an Outbox that, until a Refresh succeeds, treats every
// merchant as possibly having endpoints.
func NewOutbox(cfg OutboxConfig) *Outbox {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.RenderPayment == nil {
		cfg.RenderPayment = minimalPayment
	}
	o := &Outbox{cfg: cfg, wake: make(chan struct{}, 1)}
	o.has.Store(&map[string]struct{}{})
	return o
}

// Refresh reloads which merchants have endpoints. Changes this node made
// while it ran are kept.
func (o *Outbox) Refresh(ctx context.Context) error {
	o.mu.Lock()
	gen := o.gen
	o.mu.Unlock()
	ids, err := o.cfg.Store.ListWebhookMerchants(ctx)
	if err != nil {
		return err
	}
	m := make(map[string]struct{}, len(ids))
	for _, id := range ids {
		m[id] = struct{}{}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	kept := o.local[:0]
	for _, c := range o.local {
		if c.gen > gen {
			set(m, c.merchant, c.has)
			kept = append(kept, c)
		}
	}
	o.local = kept
	o.has.Store(&m)
	o.loaded.Store(true)
	return nil
}

// Run refreshes every EndpointsRefreshInterval until ctx ends.
func (o *Outbox) Run(ctx context.Context) {
	t := time.NewTicker(EndpointsRefreshInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := o.Refresh(ctx); err != nil && ctx.Err() == nil {
				o.cfg.Logger.Warn("webhooks: reload the merchants with endpoints", "err", err.Error())
			}
		}
	}
}

func set(m map[string]struct{}, merchant string, has bool) {
	if has {
		m[merchant] = struct{}{}
	} else {
		delete(m, merchant)
	}
}

// EndpointsChanged records that a merchant has endpoints, or none, after
// a change on this node; it takes effect at once.
func (o *Outbox) EndpointsChanged(merchantID string, has bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.gen++
	o.local = append(o.local, change{gen: o.gen, merchant: merchantID, has: has})
	m := maps.Clone(*o.has.Load())
	set(m, merchantID, has)
	o.has.Store(&m)
}

// HasEndpoints reports whether the merchant may have endpoints: known to,
// or not known yet because no Refresh has succeeded (a webhook queued for
// a merchant without endpoints fans out to no row).
func (o *Outbox) HasEndpoints(merchantID string) bool {
	if !o.loaded.Load() {
		return true
	}
	_, ok := (*o.has.Load())[merchantID]
	return ok
}

// Prepare sets w.Webhook if w holds audit events and changes a payment of
// a merchant with endpoints: the event's ID is the last audit event's, its
// type names the change (surgepay.WebhookEventType), its body renders the
// payment as the Write stores it.
func (o *Outbox) Prepare(w *surgepay.Write) {
	if len(w.Events) == 0 || w.Webhook != nil {
		return
	}
	p := w.PaymentUpdate
	if p == nil {
		p = w.PaymentInsert
	}
	if p == nil || !o.HasEndpoints(p.MerchantID) {
		return
	}
	first, last := w.Events[0], w.Events[len(w.Events)-1]
	typ := surgepay.WebhookEventType(w.Events, p)
	body, err := json.Marshal(Event{ID: last.ID, Object: "event", Type: typ, Created: last.Created.Unix(),
		Data: EventData{Object: o.cfg.RenderPayment(p), PreviousStatus: string(first.FromStatus)}})
	if err != nil {
		// Not reached with the API's types; the payment change goes on.
		o.cfg.Logger.Error("webhooks: render event", "event", last.ID, "payment", p.ID, "err", err.Error())
		return
	}
	w.Webhook = &surgepay.WebhookEvent{ID: last.ID, MerchantID: p.MerchantID, PaymentID: p.ID, Type: typ,
		Payload: body, Created: last.Created}
}

// Committed wakes the dispatcher: deliveries are due.
func (o *Outbox) Committed(w *surgepay.Write) {
	if w.Webhook == nil {
		return
	}
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// Wake returns the channel Committed signals, for Config.Wake.
func (o *Outbox) Wake() <-chan struct{} { return o.wake }

// Event is the JSON body of a delivery.
type Event struct {
	ID      string    `json:"id"`     // the last audit event of the change; de-duplicate on it
	Object  string    `json:"object"` // "event"
	Type    string    `json:"type"`   // payment.succeeded, ...
	Created int64     `json:"created"`
	Data    EventData `json:"data"`
}

// EventData is the payment after the change and its status before.
type EventData struct {
	Object         any    `json:"object"`
	PreviousStatus string `json:"previous_status"` // "" for a new payment
}

// paymentJSON is the default data.object.
type paymentJSON struct {
	ID             string `json:"id"`
	Object         string `json:"object"`
	Status         string `json:"status"`
	Amount         int64  `json:"amount"`
	AmountCaptured int64  `json:"amount_captured"`
	AmountRefunded int64  `json:"amount_refunded"`
	Currency       string `json:"currency"`
}

func minimalPayment(p *surgepay.Payment) any {
	return paymentJSON{ID: p.ID, Object: "payment", Status: string(p.Status), Amount: p.Amount,
		AmountCaptured: p.AmountCaptured, AmountRefunded: p.AmountRefunded, Currency: p.Currency}
}

// WakeDispatcher makes the dispatcher of this node look for due
// deliveries at once (a resend).
func (o *Outbox) WakeDispatcher() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}
