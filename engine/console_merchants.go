package engine

import (
	"context"
	"net/http"
	"time"

	"github.com/surgepay/surgepay"
)

// The console's key actions are the admin API's engine calls
// (CreateAPIKeyWith, RollAPIKey, RevokeAPIKey) run once per
// confirmation: the call's idempotency key is claimed by storing its
// record BEFORE the action, and a second submit of the same form finds
// the claim and does nothing (a Replay). The action's answer holds a
// secret, which is never stored, so there is nothing to replay but the
// fact that it was done: at most once, never twice. A claim whose action
// then failed (the store unavailable) is not retried under that key: the
// operator starts again from a fresh form, and the list and the audit
// trail say whether a key was made.

// operatorClaimBody is the stored answer of a claimed operator action.
var operatorClaimBody = []byte(`{"object":"operator_action","status":"claimed"}`)

// once runs fn once under call's idempotency key (required), with the
// call's Operator as the actor of the audit rows fn writes.
func (e *Engine) once(ctx context.Context, call *Call, fn func(ctx context.Context) error) error {
	if call.IdempotencyKey == "" || call.Operator == "" {
		return surgepay.Invalid("key", "parameter_missing", "an operator action needs an idempotency key and an operator")
	}
	ctx = WithActor(ctx, call.Operator)
	return e.idempotent(ctx, call, func() error {
		rec := &surgepay.IdempotencyRecord{MerchantID: call.MerchantID, Key: call.IdempotencyKey,
			RequestHash: call.RequestHash, StatusCode: http.StatusAccepted, Body: operatorClaimBody, Created: e.now()}
		if err := e.store.Apply(ctx, &surgepay.Write{Idempotency: rec}); err != nil {
			return err
		}
		e.remember(ctx, call.idemCacheKey(), rec)
		// From here an error of fn is its own, not an echo of an earlier
		// request: idempotent returns it as it is.
		call.RenderedStatus, call.RenderedBody = rec.StatusCode, rec.Body
		return fn(ctx)
	})
}

// CreateAPIKeyOnce is CreateAPIKeyWith for call.MerchantID, done at most
// once per call.IdempotencyKey and audited with call.Operator as the
// actor. A repeat returns a *Replay (IsReplay) and makes no key; a
// repeat with another request hash returns EUNPROCESS
// idempotency_key_reused; one while the first runs, ECONFLICT
// idempotency_key_in_use.
func (e *Engine) CreateAPIKeyOnce(ctx context.Context, call *Call, o KeyOptions) (string, *surgepay.APIKey, error) {
	var secret string
	var k *surgepay.APIKey
	err := e.once(ctx, call, func(ctx context.Context) (err error) {
		secret, k, err = e.CreateAPIKeyWith(ctx, call.MerchantID, o)
		return err
	})
	return secret, k, err
}

// RollAPIKeyOnce is RollAPIKey done at most once per
// call.IdempotencyKey, as CreateAPIKeyOnce.
func (e *Engine) RollAPIKeyOnce(ctx context.Context, call *Call, id string, grace time.Duration, expires time.Time) (*Rolled, error) {
	var rolled *Rolled
	err := e.once(ctx, call, func(ctx context.Context) (err error) {
		rolled, err = e.RollAPIKey(ctx, id, grace, expires)
		return err
	})
	return rolled, err
}

// RevokeAPIKeyOnce is RevokeAPIKey done at most once per
// call.IdempotencyKey, as CreateAPIKeyOnce.
func (e *Engine) RevokeAPIKeyOnce(ctx context.Context, call *Call, id string) (*surgepay.APIKey, error) {
	var k *surgepay.APIKey
	err := e.once(ctx, call, func(ctx context.Context) (err error) {
		k, err = e.RevokeAPIKey(ctx, id)
		return err
	})
	return k, err
}
