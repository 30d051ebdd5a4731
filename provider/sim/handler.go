package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/surgepay/surgepay"
)

// BodyBytesMax bounds every request body the handler reads and every
// response body the client reads.
const BodyBytesMax = 64 << 10

// HeaderIdempotencyKey carries the idempotency key of an operation. Its
// name also tells Go's HTTP client that a POST may be replayed on a fresh
// connection when a reused one turns out to be closed.
const HeaderIdempotencyKey = "Idempotency-Key"

// Outcomes in the JSON error body.
const (
	outcomeNotPerformed = surgepay.NotPerformed
	outcomeUnknown      = surgepay.Unknown
)

// Wire types. Card data travels only in authorizeBody, to the simulator,
// and is never echoed back or written into an error.
type (
	cardBody struct {
		Number   string `json:"number"`
		ExpMonth int    `json:"exp_month"`
		ExpYear  int    `json:"exp_year"`
		CVC      string `json:"cvc,omitempty"`
	}
	authorizeBody struct {
		MerchantID string   `json:"merchant_id,omitempty"`
		PaymentID  string   `json:"payment_id,omitempty"`
		Amount     int64    `json:"amount"`
		Currency   string   `json:"currency"`
		Card       cardBody `json:"card"`
		Capture    bool     `json:"capture,omitempty"`
		ReturnURL  string   `json:"return_url,omitempty"`
	}
	// refBody is a capture, void or refund.
	refBody struct {
		AuthorizationRef string `json:"authorization_ref"`
		Amount           int64  `json:"amount,omitempty"`
		Currency         string `json:"currency,omitempty"`
	}
	resultBody struct {
		Approved    bool   `json:"approved"`
		Reference   string `json:"reference"`
		DeclineCode string `json:"decline_code,omitempty"`
		Message     string `json:"message,omitempty"`
		Amount      int64  `json:"amount"`
		Operation   string `json:"operation"`
		Captured    bool   `json:"captured,omitempty"`
		PaymentID   string `json:"payment_id,omitempty"`
		// RequiresAction and ActionURL: a 3-D Secure challenge waits.
		RequiresAction bool   `json:"requires_action,omitempty"`
		ActionURL      string `json:"action_url,omitempty"`
	}
	errorBody struct {
		Outcome string `json:"outcome,omitempty"` // not_performed or unknown; empty for admin errors.
		Code    string `json:"code,omitempty"`
		Error   string `json:"error"`
	}
)

func toResultBody(r *surgepay.ProviderResult) resultBody {
	return resultBody{Approved: r.Approved, Reference: r.Reference, DeclineCode: r.DeclineCode,
		Message: r.Message, Amount: r.Amount, Operation: r.Operation, Captured: r.Captured, PaymentID: r.PaymentID,
		RequiresAction: r.RequiresAction, ActionURL: r.ActionURL}
}

func (b *resultBody) result() *surgepay.ProviderResult {
	return &surgepay.ProviderResult{Approved: b.Approved, Reference: b.Reference, DeclineCode: b.DeclineCode,
		Message: b.Message, Amount: b.Amount, Operation: b.Operation, Captured: b.Captured, PaymentID: b.PaymentID,
		RequiresAction: b.RequiresAction, ActionURL: b.ActionURL}
}

type handler struct{ p *Provider }

// NewHandler returns the simulator's HTTP API for p:
//
//	POST /v1/authorize, /v1/capture, /v1/void, /v1/refund   operations; key in the Idempotency-Key header
//	GET  /v1/operations/{key}                               Lookup (key path-escaped)
//	GET  /v1/config, PUT /v1/config                         run-time Config (PUT merges the fields sent)
//	GET  /v1/effects?payment=ID                             Effects of one payment; without payment, Totals
//	POST /v1/reset                                          Reset
//	GET  /healthz                                           200 while the process serves, outage or not
//	GET, POST /simulator/v1/...                             Pages: the 3-D Secure challenge pages, for shoppers
//
// A result, approved or declined, is 200. NotPerformed is 503 (timeout,
// outage), 429 (rate limited), 409 (key reused), 404 (no such operation)
// or 400 (bad request), with {"outcome":"not_performed","code","error"}.
// Unknown is 504 {"outcome":"unknown"}, or with
// Config.UnknownDropsConnection a connection closed without an answer.
// The admin endpoints have no authentication: serve on loopback or a
// private network only.
func NewHandler(p *Provider) http.Handler {
	h := &handler{p: p}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/authorize", h.authorize)
	mux.HandleFunc("POST /v1/capture", h.refOp)
	mux.HandleFunc("POST /v1/void", h.refOp)
	mux.HandleFunc("POST /v1/refund", h.refOp)
	mux.HandleFunc("GET /v1/operations/{key...}", h.lookup)
	mux.HandleFunc("GET /v1/config", h.getConfig)
	mux.HandleFunc("PUT /v1/config", h.putConfig)
	mux.HandleFunc("GET /v1/effects", h.effects)
	mux.HandleFunc("POST /v1/reset", h.reset)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n") // a client gone away is no error of ours
	})
	mux.Handle(surgepay.PagesPrefix, p.Pages())
	return mux
}

