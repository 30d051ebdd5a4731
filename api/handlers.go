package api

import (
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/engine"
)

// body reads the request body and sets the call's idempotency key and
// request hash from the Idempotency-Key header.
func (s *Server) body(w http.ResponseWriter, r *http.Request, call *engine.Call) ([]byte, error) {
	b, err := readBody(w, r)
	if err != nil {
		return nil, err
	}
	if len(b) > 0 {
		if err := checkContentType(r.Header.Values("Content-Type")); err != nil {
			return nil, err
		}
	}
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		return b, nil
	}
	if len(key) > surgepay.IdempotencyKeyBytesMax {
		return nil, surgepay.Invalid("Idempotency-Key", "idempotency_key_invalid",
			"Idempotency-Key must be at most %d characters", surgepay.IdempotencyKeyBytesMax)
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x21 || key[i] > 0x7e {
			return nil, surgepay.Invalid("Idempotency-Key", "idempotency_key_invalid",
				"Idempotency-Key must be printable ASCII without spaces")
		}
	}
	// A key that may hold a card number is kept as its keyed hash, never
	// refused: replays still match (engine.Engine.IdempotencyKey).
	call.IdempotencyKey = s.eng.IdempotencyKey(key)
	call.RequestHash = surgepay.RequestHash(r.Method, r.URL.Path, b)
	return b, nil
}

// emptyBody reads the body of an operation that takes no fields (a
// DELETE): empty or {}, like a void's.
func (s *Server) emptyBody(w http.ResponseWriter, r *http.Request, call *engine.Call) error {
	b, err := s.body(w, r, call)
	if err != nil {
		return err
	}
	return decode(b, &struct{}{})
}

// EUNSUPPORTEDMEDIA is the API's own code for a request body that is not
// JSON by its Content-Type: 415.
const EUNSUPPORTEDMEDIA = "unsupported_media_type"

// checkContentType refuses a body whose Content-Type is not
// application/json (with at most a charset of utf-8, in any case): a form
// (curl -d sends application/x-www-form-urlencoded) or text that happens
// to parse as JSON must not be read as JSON, and a missing Content-Type is
// not taken for JSON either. An empty body needs no Content-Type.
func checkContentType(values []string) error {
	const want = "Content-Type must be application/json (optionally ; charset=utf-8)"
	if len(values) != 1 {
		return &surgepay.Error{Code: EUNSUPPORTEDMEDIA, Reason: "unsupported_media_type", Param: "Content-Type",
			Message: "a request with a body needs one Content-Type header: " + want}
	}
	mt, params, err := mime.ParseMediaType(values[0])
	ok := err == nil && mt == "application/json"
	for k, v := range params {
		ok = ok && k == "charset" && strings.EqualFold(v, "utf-8")
	}
	if !ok {
		return &surgepay.Error{Code: EUNSUPPORTEDMEDIA, Reason: "unsupported_media_type", Param: "Content-Type",
			Message: want}
	}
	return nil
}

func (s *Server) createCustomer(w http.ResponseWriter, r *http.Request, call *engine.Call) error {
	b, err := s.body(w, r, call)
	if err != nil {
		return err
	}
	var req customerRequest
	if err := decode(b, &req); err != nil {
		return err
	}
	in := &engine.CustomerInput{Name: deref(req.Name), Email: deref(req.Email), Description: deref(req.Description), Metadata: req.Metadata}
	c, err := s.eng.CreateCustomer(r.Context(), call, in)
	return s.write(w, r, call, c, err)
}

func (s *Server) getCustomer(w http.ResponseWriter, r *http.Request, call *engine.Call) error {
	c, err := s.eng.GetCustomer(r.Context(), call, r.PathValue("id"))
	return s.write(w, r, nil, c, notFoundParam(err, "id"))
}

func (s *Server) updateCustomer(w http.ResponseWriter, r *http.Request, call *engine.Call) error {
	b, err := s.body(w, r, call)
	if err != nil {
		return err
	}
	var req customerRequest
	if err := decode(b, &req); err != nil {
		return err
	}
	u := &surgepay.CustomerUpdate{Name: req.Name, Email: req.Email, Description: req.Description, Metadata: req.Metadata}
	if err := surgepay.ValidateMetadata("metadata", req.Metadata); err != nil {
		return err
	}
	c, err := s.eng.UpdateCustomer(r.Context(), call, r.PathValue("id"), u)
	return s.write(w, r, call, c, notFoundParam(err, "id"))
}

