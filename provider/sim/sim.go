package sim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/internal/wait"
)

// Amounts (minor units) that trigger a fault when they are the amount of an
// Authorize, Capture or Refund call. They take precedence over the random
// rates.
const (
	// AmountTimeout times out before the network: after TimeoutLatency the
	// call returns NotPerformed with ErrTimeout, and nothing is stored.
	AmountTimeout int64 = 9101
	// AmountUnknown performs and stores the operation, then loses the
	// answer: the call returns Unknown with ErrAnswerLost. Lookup, or a
	// replay under the same key, returns the stored result.
	AmountUnknown int64 = 9102
	// AmountRateLimited returns NotPerformed with ErrRateLimited at once.
	AmountRateLimited int64 = 9103
	// AmountDecline declines with surgepay.DeclineGeneric (when the money
	// rules and the card allow the operation), and stores the decline.
	AmountDecline int64 = 9104
)

// OpLookup is the ProviderError.Op of a failed Lookup.
const OpLookup = "lookup"

// Provider is the card-network simulator. It implements surgepay.Provider
// in memory: idempotency by key, the money rules of authorizations, test
// card numbers and amounts that trigger each outcome, configurable latency
// and random faults, and a record of every effect.
//
// Safe for concurrent use. State is split into 64 shards by a hash of the
// idempotency key, each behind its own mutex; no call takes a global lock,
// starts a goroutine or logs.
type Provider struct {
	state  atomic.Pointer[state]
	shards [shardCount]shard

	instance   string // random tag in references, so a restarted simulator never honours old ones.
	authPrefix string // "auth_" + instance + "_"
	// challengePrefix starts the reference of a pending 3-D Secure
	// challenge: "3ds_" + instance + "_", then the challenge's ID.
	challengePrefix string

	// sleep waits d or until ctx is done. Tests replace it.
	sleep func(ctx context.Context, d time.Duration) error
	// now is the clock records are stamped by, in seconds since epoch (see
	// clock). Tests replace it.
	now   func() time.Time
	epoch time.Time

	events *events // dispute webhooks (AmountDisputed)

	pages http.Handler // Pages: the 3-D Secure challenge pages.
}

var _ surgepay.Provider = (*Provider)(nil)

// state is one immutable configuration with its derived samplers.
type state struct {
	cfg            Config
	latency        sampler
	timeoutLatency sampler
	random         bool // whether a call needs random numbers at all.
}

func newState(cfg Config) *state {
	st := &state{cfg: cfg, latency: newSampler(cfg.Latency), timeoutLatency: newSampler(cfg.TimeoutLatency)}
	st.random = st.latency.random() || st.timeoutLatency.random() ||
		cfg.TimeoutRate+cfg.RateLimitRate+cfg.DeclineRate+cfg.UnknownRate > 0
	return st
}

// fault is what befalls one call.
type fault uint8

const (
	faultNone fault = iota
	faultTimeout
	faultRateLimit
	faultDecline
	faultUnknown
)

// randomFault maps a uniform u in [0, 1) onto the configured rates.
func (st *state) randomFault(u float64) fault {
	c := &st.cfg
	switch {
	case u < c.TimeoutRate:
		return faultTimeout
	case u < c.TimeoutRate+c.RateLimitRate:
		return faultRateLimit
	case u < c.TimeoutRate+c.RateLimitRate+c.DeclineRate:
		return faultDecline
	case u < c.TimeoutRate+c.RateLimitRate+c.DeclineRate+c.UnknownRate:
		return faultUnknown
	}
	return faultNone
}

func amountFault(amount int64) fault {
	switch amount {
	case AmountTimeout:
		return faultTimeout
	case AmountUnknown:
		return faultUnknown
	case AmountRateLimited:
		return faultRateLimit
	case AmountDecline:
		return faultDecline
	}
	return faultNone
}

