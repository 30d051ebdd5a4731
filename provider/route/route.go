// Package route sends each merchant's payments to its processors: an
// ordered list per merchant (optionally per currency or card brand), a
// circuit breaker and a call budget per processor, and failover to the
// next processor only when the first provably did nothing.
//
// A Router is a surgepay.Provider. It names the processor that performed
// an authorization in its reference ("stripe_eu:pi_…"), so the capture,
// void, refund and lookup of that payment go back to the same processor
// whatever the merchant's routing says by then; references without a
// known prefix belong to the default processor (payments made before
// routing, and the default processor's own). An unknown outcome names its
// processor in the *surgepay.ProviderError, which the engine keeps with
// the pending operation.
//
// Failover never follows an unknown outcome: the first processor may
// have charged, and a second would charge again. It follows a breaker
// that is open, a budget that is spent, and a NotPerformed answer
// (connection refused, 429, authentication failure) — never an
// idempotency conflict. With an attempt journal (SetAttempts), an
// authorization of a merchant routed to more than one processor is
// recorded durably before each call with the processor it goes to: a
// retry under the same key (after a crash between the processor's answer
// and the commit, or from another node) goes back to that processor
// first, and fails over only once a lookup there proves the earlier
// attempt not performed.
//
// Budgets count across the nodes that share a Redis (SetSharedBudget),
// else per process: N nodes then spend N times a budget. Breakers are per
// process.
package route

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"
	"golang.org/x/time/rate"

	"github.com/surgepay/surgepay"
)

// DefaultName is the processor that owns references with no prefix.
const DefaultName = "default"

// Bounds.
const (
	BudgetWaitMaxDefault  = 50 * time.Millisecond // how long a call may wait for its budget
	BreakerFailuresMax    = 5                     // consecutive failures that open a breaker
	BreakerOpenFor        = 5 * time.Second       // how long it stays open before one trial call
	ProcessorsPerRouteMax = 8
)

// Processor is one processor account and its limits.
type Processor struct {
	Name     string
	Provider surgepay.Provider
	// CallsPerSecond is the account's call budget on this node (Stripe
	// live mode: 100 operations per second per account by default, 25 in
	// test mode); 0: unlimited. Burst is how many may go at once (0: the
	// rate rounded up). Calls past the budget wait up to BudgetWait, then
	// are refused as not performed, before any call.
	CallsPerSecond float64
	Burst          int
	// InflightMax bounds concurrent calls to the processor; 0: unlimited.
	InflightMax int
	// BudgetWait is how long a call may wait for the budget or an
	// in-flight slot. Default BudgetWaitMaxDefault.
	BudgetWait time.Duration
	// AuthorizeCalls, if set, says how many of the processor's API
	// operations an authorization costs against the budget (Stripe: two
	// with card data, a PaymentMethod and a PaymentIntent; one with a
	// token). nil: one.
	AuthorizeCalls func(*surgepay.AuthorizeRequest) int
}

// Rule routes the payments of one currency and/or card brand.
type Rule struct {
	Currency   string   // ISO 4217, lower case; "" any
	Brand      string   // surgepay.Brand names; "" any
	Processors []string // in order of preference
}

// Route is a merchant's routing: the first rule that matches, else
// Processors.
type Route struct {
	Processors []string
	Rules      []Rule
}

// processors picks the list for a payment.
func (r Route) processors(currency, brand string) []string {
	for _, rule := range r.Rules {
		if (rule.Currency == "" || rule.Currency == currency) && (rule.Brand == "" || rule.Brand == brand) {
			return rule.Processors
		}
	}
	return r.Processors
}

// Observer learns of every processor call (metrics). Safe for concurrent
// use.
type Observer interface {
	Call(processor, op, outcome string, d time.Duration)
	Breaker(processor string, state string)
	Refused(processor, reason string)
	Failover(from, to string)
}

// ResultObserver is an Observer that also learns how each call ended at
// the processor: a nil error when it answered (a result, a decline, a
// lookup that found nothing, a key reused), else the error, which counts
// against the breaker. A processor's state (healthy, or failing with the
// processor's status and code) is built from it. Checked at run time.
type ResultObserver interface {
	Result(processor, op string, err error)
}