func (s *Server) deleteCustomer(w http.ResponseWriter, r *http.Request, call *engine.Call) error {
	if err := s.emptyBody(w, r, call); err != nil {
		return err
	}
	c, err := s.eng.DeleteCustomer(r.Context(), call, r.PathValue("id"))
	if err != nil {
		return s.write(w, r, call, nil, notFoundParam(err, "id"))
	}
	return s.write(w, r, call, &engine.Deleted{ID: c.ID, Object: "customer"}, nil)
}

func (s *Server) listCustomers(w http.ResponseWriter, r *http.Request, call *engine.Call) error {
	page, err := pageOf(r)
	if err != nil {
		return err
	}
	cs, more, err := s.eng.ListCustomers(r.Context(), call, page)
	if err != nil {
		return err
	}
	return s.write(w, r, nil, listOf(cs, more, customerOf), nil)
}

func (s *Server) createPaymentMethod(w http.ResponseWriter, r *http.Request, call *engine.Call) error {
	b, err := s.body(w, r, call)
	if err != nil {
		return err
	}
	var req paymentMethodRequest
	if err := decode(b, &req); err != nil {
		return err
	}
	if req.Type != "" && req.Type != "card" {
		return surgepay.Invalid("type", "invalid_value", "type must be card")
	}
	if req.Card != nil && req.ProcessorToken != nil {
		return surgepay.Invalid("processor_token", "invalid_value", "give card or processor_token, not both")
	}
	if req.Card == nil && req.ProcessorToken == nil {
		return surgepay.Invalid("card", "missing", "card (or processor_token) is required")
	}
	in := &engine.CardInput{CustomerID: req.Customer}
	if req.Card != nil {
		in.Card = surgepay.CardInput{Number: surgepay.PAN(req.Card.Number),
			ExpMonth: req.Card.ExpMonth, ExpYear: req.Card.ExpYear, CVC: surgepay.CVC(req.Card.CVC)}
	} else {
		in.Token = &engine.TokenInput{Processor: req.ProcessorToken.Processor, Token: req.ProcessorToken.Token}
	}
	if req.BillingDetails != nil {
		in.Card.Name = req.BillingDetails.Name
	}
	pm, err := s.eng.CreatePaymentMethod(r.Context(), call, in)
	return s.write(w, r, call, pm, err)
}

func (s *Server) getPaymentMethod(w http.ResponseWriter, r *http.Request, call *engine.Call) error {
	pm, err := s.eng.GetPaymentMethod(r.Context(), call, r.PathValue("id"))
	return s.write(w, r, nil, pm, notFoundParam(err, "id"))
}

func (s *Server) listPaymentMethods(w http.ResponseWriter, r *http.Request, call *engine.Call) error {
	page, err := pageOf(r)
	if err != nil {
		return err
	}
	pms, more, err := s.eng.ListPaymentMethods(r.Context(), call, r.URL.Query().Get("customer"), page)
	if err != nil {
		return err
	}
	return s.write(w, r, nil, listOf(pms, more, paymentMethodOf), nil)
}

func (s *Server) deletePaymentMethod(w http.ResponseWriter, r *http.Request, call *engine.Call) error {
	if err := s.emptyBody(w, r, call); err != nil {
		return err
	}
	pm, err := s.eng.DeletePaymentMethod(r.Context(), call, r.PathValue("id"))
	if err != nil {
		return s.write(w, r, call, nil, notFoundParam(err, "id"))
	}
	return s.write(w, r, call, &engine.Deleted{ID: pm.ID, Object: "payment_method"}, nil)
}

func (s *Server) createPayment(w http.ResponseWriter, r *http.Request, call *engine.Call) error {
	b, err := s.body(w, r, call)
	if err != nil {
		return err
	}
	var req paymentRequest
	if err := decode(b, &req); err != nil {
		return err
	}
	in := &engine.PaymentInput{Amount: req.Amount, Currency: req.Currency, CustomerID: req.Customer,
		PaymentMethodID: req.PaymentMethod, CaptureMethod: req.CaptureMethod, Description: req.Description,
		Metadata: req.Metadata, CVC: surgepay.CVC(req.CVC)}
	if req.Tax != nil {
		in.Tax = &engine.TaxInput{Country: req.Tax.Country, Region: req.Tax.Region, PostalCode: req.Tax.PostalCode, Category: req.Tax.Category}
	}
	p, err := s.eng.CreatePayment(r.Context(), call, in)
	return s.write(w, r, call, p, err)
}

