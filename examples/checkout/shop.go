package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/webhook"
)

// Limits of the shop. Orders live in memory: this is an example, and a
// real shop keeps them in its database.
const (
	// OrdersMax is how many orders the shop keeps; beyond it POST
	// /checkout answers 503 and the shopper is asked to come back later.
	OrdersMax = 10_000
	// EventsPerOrderMax is how many webhook events an order keeps; later
	// ones are acknowledged and not shown.
	EventsPerOrderMax = 32
	// WebhookBodyBytesMax bounds a webhook's body (an event is about 1.5 KB).
	WebhookBodyBytesMax = 64 << 10
	// WebhookTolerance is how old (or how far in the future) a webhook's
	// signed timestamp may be: an older one is a replay and refused.
	WebhookTolerance = 5 * time.Minute
	// FormBytesMax bounds the Buy form's body.
	FormBytesMax = 4 << 10
	// APIAnswerBytesMax bounds an answer read from surgepay.
	APIAnswerBytesMax = 1 << 20
	// APITimeout bounds one call to surgepay's API.
	APITimeout = 15 * time.Second
)

// Product is a thing the shop sells, priced in integer minor units.
type Product struct {
	ID, Name    string
	AmountMinor int64
	Currency    string // ISO 4217, lower case
}

// Price is the product's price for people, e.g. "20.00 USD".
func (p Product) Price() string { return formatMoney(p.AmountMinor, p.Currency) }

// products is the catalogue, in display order.
var products = []Product{
	{ID: "mug", Name: "Blue mug", AmountMinor: 2000, Currency: "usd"},
	{ID: "tea", Name: "Sencha, 100 g", AmountMinor: 1250, Currency: "eur"},
	{ID: "wrap", Name: "Furoshiki wrap", AmountMinor: 1800, Currency: "jpy"},
}

func productByID(id string) (Product, bool) {
	for _, p := range products {
		if p.ID == id {
			return p, true
		}
	}
	return Product{}, false
}

// formatMoney writes amount minor units of currency with the currency's
// number of decimals: 2000 usd is "20.00 USD", 1800 jpy "1800 JPY".
func formatMoney(amount int64, currency string) string {
	c, ok := surgepay.LookupCurrency(currency)
	code := strings.ToUpper(currency)
	if !ok || c.Exponent == 0 {
		return fmt.Sprintf("%d %s", amount, code)
	}
	sign := ""
	if amount < 0 {
		sign, amount = "-", -amount
	}
	unit := int64(1)
	for range c.Exponent {
		unit *= 10
	}
	return fmt.Sprintf("%s%d.%0*d %s", sign, amount/unit, c.Exponent, amount%unit, code)
}

// Config configures a Shop. API, SecretKey, PublishableKey and
// WebhookSecret are required.
type Config struct {
	// API is surgepay's base URL, e.g. http://127.0.0.1:8080: the shop's
	// server calls it, and the pay page loads surgepay.js from it.
	API            string
	SecretKey      string // sk_…: server side only, never in a page
	PublishableKey string // pk_…: safe in a page
	WebhookSecret  string // whsec_…: verifies surgepay's webhooks
	// Client calls the API. Default: a client with APITimeout.
	Client *http.Client
	Logger *slog.Logger // default: discard
}

// Shop is the example merchant's web server. Safe for concurrent use.
type Shop struct {
	cfg    Config
	origin string // the API's origin, for the CSP
	csp    string
	orders orders
}

// newShop checks cfg and returns a Shop.
func newShop(cfg Config) (*Shop, error) {
	u, err := url.Parse(cfg.API)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("the API URL %q must be an absolute http or https URL", cfg.API)
	}
	for name, v := range map[string]string{"SHOP_SECRET_KEY": cfg.SecretKey, "SHOP_PUBLISHABLE_KEY": cfg.PublishableKey,
		"SHOP_WEBHOOK_SECRET": cfg.WebhookSecret} {
		if v == "" {
			return nil, fmt.Errorf("%s is required", name)
		}
	}
	if !strings.HasPrefix(cfg.PublishableKey, "pk_") {
		return nil, errors.New("SHOP_PUBLISHABLE_KEY must be a publishable key (pk_…): it goes into the page")
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: APITimeout}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	origin := u.Scheme + "://" + u.Host
	cfg.API = origin + strings.TrimSuffix(u.Path, "/")
	return &Shop{cfg: cfg, origin: origin, orders: orders{byID: map[string]*order{}},
		csp: "default-src 'self'; script-src 'self' " + origin + "; frame-src " + origin +
			"; connect-src 'self'; style-src 'self'; img-src 'self' data:; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"}, nil
}

