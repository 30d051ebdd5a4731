package api

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"golang.org/x/time/rate"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/checkout"
	"github.com/surgepay/surgepay/engine"
)

// Browser checkout (docs/checkout.md): the routes a publishable key may
// call, their CORS, and the card frame with its script.

// checkoutPreflightMaxAge is how long a browser may keep a preflight's answer.
const checkoutPreflightMaxAge = "600"

func (s *Server) checkoutRoutesInit() {
	s.handle("POST /v1/checkout/payment_methods", surgepay.ScopeCheckout, s.checkoutPaymentMethod)
	s.handle("POST /v1/checkout/payments/{id}/confirm", surgepay.ScopeCheckout, s.checkoutConfirm)
	s.handle("GET /v1/checkout/payments/{id}", surgepay.ScopeCheckout, s.checkoutPayment)
	s.mux.Handle("OPTIONS /v1/checkout/", s.bounded(checkoutPreflight))
	frame := checkout.Handler(checkout.Config{Origins: s.eng.CheckoutOrigins})
	s.mux.Handle("GET /checkout/v1/", s.bounded(frame.ServeHTTP))
	s.mux.Handle("GET "+surgepay.CheckoutReturnPath+"{token}", s.bounded(s.checkoutReturn))
	if pages := s.eng.ProcessorPages(); pages != nil {
		// The simulator's 3-D Secure challenge, standing in for an issuer's page.
		s.mux.Handle(surgepay.PagesPrefix, s.bounded(pages.ServeHTTP))
	}
}

// checkoutPreflight answers a browser's CORS preflight of a checkout
// route. It carries no key, so it cannot know the merchant: it allows
// any well-formed origin to ask, and the request itself is refused unless
// its origin is one of its merchant's checkout_origins (checkoutOrigin).
func checkoutPreflight(w http.ResponseWriter, r *http.Request) {
	origin := r.Header.Get("Origin")
	h := w.Header()
	h.Add("Vary", "Origin")
	if !surgepay.ValidOrigin(origin) {
		w.WriteHeader(http.StatusForbidden)
		return
	}
	h.Set("Access-Control-Allow-Origin", origin)
	h.Set("Access-Control-Allow-Methods", "GET, POST")
	h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Idempotency-Key")
	h.Set("Access-Control-Max-Age", checkoutPreflightMaxAge)
	w.WriteHeader(http.StatusNoContent)
}

// checkoutOrigin admits a checkout request by its Origin header: none
// (not a browser), the API's own (the card frame), or one of the key's
// merchant's checkout_origins, which is then allowed to read the answer
// (Access-Control-Allow-Origin). Any other is 403 origin_not_allowed,
// without CORS headers, so the page cannot read even that.
func (s *Server) checkoutOrigin(w http.ResponseWriter, r *http.Request, merchantID string) error {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return nil
	}
	w.Header().Add("Vary", "Origin")
	if sameOrigin(r, origin) {
		return nil
	}
	if !surgepay.ValidOrigin(origin) || !s.eng.OriginAllowed(merchantID, origin) {
		return &surgepay.Error{Code: surgepay.EFORBIDDEN, Reason: "origin_not_allowed", Param: "Origin",
			Message: "this page's origin is not in the merchant's checkout_origins"}
	}
	w.Header().Set("Access-Control-Allow-Origin", origin)
	w.Header().Set("Access-Control-Expose-Headers", "Retry-After, X-Request-Id")
	return nil
}

// sameOrigin reports whether origin is the API's own: its host and port
// are the request's Host, and its scheme the connection's (or http
// behind a proxy that ends TLS: the browser still sent this Host).
func sameOrigin(r *http.Request, origin string) bool {
	scheme, host, ok := strings.Cut(origin, "://")
	if !ok || !strings.EqualFold(host, r.Host) {
		return false
	}
	return scheme == "https" || (scheme == "http" && r.TLS == nil)
}

