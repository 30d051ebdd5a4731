package loadtest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// testCard is a card of the simulator's test-card table.
type testCard struct {
	number  string
	decline bool
}

// testCards maps --decline-card names (and "success") to simulator test
// cards. Every decline answers HTTP 402 with a card_error.
var testCards = map[string]testCard{
	"success":            {"4242424242424242", false},
	"card_declined":      {"4000000000000002", true},
	"insufficient_funds": {"4000000000009995", true},
	"expired_card":       {"4000000000000069", true},
	"incorrect_cvc":      {"4000000000000127", true},
	"processing_error":   {"4000000000000119", true},
}

func declineCardNames() string {
	var names []string
	for k, c := range testCards {
		if c.decline {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// savedCustomer is a set-up customer with a saved card.
type savedCustomer struct {
	customer      string
	paymentMethod string
	card          testCard
}

// pool holds the set-up customers. Filled before the run, read-only during it.
type pool struct {
	success []savedCustomer
	decline []savedCustomer
}

// pickCard returns the decline card with probability DeclineRate.
func (it *iteration) pickCard() testCard {
	if it.env.declineRate > 0 && it.rng.Float64() < it.env.declineRate {
		return it.env.declineCard
	}
	return testCards["success"]
}

// poolCustomer returns a set-up customer, one with a decline card with
// probability DeclineRate when set-up saved any.
func (it *iteration) poolCustomer() savedCustomer {
	p := it.env.pool
	if len(p.decline) > 0 && it.env.declineRate > 0 && it.rng.Float64() < it.env.declineRate {
		return p.decline[it.rng.IntN(len(p.decline))]
	}
	assert(len(p.success) > 0, "scenarios that need the pool run only after set-up filled it")
	return p.success[it.rng.IntN(len(p.success))]
}

// amount is a purchase amount in minor units, 5.00 to 200.00, never one of
// the simulator's fault amounts (provider/sim: 9101 a timeout, 9102 a lost
// answer, 9103 a rate limit, 9104 a decline, 9105 a dispute): uniform over
// the whole range they hit 1 purchase in 3,900, and a run's 503s were then
// the simulator's as well as the server's. Faults come only when asked
// for (--decline-rate). With tax the total is what the network sees.
func (it *iteration) amount() int64 {
	a := amountMin + it.rng.Int64N(amountMax-amountMin+1-simFaultAmounts)
	if a >= simFaultAmountFirst {
		a += simFaultAmounts
	}
	return a
}

const (
	amountMin, amountMax = 500, 20_000
	// simFaultAmountFirst and simFaultAmounts are the simulator's fault
	// amounts, 9101 to 9105 (provider/sim/doc.go).
	simFaultAmountFirst = 9101
	simFaultAmounts     = 5
)

var firstNames = [...]string{"Ada", "Grace", "Alan", "Edsger", "Barbara", "Donald", "Frances", "Ken", "Radia", "Tony"}
var lastNames = [...]string{"Lovelace", "Hopper", "Turing", "Dijkstra", "Liskov", "Knuth", "Allen", "Thompson", "Perlman", "Hoare"}

func (it *iteration) name() string {
	return firstNames[it.rng.IntN(len(firstNames))] + " " + lastNames[it.rng.IntN(len(lastNames))]
}

// customerBody generates a customer with a run-unique e-mail address.
func (it *iteration) customerBody() []byte {
	seq := strconv.FormatInt(it.index, 10) + "-" + strconv.FormatUint(it.rng.Uint64()%1_000_000, 10)
	email := "lt-" + it.env.runID + "-" + seq + "@example.test"
	return appendCustomerBody(nil, it.name(), email, "loadtest "+it.env.runID)
}

func appendCustomerBody(b []byte, name, email, description string) []byte {
	b = append(b, `{"name":`...)
	b = appendJSONString(b, name)
	b = append(b, `,"email":`...)
	b = appendJSONString(b, email)
	b = append(b, `,"description":`...)
	b = appendJSONString(b, description)
	return append(b, `,"metadata":{"source":"loadtest"}}`...)
}

func appendPaymentMethodBody(b []byte, customer string, card testCard, holder string) []byte {
	b = append(b, `{"customer":`...)
	b = appendJSONString(b, customer)
	b = append(b, `,"card":{"number":`...)
	b = appendJSONString(b, card.number)
	b = append(b, `,"exp_month":12,"exp_year":2030,"cvc":"123"},"billing_details":{"name":`...)
	b = appendJSONString(b, holder)
	return append(b, `}}`...)
}

func appendPaymentBody(b []byte, amount int64, customer, pm, captureMethod, description string) []byte {
	b = append(b, `{"amount":`...)
	b = strconv.AppendInt(b, amount, 10)
	b = append(b, `,"currency":"usd","customer":`...)
	b = appendJSONString(b, customer)
	b = append(b, `,"payment_method":`...)
	b = appendJSONString(b, pm)
	b = append(b, `,"capture_method":`...)
	b = appendJSONString(b, captureMethod)
	b = append(b, `,"description":`...)
	b = appendJSONString(b, description)
	return append(b, '}')
}

// appendAwaitingPaymentBody is a payment for the browser: no card.
func appendAwaitingPaymentBody(b []byte, amount int64, description string) []byte {
	b = append(b, `{"amount":`...)
	b = strconv.AppendInt(b, amount, 10)
	b = append(b, `,"currency":"usd","description":`...)
	b = appendJSONString(b, description)
	return append(b, '}')
}

// appendCheckoutCardBody is the card frame's guest card.
func appendCheckoutCardBody(b []byte, card testCard) []byte {
	b = append(b, `{"card":{"number":`...)
	b = appendJSONString(b, card.number)
	return append(b, `,"exp_month":12,"exp_year":2030,"cvc":"123"}}`...)
}

// appendConfirmBody is the card frame's confirm.
func appendConfirmBody(b []byte, clientSecret, pm string) []byte {
	b = append(b, `{"client_secret":`...)
	b = appendJSONString(b, clientSecret)
	b = append(b, `,"payment_method":`...)
	b = appendJSONString(b, pm)
	return append(b, `,"cvc":"123"}`...)
}

func appendAmountBody(b []byte, amount int64) []byte {
	b = append(b, `{"amount":`...)
	b = strconv.AppendInt(b, amount, 10)
	return append(b, '}')
}

// appendJSONString appends s as a JSON string, escaping quotes, backslashes
// and control characters.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// setupPool creates count customers, each with a saved card, before the
// measured window; nothing is recorded. The share DeclineRate of them (but
// never all) save the decline card, if the server lets it be saved. More
// than SetupFailureShareMax failures abandon the run.
func setupPool(ctx context.Context, e *env, count int, seed uint64) (*pool, error) {
	p := &pool{}
	var mu sync.Mutex
	var failed atomic.Int64
	var firstErr atomic.Value
	var next atomic.Int64
	declines := int64(min(math.Round(e.declineRate*float64(count)), float64(count-1)))
	var wg sync.WaitGroup
	for range min(SetupConcurrency, count) {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(count) && ctx.Err() == nil; i = next.Add(1) - 1 {
				sc, err := setupOne(ctx, e, i, seed, i < declines)
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
					continue
				}
				mu.Lock()
				if sc.card.decline {
					p.decline = append(p.decline, sc)
				} else {
					p.success = append(p.success, sc)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if f := failed.Load(); float64(f) > SetupFailureShareMax*float64(count) {
		err, _ := firstErr.Load().(error)
		return nil, fmt.Errorf("set-up: %d of %d customers failed, first: %w", f, count, err)
	}
	if len(p.success) == 0 {
		return nil, fmt.Errorf("set-up: no customer saved a good card")
	}
	return p, nil
}

// errSetup reports a set-up call that did not succeed.
var errSetup = errors.New("set-up call failed")

// setupOne creates customer i and saves its card.
func setupOne(ctx context.Context, e *env, i int64, seed uint64, decline bool) (savedCustomer, error) {
	it := &iteration{ctx: ctx, env: e, rng: rand.New(rand.NewPCG(seed, uint64(i)|1<<63)), index: i, next: time.Now()} //nolint:gosec // G404: seeded on purpose, so a run can be repeated
	card := testCards["success"]
	if decline {
		card = e.declineCard
	}
	cus, ok := it.createCustomer()
	if !ok {
		return savedCustomer{}, setupError(it, "customer.create")
	}
	pm, ok := it.createPaymentMethod(cus, card)
	if !ok && card.decline {
		// The server declines the card when saving it: keep the customer
		// with a good card instead; declines then happen in checkout only.
		card = testCards["success"]
		pm, ok = it.createPaymentMethod(cus, card)
	}
	if !ok {
		return savedCustomer{}, setupError(it, "payment_method.create")
	}
	return savedCustomer{customer: cus, paymentMethod: pm, card: card}, nil
}

func setupError(it *iteration, what string) error {
	if it.reply.Error != nil {
		return fmt.Errorf("%w: %s: %s: %s", errSetup, what, it.reply.Error.Code, it.reply.Error.Message)
	}
	return fmt.Errorf("%w: %s: %s", errSetup, what, it.lastCode)
}
