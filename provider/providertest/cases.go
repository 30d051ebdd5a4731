package providertest

import (
	"sync"
	"testing"

	"github.com/surgepay/surgepay"
)

func testAuthorizeApproved(t *testing.T, h *harness) {
	for _, number := range []string{CardVisa, CardMastercard, CardAmex} {
		res, err := h.authorize(h.key("auth"), number, 1000, false)
		h.approved("authorize card ending "+number[len(number)-4:], res, err)
		if res.Amount != 1000 {
			t.Errorf("card ending %s: got Amount %d, want 1000", number[len(number)-4:], res.Amount)
		}
		if res.Captured {
			t.Errorf("card ending %s: got Captured for an authorization without capture", number[len(number)-4:])
		}
	}
}

func testDeclineTable(t *testing.T, h *harness) {
	tests := []struct{ number, code string }{
		{CardDeclined, surgepay.DeclineGeneric},
		{CardInsufficientFunds, surgepay.DeclineInsufficientFunds},
		{CardExpired, surgepay.DeclineExpiredCard},
		{CardIncorrectCVC, surgepay.DeclineIncorrectCVC},
		{CardProcessingError, surgepay.DeclineProcessingError},
	}
	for _, tt := range tests {
		key := h.key("auth")
		res, err := h.authorize(key, tt.number, 1000, false)
		h.declined("authorize card ending "+tt.number[len(tt.number)-4:], tt.code, res, err)
		// A decline is final: the replay and Lookup repeat it.
		res, err = h.authorize(key, tt.number, 1000, false)
		h.declined("replay of a declined authorization", tt.code, res, err)
		res, err = h.lookup(key)
		h.declined("lookup of a declined authorization", tt.code, res, err)
	}
	if !h.opts.NoCaptureDeclineCard {
		res, err := h.authorize(h.key("auth"), CardCaptureDeclined, 1000, false)
		h.approved("authorize card ending 0259", res, err)
	}
}

func testAuthorizeReplay(t *testing.T, h *harness) {
	key := h.key("auth")
	first, err := h.authorize(key, CardVisa, 1500, false)
	h.approved("authorize", first, err)
	second, err := h.authorize(key, CardVisa, 1500, false)
	h.approved("replay", second, err)
	if second.Reference != first.Reference {
		t.Fatalf("replay: got Reference %q, want the first %q", second.Reference, first.Reference)
	}
	// A retry after a crash carries a new payment ID; the answer names the
	// payment the network recorded first, so the engine stores that one.
	ctx, cancel := h.ctx()
	defer cancel()
	retry := authReq(key, CardVisa, 1500, false)
	retry.PaymentID = "pay_retried"
	third, err := h.p.Authorize(ctx, retry)
	h.approved("replay with a new payment ID", third, err)
	if !h.opts.NoPaymentIDEcho && (first.PaymentID != "pay_"+key || third.PaymentID != first.PaymentID) {
		t.Fatalf("payment IDs: first answer %q (sent %q), replay %q; want the first sent on both",
			first.PaymentID, "pay_"+key, third.PaymentID)
	}
	// One authorization exists: it captures once.
	res, err := h.capture(h.key("capture"), first.Reference, 1500)
	h.approved("capture", res, err)
	res, err = h.capture(h.key("capture"), second.Reference, 1500)
	h.declined("second capture", DeclineInvalidRequest, res, err)
}

func testAuthorizeReplayConcurrent(t *testing.T, h *harness) {
	const callers = 50
	key := h.key("auth")
	refs := make([]string, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			res, err := h.authorize(key, CardVisa, 2500, false)
			errs[i] = err
			if err == nil && res.Approved {
				refs[i] = res.Reference
			}
		})
	}
	wg.Wait()
	for i := range callers {
		if errs[i] != nil {
			t.Fatalf("caller %d: got error %v, want the one result", i, errs[i])
		}
		if refs[i] == "" || refs[i] != refs[0] {
			t.Fatalf("caller %d: got Reference %q, want %q like caller 0", i, refs[i], refs[0])
		}
	}
}