// ownOrigin is surgepay's origin as the browser reaches it: the Origin of
// the frame's own request (right behind a proxy too), else the request's
// scheme and Host.
func ownOrigin(r *http.Request) string {
	if o := r.Header.Get("Origin"); o != "" && surgepay.ValidOrigin(o) && sameOrigin(r, o) {
		return o
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if o := scheme + "://" + strings.ToLower(r.Host); surgepay.ValidOrigin(o) {
		return o
	}
	return ""
}

// checkoutReturn is the shopper's way back from a processor's 3-D Secure
// page: the outcome is recorded (engine.ReturnFromAction), then the
// shopper goes on to the merchant's return_url with the payment's ID and
// status added (surgepay_payment, redirect_status), or, without one, is
// told to go back to the shop. The merchant's page must read the payment
// (its server with the secret key, or surgepay.js), never trust the query.
func (s *Server) checkoutReturn(w http.ResponseWriter, r *http.Request) {
	p, back, err := s.eng.ReturnFromAction(r.Context(), r.PathValue("token"))
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	if err != nil || p == nil {
		h.Set("Content-Security-Policy", "default-src 'none'")
		h.Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte("This return address is not valid or has expired. Go back to the shop and check your order.\n"))
		return
	}
	if u, perr := url.Parse(back); back != "" && perr == nil {
		q := u.Query()
		q.Set("surgepay_payment", p.ID)
		q.Set("redirect_status", redirectStatus(p.Status))
		u.RawQuery = q.Encode()
		http.Redirect(w, r, u.String(), http.StatusSeeOther)
		return
	}
	h.Set("Content-Security-Policy", "default-src 'none'")
	h.Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("Authentication finished. You can go back to the shop.\n"))
}

// redirectStatus is the outcome a return from authentication reports to
// the merchant's page: succeeded (authorized), failed (the shopper must
// pay again), or processing (not known yet).
func redirectStatus(s surgepay.Status) string {
	switch s {
	case surgepay.StatusSucceeded, surgepay.StatusRequiresCapture:
		return "succeeded"
	case surgepay.StatusRequiresPaymentMethod, surgepay.StatusCanceled, surgepay.StatusFailed:
		return "failed"
	}
	return "processing"
}

// checkoutClient takes a request of a publishable key from its client
// address's bucket: a publishable key is public, so its requests are
// limited by key and client address as well as by the merchant's
// rate_limit (checkout_client_rate; behind a proxy, the address its
// X-Forwarded-For names if it is one of TrustedProxies: clientAddr).
// ERATELIMIT when it is empty.
func (s *Server) checkoutClient(r *http.Request, merchantID, keyID string) error {
	host := clientAddr(r, s.cfg.TrustedProxies)
	set := s.eng.SettingsFor(merchantID)
	limit, burst := set.CheckoutClientLimit()
	wait, ok := s.clientLimits.take(keyID+"\x00"+host, rate.Limit(limit), burst)
	if ok {
		return nil
	}
	return &surgepay.Error{Code: surgepay.ERATELIMIT, Reason: "rate_limited", RetryAfter: max(1, int((wait+time.Second-1)/time.Second)),
		Message: "too many checkout requests from this address; retry shortly"}
}

type checkoutPaymentMethodRequest struct {
	Card           *cardRequest `json:"card"`
	BillingDetails *billingJSON `json:"billing_details"`
}

func (s *Server) checkoutPaymentMethod(w http.ResponseWriter, r *http.Request, call *engine.Call) error {
	b, err := s.body(w, r, call)
	if err != nil {
		return err
	}
	var req checkoutPaymentMethodRequest
	if err := decode(b, &req); err != nil {
		return err
	}
	if req.Card == nil {
		return surgepay.Invalid("card", "missing", "card is required")
	}
	in := surgepay.CardInput{Number: surgepay.PAN(req.Card.Number), ExpMonth: req.Card.ExpMonth,
		ExpYear: req.Card.ExpYear, CVC: surgepay.CVC(req.Card.CVC)}
	if req.BillingDetails != nil {
		in.Name = req.BillingDetails.Name
	}
	pm, err := s.eng.CreateCheckoutPaymentMethod(r.Context(), call, in)
	return s.write(w, r, call, pm, err)
}