func (h *handler) authorize(w http.ResponseWriter, r *http.Request) {
	var b authorizeBody
	if !decode(w, r, &b) {
		return
	}
	res, err := h.p.Authorize(r.Context(), &surgepay.AuthorizeRequest{
		IdempotencyKey: r.Header.Get(HeaderIdempotencyKey),
		MerchantID:     b.MerchantID,
		PaymentID:      b.PaymentID,
		Amount:         b.Amount,
		Currency:       b.Currency,
		Card: surgepay.ProviderCard{Number: surgepay.PAN(b.Card.Number), ExpMonth: b.Card.ExpMonth,
			ExpYear: b.Card.ExpYear, CVC: surgepay.CVC(b.Card.CVC)},
		Capture:   b.Capture,
		ReturnURL: b.ReturnURL,
	})
	h.answer(w, res, err)
}

func (h *handler) refOp(w http.ResponseWriter, r *http.Request) {
	var b refBody
	if !decode(w, r, &b) {
		return
	}
	key := r.Header.Get(HeaderIdempotencyKey)
	var res *surgepay.ProviderResult
	var err error
	switch r.URL.Path {
	case "/v1/capture":
		res, err = h.p.Capture(r.Context(), &surgepay.CaptureRequest{IdempotencyKey: key,
			AuthorizationRef: b.AuthorizationRef, Amount: b.Amount, Currency: b.Currency})
	case "/v1/void":
		res, err = h.p.Void(r.Context(), &surgepay.VoidRequest{IdempotencyKey: key, AuthorizationRef: b.AuthorizationRef})
	default:
		res, err = h.p.Refund(r.Context(), &surgepay.RefundRequest{IdempotencyKey: key,
			AuthorizationRef: b.AuthorizationRef, Amount: b.Amount, Currency: b.Currency})
	}
	h.answer(w, res, err)
}

func (h *handler) lookup(w http.ResponseWriter, r *http.Request) {
	res, err := h.p.Lookup(r.Context(), r.PathValue("key"))
	h.answer(w, res, err)
}

// answer writes a provider call's outcome.
func (h *handler) answer(w http.ResponseWriter, res *surgepay.ProviderResult, err error) {
	if err == nil {
		writeJSON(w, http.StatusOK, toResultBody(res))
		return
	}
	var pe *surgepay.ProviderError
	if !errors.As(err, &pe) {
		pe = &surgepay.ProviderError{Outcome: surgepay.Unknown, Err: err}
	}
	code := errorCode(pe.Err)
	if pe.Outcome == surgepay.Unknown {
		if h.p.Config().UnknownDropsConnection {
			// Close the connection without a response, like a network
			// whose answer never arrives. The server does not log it.
			panic(http.ErrAbortHandler)
		}
		writeJSON(w, http.StatusGatewayTimeout, errorBody{Outcome: outcomeUnknown, Code: code, Error: pe.Err.Error()})
		return
	}
	status := http.StatusServiceUnavailable
	switch code {
	case "key_reused":
		status = http.StatusConflict
	case "no_such_operation":
		status = http.StatusNotFound
	case "rate_limited":
		status = http.StatusTooManyRequests
		w.Header().Set("Retry-After", "1")
	case "key_invalid", "invalid_request":
		status = http.StatusBadRequest
	}
	writeJSON(w, status, errorBody{Outcome: outcomeNotPerformed, Code: code, Error: pe.Err.Error()})
}

// decode reads a JSON body into v, or answers 400 NotPerformed. The error
// names at most the offending field, never a value: a value could be the
// card number.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	d := json.NewDecoder(http.MaxBytesReader(w, r.Body, BodyBytesMax))
	d.DisallowUnknownFields()
	err := d.Decode(v)
	if err == nil {
		return true
	}
	msg := "request body is not valid JSON"
	var te *json.UnmarshalTypeError
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &te):
		msg = fmt.Sprintf("request field %q has the wrong type", te.Field)
	case errors.As(err, &mbe):
		msg = "request body exceeds " + strconv.Itoa(BodyBytesMax) + " bytes"
	}
	writeJSON(w, http.StatusBadRequest, errorBody{Outcome: outcomeNotPerformed, Code: "invalid_request", Error: msg})
	return false
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":"encode response"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n')) // a client gone away is no error of ours
}

func (h *handler) getConfig(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, h.p.Config())
}

// putConfig decodes the body onto the current configuration, so fields left
// out keep their values.
func (h *handler) putConfig(w http.ResponseWriter, r *http.Request) {
	cfg := h.p.Config()
	d := json.NewDecoder(http.MaxBytesReader(w, r.Body, BodyBytesMax))
	d.DisallowUnknownFields()
	if err := d.Decode(&cfg); err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody{Error: "config: " + err.Error()})
		return
	}
	if err := h.p.SetConfig(cfg); err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody{Error: "config: " + err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, h.p.Config())
}

func (h *handler) effects(w http.ResponseWriter, r *http.Request) {
	if id := r.URL.Query().Get("payment"); id != "" {
		writeJSON(w, http.StatusOK, h.p.Effects(id))
		return
	}
	writeJSON(w, http.StatusOK, h.p.TotalEffects())
}

func (h *handler) reset(w http.ResponseWriter, _ *http.Request) {
	h.p.Reset()
	w.WriteHeader(http.StatusNoContent)
}
