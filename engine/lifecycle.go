package engine

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/surgepay/surgepay"
)

// Bounds of the key lifecycle.
const (
	// APIKeyRollGraceMax bounds how long a rolled key's old secret keeps
	// working: long enough to redeploy every client, short enough that a
	// roll made because a key leaked cannot leave it alive for weeks.
	APIKeyRollGraceMax = 7 * 24 * time.Hour
	// APIKeyLifetimeMax bounds an expiry given at creation or roll.
	APIKeyLifetimeMax = 5 * 365 * 24 * time.Hour
)

type actorKey struct{}

// WithActor returns ctx carrying who acts, recorded in the audit trail of
// the merchant and key changes made with it: "cli:USER", "admin_api:ID".
// Without it the actor is "system".
func WithActor(ctx context.Context, actor string) context.Context {
	return context.WithValue(ctx, actorKey{}, actor)
}

func actorFrom(ctx context.Context) string {
	a, _ := ctx.Value(actorKey{}).(string)
	if a == "" {
		return "system"
	}
	if len(a) > surgepay.AuditTextBytesMax {
		a = a[:surgepay.AuditTextBytesMax]
	}
	return strings.ToValidUTF8(a, "?")
}

// auditIDs makes audit event IDs that increase within this process, so
// the trail lists one operator's changes in the order they were made even
// within a millisecond (IDs sort by millisecond, then by random bits).
type auditIDs struct {
	mu   sync.Mutex
	last string
}

func (a *auditIDs) next() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	id := surgepay.NewID("aud")
	// Within one millisecond (or after the clock stepped back) a fresh
	// ID may sort before the last: the next one is then the last plus
	// one, as monotonic ULIDs do, so the trail keeps the order of changes.
	if id <= a.last {
		id = nextID(a.last)
	}
	a.last = id
	return id
}

// nextID returns the ID that follows id in its Crockford base32 digits
// (the prefix and "_" unchanged); id is never all of the last digit, the
// top bits of an ID being zero.
func nextID(id string) string {
	const digits = "0123456789abcdefghjkmnpqrstvwxyz"
	b := []byte(id)
	for i := len(b) - 1; i >= 0 && b[i] != '_'; i-- {
		if k := strings.IndexByte(digits, b[i]); k < len(digits)-1 {
			b[i] = digits[k+1]
			return string(b)
		}
		b[i] = '0'
	}
	return string(b)
}

func (e *Engine) audit(ctx context.Context, action, merchantID, objectID, detail string) *surgepay.AuditEvent {
	if len(detail) > surgepay.AuditTextBytesMax {
		detail = detail[:surgepay.AuditTextBytesMax]
	}
	return &surgepay.AuditEvent{ID: e.auditIDs.next(), Created: e.now(), Actor: actorFrom(ctx), Action: action,
		MerchantID: merchantID, ObjectID: objectID, Detail: strings.ToValidUTF8(detail, "?")}
}

// validateMerchantName refuses an empty name, and control, bidirectional
// and other invisible format characters, which disguise what is displayed.
func validateMerchantName(name string) error {
	if strings.TrimSpace(name) == "" {
		return surgepay.Invalid("name", "parameter_missing", "name is required")
	}
	if err := surgepay.ValidateText("name", name); err != nil {
		return err
	}
	if surgepay.TextHasHidden(name) {
		return surgepay.Invalid("name", "invalid_characters", "name must not hold control, bidirectional-override or other invisible format characters")
	}
	return nil
}

// CreateMerchant stores a new merchant, with its audit row.
func (e *Engine) CreateMerchant(ctx context.Context, name string) (*surgepay.Merchant, error) {
	if err := validateMerchantName(name); err != nil {
		return nil, err
	}
	m := &surgepay.Merchant{ID: surgepay.NewID("mer"), Name: name, Created: e.now()}
	w := &surgepay.Write{Merchant: m, Audit: []*surgepay.AuditEvent{
		e.audit(ctx, surgepay.AuditMerchantCreated, m.ID, m.ID, fmt.Sprintf("name=%q", name))}}
	if err := e.store.Apply(ctx, w); err != nil {
		return nil, err
	}
	return m, nil
}

// GetMerchant returns a merchant, ENOTFOUND if there is none.
func (e *Engine) GetMerchant(ctx context.Context, id string) (*surgepay.Merchant, error) {
	return e.store.FindMerchant(ctx, id)
}

// ListMerchants returns every merchant, by ID.
func (e *Engine) ListMerchants(ctx context.Context) ([]*surgepay.Merchant, error) {
	return e.store.ListMerchants(ctx)
}

