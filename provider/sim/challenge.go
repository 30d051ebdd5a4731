package sim

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/surgepay/surgepay"
)

// ChallengesMax bounds the 3-D Secure challenges the simulator holds,
// pending or recently ended (kept for their page, see challengeHeld);
// each shard of the key space holds its share. Beyond it a new challenge
// is declined surgepay.DeclineAuthenticationUnavailable, as an issuer's
// overloaded access control server would be. A challenge takes about 500
// bytes (itself, its action URL, its map entries) and its ReturnURL (the
// engine's are at most surgepay.ReturnURLBytesMax, 2 KiB): at worst about
// 50 MB, within the simulator's share of the 256 MB `surgepay serve`
// stays within; 100,000 could take 250 MB. It admits about 16 new
// challenges a second, each held for two default TTLs, far more than the
// shoppers of a demo or a browser test: a load test that challenges every
// payment meets authentication_unavailable beyond that.
const ChallengesMax = 20_000

// challengeHeld is how many ChallengeTTLs a challenge is held from its
// start: pending for at most the first, then ended, so that a reload or
// the back button still shows its state, until released.
const challengeHeld = 2

// challengeSweepMax bounds the challenges one new challenge ends or
// releases, so that no call holds a shard's lock for long.
const challengeSweepMax = 16

// challengeIDBytes is the length of a challenge ID: 160 bits from
// crypto/rand, 6 of which then name the shard, leaving 154 unguessable.
// The ID alone lets its holder complete the challenge.
const challengeIDBytes = 20

// challengeID names a challenge in its page's URL. The low bits of its
// first byte are the shard of the challenge's idempotency key, so the
// page finds it without a global index.
type challengeID [challengeIDBytes]byte

// challengeEncoding writes an ID as 32 lower-case base32 characters: safe
// in a URL path, and exact (160 bits are 32 characters, none padded).
var challengeEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

func newChallengeID(shard uint64) challengeID {
	var id challengeID
	// crypto/rand.Read never returns an error: it crashes the program if
	// the system cannot give randomness.
	_, _ = rand.Read(id[:])
	id[0] = id[0]&^byte(shardCount-1) | byte(shard) //nolint:gosec // G115: shard < shardCount
	return id
}

func (id challengeID) String() string { return challengeEncoding.EncodeToString(id[:]) }

func (id challengeID) shard() uint64 { return uint64(id[0] & (shardCount - 1)) }

// parseChallengeID reads an ID as String writes it.
func parseChallengeID(s string) (challengeID, bool) {
	var id challengeID
	if len(s) != challengeEncoding.EncodedLen(challengeIDBytes) {
		return id, false
	}
	n, err := challengeEncoding.Decode(id[:], []byte(s))
	return id, err == nil && n == challengeIDBytes
}

// challengeState is where a challenge stands.
type challengeState uint8

const (
	challengePending       challengeState = iota
	challengeAuthenticated                // the cardholder authenticated: the authorization was performed.
	challengeFailed                       // the cardholder chose Fail.
	challengeAbandoned                    // ChallengeTTL passed first.
	challengeCancelled                    // the merchant cancelled it (Void of its reference).
)

// challenge is a 3-D Secure challenge: an authorization that waits for
// the cardholder. It is performed (a record stored under its key, its
// effects counted) only when the challenge ends.
type challenge struct {
	id         challengeID
	key        keyDigest
	prm        params // the authorization's: a replay must repeat them.
	paymentID  string
	merchantID string
	returnURL  string // exactly as the engine sent it.
	actionURL  string
	decline    string // the card's decline once authenticated; "" approves.
	fault      fault  // the authorize call's decline fault (amount 9104, decline_rate), applied once authenticated.
	created    uint32 // Provider.clock.
	state      challengeState
}

// challenges is a shard's 3-D Secure challenges. Guarded by the shard's mu.
type challenges struct {
	byKey map[keyDigest]*challenge   // pending ones, by idempotency key.
	byID  map[challengeID]*challenge // every one held, pending or ended.
	queue []*challenge               // every one held, oldest first.
	max   int                        // held at most: this shard's share of ChallengesMax.
}