func testAuthorizeKeyReused(t *testing.T, h *harness) {
	key := h.key("auth")
	first, err := h.authorize(key, CardVisa, 1000, false)
	h.approved("authorize", first, err)
	tests := []struct {
		name string
		req  *surgepay.AuthorizeRequest
	}{
		{"amount", authReq(key, CardVisa, 1001, false)},
		{"card", authReq(key, CardMastercard, 1000, false)},
		{"capture", authReq(key, CardVisa, 1000, true)},
		{"currency", func() *surgepay.AuthorizeRequest {
			r := authReq(key, CardVisa, 1000, false)
			r.Currency = "eur"
			return r
		}()},
	}
	for _, tt := range tests {
		ctx, cancel := h.ctx()
		res, err := h.p.Authorize(ctx, tt.req)
		cancel()
		h.notPerformed("same key, different "+tt.name, res, err)
	}
	res, err := h.lookup(key)
	res = h.approved("lookup after key reuse", res, err)
	if res.Reference != first.Reference || res.Amount != 1000 {
		t.Fatalf("lookup after key reuse: got %s %d, want the first %s 1000", res.Reference, res.Amount, first.Reference)
	}
}

func testSale(t *testing.T, h *harness) {
	key := h.key("sale")
	sale, err := h.authorize(key, CardVisa, 3000, true)
	h.approved("sale", sale, err)
	if !sale.Captured {
		t.Errorf("sale: got Captured false, want true")
	}
	res, err := h.capture(h.key("capture"), sale.Reference, 3000)
	h.declined("capture of a sale", DeclineInvalidRequest, res, err)
	res, err = h.void(h.key("void"), sale.Reference)
	h.declined("void of a sale", DeclineInvalidRequest, res, err)
	res, err = h.refund(h.key("refund"), sale.Reference, 3000)
	h.approved("refund of a sale", res, err)
	if !h.opts.NoCaptureDeclineCard {
		res, err = h.authorize(h.key("sale"), CardCaptureDeclined, 3000, true)
		h.declined("sale with card ending 0259", surgepay.DeclineGeneric, res, err)
	}
}

func testLookupAuthorization(t *testing.T, h *harness) {
	for _, capture := range []bool{false, true} {
		key := h.key("auth")
		first, err := h.authorize(key, CardVisa, 1200, capture)
		h.approved("authorize", first, err)
		res, err := h.lookup(key)
		h.approved("lookup", res, err)
		if res.Reference != first.Reference || res.Amount != 1200 {
			t.Errorf("lookup: got %s %d, want %s 1200", res.Reference, res.Amount, first.Reference)
		}
		if res.Operation != surgepay.TxAuthorization {
			t.Errorf("lookup: got Operation %q, want %q", res.Operation, surgepay.TxAuthorization)
		}
		if res.Captured != capture {
			t.Errorf("lookup: got Captured %v, want %v (a sale)", res.Captured, capture)
		}
	}
}

func testLookupOperations(t *testing.T, h *harness) {
	a := h.authorized(1000)
	capKey, refKey := h.key("capture"), h.key("refund")
	cres, err := h.capture(capKey, a.Reference, 1000)
	h.approved("capture", cres, err)
	rres, err := h.refund(refKey, a.Reference, 400)
	h.approved("refund", rres, err)
	b := h.authorized(1000)
	voidKey := h.key("void")
	vres, err := h.void(voidKey, b.Reference)
	h.approved("void", vres, err)
	for _, tt := range []struct {
		key, op string
		first   *surgepay.ProviderResult
	}{{capKey, surgepay.TxCapture, cres}, {refKey, surgepay.TxRefund, rres}, {voidKey, surgepay.TxVoid, vres}} {
		ref := a.Reference
		if tt.op == surgepay.TxVoid {
			ref = b.Reference
		}
		res, err := h.lookupOp(tt.op, tt.key, ref, tt.first.Amount)
		h.approved("lookup "+tt.op, res, err)
		if res.Operation != tt.op || res.Reference != tt.first.Reference || res.Amount != tt.first.Amount {
			t.Errorf("lookup %s: got %s %s %d, want %s %s %d", tt.op,
				res.Operation, res.Reference, res.Amount, tt.op, tt.first.Reference, tt.first.Amount)
		}
	}
}