// SetMerchantDisabled disables (or enables) a merchant and drops its API
// keys from the cache, so that their next request reads the merchant's
// state: at once in this process and, with the api_keys entity in a
// shared scope (Redis), in every process that shares it; every other
// process sharing the store sees it at its next poll of the credentials
// generation, which the same Write raises (RunCredentialsWatch, within a
// second in serve). Its payments, staged captures and
// webhooks are untouched. Setting the state it has already changes
// nothing and writes no audit row. ENOTFOUND if there is no merchant.
func (e *Engine) SetMerchantDisabled(ctx context.Context, id string, disabled bool) (*surgepay.Merchant, error) {
	m, err := e.store.FindMerchant(ctx, id)
	if err != nil {
		return nil, err
	}
	if m.Disabled != disabled {
		action := surgepay.AuditMerchantEnabled
		if disabled {
			action = surgepay.AuditMerchantDisabled
		}
		w := &surgepay.Write{MerchantStatus: &surgepay.MerchantStatus{MerchantID: id, Disabled: disabled},
			Audit: []*surgepay.AuditEvent{e.audit(ctx, action, id, id, "")}}
		if err := e.store.Apply(ctx, w); err != nil {
			return nil, err
		}
		m.Disabled = disabled
	}
	// Invalidate even when nothing changed: a retry after a failed
	// invalidation (Redis down) must be able to finish the job.
	keys, err := e.ListAPIKeys(ctx, id)
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		if err := e.apiKeys.Invalidate(ctx, hex.EncodeToString(k.Hash)); err != nil {
			e.log.Warn("merchant's API key stays in the shared cache until Redis answers", "merchant", id,
				"key", k.ID, "err", err.Error())
		}
	}
	return m, nil
}

// KeyOptions are the optional settings of a new API key.
type KeyOptions struct {
	// Scopes restrict the key (see surgepay.ParseScopes); nil: full access.
	Scopes []string
	// Expires is when the key stops working; zero: never. It must be in
	// the future and at most APIKeyLifetimeMax away.
	Expires time.Time
	// Publishable makes a publishable key (pk_test_… or pk_live_…, by
	// the processors' mode; see docs/checkout.md): safe in a web page,
	// it has the one scope surgepay.ScopeCheckout. Scopes must be nil.
	Publishable bool
}

func (e *Engine) checkKeyOptions(o KeyOptions) error {
	if o.Publishable && o.Scopes != nil {
		return surgepay.Invalid("scopes", "invalid_scope", "a publishable key has the one scope %s: give no scopes", surgepay.ScopeCheckout)
	}
	for _, s := range o.Scopes {
		if !surgepay.ValidScope(s) {
			return surgepay.Invalid("scopes", "invalid_scope", "scopes holds an unknown scope")
		}
	}
	now := e.now()
	switch {
	case o.Expires.IsZero():
	case !o.Expires.After(now):
		return surgepay.Invalid("expires_at", "invalid_value", "expires_at must be in the future")
	case o.Expires.Sub(now) > APIKeyLifetimeMax:
		return surgepay.Invalid("expires_at", "invalid_value", "expires_at must be at most %v from now", APIKeyLifetimeMax)
	}
	return nil
}

func keyDetail(k *surgepay.APIKey) string {
	scopes := "full"
	if len(k.Scopes) > 0 {
		scopes = strings.Join(k.Scopes, ",")
	}
	exp := "never"
	if !k.Expires.IsZero() {
		exp = k.Expires.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("prefix=%s scopes=%s expires=%s", k.Prefix, scopes, exp)
}

// newKey makes a key and its secret, not yet stored.
func (e *Engine) newKey(merchantID string, o KeyOptions) (string, *surgepay.APIKey, error) {
	var raw [24]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", nil, err
	}
	secret := "sk_" + base64.RawURLEncoding.EncodeToString(raw[:])
	prefixLen := 10
	if o.Publishable {
		secret = e.publishablePrefix() + base64.RawURLEncoding.EncodeToString(raw[:])
		o.Scopes = []string{surgepay.ScopeCheckout}
		prefixLen = len(surgepay.PublishableKeyPrefixTest) + 4
	}
	k := &surgepay.APIKey{ID: surgepay.NewID("key"), MerchantID: merchantID, Hash: e.hashKey(secret),
		Prefix: secret[:prefixLen], Created: e.now(), Scopes: o.Scopes, Expires: o.Expires.UTC()}
	if o.Expires.IsZero() {
		k.Expires = time.Time{}
	}
	return secret, k, nil
}

// CreateAPIKey makes a new full-access secret key for a merchant and
// returns the secret, which is shown once and stored only as a keyed hash.
func (e *Engine) CreateAPIKey(ctx context.Context, merchantID string) (string, *surgepay.APIKey, error) {
	return e.CreateAPIKeyWith(ctx, merchantID, KeyOptions{})
}

