package sim

import (
	"crypto/sha256"
	"encoding/binary"
	"math/rand/v2"
	"sync"

	"github.com/surgepay/surgepay"
)

// shardCount splits the key space so that concurrent calls rarely share a
// mutex. 64 is well above the core counts the simulator runs on, and a
// power of two so that n mod shardCount is a mask.
const shardCount = 64

// shard holds the operations whose keys hash to it, authorizations
// included. Every field is guarded by mu.
//
// A shard numbers its records 1, 2, ... in the order it stores them and
// keeps them in a ring of max records: record q sits at
// recs[(q-base) mod max], and first..seq are stored. The oldest leave
// first, evicted by the count bound or expired by age: stamps never
// decrease along the ring, so the oldest record is also the first to
// expire. An operation's reference carries its record's number (see
// refNumber), so an authorization is found from its reference with no
// index of its own.
//
// A record holds no pointer, so the collector never scans recs (hundreds
// of thousands of records): it keeps a digest of its key, its payment ID
// in place, and what few records need in rares, by record number.
//
// A record older than retention is gone at once for every call: finding
// it checks its age. Its memory is released from the head of the ring a
// few records at a time, by each store (releaseStepMax) and by
// TotalEffects; until then RecordsMax still bounds it.
type shard struct {
	mu        sync.Mutex
	index     uint64
	rng       *rand.Rand
	max       int    // records kept at most: this shard's share of RecordsMax.
	retention int64  // Config.Retention in seconds.
	stamped   uint32 // the newest record's stamp (Provider.clock).
	base      uint64 // number of the record at recs[0].
	first     uint64 // oldest stored record; seq+1 when none is.
	seq       uint64 // newest record. Never reset, so references are never reused.
	recs      []record
	rares     map[uint64]*rare // record number → what a flagRare record keeps apart.
	byKey     table            // idempotency key → position in recs.
	byPayment table            // payment ID → position of its newest authorization; see record.link.
	totals    Totals
	// challenges are the 3-D Secure challenges under keys of this shard:
	// authorizations not performed yet, kept apart from recs so that an
	// ordinary authorization pays one length check for them.
	challenges challenges
	_          [64]byte // keeps neighbouring shards' mutexes off one cache line.
}

func (s *shard) clear() {
	s.challenges.clear()
	s.recs, s.rares = nil, nil
	s.byKey, s.byPayment = table{}, table{}
	s.base, s.first = s.seq+1, s.seq+1
	s.totals = Totals{}
}

// count returns the records stored.
func (s *shard) count() int { return int(s.seq + 1 - s.first) } //nolint:gosec // G115: at most max, an int

// pos returns the position in recs of record q.
//
//nolint:gosec // G115: max is positive and below RecordsMaxLimit, so both conversions hold.
func (s *shard) pos(q uint64) uint32 { return uint32((q - s.base) % uint64(s.max)) }

// number returns the record number of the stored record at pos.
func (s *shard) number(pos uint32) uint64 {
	m := uint64(s.max) //nolint:gosec // G115: max is positive
	return s.first + (uint64(pos)+m-uint64(s.pos(s.first)))%m
}

// refNumber returns the number that the reference of the stored record at
// pos carries: its record number times shardCount plus the shard's index,
// unique per simulator, and naming the shard (n mod shardCount).
func (s *shard) refNumber(pos uint32) uint64 { return s.number(pos)*shardCount + s.index }

// rareAt returns what the stored record at pos keeps apart, or nil.
func (s *shard) rareAt(pos uint32) *rare {
	if !s.recs[pos].hasFlag(flagRare) {
		return nil
	}
	return s.rares[s.number(pos)]
}

// paymentIDAt returns the payment ID of the stored record at pos.
func (s *shard) paymentIDAt(pos uint32) string {
	r := &s.recs[pos]
	if r.pidLen > 0 {
		return string(r.pid[:r.pidLen])
	}
	if rf := s.rareAt(pos); rf != nil {
		return rf.paymentID
	}
	return ""
}