func (s *Server) getPayment(w http.ResponseWriter, r *http.Request, call *engine.Call) error {
	p, err := s.eng.GetPayment(r.Context(), call, r.PathValue("id"))
	return s.write(w, r, nil, p, notFoundParam(err, "id"))
}

func (s *Server) listPayments(w http.ResponseWriter, r *http.Request, call *engine.Call) error {
	page, err := pageOf(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	f := surgepay.PaymentFilter{Page: page, Status: surgepay.Status(q.Get("status")), CustomerID: q.Get("customer")}
	if f.Status != "" && !f.Status.Valid() {
		return surgepay.Invalid("status", "invalid_value", "status must be one of the payment statuses")
	}
	if f.CreatedGTE, err = unixParam(q.Get("created_gte"), "created_gte"); err != nil {
		return err
	}
	if f.CreatedBefore, err = unixParam(q.Get("created_lt"), "created_lt"); err != nil {
		return err
	}
	ps, more, err := s.eng.ListPayments(r.Context(), call, f)
	if err != nil {
		return err
	}
	return s.write(w, r, nil, listOf(ps, more, paymentOf), nil)
}

func (s *Server) amountOp(w http.ResponseWriter, r *http.Request, call *engine.Call,
	op func(call *engine.Call, id string, amount int64) (*surgepay.Payment, error)) error {
	b, err := s.body(w, r, call)
	if err != nil {
		return err
	}
	var req amountRequest
	if err := decode(b, &req); err != nil {
		return err
	}
	var amount int64
	if req.Amount != nil {
		if err := surgepay.ValidateAmount("amount", *req.Amount); err != nil {
			return err
		}
		amount = *req.Amount
	}
	p, err := op(call, r.PathValue("id"), amount)
	return s.write(w, r, call, p, notFoundParam(err, "id"))
}

func (s *Server) capturePayment(w http.ResponseWriter, r *http.Request, call *engine.Call) error {
	return s.amountOp(w, r, call, func(call *engine.Call, id string, amount int64) (*surgepay.Payment, error) {
		return s.eng.CapturePayment(r.Context(), call, id, amount)
	})
}

func (s *Server) refundPayment(w http.ResponseWriter, r *http.Request, call *engine.Call) error {
	return s.amountOp(w, r, call, func(call *engine.Call, id string, amount int64) (*surgepay.Payment, error) {
		return s.eng.RefundPayment(r.Context(), call, id, amount)
	})
}

func (s *Server) voidPayment(w http.ResponseWriter, r *http.Request, call *engine.Call) error {
	b, err := s.body(w, r, call)
	if err != nil {
		return err
	}
	if err := decode(b, &struct{}{}); err != nil {
		return err
	}
	p, err := s.eng.VoidPayment(r.Context(), call, r.PathValue("id"))
	return s.write(w, r, call, p, notFoundParam(err, "id"))
}

func (s *Server) listEvents(w http.ResponseWriter, r *http.Request, call *engine.Call) error {
	evs, err := s.eng.ListEvents(r.Context(), call, r.PathValue("id"))
	if err != nil {
		return notFoundParam(err, "id")
	}
	return s.write(w, r, nil, listOf(evs, false, eventOf), nil)
}

// notFoundParam sets the param of an ENOTFOUND error that has none.
func notFoundParam(err error, param string) error {
	if e, ok := err.(*surgepay.Error); ok && e.Code == surgepay.ENOTFOUND && e.Param == "" {
		c := *e
		c.Param = param
		return &c
	}
	return err
}

func pageOf(r *http.Request) (surgepay.Page, error) {
	q := r.URL.Query()
	p := surgepay.Page{Limit: surgepay.ListLimitDefault, StartingAfter: q.Get("starting_after")}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > surgepay.ListLimitMax {
			return p, surgepay.Invalid("limit", "invalid_value", "limit must be an integer from 1 to %d", surgepay.ListLimitMax)
		}
		p.Limit = n
	}
	if len(p.StartingAfter) > 64 {
		return p, surgepay.Invalid("starting_after", "invalid_value", "starting_after must be an object ID")
	}
	return p, nil
}

func unixParam(v, name string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > 1<<40 {
		return time.Time{}, surgepay.Invalid(name, "invalid_value", "%s must be a Unix time in seconds", name)
	}
	return time.Unix(n, 0).UTC(), nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// listOf is a page of items in their API representation.
func listOf[T, J any](items []T, more bool, toJSON func(T) J) listJSON {
	data := make([]any, len(items))
	for i, it := range items {
		data[i] = toJSON(it)
	}
	return listJSON{Object: "list", Data: data, HasMore: more}
}