type proc struct {
	Processor
	limiter *rate.Limiter
	slots   chan struct{}
	breaker *gobreaker.TwoStepCircuitBreaker[struct{}]
}

type table struct {
	procs  map[string]*proc
	routes func(merchantID string) Route
}

// Router is a surgepay.Provider over named processors. Safe for
// concurrent use; Set replaces the processors and routes at once.
type Router struct {
	t        atomic.Pointer[table]
	attempts atomic.Pointer[attemptJournal]
	shared   atomic.Pointer[sharedBudget]
	obs      Observer
	mu       sync.Mutex // serialises Set
}

// SharedBudget counts processors' calls across the nodes that share it
// (ratelimit.Redis), so that N nodes spend a processor's CallsPerSecond
// between them, not N times over. TakeN takes n of key's allowance of
// limit per second with bursts of burst; ok false, with the wait until
// they are left, when they are not. An error means the count could not be
// reached in time: the node's own bucket decides.
type SharedBudget interface {
	TakeN(ctx context.Context, key string, limit float64, burst, n int) (retryAfter time.Duration, ok bool, err error)
}

type sharedBudget struct{ SharedBudget }

// SetSharedBudget makes every processor's budget (CallsPerSecond, Burst)
// count across the nodes through b; nil: each node counts alone. While b
// cannot answer, each node falls back to its own bucket of the whole
// budget: N nodes may then spend up to N times it, and the processor's
// own limit (Stripe: 429, not performed) refuses the excess.
func (r *Router) SetSharedBudget(b SharedBudget) {
	if b == nil {
		r.shared.Store(nil)
		return
	}
	r.shared.Store(&sharedBudget{b})
}

// sharedKeyPrefix names a processor's shared budget: processor names
// are distinct from merchant IDs (mer_...), counted in the same Redis.
const sharedKeyPrefix = "processor:"

// attemptJournal keeps ProviderAttempts in a store.
type attemptJournal struct {
	store surgepay.Store
	find  surgepay.AttemptStore
}

// SetAttempts makes the router record, before each authorization of a
// merchant routed to more than one processor, which processor it goes to
// (one write per attempt, group-committed, and one read per
// authorization), and consult that record on a retry. A store without
// the surgepay.AttemptStore capability is an error. The single-processor
// path is unchanged: it has nothing to fail over to.
func (r *Router) SetAttempts(s surgepay.Store) error {
	a, ok := s.(surgepay.AttemptStore)
	if !ok {
		return errors.New("route: the store keeps no provider attempts")
	}
	r.attempts.Store(&attemptJournal{store: s, find: a})
	return nil
}

// previous returns the processor of the latest attempt recorded under
// key, "" if none.
func (j *attemptJournal) previous(ctx context.Context, key string) (string, error) {
	a, err := j.find.FindProviderAttempt(ctx, key)
	switch {
	case surgepay.ErrorCode(err) == surgepay.ENOTFOUND:
		return "", nil
	case err != nil:
		return "", err
	}
	return a.Processor, nil
}

// record stores, durably, that an attempt under key goes to processor.
func (j *attemptJournal) record(ctx context.Context, key, processor string) error {
	return j.store.Apply(ctx, &surgepay.Write{ProviderAttempt: &surgepay.ProviderAttempt{Key: key,
		Processor: processor, Created: time.Now()}})
}

var (
	_ surgepay.Provider          = (*Router)(nil)
	_ surgepay.OperationLookuper = (*Router)(nil)
)

// New returns a router; obs may be nil.
func New(obs Observer) *Router { return &Router{obs: obs} }

// Set installs processors (one must be DefaultName) and the merchants'
// routes. A processor whose settings are unchanged keeps its breaker and
// budget state.
func (r *Router) Set(ps []Processor, routes func(merchantID string) Route) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.t.Load()
	t := &table{procs: make(map[string]*proc, len(ps)), routes: routes}
	for _, p := range ps {
		if p.Name == "" || strings.Contains(p.Name, ":") || p.Provider == nil {
			return fmt.Errorf("route: processor %q: a name without ':' and a provider are required", p.Name)
		}
		if _, dup := t.procs[p.Name]; dup {
			return fmt.Errorf("route: processor %q twice", p.Name)
		}
		if old != nil {
			if prev, ok := old.procs[p.Name]; ok && sameLimits(prev.Processor, p) {
				t.procs[p.Name] = prev // the same provider and limits: its breaker and budget go on
				continue
			}
		}
		t.procs[p.Name] = r.newProc(p)
	}
	if _, ok := t.procs[DefaultName]; !ok {
		return errors.New("route: the default processor is required")
	}
	r.t.Store(t)
	return nil
}

