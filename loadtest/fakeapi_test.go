package loadtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// fakeAPI is a stub of the payments API: just the routes the scenarios
// call, canned JSON, and a log of the requests it saw. Safe for concurrent use.
type fakeAPI struct {
	mu        sync.Mutex
	seq       int
	log       []string
	keys      map[string]bool
	dupKeys   int
	noKeys    int
	customers map[string]bool
	cards     map[string]string // payment method → card number
	payments  map[string]*fakePayment
	secrets   map[string]string // payment awaiting a card → its client secret
	// captureStatus, when set, is the status capture answers: a bug the
	// scenario checks must catch.
	captureStatus string
}

type fakePayment struct {
	ID             string `json:"id"`
	Object         string `json:"object"`
	Status         string `json:"status"`
	Amount         int64  `json:"amount"`
	AmountCaptured int64  `json:"amount_captured"`
	AmountRefunded int64  `json:"amount_refunded"`
	PaymentMethod  string `json:"payment_method,omitempty"`
}

// fakeAPIKey is the secret key; fakePublishableKey the publishable one,
// which the fake takes on the /v1/checkout/ routes only, and only it: a
// real server lets a full-access secret key call them too, but a scenario
// that sent it there would not be measuring the browser's calls.
const (
	fakeAPIKey         = "sk_test_fake"
	fakePublishableKey = "pk_test_fake"
)

func newFakeAPI(t *testing.T) (*fakeAPI, *httptest.Server) {
	f := &fakeAPI{keys: map[string]bool{}, customers: map[string]bool{}, cards: map[string]string{},
		payments: map[string]*fakePayment{}, secrets: map[string]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/customers", f.createCustomer)
	mux.HandleFunc("GET /v1/customers", f.listCustomers)
	mux.HandleFunc("GET /v1/customers/{id}", f.customer)
	mux.HandleFunc("POST /v1/customers/{id}", f.customer)
	mux.HandleFunc("DELETE /v1/customers/{id}", f.deleteCustomer)
	mux.HandleFunc("POST /v1/payment_methods", f.createPaymentMethod)
	mux.HandleFunc("POST /v1/payments", f.createPayment)
	mux.HandleFunc("POST /v1/payments/{id}/capture", f.capture)
	mux.HandleFunc("POST /v1/payments/{id}/refunds", f.refund)
	mux.HandleFunc("POST /v1/checkout/payment_methods", f.checkoutPaymentMethod)
	mux.HandleFunc("POST /v1/checkout/payments/{id}/confirm", f.confirm)
	srv := httptest.NewServer(f.middleware(mux))
	t.Cleanup(srv.Close)
	return f, srv
}

// middleware checks auth and idempotency keys and logs "METHOD /path".
func (f *fakeAPI) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := fakeAPIKey
		if strings.HasPrefix(r.URL.Path, "/v1/checkout/") {
			key = fakePublishableKey
		}
		if r.Header.Get("Authorization") != "Bearer "+key {
			writeError(w, 401, "invalid_request_error", "unauthorized", "")
			return
		}
		f.mu.Lock()
		f.log = append(f.log, r.Method+" "+r.URL.Path)
		if r.Method == http.MethodPost {
			key := r.Header.Get("Idempotency-Key")
			switch {
			case key == "":
				f.noKeys++
			case f.keys[key]:
				f.dupKeys++
			}
			f.keys[key] = true
		}
		f.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

func (f *fakeAPI) id(prefix string) string {
	f.seq++
	return prefix + strconv.Itoa(f.seq)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // a client gone away is no error of the fake's
}

func writeError(w http.ResponseWriter, status int, typ, code, payment string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{
		"type": typ, "code": code, "message": code, "param": "", "decline_code": "generic_decline", "payment": payment,
	}})
}

