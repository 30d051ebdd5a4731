package sim

import (
	"math/rand/v2"
	"slices"
	"sync"

	"github.com/surgepay/surgepay"
)

// shardCount splits the key space so that concurrent calls rarely share a
// mutex. 64 is well above the core counts the simulator runs on, and a
// power of two so that n mod shardCount is a mask.
const shardCount = 64

// shard holds the operations whose keys hash to it and the authorizations
// those operations created. Every field is guarded by mu.
type shard struct {
	mu      sync.Mutex
	index   uint64
	rng     *rand.Rand
	seq     uint64
	records map[string]*record        // by idempotency key.
	auths   map[uint64]*authorization // by reference number.
	fifo    []*record                 // records in insertion order; a ring once full.
	head    int                       // oldest record in fifo once full.
	totals  Totals
	_       [64]byte // keeps neighbouring shards' mutexes off one cache line.
}

func (s *shard) clear() {
	s.records = make(map[string]*record)
	s.auths = make(map[uint64]*authorization)
	s.fifo, s.head = nil, 0
	s.totals = Totals{}
}

// paymentShard indexes authorizations by payment ID. Its mutex is a leaf:
// it is taken while a shard is locked, never the other way round.
type paymentShard struct {
	mu sync.Mutex
	m  map[string][]*authorization
	_  [64]byte
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

// record is one operation stored under its idempotency key.
type record struct {
	key    string
	params params
	result surgepay.ProviderResult
	auth   *authorization // for an authorization.
}

// replay answers a repeated key: the stored result for the same parameters,
// ErrKeyReused for different ones.
func (r *record) replay(prm params) (*surgepay.ProviderResult, bool, error) {
	if r.params != prm {
		return nil, false, notPerformed(prm.op, ErrKeyReused)
	}
	res := r.result
	return &res, false, nil
}

// authorization is the money state of one authorization. Guarded by the
// mutex of shards[shard].
type authorization struct {
	n               uint64
	shard           uint64
	paymentID       string
	currency        string
	authorized      int64
	captured        int64
	refunded        int64
	captures        int // 0 or 1.
	refunds         int
	voided          bool
	declined        bool
	captureDeclined bool // test card 4000000000000259.
}

// apply records an approved capture, void or refund.
func (a *authorization) apply(prm params, t *Totals) {
	switch prm.op {
	case surgepay.TxCapture:
		a.captured, a.captures = prm.amount, 1
		t.Captures++
		addAmount(&t.AmountCaptured, a.currency, prm.amount)
	case surgepay.TxVoid:
		a.voided = true
		t.Voids++
	case surgepay.TxRefund:
		a.refunded += prm.amount
		a.refunds++
		t.Refunds++
		addAmount(&t.AmountRefunded, a.currency, prm.amount)
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

func (e *Effects) add(a *authorization) {
	if a.declined {
		e.AuthorizationsDeclined++
		return
	}
	e.Authorizations++
	e.AmountAuthorized += a.authorized
	e.Captures += a.captures
	e.AmountCaptured += a.captured
	if a.voided {
		e.Voids++
	}
	e.Refunds += a.refunds
	e.AmountRefunded += a.refunded
	e.Currency = a.currency
}

// Totals is what the network did since New or Reset. Eviction does not
// change it. Amounts are by currency.
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
}

func addAmount(m *map[string]int64, currency string, amount int64) {
	if *m == nil {
		*m = make(map[string]int64)
	}
	(*m)[currency] += amount
}

func (t *Totals) authorized(a *authorization, sale bool) {
	t.Authorizations++
	addAmount(&t.AmountAuthorized, a.currency, a.authorized)
	if sale {
		t.Captures++
		addAmount(&t.AmountCaptured, a.currency, a.captured)
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

// shardOf returns the shard of an idempotency key (FNV-1a).
func (p *Provider) shardOf(key string) *shard {
	return &p.shards[hash(key)%shardCount]
}

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

// store adds r to s, evicting s's oldest record once s holds its share of
// RecordsMax. Call with s locked.
func (p *Provider) store(s *shard, r *record) {
	s.records[r.key] = r
	if len(s.fifo) < p.recordsPerShardMax {
		s.fifo = append(s.fifo, r)
		return
	}
	old := s.fifo[s.head]
	delete(s.records, old.key)
	if a := old.auth; a != nil {
		delete(s.auths, a.n)
		p.unindexPayment(a)
	}
	s.totals.RecordsEvicted++
	s.fifo[s.head] = r
	s.head = (s.head + 1) % len(s.fifo)
}

func (p *Provider) paymentShardOf(id string) *paymentShard {
	return &p.payments[hash(id)%shardCount]
}

func (p *Provider) indexPayment(a *authorization) {
	if a.paymentID == "" {
		return
	}
	ps := p.paymentShardOf(a.paymentID)
	ps.mu.Lock()
	ps.m[a.paymentID] = append(ps.m[a.paymentID], a)
	ps.mu.Unlock()
}

func (p *Provider) unindexPayment(a *authorization) {
	if a.paymentID == "" {
		return
	}
	ps := p.paymentShardOf(a.paymentID)
	ps.mu.Lock()
	list := slices.DeleteFunc(ps.m[a.paymentID], func(b *authorization) bool { return b == a })
	if len(list) == 0 {
		delete(ps.m, a.paymentID)
	} else {
		ps.m[a.paymentID] = list
	}
	ps.mu.Unlock()
}

// Effects returns what the network did for paymentID: the approved
// operations on its authorizations (matched by AuthorizeRequest.PaymentID)
// that are still stored. Safe for concurrent use.
func (p *Provider) Effects(paymentID string) Effects {
	ps := p.paymentShardOf(paymentID)
	ps.mu.Lock()
	auths := slices.Clone(ps.m[paymentID])
	ps.mu.Unlock()
	var e Effects
	for _, a := range auths {
		s := &p.shards[a.shard]
		s.mu.Lock()
		e.add(a)
		s.mu.Unlock()
	}
	return e
}

// TotalEffects returns what the network did since New or the last Reset.
// Shards are read one after another, so under concurrent calls the sum is
// not a single instant. Safe for concurrent use.
func (p *Provider) TotalEffects() Totals {
	var t Totals
	for i := range p.shards {
		s := &p.shards[i]
		s.mu.Lock()
		t.merge(&s.totals)
		t.Records += int64(len(s.records))
		s.mu.Unlock()
	}
	return t
}

// Reset forgets every operation, authorization and effect. Configuration
// and the reference sequence stay, so references are never reused. Calls
// concurrent with Reset may land on either side of it.
func (p *Provider) Reset() {
	for i := range p.shards {
		s := &p.shards[i]
		s.mu.Lock()
		s.clear()
		s.mu.Unlock()
	}
	for i := range p.payments {
		ps := &p.payments[i]
		ps.mu.Lock()
		ps.m = make(map[string][]*authorization)
		ps.mu.Unlock()
	}
}