func sameLimits(a, b Processor) bool {
	return a.CallsPerSecond == b.CallsPerSecond && a.Burst == b.Burst && a.InflightMax == b.InflightMax &&
		a.BudgetWait == b.BudgetWait && a.Provider == b.Provider && (a.AuthorizeCalls == nil) == (b.AuthorizeCalls == nil)
}

func (r *Router) newProc(p Processor) *proc {
	if p.BudgetWait <= 0 {
		p.BudgetWait = BudgetWaitMaxDefault
	}
	out := &proc{Processor: p}
	if p.CallsPerSecond > 0 {
		burst := p.Burst
		if burst <= 0 {
			burst = max(1, int(math.Ceil(p.CallsPerSecond)))
		}
		out.limiter = rate.NewLimiter(rate.Limit(p.CallsPerSecond), burst)
	}
	if p.InflightMax > 0 {
		out.slots = make(chan struct{}, p.InflightMax)
	}
	out.breaker = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name: p.Name, MaxRequests: 1, Timeout: BreakerOpenFor,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= BreakerFailuresMax },
		OnStateChange: func(name string, _, to gobreaker.State) {
			if r.obs != nil {
				r.obs.Breaker(name, to.String())
			}
		},
	})
	return out
}

// Processors returns the names of the installed processors.
func (r *Router) Processors() []string {
	t := r.t.Load()
	out := make([]string, 0, len(t.procs))
	for n := range t.procs {
		out = append(out, n)
	}
	return out
}

// errBudget is the cause of a call refused for its budget; errRefused
// wraps every refusal before a call (budget or breaker).
var (
	errBudget  = errors.New("the processor's call budget is spent")
	errRefused = errors.New("refused before the call")
)

// acquire takes n budget tokens, from the shared budget when there is one
// and it answers, and an in-flight slot, waiting up to BudgetWait; release
// returns the slot.
func (p *proc) acquire(ctx context.Context, n int, shared *sharedBudget) (release func(), retryAfter time.Duration, err error) {
	local := p.limiter != nil
	if local && shared != nil {
		var d time.Duration
		local, d, err = p.takeShared(ctx, n, shared)
		if err != nil {
			return nil, d, err
		}
	}
	if local {
		res := p.limiter.ReserveN(time.Now(), min(n, p.limiter.Burst())) // a call dearer than the burst takes it whole
		if d := res.Delay(); d > p.BudgetWait || !res.OK() {
			res.Cancel()
			return nil, max(d, time.Second), errBudget
		} else if d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				res.Cancel()
				return nil, time.Second, ctx.Err()
			}
		}
	}
	return p.slot(ctx)
}

// takeShared takes n tokens of p's budget from the shared count, waiting
// up to BudgetWait in all. local reports that the shared count did not
// answer, so that the node's own bucket decides.
func (p *proc) takeShared(ctx context.Context, n int, shared *sharedBudget) (local bool, retryAfter time.Duration, err error) {
	burst := p.limiter.Burst()
	deadline := time.Now().Add(p.BudgetWait)
	for {
		d, ok, err := shared.TakeN(ctx, sharedKeyPrefix+p.Name, p.CallsPerSecond, burst, min(n, burst))
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return false, time.Second, ctx.Err()
			}
			return true, 0, nil
		case ok:
			return false, 0, nil
		case time.Now().Add(d).After(deadline):
			return false, max(d, time.Second), errBudget
		}
		d = max(d, time.Millisecond) // each try waits: the loop ends by deadline
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false, time.Second, ctx.Err()
		}
	}
}

// slot takes an in-flight slot, waiting up to BudgetWait.
func (p *proc) slot(ctx context.Context) (release func(), retryAfter time.Duration, err error) {
	if p.slots == nil {
		return func() {}, 0, nil
	}
	t := time.NewTimer(p.BudgetWait)
	defer t.Stop()
	select {
	case p.slots <- struct{}{}:
		return func() { <-p.slots }, 0, nil
	case <-t.C:
		return nil, time.Second, errBudget
	case <-ctx.Done():
		return nil, time.Second, ctx.Err()
	}
}