// paymentIDIs reports whether the stored record at pos has paymentID,
// without making a string of its own.
func (s *shard) paymentIDIs(pos uint32, paymentID string) bool {
	r := &s.recs[pos]
	if r.pidLen > 0 {
		return string(r.pid[:r.pidLen]) == paymentID
	}
	return r.hasFlag(flagPaymentID) && s.paymentIDAt(pos) == paymentID
}

func (s *shard) keyHashAt(pos uint32) uint64     { return s.recs[pos].key.hash() }
func (s *shard) paymentHashAt(pos uint32) uint64 { return hash(s.paymentIDAt(pos)) }

// Bounds on releasing expired records, so that no call holds a shard's
// lock for long after an idle period.
const (
	// releaseStepMax is how many a store releases at most: more than the
	// one it adds, so releasing keeps up with any rate of stores.
	releaseStepMax = 16
	// releaseBatchMax is how many TotalEffects releases per hold of a
	// shard's lock.
	releaseBatchMax = 1024
)

// expired reports whether r is older than the retention at now.
func (s *shard) expired(r *record, now uint32) bool {
	return int64(now)-int64(r.stored) > s.retention
}

// releaseExpired forgets up to n expired records, oldest first, and
// returns how many it forgot.
func (s *shard) releaseExpired(now uint32, n int) int {
	i := 0
	for ; i < n && s.count() > 0 && s.expired(&s.recs[s.pos(s.first)], now); i++ {
		s.dropOldest()
		s.totals.RecordsExpired++
	}
	return i
}

// find returns the position of the live record stored under the key of
// digest d. An expired one leaves the key index at once, so the key is free
// for a new record; the ring releases it in its turn.
func (s *shard) find(d keyDigest, now uint32) (uint32, bool) {
	h := d.hash()
	pos, ok := s.byKey.find(h, func(pos uint32) bool { return s.recs[pos].key == d })
	if ok && s.expired(&s.recs[pos], now) {
		s.byKey.remove(h, pos, s.keyHashAt)
		return 0, false
	}
	return pos, ok
}

// authorization returns the live authorization whose reference carries n
// (its shard is s) and its rare fields, or nil.
func (s *shard) authorization(n uint64, now uint32) (*record, *rare) {
	q := n / shardCount
	if q < s.first || q > s.seq {
		return nil, nil
	}
	pos := s.pos(q)
	if r := &s.recs[pos]; r.op == opAuthorization && !s.expired(r, now) {
		return r, s.rareAt(pos)
	}
	return nil, nil
}

// store adds r, with rf (nil for most records), as the newest record,
// stamped now or, if the clock went back, as the newest before it. It
// first releases expired records, then evicts the oldest if the shard
// still holds max. It returns r's reference number. Pointers into recs are
// invalid afterwards: recs may have grown.
func (s *shard) store(r *record, rf *rare, now uint32) uint64 {
	s.releaseExpired(now, releaseStepMax)
	if s.count() == s.max {
		s.dropOldest()
		s.totals.RecordsEvicted++
	}
	s.stamped = max(s.stamped, now)
	r.stored = s.stamped
	s.seq++
	pos := s.pos(s.seq)
	if int(pos) == len(s.recs) {
		s.grow()
	}
	if rf != nil {
		r.flags |= flagRare
		if s.rares == nil {
			s.rares = make(map[uint64]*rare)
		}
		s.rares[s.seq] = rf
	}
	if r.indexedByPayment() {
		id := string(r.pid[:r.pidLen])
		if r.pidLen == 0 {
			id = rf.paymentID
		}
		h := hash(id)
		if prev, ok := s.findPayment(h, id); ok {
			r.link = s.refNumber(prev)
			s.byPayment.remove(h, prev, s.paymentHashAt)
		}
		s.recs[pos] = *r
		s.byPayment.insert(h, pos, s.paymentHashAt)
	} else {
		s.recs[pos] = *r
	}
	s.byKey.insert(r.key.hash(), pos, s.keyHashAt)
	return s.seq*shardCount + s.index
}

// findPayment returns the position of the newest stored authorization of
// paymentID, whose hash is h.
func (s *shard) findPayment(h uint64, paymentID string) (uint32, bool) {
	return s.byPayment.find(h, func(pos uint32) bool { return s.paymentIDIs(pos, paymentID) })
}

