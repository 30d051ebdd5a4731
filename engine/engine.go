// Package engine is the payment pipeline: it validates requests, applies the
// state machine, calls the card-network provider with deterministic
// idempotency keys, and stores each outcome with one group-committed write.
// It talks to storage, the provider, the vault and the tax table only
// through the interfaces of package surgepay.
//
// Reads that do not change often (API keys, payment methods) come from a
// bounded in-process cache, so a purchase with a saved card issues no SQL
// read and three SQL writes in one group commit. In a multi-node
// deployment, a delete on one node reaches the caches of the others within
// Config.CacheTTL.
package engine

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/maypok86/otter/v2"

	"github.com/surgepay/surgepay"
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
	// CacheEntriesMax bounds each in-process cache. Default 100,000.
	CacheEntriesMax int
	// CacheTTL bounds how long a cached entry is served. Default 5m.
	CacheTTL time.Duration
	// Now returns the current time. Default time.Now.
	Now func() time.Time

	// Sealer seals streamlined capture instructions to the settlement
	// public key. Nil: the streamlined path is off and merchants set to it
	// take the standard path.
	Sealer surgepay.Sealer
	// Stage is the external stage (JetStream). Nil: the embedded stage,
	// which needs a Store with the surgepay.StagedStore capability.
	Stage surgepay.Stage
	// StageFallback is FallbackCapture (default) or FallbackReject.
	StageFallback string
}

// Engine runs payments. Safe for concurrent use.
type Engine struct {
	cfg      Config
	store    surgepay.Store
	provider surgepay.Provider
	vault    surgepay.Vault
	log      *slog.Logger

	apiKeys  *otter.Cache[string, *surgepay.APIKey]
	methods  *otter.Cache[string, *surgepay.PaymentMethod]
	idem     *otter.Cache[string, *surgepay.IdempotencyRecord]
	inflight *keyLocks
	payLocks *stripedLocks
	settings atomic.Pointer[Settings]
}

// New returns an engine.
func New(cfg Config) (*Engine, error) {
	if cfg.Store == nil || cfg.Provider == nil || cfg.Vault == nil {
		return nil, errors.New("engine: Store, Provider and Vault are required")
	}
	if cfg.IdempotencyRetention < surgepay.IdempotencyRetentionMin {
		cfg.IdempotencyRetention = surgepay.IdempotencyRetentionDefault
	}
	if cfg.CacheEntriesMax <= 0 {
		cfg.CacheEntriesMax = 100_000
	}
	if cfg.CacheTTL <= 0 {
		cfg.CacheTTL = 5 * time.Minute
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
	if cfg.StageFallback == "" {
		cfg.StageFallback = FallbackCapture
	}
	if cfg.Tax == nil {
		cfg.Tax = func() surgepay.TaxTable { return nil }
	}
	e := &Engine{cfg: cfg, store: cfg.Store, provider: cfg.Provider, vault: cfg.Vault, log: cfg.Logger,
		inflight: newKeyLocks(), payLocks: newStripedLocks(1024)}
	var err error
	if e.apiKeys, err = newCache[*surgepay.APIKey](cfg.CacheEntriesMax, cfg.CacheTTL); err != nil {
		return nil, err
	}
	if e.methods, err = newCache[*surgepay.PaymentMethod](cfg.CacheEntriesMax, cfg.CacheTTL); err != nil {
		return nil, err
	}
	if e.idem, err = newCache[*surgepay.IdempotencyRecord](cfg.CacheEntriesMax, cfg.IdempotencyRetention); err != nil {
		return nil, err
	}
	return e, nil
}

func newCache[V any](size int, ttl time.Duration) (*otter.Cache[string, V], error) {
	return otter.New(&otter.Options[string, V]{
		MaximumSize:      size,
		ExpiryCalculator: otter.ExpiryWriting[string, V](ttl),
	})
}

func (e *Engine) now() time.Time { return e.cfg.Now().UTC() }

// Preheat loads every API key into the cache, so the first requests after
// a start do not miss.
func (e *Engine) Preheat(ctx context.Context) error {
	keys, err := e.store.ListAPIKeys(ctx)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if !k.Revoked {
			e.apiKeys.Set(string(k.Hash), k)
		}
	}
	return nil
}

// Authenticate returns the API key for secret: one HMAC-SHA256 and a cache
// lookup, a store read only on a miss. It returns EUNAUTH for unknown or
// revoked keys.
func (e *Engine) Authenticate(ctx context.Context, secret string) (*surgepay.APIKey, error) {
	if secret == "" || len(secret) > 200 {
		return nil, unauthorized()
	}
	h := e.hashKey(secret)
	if k, ok := e.apiKeys.GetIfPresent(string(h)); ok {
		return k, nil
	}
	k, err := e.store.FindAPIKeyByHash(ctx, h)
	if surgepay.ErrorCode(err) == surgepay.ENOTFOUND {
		return nil, unauthorized()
	} else if err != nil {
		return nil, err
	}
	if k.Revoked {
		return nil, unauthorized()
	}
	e.apiKeys.Set(string(h), k)
	return k, nil
}

func unauthorized() error {
	return &surgepay.Error{Code: surgepay.EUNAUTH, Reason: "invalid_api_key", Message: "missing or invalid API key"}
}

func (e *Engine) hashKey(secret string) []byte {
	m := hmac.New(sha256.New, e.vault.APIKeySecret())
	m.Write([]byte(secret))
	return m.Sum(nil)
}

// CreateMerchant stores a new merchant.
func (e *Engine) CreateMerchant(ctx context.Context, name string) (*surgepay.Merchant, error) {
	if err := surgepay.ValidateText("name", name); err != nil {
		return nil, err
	}
	m := &surgepay.Merchant{ID: surgepay.NewID("mer"), Name: name, Created: e.now()}
	if err := e.store.Apply(ctx, &surgepay.Write{Merchant: m}); err != nil {
		return nil, err
	}
	return m, nil
}

// CreateAPIKey makes a new secret key for a merchant and returns the secret,
// which is shown once and stored only as a keyed hash.
func (e *Engine) CreateAPIKey(ctx context.Context, merchantID string) (string, *surgepay.APIKey, error) {
	if _, err := e.store.FindMerchant(ctx, merchantID); err != nil {
		return "", nil, err
	}
	var raw [24]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", nil, err
	}
	secret := "sk_" + base64.RawURLEncoding.EncodeToString(raw[:])
	k := &surgepay.APIKey{ID: surgepay.NewID("key"), MerchantID: merchantID, Hash: e.hashKey(secret),
		Prefix: secret[:10], Created: e.now()}
	if err := e.store.Apply(ctx, &surgepay.Write{APIKey: k}); err != nil {
		return "", nil, err
	}
	e.apiKeys.Set(string(k.Hash), k)
	return secret, k, nil
}