// do runs one call at p under its breaker and budget. A refusal before
// the call is a NotPerformed *surgepay.ProviderError naming p.
func (r *Router) do(ctx context.Context, p *proc, op string, fn func(context.Context) (*surgepay.ProviderResult, error)) (*surgepay.ProviderResult, error) {
	return r.doN(ctx, p, op, 1, fn)
}

// doN is do for a call that costs n of the processor's operations.
func (r *Router) doN(ctx context.Context, p *proc, op string, n int, fn func(context.Context) (*surgepay.ProviderResult, error)) (*surgepay.ProviderResult, error) {
	// A lookup is how an unknown outcome is learned: the breaker does not
	// hold it back (its budget does), nor does its answer move the breaker.
	done := func(error) {}
	var err error
	if op != "lookup" {
		done, err = p.breaker.Allow()
	}
	if err != nil {
		r.refused(p.Name, "breaker_open")
		return nil, &surgepay.ProviderError{Outcome: surgepay.NotPerformed, Op: op, Processor: p.Name,
			Err: fmt.Errorf("processor %s: circuit breaker open (%w)", p.Name, errRefused), RetryAfter: BreakerOpenFor}
	}
	release, retryAfter, err := p.acquire(ctx, n, r.shared.Load())
	if err != nil {
		done(nil) // not the processor's fault
		r.refused(p.Name, "budget")
		return nil, &surgepay.ProviderError{Outcome: surgepay.NotPerformed, Op: op, Processor: p.Name,
			Err: fmt.Errorf("processor %s: %w (%w)", p.Name, err, errRefused), RetryAfter: retryAfter}
	}
	begin := time.Now()
	res, err := fn(ctx)
	release()
	// A lookup's "not performed" is an answer (no such operation); so is a
	// key reused. Everything else that is not a result counts against
	// the processor's breaker.
	healthy := err == nil || errors.Is(err, surgepay.ErrKeyReused) || (op == "lookup" && surgepay.IsNotPerformed(err))
	if healthy {
		done(nil)
	} else {
		done(err)
	}
	if r.obs != nil {
		r.obs.Call(p.Name, op, outcome(res, err), time.Since(begin))
		if ro, ok := r.obs.(ResultObserver); ok {
			if healthy {
				ro.Result(p.Name, op, nil)
			} else {
				ro.Result(p.Name, op, err)
			}
		}
	}
	if err != nil {
		var pe *surgepay.ProviderError
		if errors.As(err, &pe) {
			if pe.Processor == "" {
				pe.Processor = p.Name
			}
		} else {
			err = &surgepay.ProviderError{Outcome: surgepay.Unknown, Op: op, Processor: p.Name, Err: err}
		}
	}
	return res, err
}

func (r *Router) refused(name, reason string) {
	if r.obs != nil {
		r.obs.Refused(name, reason)
	}
}

func outcome(res *surgepay.ProviderResult, err error) string {
	switch {
	case err == nil && res != nil && res.Approved:
		return "approved"
	case err == nil && res != nil && res.RequiresAction:
		return "requires_action"
	case err == nil:
		return "declined"
	case surgepay.IsNotPerformed(err):
		return surgepay.NotPerformed
	}
	return surgepay.Unknown
}

// Authorize sends req to the merchant's first processor that can take it:
// the next one is tried only after a refusal before the call (breaker,
// budget) or a NotPerformed answer, never after a result: approved,
// declined, or RequiresAction (the cardholder must authenticate at that
// processor first). The result's Reference names the processor; a
// RequiresAction result has no reference yet, so its processor is found
// by LookupOperation with the merchant (see lookupAnywhere) or the
// attempt journal.
func (r *Router) Authorize(ctx context.Context, req *surgepay.AuthorizeRequest) (*surgepay.ProviderResult, error) {
	t := r.t.Load()
	names := []string{req.Processor}
	if req.Processor == "" {
		brand := ""
		if len(req.Card.Number) > 0 {
			brand = surgepay.Brand(string(req.Card.Number))
		}
		names = t.routes(req.MerchantID).processors(strings.ToLower(req.Currency), brand)
	}
	if len(names) == 0 {
		names = []string{DefaultName}
	}
	j := r.attempts.Load()
	if len(names) < 2 || j == nil {
		return r.authorizeAt(ctx, t, names, req, nil, "")
	}
	prev, err := j.previous(ctx, req.IdempotencyKey)
	if err != nil {
		return nil, &surgepay.ProviderError{Outcome: surgepay.NotPerformed, Op: "authorize", RetryAfter: time.Second,
			Err: fmt.Errorf("read earlier attempts: %w", err)}
	}
	if prev != "" { // an earlier attempt went there: it is asked first
		names = append([]string{prev}, slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == prev })...)
	}
	return r.authorizeAt(ctx, t, names, req, j, prev)
}

