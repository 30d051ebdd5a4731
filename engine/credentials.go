package engine

import (
	"context"
	"encoding/hex"
	"slices"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/cache"
	"github.com/surgepay/surgepay/internal/statelog"
)

// CredentialsPollIntervalDefault is how often RunCredentialsWatch reads the
// store's credentials generation: a key revoked, expired or rolled, or a
// merchant disabled, by another process (the CLI, another server) is
// refused here within this interval plus one read of the keys. Half a
// second keeps that under the second the operators are promised
// (docs/api-keys.md) for one trivial SELECT twice a second.
const CredentialsPollIntervalDefault = 500 * time.Millisecond

// credentialsReader returns the store's CredentialsGenerationReader,
// looking through decorators (telemetry's tracing store) that do not
// carry the capability themselves; nil if there is none.
func credentialsReader(s surgepay.Store) surgepay.CredentialsGenerationReader {
	for s != nil {
		if r, ok := s.(surgepay.CredentialsGenerationReader); ok {
			return r
		}
		u, ok := s.(interface{ Unwrap() surgepay.Store })
		if !ok {
			return nil
		}
		s = u.Unwrap()
	}
	return nil
}

// credentialsWatch is the state of RunCredentialsWatch between polls.
type credentialsWatch struct {
	seen    int64              // the generation the last listing was read at
	started bool               // a listing has been read
	last    []*surgepay.APIKey // that listing, by ID
	recheck bool               // compare memory with last once more
}

// RunCredentialsWatch makes changes to the standing of API keys made by
// other processes sharing the store reach this process's API-key cache
// within interval (<= 0: CredentialsPollIntervalDefault), until ctx ends.
//
// Each poll reads the store's credentials generation (one statement). When
// it has moved (and at the first poll) it reads every key (one statement)
// and drops from the cache each key whose cached standing (revoked,
// expiry, merchant disabled, scopes) differs: its next request reads it
// again, and no other key costs a request a statement. With the api_keys
// entity in a shared scope it also drops, in Redis, the keys whose
// standing changed since the last listing, in case the process that
// changed them could not reach Redis. The poll after a change compares
// memory with the same listing once more: a load that read a key before
// the change and stored it after the drop would otherwise stay until its
// TTL. Without the capability in the store it returns at once.
func (e *Engine) RunCredentialsWatch(ctx context.Context, interval time.Duration) {
	r := credentialsReader(e.store)
	if r == nil {
		e.log.Warn("the store counts no credentials changes: API keys changed by other processes are refused here only once their cache entries expire")
		return
	}
	if interval <= 0 {
		interval = CredentialsPollIntervalDefault
	}
	health := statelog.New(e.log, "engine: credentials watch")
	var w credentialsWatch
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := e.pollCredentials(ctx, r, &w); err != nil {
			if ctx.Err() != nil {
				return
			}
			health.Fail(err)
		} else {
			health.OK()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// pollCredentials is one poll of RunCredentialsWatch.
func (e *Engine) pollCredentials(ctx context.Context, r surgepay.CredentialsGenerationReader, w *credentialsWatch) error {
	g, err := r.CredentialsGeneration(ctx)
	if err != nil {
		return err
	}
	if w.started && g == w.seen {
		if w.recheck {
			w.recheck = false
			e.dropStaleKeys(ctx, w.last)
		}
		return nil
	}
	// Read after the generation: the listing holds every change the
	// generation counts, and one committed meanwhile moves it again.
	keys, err := e.store.ListAPIKeys(ctx)
	if err != nil {
		return err // w unchanged: the next poll tries again
	}
	n := e.dropStaleKeys(ctx, keys)
	if w.started && e.apiKeys.Scope() != cache.ScopeProcess {
		n += e.dropChangedKeys(ctx, w.last, keys)
	}
	if n > 0 {
		e.log.Info("API keys changed by another process dropped from the cache", "keys", n, "generation", g)
	}
	w.seen, w.started, w.last, w.recheck = g, true, keys, true
	return nil
}

// dropStaleKeys invalidates each key of keys whose entry in this process's
// memory differs in standing, and returns how many it invalidated.
func (e *Engine) dropStaleKeys(ctx context.Context, keys []*surgepay.APIKey) int {
	n := 0
	for _, k := range keys {
		h := hex.EncodeToString(k.Hash)
		if c, ok := e.apiKeys.Peek(h); ok && !sameStanding(c, k) {
			e.cacheDone(e.apiKeys.Invalidate(ctx, h), "invalidate API key changed elsewhere")
			n++
		}
	}
	return n
}

// dropChangedKeys invalidates each key of now whose standing differs from
// before, and returns how many it invalidated.
func (e *Engine) dropChangedKeys(ctx context.Context, before, now []*surgepay.APIKey) int {
	was := make(map[string]*surgepay.APIKey, len(before))
	for _, k := range before {
		was[k.ID] = k
	}
	n := 0
	for _, k := range now {
		if b, ok := was[k.ID]; ok && !sameStanding(b, k) {
			e.cacheDone(e.apiKeys.Invalidate(ctx, hex.EncodeToString(k.Hash)), "invalidate API key changed elsewhere")
			n++
		}
	}
	return n
}

// sameStanding reports whether a and b, two reads of one key, agree on
// everything Authenticate decides by. LastUsed is not among them: it
// moves with every flush.
func sameStanding(a, b *surgepay.APIKey) bool {
	return a.ID == b.ID && a.MerchantID == b.MerchantID && a.Revoked == b.Revoked &&
		a.Expires.Equal(b.Expires) && a.MerchantDisabled == b.MerchantDisabled &&
		slices.Equal(a.Scopes, b.Scopes)
}