//go:embed static templates
var files embed.FS

var pages = template.Must(template.ParseFS(files, "templates/*.html"))

// Handler returns the shop's routes.
func (s *Shop) Handler() http.Handler {
	static, _ := fs.Sub(files, "static")
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.productsPage)
	// A cross-site form cannot create orders (Sec-Fetch-Site, Origin).
	mux.Handle("POST /checkout", http.NewCrossOriginProtection().Handler(http.HandlerFunc(s.checkout)))
	mux.HandleFunc("GET /pay/{order}", s.payPage)
	mux.HandleFunc("GET /orders/{order}", s.orderPage)
	mux.HandleFunc("POST /webhooks", s.webhook)
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", s.csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		mux.ServeHTTP(w, r)
	})
}

func (s *Shop) render(w http.ResponseWriter, status int, name string, data any) {
	var b bytes.Buffer
	if err := pages.ExecuteTemplate(&b, name, data); err != nil {
		s.cfg.Logger.Error("render", "page", name, "err", err.Error())
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(b.Bytes())
}

// fail shows the shopper an error page; the detail goes to the log.
func (s *Shop) fail(w http.ResponseWriter, status int, message string, err error) {
	if err != nil {
		s.cfg.Logger.Warn(message, "err", err.Error())
	}
	s.render(w, status, "error.html", map[string]any{"Title": http.StatusText(status), "Message": message})
}

func (s *Shop) productsPage(w http.ResponseWriter, r *http.Request) {
	s.render(w, http.StatusOK, "products.html", map[string]any{"Title": "Products", "Products": products})
}

// checkout makes the order and its payment, without a card, then sends
// the shopper to the pay page.
func (s *Shop) checkout(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, FormBytesMax)
	p, ok := productByID(r.PostFormValue("product"))
	if !ok {
		s.fail(w, http.StatusBadRequest, "There is no such product.", nil)
		return
	}
	o, err := s.orders.add(p)
	if err != nil {
		s.fail(w, http.StatusServiceUnavailable, "The shop is busy: please try again later.", err)
		return
	}
	body := map[string]any{"amount": p.AmountMinor, "currency": p.Currency, "description": p.Name,
		"metadata": map[string]string{"order": o.ID}}
	// One key per order: a retry of this call cannot make a second payment.
	pay, err := s.api(r.Context(), "POST", "/v1/payments", body, "shop-"+o.ID)
	if err != nil {
		// Had surgepay made the payment before the answer was lost, it
		// stays awaiting a card that never comes: nothing is charged.
		s.orders.remove(o.ID)
		s.fail(w, http.StatusBadGateway, "We could not start the payment: please try again.", err)
		return
	}
	s.orders.setPayment(o.ID, pay.ID)
	http.Redirect(w, r, "/pay/"+o.ID, http.StatusSeeOther)
}

// payPage shows the card form for an order awaiting payment, with the
// last card's decline if there was one, or, while the bank waits for the
// shopper to authenticate (3-D Secure), the way back to the bank's page.
// The client secret is read fresh from surgepay each time; an order no
// longer awaiting the shopper goes to its order page (the back button
// after paying).
func (s *Shop) payPage(w http.ResponseWriter, r *http.Request) {
	o, pay, ok := s.orderAndPayment(w, r)
	if !ok {
		return
	}
	if !awaiting(pay.Status) || pay.ClientSecret == "" {
		http.Redirect(w, r, "/orders/"+o.ID, http.StatusSeeOther)
		return
	}
	w.Header().Set("Cache-Control", "no-store") // the page holds a client secret
	scripts := []string{s.origin + "/checkout/v1/surgepay.js", "/static/shop.js"}
	// While the bank waits for the shopper (requires_action, 3-D Secure)
	// the payment takes no card: the page offers the way back to the
	// bank's page instead of the Pay button (shop.js asks surgepay.js
	// where it is: only the browser's view of the payment says).
	s.render(w, http.StatusOK, "pay.html", map[string]any{"Title": "Pay", "Order": o, "Scripts": scripts,
		"Total": formatMoney(pay.AmountTotal, pay.Currency), "ClientSecret": pay.ClientSecret, "PublishableKey": s.cfg.PublishableKey,
		"Status": pay.Status, "Authenticating": pay.Status == "requires_action", "LastDecline": lastDecline(pay)})
}