// New returns a simulator with cfg. Zero Seed, RecordsMax and Retention
// take their defaults. New panics if cfg.Validate fails: validate operator
// input first.
func New(cfg Config) *Provider {
	if err := cfg.Validate(); err != nil {
		panic("sim.New: invalid config: " + err.Error())
	}
	if cfg.RecordsMax == 0 {
		cfg.RecordsMax = RecordsMaxDefault
	}
	if cfg.Retention == 0 {
		cfg.Retention = Duration(RetentionDefault)
	}
	if cfg.ChallengeTTL == 0 {
		cfg.ChallengeTTL = Duration(ChallengeTTLDefault)
	}
	if cfg.Seed == 0 {
		cfg.Seed = rand.Uint64() | 1 //nolint:gosec // G404: a simulation seed, which Config reports so a run can be repeated
	}
	p := &Provider{
		instance: fmt.Sprintf("%08x", rand.Uint32()), //nolint:gosec // G404: tells instances apart, not secret
		sleep:    wait.Sleep,
		now:      time.Now,
		events:   newEvents(),
	}
	p.epoch = p.now()
	p.authPrefix = refPrefixAuthorization + p.instance + "_"
	p.challengePrefix = refPrefixChallenge + p.instance + "_"
	for i := range p.shards {
		s := &p.shards[i]
		s.index = uint64(i)
		s.rng = rand.New(rand.NewPCG(cfg.Seed, uint64(i))) //nolint:gosec // G404: seeded on purpose, so a run can be repeated
		s.max = max(1, cfg.RecordsMax/shardCount)
		s.retention = int64(time.Duration(cfg.Retention) / time.Second)
		s.challenges.max = max(1, ChallengesMax/shardCount)
		s.clear()
	}
	p.state.Store(newState(cfg))
	p.pages = newPages(p)
	return p
}

// Config returns the configuration in use, with the effective Seed,
// RecordsMax and Retention.
func (p *Provider) Config() Config { return p.state.Load().cfg }

// SetConfig replaces the configuration at run time; calls already sleeping
// keep the latency they drew, and challenges already started keep their
// ActionURL. A zero Seed, RecordsMax, Retention or ChallengeTTL keeps the
// current value; a different non-zero one is an error, as is anything
// Validate rejects. Safe for concurrent use with calls.
func (p *Provider) SetConfig(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	cur := p.state.Load().cfg
	switch {
	case cfg.Seed == 0:
		cfg.Seed = cur.Seed
	case cfg.Seed != cur.Seed:
		return fmt.Errorf("seed is fixed when the simulator starts (%d); restart it to change the seed", cur.Seed)
	}
	switch {
	case cfg.RecordsMax == 0:
		cfg.RecordsMax = cur.RecordsMax
	case cfg.RecordsMax != cur.RecordsMax:
		return fmt.Errorf("records_max is fixed when the simulator starts (%d); restart it to change it", cur.RecordsMax)
	}
	switch {
	case cfg.Retention == 0:
		cfg.Retention = cur.Retention
	case cfg.Retention != cur.Retention:
		return fmt.Errorf("retention is fixed when the simulator starts (%s); restart it to change it", cur.Retention)
	}
	if cfg.ChallengeTTL == 0 {
		cfg.ChallengeTTL = cur.ChallengeTTL
	}
	p.state.Store(newState(cfg))
	return nil
}

// clock returns the seconds since New, what records are stamped with:
// four bytes a record, enough for 136 years.
func (p *Provider) clock() uint32 {
	d := p.now().Sub(p.epoch)
	if d < 0 {
		return 0
	}
	return uint32(min(d/time.Second, math.MaxUint32))
}

func notPerformed(op string, err error) error {
	return &surgepay.ProviderError{Outcome: surgepay.NotPerformed, Op: op, Err: err}
}

