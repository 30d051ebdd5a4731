// Package engine is the payment pipeline: it validates requests, applies the
// state machine, calls the card-network provider with deterministic
// idempotency keys, and stores each outcome with one group-committed write.
// It talks to storage, the provider, the vault and the tax table only
// through the interfaces of package surgepay.
//
// Reads that do not change often (API keys, customers, payment methods,
// idempotency records) come from the scoped cache (package cache: process memory by
// default, or Redis shared by the processes of a host or by every host),
// preheated at start, so a purchase with a saved card issues no SQL read.
// Writes invalidate; with a process-scope cache, other nodes see a delete
// within the entity's TTL.
package engine

import (
	"context"
	"encoding/hex"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/cache"
	"github.com/surgepay/surgepay/internal/statelog"
	"github.com/surgepay/surgepay/telemetry"
)

// Config holds the engine's dependencies and limits.
type Config struct {
	Store    surgepay.Store
	Provider surgepay.Provider
	Vault    surgepay.Vault
	Tax      func() surgepay.TaxTable // the current table; may change at run time
	Logger   *slog.Logger

	// IdempotencyRetention is how long idempotency records are kept.
	// Default and minimum: 24h.
	IdempotencyRetention time.Duration
	// Cache is the scoped cache. Nil: a process-scope cache with
	// cache.DefaultConfig().
	Cache *cache.Cache
	// Now returns the current time. Default time.Now.
	Now func() time.Time

	// PreheatPaymentMethodsMax is how many saved cards Preheat loads into
	// the cache, the newest first across merchants. 0 (default): the
	// payment_methods cache entity's entries_max; negative: none.
	PreheatPaymentMethodsMax int

	// Sealer seals streamlined capture instructions to the settlement
	// public key. Nil: the streamlined path is off and merchants set to it
	// take the standard path.
	Sealer surgepay.Sealer
	// Stage is the external stage (JetStream). Nil: the embedded stage,
	// which needs a Store with the surgepay.StagedStore capability.
	Stage surgepay.Stage
	// StageFallback is FallbackCapture (default) or FallbackReject.
	StageFallback string

	// OnPayment, if set, is called once for every payment operation stored
	// (op: "authorize", "capture", "void", "refund"), declines included,
	// with the payment as stored. It must be cheap and safe for concurrent
	// use (metrics).
	OnPayment func(op string, p *surgepay.Payment)

	// Webhooks holds the webhook endpoints. Nil: the Store, if it has the
	// surgepay.WebhookStore capability.
	Webhooks surgepay.WebhookStore
	// Outbox queues a webhook in each Write of a payment change (package
	// webhook). Nil: none is queued.
	Outbox surgepay.WebhookOutbox
}

// Engine runs payments. Safe for concurrent use.
type Engine struct {
	cfg      Config
	store    surgepay.Store
	provider surgepay.Provider
	vault    surgepay.Vault
	log      *slog.Logger

	cache     *cache.Cache
	apiKeys   *cache.Table[*surgepay.APIKey]
	methods   *cache.Table[*surgepay.PaymentMethod]
	customers *cache.Table[*surgepay.Customer]
	idem      *cache.Table[*surgepay.IdempotencyRecord]
	inflight  *keyLocks
	payLocks  *stripedLocks
	settings  atomic.Pointer[Settings]
	uses      *keyUses
	auditIDs  auditIDs

	// cacheHealth and stageHealth log a failing cache (Redis) or stage
	// (NATS) once per change of state with a count, not once per request.
	cacheHealth, stageHealth *statelog.Tracker

	// keyLookups bounds the API-key reads of keys not in the cache
	// (KeyLookupsInflightMax).
	keyLookups chan struct{}

	// actionsAfter is where the next reconcile pass goes on through the
	// payments in requires_action (ReconcileOnce).
	actionsAfter atomic.Pointer[string]

	node string // this engine's name as the holder of leases (Lease)
}

// KeyLookupsInflightMax bounds the store reads of API keys the cache
// does not hold, in flight at once: a flood of made-up keys (each one a
// miss) gets 503 overloaded beyond it instead of queueing reads on the
// store ahead of real requests. Real keys are preheated and cached.
const KeyLookupsInflightMax = 64

// cacheDone records the outcome of a cache write or invalidation on a
// request's path. A failure costs only store reads later (or, for an
// invalidation, an entry served until its TTL, see docs/cache.md), so the
// request goes on either way.
func (e *Engine) cacheDone(err error, op string) {
	if err != nil {
		e.cacheHealth.Fail(err, slog.String("op", op))
		return
	}
	e.cacheHealth.OK()
}