func testLookupMissing(t *testing.T, h *harness) {
	res, err := h.lookup(h.key("never-used"))
	h.notPerformed("lookup of an unused key", res, err)
}

func testCaptureFull(t *testing.T, h *harness) {
	a := h.authorized(5000)
	res, err := h.capture(h.key("capture"), a.Reference, 5000)
	h.approved("capture", res, err)
	if res.Amount != 5000 {
		t.Errorf("capture: got Amount %d, want 5000", res.Amount)
	}
}

func testCapturePartial(t *testing.T, h *harness) {
	a := h.authorized(5000)
	res, err := h.capture(h.key("capture"), a.Reference, 3000)
	h.approved("partial capture", res, err)
	res, err = h.capture(h.key("capture"), a.Reference, 2000)
	h.declined("capture of the released rest", DeclineInvalidRequest, res, err)
	res, err = h.refund(h.key("refund"), a.Reference, 3001)
	h.declined("refund beyond the partial capture", DeclineInvalidRequest, res, err)
	res, err = h.refund(h.key("refund"), a.Reference, 3000)
	h.approved("refund of the partial capture", res, err)
}

func testCaptureOnce(t *testing.T, h *harness) {
	a := h.captured(1000)
	res, err := h.capture(h.key("capture"), a.Reference, 1000)
	h.declined("second capture", DeclineInvalidRequest, res, err)
}

func testCaptureExceeds(t *testing.T, h *harness) {
	a := h.authorized(1000)
	res, err := h.capture(h.key("capture"), a.Reference, 1001)
	h.declined("capture above the authorized amount", DeclineInvalidRequest, res, err)
	// The declined capture had no effect.
	res, err = h.capture(h.key("capture"), a.Reference, 1000)
	h.approved("capture after a declined one", res, err)
}

func testCaptureReplay(t *testing.T, h *harness) {
	a := h.authorized(1000)
	key := h.key("capture")
	first, err := h.capture(key, a.Reference, 1000)
	h.approved("capture", first, err)
	second, err := h.capture(key, a.Reference, 1000)
	h.approved("replay", second, err)
	if second.Reference != first.Reference {
		t.Fatalf("replay: got Reference %q, want the first %q", second.Reference, first.Reference)
	}
	// The replay captured nothing more: 1000 is refundable, not 2000.
	res, err := h.refund(h.key("refund"), a.Reference, 1001)
	h.declined("refund above one capture", DeclineInvalidRequest, res, err)
}

func testCaptureKeyReused(t *testing.T, h *harness) {
	a := h.authorized(1000)
	b := h.authorized(1000)
	key := h.key("capture")
	res, err := h.capture(key, a.Reference, 500)
	h.approved("capture", res, err)
	res, err = h.capture(key, a.Reference, 600)
	h.notPerformed("same key, different amount", res, err)
	res, err = h.capture(key, b.Reference, 500)
	h.notPerformed("same key, different authorization", res, err)
	// Another operation under a capture's key is a reuse too.
	res, err = h.refund(key, a.Reference, 500)
	h.notPerformed("same key, different operation", res, err)
}

func testCaptureVoided(t *testing.T, h *harness) {
	a := h.authorized(1000)
	res, err := h.void(h.key("void"), a.Reference)
	h.approved("void", res, err)
	res, err = h.capture(h.key("capture"), a.Reference, 1000)
	h.declined("capture of a voided authorization", DeclineInvalidRequest, res, err)
}