// before runs everything that happens before the network: key check,
// outage, faults that stop the call (timeout, rate limit), and the latency
// sleep. It returns the key's digest and shard and the fault left for the
// operation (none, decline or unknown). Sleeping before performing means a call
// cancelled during its latency is NotPerformed; answers lost after
// performing are the AmountUnknown and UnknownRate path.
func (p *Provider) before(ctx context.Context, op, key string, amount int64, faults bool) (*shard, keyDigest, fault, error) {
	var d keyDigest
	if key == "" || len(key) > surgepay.IdempotencyKeyBytesMax {
		return nil, d, faultNone, notPerformed(op, ErrKeyInvalid)
	}
	st := p.state.Load()
	if st.cfg.Outage {
		return nil, d, faultNone, notPerformed(op, ErrOutage)
	}
	if err := ctx.Err(); err != nil {
		return nil, d, faultNone, notPerformed(op, err)
	}
	d = digestOf(key)
	s := p.shardOf(d)
	f := faultNone
	if faults {
		f = amountFault(amount)
	}
	wait := st.latency.fixed
	if st.random {
		s.mu.Lock()
		u := s.rng.Float64()
		if f == faultNone && faults {
			f = st.randomFault(u)
		}
		wait = st.latency.sample(s.rng)
		if f == faultTimeout {
			wait = st.timeoutLatency.sample(s.rng)
		}
		s.mu.Unlock()
	} else if f == faultTimeout {
		wait = st.timeoutLatency.fixed
	}
	switch f {
	case faultTimeout:
		if err := p.sleep(ctx, wait); err != nil {
			return nil, d, f, notPerformed(op, err)
		}
		return nil, d, f, notPerformed(op, ErrTimeout)
	case faultRateLimit:
		return nil, d, f, notPerformed(op, ErrRateLimited)
	}
	if err := p.sleep(ctx, wait); err != nil {
		return nil, d, f, notPerformed(op, err)
	}
	return s, d, f, nil
}

// after turns a performed call into its answer: a freshly performed
// operation under faultUnknown loses its answer.
func after(op string, res *surgepay.ProviderResult, fresh bool, f fault, err error) (*surgepay.ProviderResult, error) {
	if err != nil {
		return nil, err
	}
	if fresh && f == faultUnknown {
		return nil, &surgepay.ProviderError{Outcome: surgepay.Unknown, Op: op, Err: ErrAnswerLost}
	}
	return res, nil
}

// Authorize authorizes req.Amount on the card, or with req.Capture
// authorizes and captures it at once (a sale). See the package
// documentation for the test cards and amounts.
//
// A 3-D Secure challenge card (Card3DSChallenge) with a req.ReturnURL
// answers RequiresAction: the challenge waits, under the key, for the
// cardholder at ActionURL (Pages), and nothing is performed until it
// ends. Without a ReturnURL it is declined
// surgepay.DeclineAuthenticationRequired.
func (p *Provider) Authorize(ctx context.Context, req *surgepay.AuthorizeRequest) (*surgepay.ProviderResult, error) {
	const op = surgepay.TxAuthorization
	s, d, f, err := p.before(ctx, op, req.IdempotencyKey, req.Amount, true)
	if err != nil {
		return nil, err
	}
	prm := params{op: op, amount: req.Amount, currency: req.Currency, last4: req.Card.Number.Last4(), capture: req.Capture}
	now := p.clock()
	s.mu.Lock()
	res, fresh, err := p.authorizeLocked(s, d, req, prm, f, now)
	s.mu.Unlock()
	if fresh && err == nil && res.Approved && req.Capture && req.Amount == AmountDisputed {
		p.fileDispute(req.MerchantID, req.PaymentID, res.Reference, req.Amount)
	}
	return after(op, res, fresh, f, err)
}

func (p *Provider) authorizeLocked(s *shard, d keyDigest, req *surgepay.AuthorizeRequest, prm params, f fault, now uint32) (*surgepay.ProviderResult, bool, error) {
	if pos, ok := s.find(d, now); ok {
		return p.replay(s, pos, prm)
	}
	if len(s.challenges.byKey) != 0 { // a 3-D Secure challenge is waiting under some key of this shard.
		if ch := s.challenges.byKey[d]; ch != nil {
			if ch.prm != prm {
				return nil, false, notPerformed(prm.op, ErrKeyReused)
			}
			res := p.pendingAnswer(s, ch, now)
			return &res, false, nil
		}
	}
	number := req.Card.Number.Digits()
	c := cards[number]
	code, msg := checkAuthorize(req, number)
	if code == "" && c.secure >= secureChallenge {
		if c.secure == secureChallenge && req.ReturnURL != "" {
			return p.startChallenge(s, d, req, prm, c, f, now)
		}
		code, msg = authenticationDecline(c, req.Card.Number.Last4())
	}
	if code == "" {
		code, msg = decideCard(req, number, c, f)
	}
	res := p.performAuthorization(s, d, prm, req.PaymentID, code, msg, number == cardCaptureDeclined, now)
	return &res, true, nil
}

