package engine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"

	"github.com/surgepay/surgepay"
)

// Call describes who makes a request and how its answer is rendered, so the
// engine can store the exact response for idempotent replay.
type Call struct {
	MerchantID string
	KeyID      string
	RequestID  string

	// Operator, if set, names the operator who acts through the console
	// ("console:token", "console:cert:NAME"): each capture, void, refund
	// or webhook resend the call makes records an audit row naming them
	// in the Write of the change (operatorAudit). "" for API calls, whose
	// key is named in the payment's events.
	Operator string

	// IdempotencyKey, if set, makes the call idempotent: see Engine.idempotent.
	IdempotencyKey string
	RequestHash    [32]byte
	// Render turns a result (or error) into the HTTP status and body the
	// client receives. Required with IdempotencyKey; it must be deterministic.
	Render func(v any, err error) (status int, body []byte)

	// Rendered holds the stored response once the engine has rendered it, so
	// the API writes the very bytes that were stored.
	RenderedStatus int
	RenderedBody   []byte

	// cacheKey is idemCacheKey's answer, made once per call.
	cacheKey string
}

// Replay is returned instead of a result when a request repeats an
// idempotency key: the API writes Status and Body as they are.
type Replay struct {
	Status int
	Body   []byte
}

func (r *Replay) Error() string { return "idempotent replay" }

func (c *Call) idemCacheKey() string {
	if c.cacheKey == "" {
		c.cacheKey = c.MerchantID + "/" + hex.EncodeToString([]byte(c.IdempotencyKey))
	}
	return c.cacheKey
}

// keyDigest is a short digest of the idempotency key for provider keys, so a
// client's key never reaches the provider verbatim.
func (c *Call) keyDigest() string {
	var buf [256]byte
	b := append(append(append(buf[:0], c.MerchantID...), 0), c.IdempotencyKey...)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:12])
}

// idempotent runs fn under the call's idempotency key.
//
// A key in flight on this node is refused at once (409
// idempotency_key_in_use); a key completed recently on this node is
// answered from memory; otherwise the store is read BEFORE fn, so that a
// request completed on another node or before a restart is replayed
// without reaching the provider again: a processor keeps its idempotency
// keys for a while only (Stripe: 24 hours), after which a second call
// would charge again, and every replay spends its call budget. That read
// is the one SQL statement an Idempotency-Key adds to a request. Then fn
// runs and its write carries the idempotency record, whose insert fails if
// the key was used meanwhile (on another node). Then, and whenever fn
// fails with a client error, the stored record is read and replayed (same
// request) or refused (422 idempotency_key_reused). Provider calls use
// keys derived from the payment and the idempotency key, so running fn
// again within the provider's own retention never repeats a charge, a
// capture or a refund at the network either.
func (e *Engine) idempotent(ctx context.Context, call *Call, fn func() error) error {
	if call.IdempotencyKey == "" {
		return fn()
	}
	ck := call.idemCacheKey()
	if !e.inflight.tryLock(ck) {
		return surgepay.Conflict("idempotency_key_in_use",
			"a request with this Idempotency-Key is still in progress; retry later")
	}
	defer e.inflight.unlock(ck)
	if rec, ok := e.idem.GetIfPresent(ctx, ck); ok {
		return replayOf(rec, call)
	}
	rec, ferr := e.store.FindIdempotency(ctx, call.MerchantID, call.IdempotencyKey)
	switch {
	case ferr == nil:
		e.remember(ctx, ck, rec)
		return replayOf(rec, call)
	case surgepay.ErrorCode(ferr) != surgepay.ENOTFOUND:
		return ferr
	}
	err := fn()
	if errors.Is(err, surgepay.ErrIdempotencyKeyExists) {
		// The key was stored by an earlier request (before a restart, or on
		// another node): what fn rendered was never stored and must not be
		// sent; the stored answer is replayed below.
		call.RenderedBody, call.RenderedStatus = nil, 0
	}
	if err == nil || call.RenderedBody != nil || !replayable(err) {
		return err
	}
	rec, ferr = e.store.FindIdempotency(ctx, call.MerchantID, call.IdempotencyKey)
	if surgepay.ErrorCode(ferr) == surgepay.ENOTFOUND {
		return err
	} else if ferr != nil {
		return ferr
	}
	e.remember(ctx, ck, rec)
	return replayOf(rec, call)
}

