package loadtest

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// The built-in scenarios. Each stops at the first call that does not succeed;
// a decline of a decline card ends the iteration as an expected outcome.

// runCheckout: new customer, add a card, purchase (capture_method=automatic).
func runCheckout(it *iteration) {
	cus, ok := it.createCustomer()
	if !ok {
		return
	}
	card := it.pickCard()
	pm, ok := it.createPaymentMethod(cus, card)
	if !ok {
		return
	}
	it.pay(typePaymentCreate, cus, pm, "automatic", card.decline, it.amount())
}

// runReturning: a set-up customer with a saved card authorizes
// (capture_method=manual), then captures.
func runReturning(it *iteration) {
	sc := it.poolCustomer()
	amount := it.amount()
	r, ok := it.pay(typePaymentAuthorize, sc.customer, sc.paymentMethod, "manual", sc.card.decline, amount)
	if !ok {
		return
	}
	it.do(&call{
		typ: typePaymentCapture, method: http.MethodPost,
		path: "/v1/payments/" + r.ID + "/capture", body: []byte("{}"),
		check: expectPayment("succeeded", amount, func(r *apiReply) (string, int64) { return "amount_captured", r.AmountCaptured }),
	})
}

// runStreamlined: a set-up customer's saved card pays in one sale
// (capture_method=automatic). It should run against a merchant configured
// for the streamlined pipeline; the harness cannot select one yet, so it
// uses the same API key and merchant as returning.
func runStreamlined(it *iteration) {
	sc := it.poolCustomer()
	it.pay(typePaymentCreate, sc.customer, sc.paymentMethod, "automatic", sc.card.decline, it.amount())
}

// runRefund: purchase, refund a third, refund the rest.
func runRefund(it *iteration) {
	sc := it.poolCustomer()
	amount := it.amount()
	r, ok := it.pay(typePaymentCreate, sc.customer, sc.paymentMethod, "automatic", sc.card.decline, amount)
	if !ok {
		return
	}
	id, part := r.ID, amount/3
	refunded := func(r *apiReply) (string, int64) { return "amount_refunded", r.AmountRefunded }
	_, oc := it.do(&call{
		typ: typePaymentRefund, method: http.MethodPost, path: "/v1/payments/" + id + "/refunds",
		body:  appendAmountBody(nil, part),
		check: expectPayment("partially_refunded", part, refunded),
	})
	if oc != outcomeOK {
		return
	}
	it.do(&call{
		typ: typePaymentRefund, method: http.MethodPost, path: "/v1/payments/" + id + "/refunds",
		body:  []byte("{}"),
		check: expectPayment("refunded", amount, refunded),
	})
}

// crudWeights is the read-heavy customer mix: get, list, update,
// create-then-delete, out of 100.
var crudWeights = [4]int{60, 20, 10, 10}

// runCRUD performs one customer operation chosen by crudWeights. It reads
// and updates set-up customers but deletes only customers it created.
func runCRUD(it *iteration) {
	w := it.rng.IntN(100)
	switch {
	case w < crudWeights[0]:
		it.do(&call{typ: typeCustomerGet, method: http.MethodGet,
			path: "/v1/customers/" + it.poolCustomer().customer, check: expectObject("customer", "cus_")})
	case w < crudWeights[0]+crudWeights[1]:
		it.listCustomers()
	case w < crudWeights[0]+crudWeights[1]+crudWeights[2]:
		it.do(&call{typ: typeCustomerUpdate, method: http.MethodPost,
			path: "/v1/customers/" + it.poolCustomer().customer, body: it.customerBody(),
			check: expectObject("customer", "cus_")})
	default:
		if cus, ok := it.createCustomer(); ok {
			it.do(&call{typ: typeCustomerDelete, method: http.MethodDelete,
				path: "/v1/customers/" + cus, check: expectDeleted})
		}
	}
}

func (it *iteration) listCustomers() {
	path := "/v1/customers?limit=10"
	if it.rng.IntN(2) == 0 {
		path += "&starting_after=" + it.poolCustomer().customer
	}
	it.do(&call{typ: typeCustomerList, method: http.MethodGet, path: path, check: expectList})
}

// runGet requests the configured path; any 2xx passes. It benchmarks the
// injector against a trivial handler.
func runGet(it *iteration) {
	it.do(&call{typ: typeGet, method: http.MethodGet, path: it.env.path, raw: true})
}