// performAuthorization stores the authorization under the key of d with
// parameters prm, declined with code and msg or, with code "", approved
// (a sale captured; with captureDeclined, every later capture declined),
// counts it, and returns its answer.
func (p *Provider) performAuthorization(s *shard, d keyDigest, prm params, paymentID, code, msg string, captureDeclined bool, now uint32) surgepay.ProviderResult {
	r := p.newRecord(d, &prm)
	r.setPaymentID(paymentID)
	if code != "" {
		r.decline(code, msg)
		s.totals.Declines++
		s.totals.AuthorizationsDeclined++
	} else {
		r.flags |= flagApproved
		if captureDeclined {
			r.flags |= flagCaptureDeclined
		}
		if prm.capture {
			r.captured = prm.amount
		}
		s.totals.authorized(prm.currency, prm.amount, prm.capture)
	}
	return p.result(&r.record, r.rare, paymentID, s.store(&r.record, r.rare, now))
}

// checkAuthorize returns the decline code and message of an authorization
// the network refuses whatever the card: a bad amount, currency or card
// number; or "".
func checkAuthorize(req *surgepay.AuthorizeRequest, number string) (code, msg string) {
	if req.Amount <= 0 || req.Amount > surgepay.AmountMinorMax {
		return DeclineInvalidRequest, fmt.Sprintf("amount must be between 1 and %d minor units", surgepay.AmountMinorMax)
	}
	if _, ok := surgepay.LookupCurrency(req.Currency); !ok {
		return DeclineInvalidRequest, "currency is not an ISO 4217 code"
	}
	if !validNumber(number) {
		return DeclineIncorrectNumber, "the card number is invalid"
	}
	return "", ""
}

// authenticationDecline returns the decline of a 3-D Secure card that
// cannot be authenticated now: a challenge card on a payment without a
// ReturnURL (a server's, with no cardholder to ask), or an issuer whose
// authentication is unavailable.
func authenticationDecline(c card, last4 string) (code, msg string) {
	if c.secure == secureUnavailable {
		return surgepay.DeclineAuthenticationUnavailable,
			"the issuer's 3-D Secure service is unavailable (test card ending " + last4 + ")"
	}
	return surgepay.DeclineAuthenticationRequired,
		"the issuer requires 3-D Secure, which a payment without a return URL cannot perform (test card ending " + last4 + ")"
}

// decideCard returns the decline code and message the card's number and
// the fault decide for an authorization, or "" to approve it. Messages
// mention the card's last four digits at most.
func decideCard(req *surgepay.AuthorizeRequest, number string, c card, f fault) (code, msg string) {
	last4 := req.Card.Number.Last4()
	if c.decline != "" {
		return c.decline, fmt.Sprintf("declined: %s (test card ending %s)", c.decline, last4)
	}
	if req.Capture && number == cardCaptureDeclined {
		return surgepay.DeclineGeneric, "the issuer declined the capture of this sale (test card ending " + last4 + ")"
	}
	if f == faultDecline {
		return surgepay.DeclineGeneric, faultDeclineMessage(req.Amount)
	}
	return "", ""
}

func faultDeclineMessage(amount int64) string {
	if amount == AmountDecline {
		return "declined: amount 9104 triggers a decline"
	}
	return "declined at random (decline_rate)"
}

// Capture captures req.Amount of the authorization req.AuthorizationRef.
// An authorization is captured once; a partial capture releases the rest.
func (p *Provider) Capture(ctx context.Context, req *surgepay.CaptureRequest) (*surgepay.ProviderResult, error) {
	return p.refOp(ctx, surgepay.TxCapture, req.IdempotencyKey, req.AuthorizationRef, req.Currency, req.Amount)
}

// Void releases the uncaptured authorization req.AuthorizationRef.
func (p *Provider) Void(ctx context.Context, req *surgepay.VoidRequest) (*surgepay.ProviderResult, error) {
	if strings.HasPrefix(req.AuthorizationRef, p.challengePrefix) {
		return p.cancelChallenge(ctx, req.IdempotencyKey, req.AuthorizationRef)
	}
	return p.refOp(ctx, surgepay.TxVoid, req.IdempotencyKey, req.AuthorizationRef, "", 0)
}