// replayable reports whether err may be the echo of an earlier request with
// the same key: a client error, or the key's own conflict at commit.
func replayable(err error) bool {
	switch surgepay.ErrorCode(err) {
	case surgepay.EINVALID, surgepay.ENOTFOUND, surgepay.ECONFLICT, surgepay.EUNPROCESS, surgepay.EDECLINED:
		return true
	}
	return false
}

func replayOf(rec *surgepay.IdempotencyRecord, call *Call) error {
	if rec.RequestHash != call.RequestHash {
		return &surgepay.Error{Code: surgepay.EUNPROCESS, Reason: "idempotency_key_reused",
			Message: "this Idempotency-Key was used with a different request"}
	}
	return &Replay{Status: rec.StatusCode, Body: bytes.Clone(rec.Body)}
}

// attach renders (v, err) and adds the idempotency record to w.
func (e *Engine) attach(call *Call, w *surgepay.Write, v any, err error) {
	if call.IdempotencyKey == "" || call.Render == nil {
		return
	}
	status, body := call.Render(v, err)
	call.RenderedStatus, call.RenderedBody = status, body
	w.Idempotency = &surgepay.IdempotencyRecord{MerchantID: call.MerchantID, Key: call.IdempotencyKey,
		RequestHash: call.RequestHash, StatusCode: status, Body: body, Created: e.now()}
}

// apply stores w and, once durable, remembers its idempotency record. If
// w is not stored, the answer attach rendered for it is dropped: the client
// must get the error (and retry), never an answer that was not stored.
func (e *Engine) apply(ctx context.Context, call *Call, w *surgepay.Write) error {
	if w.PaymentInsert != nil { // a new payment; updates are counted where their previous state is known
		e.countAnalytics(w, nil, w.PaymentInsert)
	}
	if err := e.commit(ctx, w); err != nil {
		call.RenderedBody, call.RenderedStatus = nil, 0
		return err
	}
	if w.Idempotency != nil {
		e.remember(ctx, call.idemCacheKey(), w.Idempotency)
	}
	return nil
}

// remember caches a stored idempotency record; a cache failure only costs
// a store read on a later repeat.
func (e *Engine) remember(ctx context.Context, key string, rec *surgepay.IdempotencyRecord) {
	e.cacheDone(e.idem.Set(ctx, key, rec), "cache idempotency record")
}

// IsReplay reports whether err is a *Replay and returns it.
func IsReplay(err error) (*Replay, bool) {
	var r *Replay
	ok := errors.As(err, &r)
	return r, ok
}

// PurgeIdempotency deletes records older than the retention, up to limit,
// and then, within the same limit, provider attempts as old (a retry
// after the retention is a new request: it never reads its attempt).
func (e *Engine) PurgeIdempotency(ctx context.Context, limit int) (int, error) {
	before := e.now().Add(-e.cfg.IdempotencyRetention)
	n, err := e.store.DeleteIdempotencyBefore(ctx, before, limit)
	if err != nil || n >= limit {
		return n, err
	}
	a, ok := attemptStore(e.store)
	if !ok {
		return n, nil
	}
	m, err := a.DeleteProviderAttemptsBefore(ctx, before, limit-n)
	return n + m, err
}

// attemptStore returns s, or the store it decorates, as an AttemptStore.
func attemptStore(s surgepay.Store) (surgepay.AttemptStore, bool) {
	for {
		if a, ok := s.(surgepay.AttemptStore); ok {
			return a, true
		}
		u, ok := s.(interface{ Unwrap() surgepay.Store })
		if !ok {
			return nil, false
		}
		s = u.Unwrap()
	}
}