func testCaptureUnknownAuthorization(t *testing.T, h *harness) {
	res, err := h.capture(h.key("capture"), "auth_does_not_exist", 1000)
	h.declined("capture of an unknown authorization", DeclineInvalidRequest, res, err)
}

func testCaptureDeclinedAuthorization(t *testing.T, h *harness) {
	card := CardDeclined
	if h.opts.CardDeclined != "" {
		card = h.opts.CardDeclined
	}
	res, err := h.authorize(h.key("auth"), card, 1000, false)
	res = h.declined("authorize", surgepay.DeclineGeneric, res, err)
	if res.Reference == "" {
		return // nothing to capture against.
	}
	res, err = h.capture(h.key("capture"), res.Reference, 1000)
	h.declined("capture of a declined authorization", DeclineInvalidRequest, res, err)
}

func testCaptureCardDeclines(t *testing.T, h *harness) {
	res, err := h.authorize(h.key("auth"), CardCaptureDeclined, 1000, false)
	a := h.approved("authorize card ending 0259", res, err)
	res, err = h.capture(h.key("capture"), a.Reference, 1000)
	h.declined("capture with card ending 0259", surgepay.DeclineGeneric, res, err)
	res, err = h.void(h.key("void"), a.Reference)
	h.approved("void after the declined capture", res, err)
}

func testVoid(t *testing.T, h *harness) {
	a := h.authorized(1000)
	key := h.key("void")
	first, err := h.void(key, a.Reference)
	h.approved("void", first, err)
	second, err := h.void(key, a.Reference)
	h.approved("replay", second, err)
	if second.Reference != first.Reference {
		t.Fatalf("replay: got Reference %q, want the first %q", second.Reference, first.Reference)
	}
}

func testVoidCaptured(t *testing.T, h *harness) {
	a := h.captured(1000)
	res, err := h.void(h.key("void"), a.Reference)
	h.declined("void of a captured authorization", DeclineInvalidRequest, res, err)
}

func testVoidTwice(t *testing.T, h *harness) {
	a := h.authorized(1000)
	res, err := h.void(h.key("void"), a.Reference)
	h.approved("void", res, err)
	res, err = h.void(h.key("void"), a.Reference)
	h.declined("second void", DeclineInvalidRequest, res, err)
}

func testRefundPartialThenRest(t *testing.T, h *harness) {
	a := h.captured(1000)
	res, err := h.refund(h.key("refund"), a.Reference, 300)
	h.approved("first refund", res, err)
	res, err = h.refund(h.key("refund"), a.Reference, 700)
	h.approved("refund of the rest", res, err)
	res, err = h.refund(h.key("refund"), a.Reference, 1)
	h.declined("refund beyond the captured amount", DeclineInvalidRequest, res, err)
}

func testRefundExceeds(t *testing.T, h *harness) {
	a := h.captured(1000)
	res, err := h.refund(h.key("refund"), a.Reference, 1001)
	h.declined("refund above the captured amount", DeclineInvalidRequest, res, err)
}

func testRefundUncaptured(t *testing.T, h *harness) {
	a := h.authorized(1000)
	res, err := h.refund(h.key("refund"), a.Reference, 100)
	h.declined("refund of an uncaptured authorization", DeclineInvalidRequest, res, err)
}

func testRefundReplay(t *testing.T, h *harness) {
	a := h.captured(1000)
	key := h.key("refund")
	first, err := h.refund(key, a.Reference, 600)
	h.approved("refund", first, err)
	second, err := h.refund(key, a.Reference, 600)
	h.approved("replay", second, err)
	if second.Reference != first.Reference {
		t.Fatalf("replay: got Reference %q, want the first %q", second.Reference, first.Reference)
	}
	// The replay refunded nothing more: 400 is left.
	res, err := h.refund(h.key("refund"), a.Reference, 400)
	h.approved("refund of the rest", res, err)
	res, err = h.refund(h.key("refund"), a.Reference, 1)
	h.declined("refund beyond the captured amount", DeclineInvalidRequest, res, err)
}