// Refund returns req.Amount of the captured authorization
// req.AuthorizationRef; refunds may repeat up to the captured amount.
func (p *Provider) Refund(ctx context.Context, req *surgepay.RefundRequest) (*surgepay.ProviderResult, error) {
	return p.refOp(ctx, surgepay.TxRefund, req.IdempotencyKey, req.AuthorizationRef, req.Currency, req.Amount)
}

// refOp performs a capture, void or refund. The operation's record lives in
// the shard of its key; the authorization lives in the shard its reference
// names. Both are locked, in shard order, so a replay check and the money
// rules see one consistent state.
func (p *Provider) refOp(ctx context.Context, op, key, ref, currency string, amount int64) (*surgepay.ProviderResult, error) {
	ks, d, f, err := p.before(ctx, op, key, amount, true)
	if err != nil {
		return nil, err
	}
	prm := params{op: op, amount: amount, currency: currency, ref: ref}
	as, n, known := p.authShard(ref)
	if !known {
		as = ks
	}
	now := p.clock()
	lockPair(ks, as)
	res, fresh, err := p.refOpLocked(ks, as, n, known, d, prm, f, now)
	unlockPair(ks, as)
	return after(op, res, fresh, f, err)
}

func (p *Provider) refOpLocked(ks, as *shard, n uint64, known bool, d keyDigest, prm params, f fault, now uint32) (*surgepay.ProviderResult, bool, error) {
	if pos, ok := ks.find(d, now); ok {
		return p.replay(ks, pos, prm)
	}
	var a *record // valid until ks.store below.
	var arf *rare
	if known {
		a, arf = as.authorization(n, now)
	}
	r := p.newRecord(d, &prm)
	if code, msg := decideRefOp(a, arf, prm, f); code != "" {
		r.decline(code, msg)
		as.totals.Declines++
	} else {
		r.flags |= flagApproved
		if prm.op == surgepay.TxVoid {
			r.amount = a.amount // the authorized amount, released.
		}
		a.apply(prm, &as.totals)
	}
	res := p.result(&r.record, r.rare, "", ks.store(&r.record, r.rare, now))
	return &res, true, nil
}

// decideRefOp applies the money rules to a capture, void or refund of a
// (nil if unknown), whose rare fields are arf. It returns a decline code
// and message, or "".
func decideRefOp(a *record, arf *rare, prm params, f fault) (code, msg string) {
	invalid := func(format string, args ...any) (string, string) {
		return DeclineInvalidRequest, fmt.Sprintf(format, args...)
	}
	switch {
	case a == nil:
		return invalid("no such authorization")
	case !a.approved():
		return invalid("the authorization was declined")
	case prm.op == surgepay.TxVoid && a.hasFlag(flagVoided):
		return invalid("the authorization is already voided")
	case prm.op == surgepay.TxVoid && a.captured > 0:
		return invalid("a captured authorization cannot be voided; refund it instead")
	case prm.op == surgepay.TxVoid:
		// Allowed.
	case a.hasFlag(flagVoided):
		return invalid("the authorization was voided")
	case prm.op == surgepay.TxCapture && a.captured > 0:
		return invalid("the authorization is already captured; an authorization is captured once")
	case prm.op == surgepay.TxRefund && a.captured == 0:
		return invalid("the authorization is not captured")
	case !a.currencyIs(arf, prm.currency):
		return invalid("currency does not match the authorization's %s", a.currencyString(arf))
	case prm.amount <= 0:
		return invalid("%s amount must be positive", prm.op)
	case prm.op == surgepay.TxCapture && prm.amount > a.amount:
		return invalid("capture amount %d exceeds the authorized amount %d", prm.amount, a.amount)
	case prm.op == surgepay.TxRefund && prm.amount > a.captured-a.refunded:
		return invalid("refund amount %d exceeds the refundable amount %d", prm.amount, a.captured-a.refunded)
	case prm.op == surgepay.TxCapture && a.hasFlag(flagCaptureDeclined):
		return surgepay.DeclineGeneric, "the issuer declined the capture (test card ending 0259)"
	}
	if f == faultDecline {
		return surgepay.DeclineGeneric, faultDeclineMessage(prm.amount)
	}
	return "", ""
}