// grow lengthens recs by one, doubling its capacity up to max when full,
// so that a full ring holds no spare capacity.
func (s *shard) grow() {
	if len(s.recs) == cap(s.recs) {
		recs := make([]record, len(s.recs), min(max(2*cap(s.recs), 16), s.max))
		copy(recs, s.recs)
		s.recs = recs
	}
	s.recs = s.recs[:len(s.recs)+1]
}

// dropOldest forgets the oldest record. Call with one stored.
func (s *shard) dropOldest() {
	pos := s.pos(s.first)
	r := &s.recs[pos]
	s.byKey.remove(r.key.hash(), pos, s.keyHashAt)
	if r.indexedByPayment() {
		s.byPayment.remove(hash(s.paymentIDAt(pos)), pos, s.paymentHashAt)
	}
	if r.hasFlag(flagRare) {
		delete(s.rares, s.first)
	}
	*r = record{}
	s.first++
}

// params are the parameters a replay under the same key must repeat.
type params struct {
	op       string
	amount   int64
	currency string
	ref      string
	last4    string
	capture  bool
}

// opKind is a record's operation.
type opKind uint8

const (
	opNone opKind = iota // a free position.
	opAuthorization
	opCapture
	opVoid
	opRefund
)

var opNames = [...]string{opAuthorization: surgepay.TxAuthorization, opCapture: surgepay.TxCapture,
	opVoid: surgepay.TxVoid, opRefund: surgepay.TxRefund}

func (o opKind) String() string { return opNames[o] }

func opOf(name string) opKind {
	for o, n := range opNames {
		if n == name && n != "" {
			return opKind(o)
		}
	}
	return opNone
}

// keyDigest is what a record keeps of its idempotency key: the first 16
// bytes of the key's SHA-256. Two keys share one with a probability of
// about n²/2¹²⁹ for n keys stored (10⁻²⁷ at a million), and a client cannot
// make two on purpose; keys are up to 255 bytes, the digest 16.
type keyDigest [16]byte

func digestOf(key string) keyDigest {
	var buf [surgepay.IdempotencyKeyBytesMax]byte // callers check the key's length first.
	sum := sha256.Sum256(buf[:copy(buf[:], key)])
	return keyDigest(sum[:16])
}

// hash is the digest's hash for the key table and the choice of shard.
func (d keyDigest) hash() uint64 { return binary.LittleEndian.Uint64(d[:8]) }

// paymentIDInline is the longest payment ID a record holds in place (the
// engine's are 30 bytes); a longer one is kept in rare.
const paymentIDInline = 32

// record is one operation stored under its idempotency key and, for an
// authorization, its money state. It is kept compact, as hundreds of
// thousands are (docs/simulator.md, Memory), and holds no pointer: the
// result and the parameters are rebuilt from these fields (result,
// params), the reference from the record's number, and what only declines
// or odd requests need is in the shard's rares (flagRare).
type record struct {
	key keyDigest
	// pid[:pidLen] is an authorization's AuthorizeRequest.PaymentID when
	// it fits; with flagPaymentID and pidLen 0, rare has it.
	pid [paymentIDInline]byte
	// amount is the request's; for an approved void, the amount it
	// released (the authorized amount), which its result answers.
	amount int64
	// An authorization's money state; 0 in other records. captured > 0
	// means captured: a capture is of a positive amount.
	captured int64
	refunded int64
	refunds  int64
	// link is the reference number of another authorization. For a
	// capture, void or refund (with flagTarget): the one it names. For an
	// authorization: the previous one of its payment in this shard, 0 for
	// none; byPayment holds only a payment's newest, the rest follow by
	// link until one is no longer stored (they leave oldest first).
	link     uint64
	stored   uint32  // stamp: seconds since New (Provider.clock).
	currency [3]byte // with flagCurrency.
	last4    [4]byte // with flagLast4.
	op       opKind
	pidLen   uint8
	flags    recordFlags
}

type recordFlags uint16