// runBrowser is a browser checkout (docs/checkout.md): the shop's server
// makes a payment without a card (requires_payment_method, with a client
// secret) with the secret key; then the shopper's browser, in the card
// frame, saves the card as a guest card and confirms the payment with the
// publishable key. The browser's calls carry no Origin header: the server
// admits them as not a browser's, so no checkout_origins are needed, and
// the origin check (a string comparison) is left out of the measure.
func runBrowser(it *iteration) {
	amount := it.amount()
	r, oc := it.do(&call{
		typ: typePaymentCreateAwaiting, method: http.MethodPost, path: "/v1/payments",
		body:  appendAwaitingPaymentBody(nil, amount, "loadtest "+it.env.runID),
		check: expectAwaiting(amount),
	})
	if oc != outcomeOK {
		return
	}
	id, secret := r.ID, r.ClientSecret // the next call overwrites r
	card := it.pickCard()
	r, oc = it.do(&call{
		typ: typeCheckoutPaymentMethod, method: http.MethodPost, path: "/v1/checkout/payment_methods",
		body: appendCheckoutCardBody(nil, card), decline: card.decline, publishable: true,
		check: expectObject("payment_method", "pm_"),
	})
	if oc != outcomeOK {
		return
	}
	pm := r.ID
	it.do(&call{
		typ: typeCheckoutConfirm, method: http.MethodPost, path: "/v1/checkout/payments/" + id + "/confirm",
		body: appendConfirmBody(nil, secret, pm), decline: card.decline, publishable: true,
		check: expectConfirmed(amount, pm),
	})
}

// createCustomer creates a customer and returns its ID.
func (it *iteration) createCustomer() (string, bool) {
	r, oc := it.do(&call{
		typ: typeCustomerCreate, method: http.MethodPost, path: "/v1/customers",
		body: it.customerBody(), check: expectObject("customer", "cus_"),
	})
	return r.ID, oc == outcomeOK
}

// createPaymentMethod saves card for customer. A decline card may be
// declined here already; that ends the iteration as expected.
func (it *iteration) createPaymentMethod(customer string, card testCard) (string, bool) {
	r, oc := it.do(&call{
		typ: typePaymentMethodCreate, method: http.MethodPost, path: "/v1/payment_methods",
		body: appendPaymentMethodBody(nil, customer, card, it.name()), decline: card.decline,
		check: expectObject("payment_method", "pm_"),
	})
	return r.ID, oc == outcomeOK
}

// pay creates a payment; ok is true only when it succeeded.
func (it *iteration) pay(typ reqType, customer, pm, captureMethod string, decline bool, amount int64) (*apiReply, bool) {
	want := "succeeded"
	if captureMethod == "manual" {
		want = "requires_capture"
	}
	r, oc := it.do(&call{
		typ: typ, method: http.MethodPost, path: "/v1/payments",
		body:    appendPaymentBody(nil, amount, customer, pm, captureMethod, "loadtest "+it.env.runID),
		decline: decline,
		check:   expectPayment(want, amount, paymentAmount),
	})
	return r, oc == outcomeOK
}

// Response checks. Each returns "" or what failed.

func expectObject(object, prefix string) func(*apiReply) string {
	return func(r *apiReply) string {
		if r.Object != object {
			return fmt.Sprintf("object %q, want %q", r.Object, object)
		}
		if len(r.ID) < len(prefix) || r.ID[:len(prefix)] != prefix {
			return "id without prefix " + prefix
		}
		return ""
	}
}

func expectPayment(status string, amount int64, field func(*apiReply) (string, int64)) func(*apiReply) string {
	return func(r *apiReply) string {
		if bad := expectObject("payment", "pay_")(r); bad != "" {
			return bad
		}
		if r.Status != status {
			return "status " + strconv.Quote(r.Status) + ", want " + strconv.Quote(status)
		}
		if name, got := field(r); got != amount {
			return fmt.Sprintf("%s %d, want %d", name, got, amount)
		}
		return ""
	}
}

func paymentAmount(r *apiReply) (string, int64) { return "amount", r.Amount }

// expectAwaiting checks a payment made for the browser: awaiting a card,
// with a client secret that names it.
func expectAwaiting(amount int64) func(*apiReply) string {
	payment := expectPayment("requires_payment_method", amount, paymentAmount)
	return func(r *apiReply) string {
		if bad := payment(r); bad != "" {
			return bad
		}
		if !strings.HasPrefix(r.ClientSecret, r.ID+"_secret_") {
			return "client_secret does not name the payment"
		}
		return ""
	}
}

// expectConfirmed checks the browser's view of a confirmed sale: succeeded,
// with the card it was confirmed with.
func expectConfirmed(amount int64, pm string) func(*apiReply) string {
	payment := expectPayment("succeeded", amount, paymentAmount)
	return func(r *apiReply) string {
		if bad := payment(r); bad != "" {
			return bad
		}
		if r.PaymentMethod != pm {
			return "payment_method " + strconv.Quote(r.PaymentMethod) + ", want " + strconv.Quote(pm)
		}
		return ""
	}
}

func expectList(r *apiReply) string {
	if r.Object != "list" {
		return fmt.Sprintf("object %q, want \"list\"", r.Object)
	}
	return ""
}

func expectDeleted(r *apiReply) string {
	if !r.Deleted {
		return "deleted false"
	}
	return ""
}