func (f *fakeAPI) createCustomer(w http.ResponseWriter, r *http.Request) {
	var body struct{ Name, Email string }
	if json.NewDecoder(r.Body).Decode(&body) != nil || body.Email == "" {
		writeError(w, 400, "invalid_request_error", "parameter_missing", "")
		return
	}
	f.mu.Lock()
	id := f.id("cus_")
	f.customers[id] = true
	f.mu.Unlock()
	writeJSON(w, 200, map[string]any{"id": id, "object": "customer", "name": body.Name, "email": body.Email})
}

func (f *fakeAPI) customer(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	f.mu.Lock()
	ok := f.customers[id]
	f.mu.Unlock()
	if !ok {
		writeError(w, 404, "invalid_request_error", "resource_missing", "")
		return
	}
	writeJSON(w, 200, map[string]any{"id": id, "object": "customer"})
}

func (f *fakeAPI) listCustomers(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("limit") == "" {
		writeError(w, 400, "invalid_request_error", "parameter_missing", "")
		return
	}
	writeJSON(w, 200, map[string]any{"object": "list", "data": []any{map[string]any{"id": "cus_1", "object": "customer"}}, "has_more": true})
}

func (f *fakeAPI) deleteCustomer(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	f.mu.Lock()
	ok := f.customers[id]
	delete(f.customers, id)
	f.mu.Unlock()
	if !ok {
		writeError(w, 404, "invalid_request_error", "resource_missing", "")
		return
	}
	writeJSON(w, 200, map[string]any{"id": id, "object": "customer", "deleted": true})
}

func (f *fakeAPI) createPaymentMethod(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Customer string
		Card     struct{ Number string }
	}
	_ = json.NewDecoder(r.Body).Decode(&body) // a malformed body stays zero, which the checks below refuse
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.customers[body.Customer] || len(body.Card.Number) != 16 {
		writeError(w, 400, "invalid_request_error", "parameter_invalid", "")
		return
	}
	id := f.id("pm_")
	f.cards[id] = body.Card.Number
	writeJSON(w, 200, map[string]any{"id": id, "object": "payment_method", "card": map[string]any{"brand": "visa", "last4": body.Card.Number[12:]}})
}

func (f *fakeAPI) createPayment(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Amount        int64
		Currency      string
		Customer      string
		PaymentMethod string `json:"payment_method"`
		CaptureMethod string `json:"capture_method"`
	}
	_ = json.NewDecoder(r.Body).Decode(&body) // a malformed body stays zero, which the checks below refuse
	f.mu.Lock()
	defer f.mu.Unlock()
	if body.PaymentMethod == "" && body.Customer == "" && body.Currency == "usd" && body.Amount > 0 {
		// For the browser: it awaits a card, with a client secret.
		p := &fakePayment{ID: f.id("pay_"), Object: "payment", Amount: body.Amount, Status: "requires_payment_method"}
		f.payments[p.ID] = p
		f.secrets[p.ID] = p.ID + "_secret_" + strconv.Itoa(f.seq)
		writeJSON(w, 200, struct {
			*fakePayment
			ClientSecret string `json:"client_secret"`
		}{p, f.secrets[p.ID]})
		return
	}
	card, ok := f.cards[body.PaymentMethod]
	if !ok || body.Currency != "usd" || body.Amount <= 0 {
		writeError(w, 400, "invalid_request_error", "parameter_invalid", "")
		return
	}
	p := &fakePayment{ID: f.id("pay_"), Object: "payment", Amount: body.Amount, Status: "succeeded", AmountCaptured: body.Amount}
	f.payments[p.ID] = p
	if card != testCards["success"].number {
		p.Status, p.AmountCaptured = "failed", 0
		writeError(w, 402, "card_error", "card_declined", p.ID)
		return
	}
	if body.CaptureMethod == "manual" {
		p.Status, p.AmountCaptured = "requires_capture", 0
	}
	writeJSON(w, 200, p)
}