const (
	flagApproved        recordFlags = 1 << iota
	flagSale                        // an authorization with AuthorizeRequest.Capture.
	flagVoided                      // an authorization that was voided.
	flagCaptureDeclined             // an authorization on test card 4000000000000259.
	flagLast4                       // last4 holds the card number's last four bytes; else it had fewer.
	flagCurrency                    // currency holds the request's currency; else rare has it, or it was "".
	flagTarget                      // link names the authorization; else rare has the reference as sent, or it was "".
	flagPaymentID                   // an authorization with a payment ID: in pid, or in rare if longer.
	flagRare                        // the shard's rares has this record's rare fields.
)

// rare is what few records need: a decline's code and message, and
// parameters that fit no compact field (a currency that is not three
// bytes, a reference this simulator did not write, a payment ID longer
// than paymentIDInline).
type rare struct {
	declineCode, message string
	currency, ref        string
	paymentID            string
}

// newRecord is a record being made, with its rare fields (nil until one
// is needed).
type newRecord struct {
	record
	rare *rare
}

func (n *newRecord) rareFields() *rare {
	if n.rare == nil {
		n.rare = &rare{}
	}
	return n.rare
}

func (n *newRecord) decline(code, msg string) {
	rf := n.rareFields()
	rf.declineCode, rf.message = code, msg
}

func (n *newRecord) setPaymentID(id string) {
	if id == "" {
		return
	}
	n.flags |= flagPaymentID
	if len(id) <= paymentIDInline {
		n.pidLen = uint8(copy(n.pid[:], id)) //nolint:gosec // G115: at most paymentIDInline
	} else {
		n.rareFields().paymentID = id
	}
}

func (r *record) approved() bool             { return r.flags&flagApproved != 0 }
func (r *record) indexedByPayment() bool     { return r.op == opAuthorization && r.hasFlag(flagPaymentID) }
func (r *record) hasFlag(f recordFlags) bool { return r.flags&f != 0 }

// currencyIs reports whether c is the currency r's request carried; rf is
// r's rare fields.
func (r *record) currencyIs(rf *rare, c string) bool {
	switch {
	case r.hasFlag(flagCurrency):
		return len(c) == 3 && string(r.currency[:]) == c
	case rf != nil:
		return rf.currency == c
	}
	return c == ""
}

func (r *record) currencyString(rf *rare) string {
	switch {
	case r.hasFlag(flagCurrency):
		return string(r.currency[:])
	case rf != nil:
		return rf.currency
	}
	return ""
}

// newRecord returns the record of an operation under the key of digest d
// with parameters prm, its outcome still to set.
func (p *Provider) newRecord(d keyDigest, prm *params) newRecord {
	r := newRecord{record: record{key: d, op: opOf(prm.op), amount: prm.amount}}
	switch {
	case len(prm.currency) == 3:
		copy(r.currency[:], prm.currency)
		r.flags |= flagCurrency
	case prm.currency != "":
		r.rareFields().currency = prm.currency
	}
	if len(prm.last4) == len(r.last4) { // Last4 is four bytes or none.
		copy(r.last4[:], prm.last4)
		r.flags |= flagLast4
	}
	if prm.capture {
		r.flags |= flagSale
	}
	if n, ok := p.authNumber(prm.ref); ok {
		r.link = n
		r.flags |= flagTarget
	} else if prm.ref != "" {
		r.rareFields().ref = prm.ref
	}
	return r
}

// params returns the parameters r, with rare fields rf, was performed with.
func (p *Provider) params(r *record, rf *rare) params {
	prm := params{op: r.op.String(), amount: r.amount, currency: r.currencyString(rf), capture: r.hasFlag(flagSale)}
	if r.op == opVoid {
		prm.amount = 0 // a void names no amount; its record keeps the one released.
	}
	if r.hasFlag(flagLast4) {
		prm.last4 = string(r.last4[:])
	}
	switch {
	case r.hasFlag(flagTarget):
		prm.ref = p.ref(opAuthorization, r.link)
	case rf != nil:
		prm.ref = rf.ref
	}
	return prm
}