// Lookup returns the stored result of the operation performed under key,
// with Operation set and, for an authorization, Captured (it was a sale).
// Under the key of a pending 3-D Secure challenge it answers
// RequiresAction (the same ActionURL as the authorization), until the
// challenge ends and the authorization is performed; a challenge whose
// ChallengeTTL has passed ends then, abandoned.
// It answers NotPerformed with ErrNoSuchOperation if there is none, and
// Unknown if the lookup itself did not happen (an outage). Lookup
// waits the configured latency and fails during an Outage, but never meets
// a random fault.
func (p *Provider) Lookup(ctx context.Context, key string) (*surgepay.ProviderResult, error) {
	s, d, _, err := p.before(ctx, OpLookup, key, 0, false)
	if errors.Is(err, ErrKeyInvalid) {
		return nil, err
	} else if err != nil {
		// The lookup did not happen (an outage, a cancelled call): that
		// says nothing of the operation, which stays unknown.
		return nil, &surgepay.ProviderError{Outcome: surgepay.Unknown, Op: OpLookup, Err: err}
	}
	now := p.clock()
	s.mu.Lock()
	pos, ok := s.find(d, now)
	var res surgepay.ProviderResult
	if ok {
		res = p.storedResult(s, pos)
	} else if ch := s.challenges.byKey[d]; ch != nil {
		res, ok = p.pendingAnswer(s, ch, now), true
	}
	s.mu.Unlock()
	if !ok {
		return nil, notPerformed(OpLookup, ErrNoSuchOperation)
	}
	return &res, nil
}

// Reference prefixes name the operation.
const (
	refPrefixAuthorization = "auth_"
	refPrefixCapture       = "cap_"
	refPrefixVoid          = "void_"
	refPrefixRefund        = "re_"
	refPrefixChallenge     = "3ds_" // a pending 3-D Secure challenge (requiresAction).
)

func refPrefix(op opKind) string {
	switch op {
	case opAuthorization:
		return refPrefixAuthorization
	case opCapture:
		return refPrefixCapture
	case opVoid:
		return refPrefixVoid
	}
	return refPrefixRefund
}

// refBytesMax bounds a reference: the longest prefix, the instance tag, an
// underscore and a uint64 in base 36.
const refBytesMax = 5 + 8 + 1 + 13

// appendRef appends the reference of operation op numbered n (see
// shard.refNumber) to b.
func (p *Provider) appendRef(b []byte, op opKind, n uint64) []byte {
	b = append(b, refPrefix(op)...)
	b = append(b, p.instance...)
	b = append(b, '_')
	return strconv.AppendUint(b, n, 36)
}

func (p *Provider) ref(op opKind, n uint64) string {
	var buf [refBytesMax]byte
	return string(p.appendRef(buf[:0], op, n))
}

// authNumber returns the number of ref if it is one of this simulator's
// authorization references written exactly as it writes them, so that the
// number alone gives back the string.
func (p *Provider) authNumber(ref string) (uint64, bool) {
	_, n, ok := p.authShard(ref)
	var buf [refBytesMax]byte
	return n, ok && string(p.appendRef(buf[:0], opAuthorization, n)) == ref
}

// authShard returns the shard and number of an authorization reference, and
// false if ref is not one of this simulator's authorization references.
func (p *Provider) authShard(ref string) (*shard, uint64, bool) {
	rest, ok := strings.CutPrefix(ref, p.authPrefix)
	if !ok {
		return nil, 0, false
	}
	n, err := strconv.ParseUint(rest, 36, 64)
	if err != nil {
		return nil, 0, false
	}
	return &p.shards[n%shardCount], n, true
}

func validNumber(n string) bool {
	if len(n) < 12 || len(n) > 19 {
		return false
	}
	for i := 0; i < len(n); i++ {
		if n[i] < '0' || n[i] > '9' {
			return false
		}
	}
	return surgepay.Luhn(n)
}