type confirmRequest struct {
	ClientSecret  string `json:"client_secret"`
	PaymentMethod string `json:"payment_method"`
	CVC           string `json:"cvc"`
	ReturnURL     string `json:"return_url"`
}

func (s *Server) checkoutConfirm(w http.ResponseWriter, r *http.Request, call *engine.Call) error {
	b, err := s.body(w, r, call)
	if err != nil {
		return err
	}
	var req confirmRequest
	if err := decode(b, &req); err != nil {
		return err
	}
	call.Render = renderCheckout
	p, err := s.eng.ConfirmPayment(r.Context(), call, r.PathValue("id"), &engine.ConfirmInput{ClientSecret: req.ClientSecret,
		PaymentMethodID: req.PaymentMethod, CVC: surgepay.CVC(req.CVC), ReturnURL: req.ReturnURL, ReturnBase: ownOrigin(r)})
	return s.write(w, r, call, checkoutView(p), notFoundParam(err, "id"))
}

func (s *Server) checkoutPayment(w http.ResponseWriter, r *http.Request, call *engine.Call) error {
	p, err := s.eng.CheckoutPayment(r.Context(), call, r.PathValue("id"), r.URL.Query().Get("client_secret"))
	return s.write(w, r, nil, checkoutView(p), notFoundParam(err, "id"))
}

// checkoutPaymentJSON is what a browser holding a client secret sees of
// its payment: its state, amount and card, never the merchant's
// description, metadata, customer or transactions.
type checkoutPaymentJSON struct {
	ID            string `json:"id"`
	Object        string `json:"object"`
	Status        string `json:"status"`
	Amount        int64  `json:"amount"` // the total, tax included
	Currency      string `json:"currency"`
	CaptureMethod string `json:"capture_method"`
	PaymentMethod string `json:"payment_method"`
	// LastPaymentError is the decline of the last confirm, while the
	// payment awaits another card.
	LastPaymentError *lastPaymentErrorJSON `json:"last_payment_error,omitempty"`
	// NextAction, while requires_action, is the shopper's authentication.
	NextAction *nextActionJSON `json:"next_action,omitempty"`
	Created    int64           `json:"created"`
}

type nextActionJSON struct {
	Type          string            `json:"type"` // "redirect_to_url"
	RedirectToURL redirectToURLJSON `json:"redirect_to_url"`
}

type redirectToURLJSON struct {
	URL       string `json:"url"`
	ReturnURL string `json:"return_url,omitempty"`
}

type lastPaymentErrorJSON struct {
	Code        string `json:"code"`
	DeclineCode string `json:"decline_code,omitempty"`
	Message     string `json:"message"`
}

// checkoutView returns the browser's view of p; nil for nil.
func checkoutView(p *surgepay.Payment) *checkoutPaymentJSON {
	if p == nil {
		return nil
	}
	v := &checkoutPaymentJSON{ID: p.ID, Object: "payment", Status: string(p.Status), Amount: p.AmountTotal(),
		Currency: p.Currency, CaptureMethod: p.CaptureMethod, PaymentMethod: p.PaymentMethodID, Created: p.Created.Unix()}
	if p.Status == surgepay.StatusRequiresPaymentMethod && p.DeclineCode != "" {
		v.LastPaymentError = &lastPaymentErrorJSON{Code: "card_declined", DeclineCode: p.DeclineCode, Message: p.FailureMessage}
	}
	if p.Status == surgepay.StatusRequiresAction && p.Pending != nil && p.Pending.ActionURL != "" {
		v.NextAction = &nextActionJSON{Type: "redirect_to_url",
			RedirectToURL: redirectToURLJSON{URL: p.Pending.ActionURL, ReturnURL: p.Pending.ReturnURL}}
	}
	return v
}

// renderCheckout renders a confirm's answer, stored for an idempotent
// replay: the browser's view of a payment, not the merchant's.
func renderCheckout(v any, err error) (int, []byte) {
	if p, ok := v.(*surgepay.Payment); ok {
		v = checkoutView(p)
	}
	return render(v, err)
}