// result returns the answer to the operation of r, with rare fields rf and
// payment ID paymentID, whose reference number is n.
func (p *Provider) result(r *record, rf *rare, paymentID string, n uint64) surgepay.ProviderResult {
	res := surgepay.ProviderResult{Approved: r.approved(), Reference: p.ref(r.op, n), Amount: r.amount,
		Operation: r.op.String(), PaymentID: paymentID,
		Captured: r.op == opAuthorization && r.approved() && r.hasFlag(flagSale)}
	if rf != nil {
		res.DeclineCode, res.Message = rf.declineCode, rf.message
	}
	return res
}

// storedResult returns the answer to the stored operation at pos in s.
func (p *Provider) storedResult(s *shard, pos uint32) surgepay.ProviderResult {
	return p.result(&s.recs[pos], s.rareAt(pos), s.paymentIDAt(pos), s.refNumber(pos))
}

// replay answers a repeated key, whose record is at pos in s: the stored
// result for the same parameters, ErrKeyReused for different ones.
func (p *Provider) replay(s *shard, pos uint32, prm params) (*surgepay.ProviderResult, bool, error) {
	if p.params(&s.recs[pos], s.rareAt(pos)) != prm {
		return nil, false, notPerformed(prm.op, ErrKeyReused)
	}
	res := p.storedResult(s, pos)
	return &res, false, nil
}

// apply records an approved capture, void or refund of the authorization
// r. The request's currency is the authorization's: the money rules
// checked it.
func (r *record) apply(prm params, t *Totals) {
	switch prm.op {
	case surgepay.TxCapture:
		r.captured = prm.amount
		t.Captures++
		addAmount(&t.AmountCaptured, prm.currency, prm.amount)
	case surgepay.TxVoid:
		r.flags |= flagVoided
		t.Voids++
	case surgepay.TxRefund:
		r.refunded += prm.amount
		r.refunds++
		t.Refunds++
		addAmount(&t.AmountRefunded, prm.currency, prm.amount)
	}
}

// Effects is what the network did for one payment: the approved operations
// on the authorizations whose AuthorizeRequest carried its payment ID.
// Declined operations have no effect; declined authorizations are counted
// apart. A sale counts as one authorization and one capture.
type Effects struct {
	Authorizations         int    `json:"authorizations"`
	AuthorizationsDeclined int    `json:"authorizations_declined"`
	Captures               int    `json:"captures"`
	Voids                  int    `json:"voids"`
	Refunds                int    `json:"refunds"`
	AmountAuthorized       int64  `json:"amount_authorized"`
	AmountCaptured         int64  `json:"amount_captured"`
	AmountRefunded         int64  `json:"amount_refunded"`
	Currency               string `json:"currency,omitempty"`
}

// add counts the authorization a, whose rare fields are rf.
func (e *Effects) add(a *record, rf *rare) {
	if !a.approved() {
		e.AuthorizationsDeclined++
		return
	}
	e.Authorizations++
	e.AmountAuthorized += a.amount
	if a.captured > 0 {
		e.Captures++
	}
	e.AmountCaptured += a.captured
	if a.hasFlag(flagVoided) {
		e.Voids++
	}
	e.Refunds += int(a.refunds)
	e.AmountRefunded += a.refunded
	e.Currency = a.currencyString(rf)
}

// Totals is what the network did since New or Reset. Eviction and expiry
// do not change it. Amounts are by currency.
type Totals struct {
	Authorizations         int64            `json:"authorizations"`
	AuthorizationsDeclined int64            `json:"authorizations_declined"`
	Captures               int64            `json:"captures"`
	Voids                  int64            `json:"voids"`
	Refunds                int64            `json:"refunds"`
	Declines               int64            `json:"declines"` // declined operations of every kind.
	AmountAuthorized       map[string]int64 `json:"amount_authorized"`
	AmountCaptured         map[string]int64 `json:"amount_captured"`
	AmountRefunded         map[string]int64 `json:"amount_refunded"`
	Records                int64            `json:"records"`         // operations stored now.
	RecordsEvicted         int64            `json:"records_evicted"` // operations evicted by RecordsMax.
	RecordsExpired         int64            `json:"records_expired"` // operations expired by Retention.
}

