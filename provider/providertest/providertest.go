// Package providertest is the conformance suite every surgepay.Provider
// connector runs: idempotent replay, key reuse with different parameters,
// Lookup, the money rules of authorizations, and the Stripe-style test card
// numbers that connectors' test modes honour. The simulator (provider/sim)
// runs it in process and over HTTP.
//
// The suite needs a provider in test mode: it authorizes real test cards
// and expects their documented declines. Idempotency keys are random per
// Run, so a shared sandbox can run it repeatedly.
package providertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
)

// Test card numbers (Stripe's test-mode numbers).
const (
	CardVisa              = "4242424242424242"
	CardMastercard        = "5555555555554444"
	CardAmex              = "378282246310005"
	CardDeclined          = "4000000000000002" // generic_decline
	CardInsufficientFunds = "4000000000009995" // insufficient_funds
	CardExpired           = "4000000000000069" // expired_card
	CardIncorrectCVC      = "4000000000000127" // incorrect_cvc
	CardProcessingError   = "4000000000000119" // processing_error
	CardCaptureDeclined   = "4000000000000259" // authorizes; captures declined generic_decline
)

// DeclineInvalidRequest is the decline code of a request that breaks the
// money rules: capture more than authorized or twice, void a captured
// authorization, refund more than captured, unknown authorization.
const DeclineInvalidRequest = "invalid_request"

// callTimeout bounds each provider call the suite makes.
const callTimeout = 30 * time.Second

// Options adapt the suite to a provider's test mode or test double.
type Options struct {
	// Skip names subtests (e.g. "Refund/ExceedsCaptured") that the
	// provider's test double cannot run, each with the reason; they are
	// reported as skipped with it.
	Skip map[string]string
	// NoCaptureDeclineCard: the provider has no test card that authorizes
	// and then declines its capture (the simulator's card ending 0259).
	NoCaptureDeclineCard bool
	// NoPaymentIDEcho: the provider does not answer a replayed
	// authorization with the payment ID sent first (Stripe compares every
	// parameter of a replay, so surgepay sends it none that a retry
	// changes); the engine then keeps the retry's ID.
	NoPaymentIDEcho bool
	// CardDeclined, if set, replaces CardDeclined where the suite needs
	// an authorization declined generic_decline (a double's own card).
	CardDeclined string
}

// Run runs the suite. newProvider returns a provider for one subtest; it
// may return the same provider every time.
func Run(t *testing.T, newProvider func(t *testing.T) surgepay.Provider) {
	RunWith(t, Options{}, newProvider)
}

// RunWith runs the suite with options.
func RunWith(t *testing.T, opts Options, newProvider func(t *testing.T) surgepay.Provider) {
	var b [6]byte
	rand.Read(b[:])
	s := &suite{newProvider: newProvider, prefix: "pt_" + hex.EncodeToString(b[:])}
	tests := []struct {
		name string
		fn   func(t *testing.T, h *harness)
	}{
		{"Authorize/Approved", testAuthorizeApproved},
		{"Authorize/DeclineTable", testDeclineTable},
		{"Authorize/Replay", testAuthorizeReplay},
		{"Authorize/ReplayConcurrent", testAuthorizeReplayConcurrent},
		{"Authorize/ErrKeyReused", testAuthorizeKeyReused},
		{"Authorize/Sale", testSale},
		{"Lookup/Authorization", testLookupAuthorization},
		{"Lookup/Operations", testLookupOperations},
		{"Lookup/ErrNoSuchOperation", testLookupMissing},
		{"Capture/Full", testCaptureFull},
		{"Capture/PartialReleasesRest", testCapturePartial},
		{"Capture/Once", testCaptureOnce},
		{"Capture/ExceedsAuthorized", testCaptureExceeds},
		{"Capture/Replay", testCaptureReplay},
		{"Capture/ErrKeyReused", testCaptureKeyReused},
		{"Capture/Voided", testCaptureVoided},
		{"Capture/UnknownAuthorization", testCaptureUnknownAuthorization},
		{"Capture/DeclinedAuthorization", testCaptureDeclinedAuthorization},
		{"Capture/CardDeclinesCapture", testCaptureCardDeclines},
		{"Void/OK", testVoid},
		{"Void/Captured", testVoidCaptured},
		{"Void/Twice", testVoidTwice},
		{"Refund/PartialThenRest", testRefundPartialThenRest},
		{"Refund/ExceedsCaptured", testRefundExceeds},
		{"Refund/Uncaptured", testRefundUncaptured},
		{"Refund/ReplayNoSecondEffect", testRefundReplay},
	}
	for _, tt := range tests {
		if opts.NoCaptureDeclineCard && tt.name == "Capture/CardDeclinesCapture" {
			continue
		}
		t.Run(tt.name, func(t *testing.T) {
			if why, ok := opts.Skip[tt.name]; ok {
				t.Skip(why)
			}
			t.Parallel()
			tt.fn(t, &harness{t: t, p: s.newProvider(t), prefix: s.prefix + "/" + t.Name(), opts: opts})
		})
	}
}

type suite struct {
	newProvider func(t *testing.T) surgepay.Provider
	prefix      string
}

// harness makes provider calls for one subtest and fails it on surprises.
type harness struct {
	t      *testing.T
	p      surgepay.Provider
	prefix string
	opts   Options
	mu     sync.Mutex
	n      int
}