// authorizeAt tries names in order. With a journal j, each attempt is
// recorded before its call; prev is the processor an earlier attempt
// under the key went to (before a crash, or on another node): its
// refusal now proves nothing about that attempt, so the next processor
// is tried only once a lookup at prev says it was not performed.
func (r *Router) authorizeAt(ctx context.Context, t *table, names []string, req *surgepay.AuthorizeRequest, j *attemptJournal, prev string) (*surgepay.ProviderResult, error) {
	var last error
	for i, name := range names {
		p, ok := t.procs[name]
		if !ok {
			last = &surgepay.ProviderError{Outcome: surgepay.NotPerformed, Op: "authorize", Processor: name,
				Err: fmt.Errorf("no processor named %q", name)}
			if name == prev { // it holds an attempt nobody can look up now
				return nil, &surgepay.ProviderError{Outcome: surgepay.Unknown, Op: "authorize", Processor: name,
					Err: fmt.Errorf("an earlier attempt went to processor %q, which is not configured", name)}
			}
			continue
		}
		if i > 0 && r.obs != nil {
			r.obs.Failover(names[i-1], name)
		}
		if j != nil && name != prev {
			if err := j.record(ctx, req.IdempotencyKey, name); err != nil {
				return nil, &surgepay.ProviderError{Outcome: surgepay.NotPerformed, Op: "authorize", Processor: name,
					RetryAfter: time.Second, Err: fmt.Errorf("record the attempt before the call: %w", err)}
			}
		}
		cost := 1
		if p.AuthorizeCalls != nil {
			cost = max(p.AuthorizeCalls(req), 1)
		}
		res, err := r.doN(ctx, p, "authorize", cost, func(ctx context.Context) (*surgepay.ProviderResult, error) {
			return p.Provider.Authorize(ctx, req) // req whole: ReturnURL included, for 3-D Secure.
		})
		if err == nil {
			// A result is final for failover, RequiresAction included: the
			// processor holds a 3-D Secure challenge under the key, which
			// the shopper completes there and a Lookup there then
			// answers. Another processor would start a second payment.
			res.Reference = qualify(name, res.Reference)
			return res, nil
		}
		if !surgepay.IsNotPerformed(err) || errors.Is(err, surgepay.ErrKeyReused) {
			return nil, err // unknown: only this processor may be asked again
		}
		if name == prev {
			// An earlier attempt's lookup that answers RequiresAction (its
			// challenge is pending there) is a result too: no failover.
			if res, err := r.earlierAttempt(ctx, req, name); err == nil || !surgepay.IsNotPerformed(err) {
				return res, err
			}
		}
		last = err
	}
	return nil, last
}

// earlierAttempt looks up, at processor name, an attempt under req's key
// that an earlier request made: its result, NotPerformed once the
// processor proves it never happened, else unknown (the payment then
// waits in processing for the reconciler, at name). The lookup's time of
// attempt is now: the node that made it may still be sending it.
func (r *Router) earlierAttempt(ctx context.Context, req *surgepay.AuthorizeRequest, name string) (*surgepay.ProviderResult, error) {
	res, err := r.LookupOperation(ctx, &surgepay.LookupQuery{Key: req.IdempotencyKey, Operation: surgepay.TxAuthorization,
		Processor: name, MerchantID: req.MerchantID, Amount: req.Amount, Currency: req.Currency, Attempted: time.Now()})
	if err != nil && !surgepay.IsNotPerformed(err) {
		var pe *surgepay.ProviderError
		if !errors.As(err, &pe) {
			err = &surgepay.ProviderError{Outcome: surgepay.Unknown, Op: "authorize", Processor: name, Err: err}
		} else if pe.Processor == "" {
			pe.Processor = name
		}
	}
	return res, err
}