func (cs *challenges) clear() {
	cs.byKey, cs.byID, cs.queue = nil, nil, nil
}

// challengeTTL returns Config.ChallengeTTL in seconds of Provider.clock.
func challengeTTL(st *state) int64 { return int64(time.Duration(st.cfg.ChallengeTTL) / time.Second) }

// due reports whether c's time to authenticate has run out at now.
func (c *challenge) due(now uint32, ttl int64) bool { return int64(now)-int64(c.created) >= ttl }

// startChallenge answers the first authorization under the key of d with
// a challenge card: RequiresAction, the challenge held pending; or a
// decline when the request cannot have one (a ReturnURL the page cannot
// send the shopper back to, or ChallengesMax reached). fresh is true.
func (p *Provider) startChallenge(s *shard, d keyDigest, req *surgepay.AuthorizeRequest, prm params, c card, f fault, now uint32) (*surgepay.ProviderResult, bool, error) {
	st := p.state.Load()
	ttl := challengeTTL(st)
	last4 := req.Card.Number.Last4()
	origin, ok := returnOrigin(req.ReturnURL)
	if !ok {
		res := p.performAuthorization(s, d, prm, req.PaymentID, DeclineInvalidRequest,
			fmt.Sprintf("the return URL must be an absolute http(s) URL of at most %d bytes", surgepay.ReturnURLBytesMax), false, now)
		return &res, true, nil
	}
	p.sweepChallenges(s, now, ttl, challengeSweepMax)
	cs := &s.challenges
	if len(cs.byID) >= cs.max {
		res := p.performAuthorization(s, d, prm, req.PaymentID, surgepay.DeclineAuthenticationUnavailable,
			"the issuer's authentication service is busy: the simulator holds its most challenges (test card ending "+last4+")", false, now)
		return &res, true, nil
	}
	base := st.cfg.PagesURL
	if base == "" {
		base = origin
	}
	ch := &challenge{id: newChallengeID(s.index), key: d, prm: prm, paymentID: req.PaymentID,
		merchantID: req.MerchantID, returnURL: req.ReturnURL, decline: c.decline, fault: f, created: now}
	ch.actionURL = trimSlash(base) + surgepay.PagesPrefix + "3ds/" + ch.id.String()
	if cs.byKey == nil {
		cs.byKey = make(map[keyDigest]*challenge)
		cs.byID = make(map[challengeID]*challenge)
	}
	cs.byKey[d] = ch
	cs.byID[ch.id] = ch
	cs.queue = append(cs.queue, ch)
	res := p.requiresAction(ch)
	return &res, true, nil
}

func trimSlash(s string) string {
	for len(s) > 0 && s[len(s)-1] == '/' {
		s = s[:len(s)-1]
	}
	return s
}