// key returns a new idempotency key unique to this Run and subtest.
func (h *harness) key(op string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n++
	return h.prefix + "/" + op + "/" + strconv.Itoa(h.n)
}

func (h *harness) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(h.t.Context(), callTimeout)
}

func authReq(key, number string, amount int64, capture bool) *surgepay.AuthorizeRequest {
	cvc := "123"
	if len(number) == 15 {
		cvc = "1234"
	}
	return &surgepay.AuthorizeRequest{
		IdempotencyKey: key, MerchantID: "mer_providertest", PaymentID: "pay_" + key,
		Amount: amount, Currency: "usd", Capture: capture,
		Card: surgepay.ProviderCard{Number: surgepay.PAN(number), ExpMonth: 12, ExpYear: 2034, CVC: surgepay.CVC(cvc)},
	}
}

// result fails the test unless the call returned a result.
func (h *harness) result(what string, res *surgepay.ProviderResult, err error) *surgepay.ProviderResult {
	h.t.Helper()
	if err != nil {
		h.t.Fatalf("%s: got error %v, want a result", what, err)
	}
	if res == nil {
		h.t.Fatalf("%s: got nil result and nil error", what)
	}
	return res
}

func (h *harness) approved(what string, res *surgepay.ProviderResult, err error) *surgepay.ProviderResult {
	h.t.Helper()
	res = h.result(what, res, err)
	if !res.Approved {
		h.t.Fatalf("%s: got declined %q (%s), want approved", what, res.DeclineCode, res.Message)
	}
	if res.Reference == "" {
		h.t.Fatalf("%s: approved with an empty Reference", what)
	}
	return res
}

func (h *harness) declined(what, code string, res *surgepay.ProviderResult, err error) *surgepay.ProviderResult {
	h.t.Helper()
	res = h.result(what, res, err)
	if res.Approved {
		h.t.Fatalf("%s: got approved, want declined %q", what, code)
	}
	if res.DeclineCode != code {
		h.t.Fatalf("%s: got decline code %q (%s), want %q", what, res.DeclineCode, res.Message, code)
	}
	if res.Message == "" {
		h.t.Errorf("%s: declined %q without a Message", what, code)
	}
	return res
}

func (h *harness) notPerformed(what string, res *surgepay.ProviderResult, err error) {
	h.t.Helper()
	if err == nil {
		h.t.Fatalf("%s: got result %+v, want a NotPerformed *surgepay.ProviderError", what, res)
	}
	if !surgepay.IsNotPerformed(err) {
		h.t.Fatalf("%s: got error %v, want a NotPerformed *surgepay.ProviderError", what, err)
	}
}

func (h *harness) authorize(key, number string, amount int64, capture bool) (*surgepay.ProviderResult, error) {
	ctx, cancel := h.ctx()
	defer cancel()
	return h.p.Authorize(ctx, authReq(key, number, amount, capture))
}

func (h *harness) capture(key, ref string, amount int64) (*surgepay.ProviderResult, error) {
	ctx, cancel := h.ctx()
	defer cancel()
	return h.p.Capture(ctx, &surgepay.CaptureRequest{IdempotencyKey: key, AuthorizationRef: ref, Amount: amount, Currency: "usd"})
}

func (h *harness) void(key, ref string) (*surgepay.ProviderResult, error) {
	ctx, cancel := h.ctx()
	defer cancel()
	return h.p.Void(ctx, &surgepay.VoidRequest{IdempotencyKey: key, AuthorizationRef: ref})
}

func (h *harness) refund(key, ref string, amount int64) (*surgepay.ProviderResult, error) {
	ctx, cancel := h.ctx()
	defer cancel()
	return h.p.Refund(ctx, &surgepay.RefundRequest{IdempotencyKey: key, AuthorizationRef: ref, Amount: amount, Currency: "usd"})
}

// lookup looks up an authorization by its key.
func (h *harness) lookup(key string) (*surgepay.ProviderResult, error) {
	return h.lookupOp(surgepay.TxAuthorization, key, "", 0)
}

// lookupOp looks up an operation as the engine does: with what it knows
// of it, for providers that need more than the key. Every operation the
// suite looks up had its answer before the lookup, so it is told they
// were sent long ago: a provider whose index of keys lags (Stripe's
// search) may then answer "not performed" for a key never used.
func (h *harness) lookupOp(op, key, ref string, amount int64) (*surgepay.ProviderResult, error) {
	ctx, cancel := h.ctx()
	defer cancel()
	return surgepay.LookupOperation(ctx, h.p, &surgepay.LookupQuery{Key: key, Operation: op, AuthorizationRef: ref, Amount: amount,
		MerchantID: "mer_providertest", Currency: "usd", Attempted: time.Now().Add(-time.Hour)})
}

// authorized returns an approved, uncaptured authorization of amount.
func (h *harness) authorized(amount int64) *surgepay.ProviderResult {
	h.t.Helper()
	res, err := h.authorize(h.key("auth"), CardVisa, amount, false)
	return h.approved("authorize", res, err)
}

// captured returns an authorization of amount, captured in full.
func (h *harness) captured(amount int64) *surgepay.ProviderResult {
	h.t.Helper()
	a := h.authorized(amount)
	res, err := h.capture(h.key("capture"), a.Reference, amount)
	h.approved("capture", res, err)
	return a
}