// orderPage shows the order's state as surgepay has it (never as the
// browser says), and the webhooks received for it.
func (s *Shop) orderPage(w http.ResponseWriter, r *http.Request) {
	o, pay, ok := s.orderAndPayment(w, r)
	if !ok {
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	s.render(w, http.StatusOK, "order.html", map[string]any{"Title": "Your order", "Order": o,
		"Total": formatMoney(pay.AmountTotal, pay.Currency), "State": stateOf(pay.Status), "Status": pay.Status,
		"Refresh": pay.Status == "processing", "Awaiting": awaiting(pay.Status),
		"Authenticating": pay.Status == "requires_action", "LastDecline": lastDecline(pay)})
}

// lastDecline says in words why the last card did not pay, while the
// payment awaits another; "" if none did. The decline codes are
// surgepay's (provider.go); an unknown one shows the processor's message.
func lastDecline(p *payment) string {
	if p.Status != "requires_payment_method" || p.DeclineCode == "" {
		return ""
	}
	switch p.DeclineCode {
	case "authentication_failed":
		return "Your bank did not confirm the payment (3-D Secure authentication failed or was not finished), so nothing was charged."
	case "authentication_unavailable":
		return "Your bank's authentication service could not be reached, so nothing was charged."
	case "authentication_required":
		return "Your bank asked to confirm the payment and it could not be, so nothing was charged."
	case "insufficient_funds":
		return "Your card was declined: insufficient funds."
	case "expired_card":
		return "Your card has expired."
	case "incorrect_cvc":
		return "Your card's security code was incorrect."
	case "processing_error":
		return "Your bank could not process the card, so nothing was charged."
	case "generic_decline", "lost_card", "stolen_card":
		return "Your card was declined."
	}
	if p.FailureMessage != "" {
		return "Your card was declined: " + strings.TrimSuffix(p.FailureMessage, ".") + "."
	}
	return "Your card was declined."
}

// orderAndPayment returns the order named in the path and its payment
// read from surgepay; it answers the request itself when it cannot.
func (s *Shop) orderAndPayment(w http.ResponseWriter, r *http.Request) (order, *payment, bool) {
	o, ok := s.orders.get(r.PathValue("order"))
	if !ok || o.PaymentID == "" {
		s.fail(w, http.StatusNotFound, "There is no such order.", nil)
		return order{}, nil, false
	}
	pay, err := s.api(r.Context(), "GET", "/v1/payments/"+o.PaymentID, nil, "")
	if err != nil {
		s.fail(w, http.StatusBadGateway, "We could not read the payment: please reload the page.", err)
		return order{}, nil, false
	}
	return o, pay, true
}

// awaiting reports whether a payment still waits for the shopper.
func awaiting(status string) bool {
	return status == "requires_payment_method" || status == "requires_action"
}

// stateOf is what the order page says of a payment's status.
func stateOf(status string) string {
	switch status {
	case "succeeded":
		return "Paid"
	case "requires_capture":
		return "Authorized"
	case "processing":
		return "Processing"
	case "requires_payment_method", "requires_action":
		return "Awaiting payment"
	case "partially_refunded", "refunded":
		return "Refunded"
	case "canceled":
		return "Canceled"
	}
	return "Failed"
}

// webhook receives surgepay's events: it checks the signature on the raw
// body, records the event against its order once (deliveries repeat),
// and answers at once. Events of payments that are not the shop's are
// acknowledged and ignored, so that surgepay does not retry them.
func (s *Shop) webhook(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, WebhookBodyBytesMax))
	if err != nil {
		http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
		return
	}
	err = webhook.Verify([]byte(s.cfg.WebhookSecret), r.Header.Get(webhook.HeaderSignature), body, WebhookTolerance, time.Now())
	if err != nil {
		s.cfg.Logger.Warn("webhook refused", "err", err.Error())
		http.Error(w, "bad signature", http.StatusBadRequest)
		return
	}
	var ev event
	if err := json.Unmarshal(body, &ev); err != nil || ev.ID == "" {
		http.Error(w, "bad event", http.StatusBadRequest)
		return
	}
	p := ev.Data.Object
	s.orders.record(p.Metadata["order"], p.ID, received{EventID: ev.ID, Type: ev.Type,
		Created: time.Unix(ev.Created, 0).UTC(), Status: p.Status})
	w.WriteHeader(http.StatusOK)
}