func (f *fakeAPI) capture(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.payments[r.PathValue("id")]
	if !ok || p.Status != "requires_capture" {
		writeError(w, 400, "invalid_request_error", "payment_unexpected_state", "")
		return
	}
	p.Status, p.AmountCaptured = "succeeded", p.Amount
	if f.captureStatus != "" {
		p.Status = f.captureStatus
	}
	writeJSON(w, 200, p)
}

func (f *fakeAPI) refund(w http.ResponseWriter, r *http.Request) {
	var body struct{ Amount int64 }
	_ = json.NewDecoder(r.Body).Decode(&body) // the load test sends well-formed bodies; a malformed one stays zero
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.payments[r.PathValue("id")]
	if !ok || p.Status == "refunded" {
		writeError(w, 400, "invalid_request_error", "payment_unexpected_state", "")
		return
	}
	if body.Amount == 0 {
		body.Amount = p.Amount - p.AmountRefunded
	}
	p.AmountRefunded += body.Amount
	p.Status = "partially_refunded"
	if p.AmountRefunded == p.Amount {
		p.Status = "refunded"
	}
	writeJSON(w, 200, p)
}

// checkoutPaymentMethod saves a guest card, as the card frame does.
func (f *fakeAPI) checkoutPaymentMethod(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Customer string
		Card     struct {
			Number string
			CVC    string
		}
	}
	_ = json.NewDecoder(r.Body).Decode(&body) // a malformed body stays zero, which the checks below refuse
	f.mu.Lock()
	defer f.mu.Unlock()
	if body.Customer != "" || len(body.Card.Number) != 16 || body.Card.CVC == "" {
		writeError(w, 400, "invalid_request_error", "parameter_invalid", "")
		return
	}
	id := f.id("pm_")
	f.cards[id] = body.Card.Number
	writeJSON(w, 200, map[string]any{"id": id, "object": "payment_method", "card": map[string]any{"brand": "visa", "last4": body.Card.Number[12:]}})
}

// confirm authorizes a payment awaiting a card with the card its client
// secret's holder saved; a decline leaves it awaiting another.
func (f *fakeAPI) confirm(w http.ResponseWriter, r *http.Request) {
	var body struct {
		ClientSecret  string `json:"client_secret"`
		PaymentMethod string `json:"payment_method"`
	}
	_ = json.NewDecoder(r.Body).Decode(&body) // a malformed body stays zero, which the checks below refuse
	f.mu.Lock()
	defer f.mu.Unlock()
	id := r.PathValue("id")
	p, ok := f.payments[id]
	card, known := f.cards[body.PaymentMethod]
	switch {
	case !ok || body.ClientSecret != f.secrets[id]:
		writeError(w, 401, "invalid_request_error", "client_secret_invalid", "")
		return
	case !known:
		writeError(w, 400, "invalid_request_error", "parameter_invalid", "")
		return
	case p.Status != "requires_payment_method":
		writeError(w, 409, "invalid_request_error", "payment_unexpected_state", "")
		return
	case card != testCards["success"].number:
		writeError(w, 402, "card_error", "card_declined", p.ID)
		return
	}
	p.Status, p.AmountCaptured, p.PaymentMethod = "succeeded", p.Amount, body.PaymentMethod
	writeJSON(w, 200, p)
}

// takeLog returns the request log with IDs replaced by "{id}" and clears it.
func (f *fakeAPI) takeLog() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, len(f.log))
	for i, l := range f.log {
		parts := strings.Split(l, "/")
		for j, p := range parts {
			if strings.Contains(p, "_") && strings.IndexAny(p, "0123456789") > 0 {
				parts[j] = "{id}"
			}
		}
		out[i] = strings.Join(parts, "/")
	}
	f.log = f.log[:0]
	return out
}

func (f *fakeAPI) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return fmt.Sprintf("fakeAPI{requests: %d, dupKeys: %d, noKeys: %d}", len(f.log), f.dupKeys, f.noKeys)
}