// CreateAPIKeyWith is CreateAPIKey with scopes and an expiry. A disabled
// merchant may get keys; they are refused until it is enabled.
func (e *Engine) CreateAPIKeyWith(ctx context.Context, merchantID string, o KeyOptions) (string, *surgepay.APIKey, error) {
	if err := e.checkKeyOptions(o); err != nil {
		return "", nil, err
	}
	m, err := e.store.FindMerchant(ctx, merchantID)
	if err != nil {
		return "", nil, err
	}
	secret, k, err := e.newKey(merchantID, o)
	if err != nil {
		return "", nil, err
	}
	w := &surgepay.Write{APIKey: k, Audit: []*surgepay.AuditEvent{
		e.audit(ctx, surgepay.AuditAPIKeyCreated, merchantID, k.ID, keyDetail(k))}}
	if err := e.store.Apply(ctx, w); err != nil {
		return "", nil, err
	}
	k.MerchantDisabled = m.Disabled
	// Not cached from here: the merchant read above may be older than a
	// disable that ran meanwhile (and listed the keys before this one was
	// stored); the first use reads the key with its merchant's state.
	e.cacheDone(e.apiKeys.Invalidate(ctx, hex.EncodeToString(k.Hash)), "invalidate new API key")
	return secret, k, nil
}

// ListAPIKeys returns the API keys of merchantID ("": of every merchant),
// revoked ones included. Their secrets are not stored: a key is its ID and
// prefix.
func (e *Engine) ListAPIKeys(ctx context.Context, merchantID string) ([]*surgepay.APIKey, error) {
	keys, err := e.store.ListAPIKeys(ctx)
	if err != nil || merchantID == "" {
		return keys, err
	}
	out := keys[:0]
	for _, k := range keys {
		if k.MerchantID == merchantID {
			out = append(out, k)
		}
	}
	return out, nil
}

// GetAPIKey returns the key with this ID, ENOTFOUND if none.
func (e *Engine) GetAPIKey(ctx context.Context, id string) (*surgepay.APIKey, error) {
	keys, err := e.store.ListAPIKeys(ctx)
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		if k.ID == id {
			return k, nil
		}
	}
	return nil, surgepay.NotFound("id", "API key")
}

// RevokeAPIKey revokes the key with this ID for good and drops it from the
// cache: at once in this process and, with the api_keys entity in a shared
// scope (Redis), in every process that shares it; every other process
// sharing the store drops it at its next poll of the credentials
// generation, which the revoking Write raises (RunCredentialsWatch, within
// a second in serve). ENOTFOUND if there is no such key; revoking a
// revoked key is no error and writes no audit row.
func (e *Engine) RevokeAPIKey(ctx context.Context, id string) (*surgepay.APIKey, error) {
	k, err := e.GetAPIKey(ctx, id)
	if err != nil {
		return nil, err
	}
	if !k.Revoked {
		w := &surgepay.Write{APIKeyRevoke: id, Audit: []*surgepay.AuditEvent{
			e.audit(ctx, surgepay.AuditAPIKeyRevoked, k.MerchantID, id, "prefix="+k.Prefix)}}
		if err := e.store.Apply(ctx, w); err != nil {
			return nil, err
		}
	}
	if err := e.apiKeys.Invalidate(ctx, hex.EncodeToString(k.Hash)); err != nil {
		e.log.Warn("revoked API key stays in the shared cache until Redis answers", "key", id, "err", err.Error())
	}
	k.Revoked = true
	return k, nil
}

// ExpireAPIKey sets the key's expiry to expires, or brings it forward:
// an expiry can only be shortened (a key that leaked cannot be lengthened
// back to life by mistake). The cache bound is RevokeAPIKey's. ENOTFOUND
// if there is no key; ECONFLICT api_key_revoked for a revoked key;
// EINVALID for a time in the past, beyond APIKeyLifetimeMax, or later
// than the key's expiry.
func (e *Engine) ExpireAPIKey(ctx context.Context, id string, expires time.Time) (*surgepay.APIKey, error) {
	if expires.IsZero() {
		return nil, surgepay.Invalid("expires_at", "parameter_missing", "an expiry is required")
	}
	if err := e.checkKeyOptions(KeyOptions{Expires: expires}); err != nil {
		return nil, err
	}
	k, err := e.GetAPIKey(ctx, id)
	if err != nil {
		return nil, err
	}
	if k.Revoked {
		return nil, surgepay.Conflict("api_key_revoked", "the API key is revoked")
	}
	if !k.Expires.IsZero() && expires.After(k.Expires) {
		return nil, surgepay.Invalid("expires_at", "invalid_value", "the key expires at %s already; an expiry can only be brought forward",
			k.Expires.UTC().Format(time.RFC3339))
	}
	k.Expires = expires.UTC()
	w := &surgepay.Write{APIKeyExpire: &surgepay.APIKeyExpiry{ID: id, Expires: k.Expires},
		Audit: []*surgepay.AuditEvent{e.audit(ctx, surgepay.AuditAPIKeyExpirySet, k.MerchantID, id, keyDetail(k))}}
	if err := e.store.Apply(ctx, w); err != nil {
		return nil, err
	}
	if err := e.apiKeys.Invalidate(ctx, hex.EncodeToString(k.Hash)); err != nil {
		e.log.Warn("API key keeps its old expiry in the shared cache until Redis answers", "key", id, "err", err.Error())
	}
	return k, nil
}