// New returns an engine.
func New(cfg Config) (*Engine, error) {
	if cfg.Store == nil || cfg.Provider == nil || cfg.Vault == nil {
		return nil, errors.New("engine: Store, Provider and Vault are required")
	}
	if cfg.IdempotencyRetention < surgepay.IdempotencyRetentionMin {
		cfg.IdempotencyRetention = surgepay.IdempotencyRetentionDefault
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Sealer != nil && cfg.Stage == nil {
		if _, ok := cfg.Store.(surgepay.StagedStore); !ok {
			return nil, errors.New("engine: the embedded stage needs a store with the StagedStore capability")
		}
	}
	if cfg.OnPayment == nil {
		cfg.OnPayment = func(string, *surgepay.Payment) {}
	}
	if cfg.StageFallback == "" {
		cfg.StageFallback = FallbackCapture
	}
	if cfg.Tax == nil {
		cfg.Tax = func() surgepay.TaxTable { return nil }
	}
	e := &Engine{node: newNodeName(), cfg: cfg, store: cfg.Store, provider: cfg.Provider, vault: cfg.Vault, log: cfg.Logger,
		inflight: newKeyLocks(), payLocks: newStripedLocks(1024), uses: newKeyUses(),
		cacheHealth: statelog.New(cfg.Logger, "engine: cache"), stageHealth: statelog.New(cfg.Logger, "engine: stage"),
		keyLookups: make(chan struct{}, KeyLookupsInflightMax)}
	if cfg.Cache == nil {
		c, err := cache.New(cache.DefaultConfig(), cache.WithLogger(cfg.Logger))
		if err != nil {
			return nil, err
		}
		cfg.Cache = c
		e.cfg.Cache = c
	}
	e.cache = cfg.Cache
	e.apiKeys = cache.Entity(e.cache, cache.APIKeys, nil, cache.WithSize(apiKeyBytes))
	e.methods = cache.Entity(e.cache, cache.PaymentMethods, nil, cache.WithSize(paymentMethodBytes))
	e.customers = cache.Entity(e.cache, cache.Customers, nil, cache.WithSize(customerBytes))
	e.idem = cache.Entity(e.cache, cache.Idempotency, nil, cache.WithSize(idempotencyBytes))
	return e, nil
}

// countCache counts a cache lookup on the request's telemetry counters.
func countCache(ctx context.Context, missed bool) {
	if missed {
		telemetry.CountCacheMiss(ctx)
	} else {
		telemetry.CountCacheHit(ctx)
	}
}

// CacheStats returns the cache's counters per entity and scope.
func (e *Engine) CacheStats() []cache.Stat { return e.cache.Stats() }

func (e *Engine) now() time.Time { return e.cfg.Now().UTC() }

// Now returns the engine's current time (Config.Now), in UTC: the clock
// that key expiries are checked against.
func (e *Engine) Now() time.Time { return e.now() }

// Preheat loads every API key and the most recently saved cards (see
// Config.PreheatPaymentMethodsMax) into the cache, so the first requests
// after a start, or on a new node, do not miss. It returns only the
// store's errors: a cache that cannot be filled (a shared scope's Redis
// down or slow at start) is logged and counted, and the first requests
// read the store instead.
func (e *Engine) Preheat(ctx context.Context) error {
	readAt := time.Now()
	keys, err := e.store.ListAPIKeys(ctx)
	if err != nil {
		return err
	}
	items := make(map[string]*surgepay.APIKey, len(keys))
	for _, k := range keys {
		if !k.Revoked {
			items[hex.EncodeToString(k.Hash)] = k
		}
	}
	if err := e.apiKeys.PreheatRead(ctx, items, readAt); err != nil {
		e.log.Warn("preheat API keys: not cached; the first requests read the store", "count", len(items), "err", err.Error())
	}
	return e.preheatPaymentMethods(ctx)
}

// Authenticate returns the API key for secret: one HMAC-SHA256 and a cache
// lookup, a store read only on a miss. It returns EUNAUTH for unknown,
// revoked (invalid_api_key) or expired (api_key_expired) keys, and
// EFORBIDDEN merchant_disabled for a key whose merchant is disabled. It
// records the key's use in memory (see RunKeyUseFlusher): no statement.
func (e *Engine) Authenticate(ctx context.Context, secret string) (*surgepay.APIKey, error) {
	if secret == "" || len(secret) > 200 {
		return nil, unauthorized()
	}
	h := e.hashKey(secret)
	loaded := false
	k, err := e.apiKeys.Get(ctx, hex.EncodeToString(h), func(ctx context.Context) (*surgepay.APIKey, error) {
		loaded = true
		// A key the cache does not know costs a store read before any
		// admission bound applies (the merchant is not known yet), and
		// random keys always miss: the reads are bounded here.
		select {
		case e.keyLookups <- struct{}{}:
			defer func() { <-e.keyLookups }()
		default:
			return nil, &surgepay.Error{Code: surgepay.EUNAVAILABLE, Reason: "overloaded", RetryAfter: 1,
				Message: "too many API keys are being looked up at once; retry shortly"}
		}
		return e.store.FindAPIKeyByHash(ctx, h)
	})
	countCache(ctx, loaded)
	if surgepay.ErrorCode(err) == surgepay.ENOTFOUND {
		return nil, unauthorized()
	} else if err != nil {
		return nil, err
	}
	if k.Revoked {
		return nil, unauthorized()
	}
	if k.Expired(e.now()) {
		return nil, &surgepay.Error{Code: surgepay.EUNAUTH, Reason: "api_key_expired",
			Message: "the API key has expired; use its replacement or ask for a new one"}
	}
	if k.MerchantDisabled {
		return nil, &surgepay.Error{Code: surgepay.EFORBIDDEN, Reason: "merchant_disabled",
			Message: "the merchant of this API key is disabled"}
	}
	e.uses.record(k.ID, e.now())
	return k, nil
}

func unauthorized() error {
	return &surgepay.Error{Code: surgepay.EUNAUTH, Reason: "invalid_api_key", Message: "missing or invalid API key"}
}

func (e *Engine) hashKey(secret string) []byte { return e.vault.APIKeyHash(secret) }