// qualify prefixes a reference with its processor, except the default's.
func qualify(name, ref string) string {
	if name == DefaultName || ref == "" {
		return ref
	}
	return name + ":" + ref
}

// resolve returns the processor of a reference and the reference as that
// processor knows it. A reference that names a processor no longer
// configured is an error, never the default's: that processor holds the
// money, and another would answer "no such authorization".
func (t *table) resolve(ref string) (*proc, string, error) {
	if i := strings.IndexByte(ref, ':'); i > 0 {
		if p, ok := t.procs[ref[:i]]; ok {
			return p, ref[i+1:], nil
		}
		if processorRef.MatchString(ref[:i+1]) {
			return nil, "", fmt.Errorf("the payment's processor %q is not configured; put its [processors.%s] section back", ref[:i], ref[:i])
		}
	}
	return t.procs[DefaultName], ref, nil
}

// processorRef matches the name a router puts before a reference.
var processorRef = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}:$`)

// byRef runs an operation on an existing authorization at its processor.
func (r *Router) byRef(ctx context.Context, op, ref string, fn func(context.Context, *proc, string) (*surgepay.ProviderResult, error)) (*surgepay.ProviderResult, error) {
	p, bare, err := r.t.Load().resolve(ref)
	if err != nil {
		return nil, &surgepay.ProviderError{Outcome: surgepay.NotPerformed, Op: op, Err: err, RetryAfter: time.Minute}
	}
	res, err := r.do(ctx, p, op, func(ctx context.Context) (*surgepay.ProviderResult, error) { return fn(ctx, p, bare) })
	if err == nil {
		res.Reference = qualify(p.Name, res.Reference)
	}
	return res, err
}

// Capture captures at the authorization's processor.
func (r *Router) Capture(ctx context.Context, req *surgepay.CaptureRequest) (*surgepay.ProviderResult, error) {
	return r.byRef(ctx, "capture", req.AuthorizationRef, func(ctx context.Context, p *proc, ref string) (*surgepay.ProviderResult, error) {
		c := *req
		c.AuthorizationRef = ref
		return p.Provider.Capture(ctx, &c)
	})
}

// Void voids at the authorization's processor.
func (r *Router) Void(ctx context.Context, req *surgepay.VoidRequest) (*surgepay.ProviderResult, error) {
	return r.byRef(ctx, "void", req.AuthorizationRef, func(ctx context.Context, p *proc, ref string) (*surgepay.ProviderResult, error) {
		c := *req
		c.AuthorizationRef = ref
		return p.Provider.Void(ctx, &c)
	})
}

// Refund refunds at the authorization's processor.
func (r *Router) Refund(ctx context.Context, req *surgepay.RefundRequest) (*surgepay.ProviderResult, error) {
	return r.byRef(ctx, "refund", req.AuthorizationRef, func(ctx context.Context, p *proc, ref string) (*surgepay.ProviderResult, error) {
		c := *req
		c.AuthorizationRef = ref
		return p.Provider.Refund(ctx, &c)
	})
}

// Lookup looks a key up at the default processor; LookupOperation knows
// where an operation went.
func (r *Router) Lookup(ctx context.Context, key string) (*surgepay.ProviderResult, error) {
	return r.LookupOperation(ctx, &surgepay.LookupQuery{Key: key})
}

// LookupOperation looks q up at the processor it went to: q.Processor,
// else its authorization's, else the default.
func (r *Router) LookupOperation(ctx context.Context, q *surgepay.LookupQuery) (*surgepay.ProviderResult, error) {
	t := r.t.Load()
	if q.Processor == "" && q.AuthorizationRef == "" && t.routes != nil && q.MerchantID != "" {
		return r.lookupAnywhere(ctx, t, q)
	}
	p, bare, rerr := t.resolve(q.AuthorizationRef)
	if q.Processor != "" {
		named, ok := t.procs[q.Processor]
		if !ok {
			return nil, &surgepay.ProviderError{Outcome: surgepay.Unknown, Op: "lookup", Processor: q.Processor,
				Err: fmt.Errorf("no processor named %q is configured", q.Processor)}
		}
		p, rerr = named, nil
	}
	if rerr != nil {
		return nil, &surgepay.ProviderError{Outcome: surgepay.Unknown, Op: "lookup", Err: rerr}
	}
	c := *q
	c.AuthorizationRef = bare
	if c.Reference != "" { // the operation's own, as this processor knows it
		if rp, own, err := t.resolve(c.Reference); err == nil && rp == p {
			c.Reference = own
		} else {
			c.Reference = ""
		}
	}
	res, err := r.do(ctx, p, "lookup", func(ctx context.Context) (*surgepay.ProviderResult, error) {
		return surgepay.LookupOperation(ctx, p.Provider, &c)
	})
	if errors.Is(err, errRefused) {
		// A lookup the router did not send proves nothing: still unknown,
		// never "not performed".
		return nil, &surgepay.ProviderError{Outcome: surgepay.Unknown, Op: "lookup", Processor: p.Name, Err: err}
	}
	if err == nil {
		res.Reference = qualify(p.Name, res.Reference)
	}
	return res, err
}

// lookupAnywhere looks an authorization up at each processor of the
// merchant's routes and the default, when nothing says where it went (a
// pending operation stored before routing): the first result wins; not
// performed only if every processor says so.
func (r *Router) lookupAnywhere(ctx context.Context, t *table, q *surgepay.LookupQuery) (*surgepay.ProviderResult, error) {
	seen := map[string]bool{}
	var names []string
	rt := t.routes(q.MerchantID)
	for _, list := range append([][]string{rt.Processors, {DefaultName}}, rulesOf(rt)...) {
		for _, n := range list {
			if !seen[n] && t.procs[n] != nil {
				seen[n] = true
				names = append(names, n)
			}
		}
	}
	var unknown error
	for _, n := range names {
		c := *q
		c.Processor = n
		res, err := r.LookupOperation(ctx, &c)
		if err == nil {
			return res, nil
		}
		if !surgepay.IsNotPerformed(err) {
			unknown = err
		}
	}
	if unknown != nil {
		return nil, unknown
	}
	return nil, &surgepay.ProviderError{Outcome: surgepay.NotPerformed, Op: "lookup",
		Err: errors.New("no processor of the merchant has an operation under this key")}
}

func rulesOf(rt Route) [][]string {
	out := make([][]string, len(rt.Rules))
	for i, rule := range rt.Rules {
		out[i] = rule.Processors
	}
	return out
}

var _ surgepay.TokenDescriber = (*Router)(nil)

// DescribeToken asks the named processor about one of its tokens, within
// its budget. A processor that is not configured, or takes no tokens, is
// an EINVALID error naming processor_token.processor.
func (r *Router) DescribeToken(ctx context.Context, processor, token string) (*surgepay.TokenCard, error) {
	p, ok := r.t.Load().procs[processor]
	if !ok || processor == DefaultName {
		return nil, surgepay.Invalid("processor_token.processor", "invalid_value",
			"no processor named %q takes tokens here", processor)
	}
	d, ok := p.Provider.(surgepay.TokenDescriber)
	if !ok {
		return nil, surgepay.Invalid("processor_token.processor", "invalid_value",
			"processor %q takes no tokens", processor)
	}
	release, retryAfter, err := p.acquire(ctx, 1, r.shared.Load())
	if err != nil {
		r.refused(p.Name, "budget")
		return nil, &surgepay.Error{Code: surgepay.EUNAVAILABLE, Reason: "provider_unavailable",
			RetryAfter: max(int(retryAfter/time.Second), 1), Message: "the processor's call budget is spent; retry later"}
	}
	defer release()
	return d.DescribeToken(ctx, processor, token)
}

var _ surgepay.Moder = (*Router)(nil)

// Mode is "live" if any configured processor moves real money, else
// "test": a merchant's publishable keys say so (pk_live_).
func (r *Router) Mode() string {
	for _, p := range r.t.Load().procs {
		if surgepay.ModeOf(p.Provider) == "live" {
			return "live"
		}
	}
	return "test"
}

var _ surgepay.TokenAttacher = (*Router)(nil)

// AttachToken attaches a token of the named processor to a customer of
// its own, within its call budget; "" from a processor that attaches no
// tokens.
func (r *Router) AttachToken(ctx context.Context, processor, token, merchantID, customerID string) (string, error) {
	p, ok := r.t.Load().procs[processor]
	if !ok || processor == DefaultName {
		return "", surgepay.Invalid("processor_token.processor", "invalid_value", "no processor named %q takes tokens here", processor)
	}
	a, ok := p.Provider.(surgepay.TokenAttacher)
	if !ok {
		return "", nil
	}
	release, retryAfter, err := p.acquire(ctx, 1, r.shared.Load())
	if err != nil {
		r.refused(p.Name, "budget")
		return "", &surgepay.Error{Code: surgepay.EUNAVAILABLE, Reason: "provider_unavailable",
			RetryAfter: max(int(retryAfter/time.Second), 1), Message: "the processor's call budget is spent; retry later"}
	}
	defer release()
	return a.AttachToken(ctx, processor, token, merchantID, customerID)
}

var _ surgepay.EventParser = (*Router)(nil)

// ParseEvent verifies and reads a webhook of the named processor, and
// names the processor in the event's PaymentRef as this router's
// references do. ENOTFOUND for a processor that is not configured or
// takes no webhooks.
// AcceptsEvents reports whether processor is configured and parses
// webhooks.
func (r *Router) AcceptsEvents(processor string) bool {
	p, ok := r.t.Load().procs[processor]
	if ok {
		_, ok = p.Provider.(surgepay.EventParser)
	}
	return ok
}

func (r *Router) ParseEvent(processor string, payload []byte, header http.Header) (*surgepay.ProcessorEvent, error) {
	p, ok := r.t.Load().procs[processor]
	var ep surgepay.EventParser
	if ok {
		ep, ok = p.Provider.(surgepay.EventParser)
	}
	if !ok {
		return nil, surgepay.NotFound("processor", "processor")
	}
	ev, err := ep.ParseEvent(processor, payload, header)
	if err == nil && ev.PaymentRef != "" {
		ev.PaymentRef = qualify(processor, ev.PaymentRef)
	}
	return ev, err
}

var _ surgepay.OutsideRefunder = (*Router)(nil)

// RefundedOutside asks the authorization's processor; a processor that
// cannot tell answers 0.
func (r *Router) RefundedOutside(ctx context.Context, ref string) (int64, error) {
	p, bare, err := r.t.Load().resolve(ref)
	if err != nil {
		return 0, err
	}
	if o, ok := p.Provider.(surgepay.OutsideRefunder); ok {
		return o.RefundedOutside(ctx, bare)
	}
	return 0, nil
}

var _ surgepay.PageServer = (*Router)(nil)

// pageHolder is a PageServer that tells whether a page request is its
// own: the simulator, whether it holds the challenge the path names.
type pageHolder interface {
	HoldsPage(r *http.Request) bool
}

// Pages serves the shopper-facing pages (surgepay.PagesPrefix) of the
// processors that have them, the simulator's 3-D Secure challenges: each
// request goes to the first processor, by name, that holds it (challenge
// IDs are unique, so at most one does), else to the first PageServer that
// cannot tell; with none, 404. It reads the processors at each request,
// so Set takes effect at once; a router without a PageServer answers 404
// to everything, as the listener would without it.
func (r *Router) Pages() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		t := r.t.Load()
		names := make([]string, 0, len(t.procs))
		for n, p := range t.procs {
			if surgepay.PageServerOf(p.Provider) != nil {
				names = append(names, n)
			}
		}
		slices.Sort(names)
		var fallback surgepay.PageServer
		for _, n := range names {
			ps := surgepay.PageServerOf(t.procs[n].Provider)
			h, ok := ps.(pageHolder)
			if !ok {
				if fallback == nil {
					fallback = ps
				}
				continue
			}
			if h.HoldsPage(req) {
				ps.Pages().ServeHTTP(w, req)
				return
			}
		}
		if fallback != nil {
			fallback.Pages().ServeHTTP(w, req)
			return
		}
		if len(names) > 0 { // the first one's own 404 page, with its headers.
			surgepay.PageServerOf(t.procs[names[0]].Provider).Pages().ServeHTTP(w, req)
			return
		}
		http.NotFound(w, req)
	})
}