// Rolled is the outcome of RollAPIKey.
type Rolled struct {
	Secret string           // the new key's secret, shown once
	New    *surgepay.APIKey // the new key: the old one's merchant and scopes
	Old    *surgepay.APIKey // the old key: expiring at the end of the grace, or revoked
}

// RollAPIKey replaces a key with a new secret of the same merchant and
// scopes (expiring at expires, zero: never). The old secret keeps working
// for grace (0 to APIKeyRollGraceMax; 0 revokes it at once); an old key
// that expires sooner keeps its expiry. One Write stores the new key, the
// old key's expiry and both audit rows. ENOTFOUND if there is no key;
// ECONFLICT api_key_revoked or api_key_expired if it cannot be rolled.
func (e *Engine) RollAPIKey(ctx context.Context, id string, grace time.Duration, expires time.Time) (*Rolled, error) {
	if grace < 0 || grace > APIKeyRollGraceMax {
		return nil, surgepay.Invalid("grace", "invalid_value", "grace must be 0 (at once) to %v", APIKeyRollGraceMax)
	}
	old, err := e.GetAPIKey(ctx, id)
	if err != nil {
		return nil, err
	}
	now := e.now()
	switch {
	case old.Revoked:
		return nil, surgepay.Conflict("api_key_revoked", "the API key is revoked; create a new one")
	case old.Expired(now):
		return nil, surgepay.Conflict("api_key_expired", "the API key has expired; create a new one")
	}
	o := KeyOptions{Scopes: old.Scopes, Expires: expires}
	if old.Publishable() {
		o = KeyOptions{Publishable: true, Expires: expires}
	}
	if err := e.checkKeyOptions(o); err != nil {
		return nil, err
	}
	secret, k, err := e.newKey(old.MerchantID, o)
	if err != nil {
		return nil, err
	}
	w := &surgepay.Write{APIKey: k}
	end := now.Add(grace)
	if grace == 0 {
		w.APIKeyRevoke = old.ID
		old.Revoked = true
	} else {
		w.APIKeyExpire = &surgepay.APIKeyExpiry{ID: old.ID, Expires: end}
		if old.Expires.IsZero() || end.Before(old.Expires) {
			old.Expires = end
		}
	}
	w.Audit = []*surgepay.AuditEvent{
		e.audit(ctx, surgepay.AuditAPIKeyRolled, old.MerchantID, old.ID,
			fmt.Sprintf("new_key=%s grace=%v %s revoked=%v", k.ID, grace, keyDetail(old), old.Revoked)),
		e.audit(ctx, surgepay.AuditAPIKeyCreated, old.MerchantID, k.ID, "rolled_from="+old.ID+" "+keyDetail(k)),
	}
	if err := e.store.Apply(ctx, w); err != nil {
		return nil, err
	}
	if err := e.apiKeys.Invalidate(ctx, hex.EncodeToString(old.Hash)); err != nil {
		e.log.Warn("rolled API key keeps its old expiry in the shared cache until Redis answers", "key", id, "err", err.Error())
	}
	k.MerchantDisabled = old.MerchantDisabled
	// Not cached from here, as in CreateAPIKeyWith: a disable may have run
	// since old was read.
	e.cacheDone(e.apiKeys.Invalidate(ctx, hex.EncodeToString(k.Hash)), "invalidate new API key")
	return &Rolled{Secret: secret, New: k, Old: old}, nil
}

// ListAuditEvents returns a page of the merchant and key audit trail,
// newest first, and whether more follow.
func (e *Engine) ListAuditEvents(ctx context.Context, f surgepay.AuditFilter) ([]*surgepay.AuditEvent, bool, error) {
	if f.Limit < 0 || f.Limit > surgepay.ListLimitMax {
		return nil, false, surgepay.Invalid("limit", "invalid_value", "limit must be 1 to %d", surgepay.ListLimitMax)
	}
	return e.store.ListAuditEvents(ctx, f)
}