func addAmount(m *map[string]int64, currency string, amount int64) {
	if *m == nil {
		*m = make(map[string]int64)
	}
	(*m)[currency] += amount
}

// authorized counts an approved authorization, or with sale an approved sale.
func (t *Totals) authorized(currency string, amount int64, sale bool) {
	t.Authorizations++
	addAmount(&t.AmountAuthorized, currency, amount)
	if sale {
		t.Captures++
		addAmount(&t.AmountCaptured, currency, amount)
	}
}

func (t *Totals) merge(o *Totals) {
	t.Authorizations += o.Authorizations
	t.AuthorizationsDeclined += o.AuthorizationsDeclined
	t.Captures += o.Captures
	t.Voids += o.Voids
	t.Refunds += o.Refunds
	t.Declines += o.Declines
	t.RecordsEvicted += o.RecordsEvicted
	t.RecordsExpired += o.RecordsExpired
	for c, v := range o.AmountAuthorized {
		addAmount(&t.AmountAuthorized, c, v)
	}
	for c, v := range o.AmountCaptured {
		addAmount(&t.AmountCaptured, c, v)
	}
	for c, v := range o.AmountRefunded {
		addAmount(&t.AmountRefunded, c, v)
	}
}

// shardOf returns the shard of the idempotency key of digest d.
func (p *Provider) shardOf(d keyDigest) *shard {
	return &p.shards[d.hash()%shardCount]
}

// hash is FNV-1a, for payment IDs.
func hash(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h ^ h>>32
}

// lockPair locks two shards in index order, once if they are the same.
func lockPair(a, b *shard) {
	switch {
	case a == b:
		a.mu.Lock()
	case a.index < b.index:
		a.mu.Lock()
		b.mu.Lock()
	default:
		b.mu.Lock()
		a.mu.Lock()
	}
}

func unlockPair(a, b *shard) {
	a.mu.Unlock()
	if a != b {
		b.mu.Unlock()
	}
}

// Effects returns what the network did for paymentID: the approved
// operations on its authorizations (matched by AuthorizeRequest.PaymentID)
// that are still stored. A payment's authorizations may be in any shard
// (their keys choose it): each is locked in turn. Safe for concurrent use.
func (p *Provider) Effects(paymentID string) Effects {
	var e Effects
	h := hash(paymentID)
	now := p.clock()
	for i := range p.shards {
		s := &p.shards[i]
		s.mu.Lock()
		if pos, ok := s.findPayment(h, paymentID); ok {
			for n := s.refNumber(pos); ; {
				a, rf := s.authorization(n, now)
				if a == nil {
					break
				}
				e.add(a, rf)
				n = a.link
			}
		}
		s.mu.Unlock()
	}
	return e
}

// TotalEffects returns what the network did since New or the last Reset.
// It first releases every expired record, so Records counts live ones and
// RecordsExpired every one expired, and ends 3-D Secure challenges whose
// ChallengeTTL has passed (abandoned: declined authorizations from then
// on) and releases old ones, up to releaseBatchMax a shard. Shards are
// read one after another, so
// under concurrent calls the sum is not a single instant. Safe for
// concurrent use.
func (p *Provider) TotalEffects() Totals {
	var t Totals
	now := p.clock()
	ttl := challengeTTL(p.state.Load())
	for i := range p.shards {
		s := &p.shards[i]
		s.mu.Lock()
		for s.releaseExpired(now, releaseBatchMax) == releaseBatchMax {
			s.mu.Unlock() // let calls in between long releases.
			s.mu.Lock()
		}
		if len(s.challenges.queue) != 0 {
			p.sweepChallenges(s, now, ttl, releaseBatchMax)
		}
		t.merge(&s.totals)
		t.Records += int64(s.count())
		s.mu.Unlock()
	}
	return t
}

// Reset forgets every operation, authorization, 3-D Secure challenge and
// effect. Configuration and the reference sequence stay, so references
// are never reused. Calls concurrent with Reset may land on either side
// of it.
func (p *Provider) Reset() {
	for i := range p.shards {
		s := &p.shards[i]
		s.mu.Lock()
		s.clear()
		s.mu.Unlock()
	}
}