// returnOrigin returns the scheme://host[:port] of an absolute http(s)
// ReturnURL, and false for any other: too long, relative, or a host with
// characters that could not stand in the page's Content-Security-Policy.
func returnOrigin(s string) (string, bool) {
	if s == "" || len(s) > surgepay.ReturnURLBytesMax {
		return "", false
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || !originHostOK(u.Host) || u.Opaque != "" {
		return "", false
	}
	return u.Scheme + "://" + u.Host, true
}

// originHostOK reports whether host (with any port) is non-empty and
// made of the characters of DNS names, IP addresses and ports only.
func originHostOK(host string) bool {
	if host == "" {
		return false
	}
	for i := 0; i < len(host); i++ {
		switch c := host[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '-', c == ':', c == '[', c == ']':
		default:
			return false
		}
	}
	return true
}

// requiresAction is the answer to an authorization whose challenge is
// pending. Its Reference names the challenge: a Void of it cancels the
// challenge (cancelChallenge), as Stripe cancels a PaymentIntent awaiting
// authentication.
func (p *Provider) requiresAction(ch *challenge) surgepay.ProviderResult {
	return surgepay.ProviderResult{RequiresAction: true, ActionURL: ch.actionURL, Amount: ch.prm.amount,
		Operation: surgepay.TxAuthorization, PaymentID: ch.paymentID, Reference: p.challengePrefix + ch.id.String(),
		Message: "the issuer asks the cardholder to authenticate (3-D Secure, test card ending " + ch.prm.last4 + ")"}
}

// pendingAnswer answers a replay or Lookup of the pending challenge ch:
// RequiresAction, or, once its time has run out, the abandoned
// authorization's decline.
func (p *Provider) pendingAnswer(s *shard, ch *challenge, now uint32) surgepay.ProviderResult {
	if ch.due(now, challengeTTL(p.state.Load())) {
		return p.endChallenge(s, ch, challengeAbandoned, now)
	}
	return p.requiresAction(ch)
}

// endChallenge ends the pending challenge ch as state says and performs
// its authorization: stored under its key from now on, its effects
// counted, replays and Lookup answered from the record as for any
// authorization. The challenge stays held for its page.
func (p *Provider) endChallenge(s *shard, ch *challenge, state challengeState, now uint32) surgepay.ProviderResult {
	delete(s.challenges.byKey, ch.key)
	ch.state = state
	var code, msg string
	switch state {
	case challengeAuthenticated:
		switch {
		case ch.decline != "":
			code, msg = ch.decline, fmt.Sprintf("declined after 3-D Secure: %s (test card ending %s)", ch.decline, ch.prm.last4)
		case ch.fault == faultDecline:
			code, msg = surgepay.DeclineGeneric, faultDeclineMessage(ch.prm.amount)
		}
	case challengeFailed:
		code, msg = surgepay.DeclineAuthenticationFailed, "the cardholder failed 3-D Secure authentication (test card ending "+ch.prm.last4+")"
	case challengeCancelled:
		code, msg = surgepay.DeclineAuthenticationFailed, "3-D Secure authentication was cancelled before the cardholder finished it (test card ending "+ch.prm.last4+")"
	default:
		code, msg = surgepay.DeclineAuthenticationFailed, "the cardholder abandoned 3-D Secure authentication (test card ending "+ch.prm.last4+")"
	}
	return p.performAuthorization(s, ch.key, ch.prm, ch.paymentID, code, msg, false, now)
}

// sweepChallenges ends the pending challenges whose time has run out and
// releases those held for their page long enough, oldest first, at most
// n. Challenges end and leave in the order they started, as all share
// one ChallengeTTL; a pending one past its time but behind a held one
// ends when the sweep reaches it, or at once when a replay, Lookup or its
// page asks for it.
func (p *Provider) sweepChallenges(s *shard, now uint32, ttl int64, n int) {
	cs := &s.challenges
	for i := 0; i < n && len(cs.queue) > 0; i++ {
		ch := cs.queue[0]
		if !ch.due(now, ttl) {
			return
		}
		if ch.state == challengePending {
			p.endChallenge(s, ch, challengeAbandoned, now)
		}
		if int64(now)-int64(ch.created) < challengeHeld*ttl {
			return
		}
		delete(cs.byID, ch.id)
		cs.queue[0] = nil
		cs.queue = cs.queue[1:]
	}
}

// challengeView is what a challenge's page shows: no card data beyond
// the last four digits.
type challengeView struct {
	id        string
	state     challengeState
	amount    int64
	currency  string
	last4     string
	returnURL string
}

// challengeAt finds the challenge named id, ending it first if its time
// has run out, and, with complete, completes it if still pending
// (authenticated or not). It returns what its page shows and false if no
// such challenge is held.
func (p *Provider) challengeAt(idText string, complete bool, authenticated bool) (challengeView, bool) {
	id, ok := parseChallengeID(idText)
	if !ok {
		return challengeView{}, false
	}
	s := &p.shards[id.shard()]
	st := p.state.Load()
	now := p.clock()
	var fresh surgepay.ProviderResult
	s.mu.Lock()
	ch := s.challenges.byID[id]
	if ch == nil {
		s.mu.Unlock()
		return challengeView{}, false
	}
	if ch.state == challengePending && ch.due(now, challengeTTL(st)) {
		p.endChallenge(s, ch, challengeAbandoned, now)
	}
	if complete && ch.state == challengePending {
		state := challengeFailed
		if authenticated {
			state = challengeAuthenticated
		}
		fresh = p.endChallenge(s, ch, state, now)
	}
	v := challengeView{id: idText, state: ch.state, amount: ch.prm.amount, currency: ch.prm.currency,
		last4: ch.prm.last4, returnURL: ch.returnURL}
	disputed := fresh.Approved && ch.prm.capture && ch.prm.amount == AmountDisputed
	merchantID, paymentID := ch.merchantID, ch.paymentID
	s.mu.Unlock()
	if disputed { // as Authorize does for an ordinary sale of this amount.
		p.fileDispute(merchantID, paymentID, fresh.Reference, AmountDisputed)
	}
	return v, true
}

// HasChallenge reports whether the simulator holds the 3-D Secure
// challenge named id (the last element of its ActionURL), pending or
// recently ended: whether its page is served here. A router over several
// simulators asks each (see HoldsPage).
func (p *Provider) HasChallenge(id string) bool {
	cid, ok := parseChallengeID(id)
	if !ok {
		return false
	}
	s := &p.shards[cid.shard()]
	s.mu.Lock()
	_, ok = s.challenges.byID[cid]
	s.mu.Unlock()
	return ok
}

// cancelChallenge is a Void of the reference of a challenge (ref, which
// starts with challengePrefix) under key: a pending challenge ends
// cancelled, its authorization performed declined authentication_failed,
// and the Void is approved (nothing was authorized; nothing is counted as
// voided). A challenge that has ended, whose authorization a lookup under
// its key answers, or one not held, declines the Void, as Stripe refuses
// to cancel a PaymentIntent that has succeeded. Replays under key answer
// as the first.
func (p *Provider) cancelChallenge(ctx context.Context, key, ref string) (*surgepay.ProviderResult, error) {
	const op = surgepay.TxVoid
	ks, d, f, err := p.before(ctx, op, key, 0, true)
	if err != nil {
		return nil, err
	}
	prm := params{op: op, ref: ref}
	id, known := parseChallengeID(strings.TrimPrefix(ref, p.challengePrefix))
	cs := ks
	if known {
		cs = &p.shards[id.shard()]
	}
	now := p.clock()
	lockPair(ks, cs)
	res, fresh, err := p.cancelChallengeLocked(ks, cs, id, known, d, prm, now)
	unlockPair(ks, cs)
	return after(op, res, fresh, f, err)
}

func (p *Provider) cancelChallengeLocked(ks, cs *shard, id challengeID, known bool, d keyDigest, prm params, now uint32) (*surgepay.ProviderResult, bool, error) {
	if pos, ok := ks.find(d, now); ok {
		return p.replay(ks, pos, prm)
	}
	var ch *challenge
	if known {
		ch = cs.challenges.byID[id]
	}
	if ch != nil && ch.state == challengePending && ch.due(now, challengeTTL(p.state.Load())) {
		p.endChallenge(cs, ch, challengeAbandoned, now)
	}
	r := p.newRecord(d, &prm)
	switch {
	case ch == nil:
		r.decline(DeclineInvalidRequest, "no such authorization: the 3-D Secure challenge is not held")
		ks.totals.Declines++
	case ch.state != challengePending:
		r.decline(DeclineInvalidRequest, "the 3-D Secure challenge has ended; its authorization is answered under its key")
		ks.totals.Declines++
	default:
		p.endChallenge(cs, ch, challengeCancelled, now)
		r.flags |= flagApproved
		r.amount = ch.prm.amount
	}
	res := p.result(&r.record, r.rare, "", ks.store(&r.record, r.rare, now))
	return &res, true, nil
}
