package main

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/api"
	"github.com/surgepay/surgepay/engine"
	"github.com/surgepay/surgepay/postgres"
	"github.com/surgepay/surgepay/sqlite"
	"github.com/surgepay/surgepay/telemetry"
	"github.com/surgepay/surgepay/webhook"
)

// appWebhooks is the webhook wiring of a process: the outbox the engine
// fills, and (serve) the dispatcher.
type appWebhooks struct {
	store  surgepay.WebhookStore
	outbox *webhook.Outbox
}

// openWebhooks prepares the outbox if the store holds webhooks (both
// stores do).
func (a *app) openWebhooks() {
	ws, ok := a.store.(surgepay.WebhookStore)
	if !ok {
		return
	}
	a.hooks = &appWebhooks{store: ws, outbox: webhook.NewOutbox(webhook.OutboxConfig{Store: ws,
		RenderPayment: api.PaymentObject, Logger: a.log})}
}

// webhookStore and webhookOutbox are the engine's; nil interfaces without
// webhooks.
func (a *app) webhookStore() surgepay.WebhookStore {
	if a.hooks == nil {
		return nil
	}
	return a.hooks.store
}

func (a *app) webhookOutbox() surgepay.WebhookOutbox {
	if a.hooks == nil {
		return nil
	}
	return a.hooks.outbox
}

// startWebhooks loads which merchants have endpoints, then runs the
// outbox's refresh and the dispatcher on wg until ctx ends. The
// dispatcher finishes its deliveries in flight (each bounded by
// webhooks.timeout) and records them before wg is done.
func (a *app) startWebhooks(ctx context.Context, wg *sync.WaitGroup) {
	if a.hooks == nil {
		return
	}
	cfg := a.cfg.Webhooks
	if err := a.hooks.outbox.Refresh(ctx); err != nil {
		a.log.Warn("webhooks: load the merchants with endpoints; retried in the background", "err", err.Error())
	}
	d, err := webhook.New(webhook.Config{Store: a.hooks.store, Vault: a.keys, Logger: a.log,
		Workers: cfg.Workers, EndpointInflightMax: cfg.EndpointInflightMax, Timeout: cfg.Timeout.Duration,
		AllowPrivateNetworks: cfg.AllowPrivateNetworks, DeliveredRetention: cfg.DeliveredRetention.Duration,
		Wake: a.hooks.outbox.Wake()})
	if err != nil { // config.Config.Validate checked the same bounds
		a.log.Error("webhooks: dispatcher not started", "err", err.Error())
		return
	}
	if err := a.tel.RegisterWebhooks(func() telemetry.WebhookStat { return webhookStat(d.Stats()) }); err != nil {
		a.log.Warn("webhooks: metrics", "err", err.Error())
	}
	wg.Add(2)
	go func() { defer wg.Done(); a.hooks.outbox.Run(ctx) }()
	go func() { defer wg.Done(); d.Run(ctx) }()
}

func webhookStat(s webhook.Stats) telemetry.WebhookStat {
	st := telemetry.WebhookStat{Delivered: s.Delivered, Retried: s.Retried, Failed: s.Failed, Dropped: s.Dropped,
		Pending: s.Backlog.Pending, FailedKept: s.Backlog.Failed}
	if !s.Backlog.OldestPending.IsZero() {
		st.OldestPendingAge = time.Since(s.Backlog.OldestPending)
	}
	return st
}

// outboxWrites queues webhooks in the Writes of a process without an
// engine: `surgepay settle`, whose capture results (capture,
// capture_failed) write audit events. The merchant switch is read from
// settings, which settle reloads on SIGHUP and file changes.
type outboxWrites struct {
	outbox *webhook.Outbox
	// settings are the merchant settings in effect (settle reloads them).
	settings *atomic.Pointer[engine.Settings]
}

func (q outboxWrites) prepare(w *surgepay.Write) {
	if len(w.Events) > 0 && q.settings.Load().For(w.Events[0].MerchantID).Webhooks != "off" {
		q.outbox.Prepare(w)
	}
}

// The store of settle with webhooks: the concrete store embedded, so that
// every method and capability it has (StagedStore, FindPayments, ...)
// stays, and Apply queues the webhook first.
type (
	sqliteWithWebhooks struct {
		*sqlite.DB
		q outboxWrites
	}
	postgresWithWebhooks struct {
		*postgres.DB
		q outboxWrites
	}
)

func (s sqliteWithWebhooks) Apply(ctx context.Context, w *surgepay.Write) error {
	s.q.prepare(w)
	return s.DB.Apply(ctx, w)
}

func (s postgresWithWebhooks) Apply(ctx context.Context, w *surgepay.Write) error {
	s.q.prepare(w)
	return s.DB.Apply(ctx, w)
}

// settlementWriter is the PostgreSQL store's batch of settlement Writes
// (surgepay.SettlementWriter, where the store has it).
type settlementWriter interface {
	ApplySettlements(ctx context.Context, ws []*surgepay.Write) ([]bool, error)
}

// ApplySettlements queues the webhooks of settlement's Writes too, where
// the store stores them as one batch: without it, the promoted method
// would skip the outbox.
func (s postgresWithWebhooks) ApplySettlements(ctx context.Context, ws []*surgepay.Write) ([]bool, error) {
	sw, ok := any(s.DB).(settlementWriter)
	if !ok {
		return nil, errors.New("the store cannot apply settlements as a batch")
	}
	for _, w := range ws {
		s.q.prepare(w)
	}
	return sw.ApplySettlements(ctx, ws)
}

// withWebhooks returns store queuing webhooks in its Writes, and keeps the
// outbox's list of merchants with endpoints fresh until ctx ends: end ctx
// before closing store. A store of another type is returned as it is.
func withWebhooks(ctx context.Context, store surgepay.Store, settings *atomic.Pointer[engine.Settings], log *slog.Logger) surgepay.Store {
	ws, ok := store.(surgepay.WebhookStore)
	if !ok {
		return store
	}
	ob := webhook.NewOutbox(webhook.OutboxConfig{Store: ws, RenderPayment: api.PaymentObject, Logger: log})
	if err := ob.Refresh(ctx); err != nil {
		log.Warn("webhooks: load the merchants with endpoints; retried in the background", "err", err.Error())
	}
	go ob.Run(ctx)
	q := outboxWrites{outbox: ob, settings: settings}
	switch s := store.(type) {
	case *sqlite.DB:
		return sqliteWithWebhooks{DB: s, q: q}
	case *postgres.DB:
		return postgresWithWebhooks{DB: s, q: q}
	}
	return store
}