// event is what the shop reads of a webhook's body (docs/webhooks.md).
type event struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Created int64  `json:"created"`
	Data    struct {
		Object payment `json:"object"`
	} `json:"data"`
}

// payment is what the shop reads of a surgepay payment.
type payment struct {
	ID           string `json:"id"`
	Status       string `json:"status"`
	AmountTotal  int64  `json:"amount_total"`
	Currency     string `json:"currency"`
	ClientSecret string `json:"client_secret"`
	// DeclineCode and FailureMessage are the last card's decline, while
	// the payment awaits another (lastDecline).
	DeclineCode    string            `json:"decline_code"`
	FailureMessage string            `json:"failure_message"`
	Metadata       map[string]string `json:"metadata"`
}

// apiError is an error answer of surgepay's API.
type apiError struct {
	Status int
	Code   string `json:"code"`
	Msg    string `json:"message"`
}

func (e *apiError) Error() string {
	return fmt.Sprintf("surgepay: HTTP %d %s: %s", e.Status, e.Code, e.Msg)
}

// api calls surgepay with the secret key and returns the payment it
// answers. A POST carries idempotencyKey.
func (s *Shop) api(ctx context.Context, method, path string, body any, idempotencyKey string) (*payment, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.cfg.API+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+s.cfg.SecretKey)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", idempotencyKey)
	}
	res, err := s.cfg.Client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer res.Body.Close() //nolint:errcheck // read-only: closing loses nothing
	b, err := io.ReadAll(io.LimitReader(res.Body, APIAnswerBytesMax))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if res.StatusCode != http.StatusOK {
		var e struct{ Error apiError }
		json.Unmarshal(b, &e) //nolint:errcheck // the status says enough
		e.Error.Status = res.StatusCode
		return nil, fmt.Errorf("%s %s: %w", method, path, &e.Error)
	}
	var p payment
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	return &p, nil
}

// order is one purchase. Its fields change under orders.mu only; get
// returns a copy.
type order struct {
	ID        string
	Product   Product
	PaymentID string // empty while the payment is being made
	Created   time.Time
	Events    []received // verified webhooks, in the order they came
}

// received is one webhook event the shop verified and recorded.
type received struct {
	EventID, Type, Status string
	Created               time.Time // when surgepay made the event
}

// orders is the shop's in-memory order book. Safe for concurrent use.
type orders struct {
	mu   sync.Mutex
	byID map[string]*order
}

var errOrdersFull = fmt.Errorf("%d orders kept: OrdersMax reached", OrdersMax)

// add makes a new order for p; errOrdersFull past OrdersMax.
func (b *orders) add(p Product) (order, error) {
	var id [16]byte
	rand.Read(id[:])
	o := &order{ID: "ord_" + hex.EncodeToString(id[:]), Product: p, Created: time.Now()}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.byID) >= OrdersMax {
		return order{}, errOrdersFull
	}
	b.byID[o.ID] = o
	return *o, nil
}

func (b *orders) remove(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.byID, id)
}

func (b *orders) setPayment(id, paymentID string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if o := b.byID[id]; o != nil {
		o.PaymentID = paymentID
	}
}

// get returns a copy of an order.
func (b *orders) get(id string) (order, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	o := b.byID[id]
	if o == nil {
		return order{}, false
	}
	c := *o
	c.Events = append([]received(nil), o.Events...)
	return c, true
}

// record adds an event to the order orderID whose payment is paymentID,
// unless it has it already. The order is found by the payment's
// metadata: an event can arrive before setPayment.
func (b *orders) record(orderID, paymentID string, ev received) {
	b.mu.Lock()
	defer b.mu.Unlock()
	o := b.byID[orderID]
	if o == nil || (o.PaymentID != "" && o.PaymentID != paymentID) || len(o.Events) >= EventsPerOrderMax {
		return
	}
	for _, e := range o.Events {
		if e.EventID == ev.EventID {
			return
		}
	}
	o.Events = append(o.Events, ev)
}
