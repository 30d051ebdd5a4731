package console

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/engine"
)

// An action is confirmed before it is done: the payment's page links to
// a confirmation page (GET), whose form carries an idempotency key made
// when it was rendered and the CSRF token; its POST runs the engine's
// operation under that key, as an API request with an Idempotency-Key
// would, so a double submit acts once (the second is answered from the
// stored record, or refused while the first is in flight).

// IdempotencyKeyPrefix starts the idempotency keys of the console's
// confirmations, so that the records (and the audit rows) say where a
// request came from.
const IdempotencyKeyPrefix = "console_"

// keyBytes is the randomness of a confirmation's key: 128 bits.
const keyBytes = 16

// actions are the payment operations a confirmation may do, by path
// segment.
var actions = map[string]struct{ verb, done string }{
	"capture": {"Capture", "captured"},
	"void":    {"Void", "voided"},
	"refund":  {"Refund", "refunded"},
}

// confirmPage is the data of confirm.html.
type confirmPage struct {
	Verb     string // Capture, Void, Refund, Resend
	Action   string // the form's path
	Back     string // the payment's page
	P        *surgepay.Payment
	Amount   int64 // minor units: what the action takes; 0 for a void or a resend
	Full     bool  // the whole capturable or refundable amount as the page was rendered (the form sends it as a number, so that a change meanwhile is refused, not acted on)
	Delivery *surgepay.WebhookDeliveryInfo
	Key      string
	CSRF     string
	Err      string
}

func newKey() string {
	b := make([]byte, keyBytes)
	rand.Read(b) // never fails (crypto/rand)
	return IdempotencyKeyPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// validKey reports whether k is a key newKey made.
func validKey(k string) bool {
	rest, ok := strings.CutPrefix(k, IdempotencyKeyPrefix)
	b, err := base64.RawURLEncoding.DecodeString(rest)
	return ok && err == nil && len(b) == keyBytes
}

// amountParam parses an action's amount in minor units: "" is the whole
// amount (0).
func amountParam(v string) (int64, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, surgepay.Invalid("amount", "invalid_value", "amount must be a whole number of minor units (1250 is 12.50 EUR)")
	}
	return n, surgepay.ValidateAmount("amount", n)
}

// check applies the payment's rules to an action, as the engine will.
func check(p *surgepay.Payment, action string, amount int64) error {
	switch action {
	case "capture":
		_, err := p.CheckCapture(amount)
		return err
	case "void":
		return p.CheckVoid()
	default:
		_, err := p.CheckRefund(amount)
		return err
	}
}

// confirm serves an action's confirmation page.
func (c *Console) confirm(w http.ResponseWriter, r *http.Request) {
	action := r.PathValue("action")
	a, ok := actions[action]
	if !ok {
		c.fail(w, r, http.StatusNotFound, "No such action", "The actions are capture, void and refund.")
		return
	}
	call := &engine.Call{MerchantID: r.PathValue("merchant")}
	p, err := c.eng.GetPayment(r.Context(), call, r.PathValue("id"))
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	amount, err := amountParam(r.URL.Query().Get("amount"))
	if action == "void" {
		amount, err = 0, nil
	}
	if err == nil {
		err = check(p, action, amount)
	}
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	full := amount == 0 && action != "void"
	if full && action == "capture" {
		amount = p.AmountCapturable()
	} else if full {
		amount = p.AmountRefundable()
	}
	self := paymentPath(p.MerchantID, p.ID)
	c.render(w, http.StatusOK, "confirm.html", confirmPage{Verb: a.verb, Action: self + "/" + action, Back: self, P: p,
		Amount: amount, Full: full, Key: newKey(), CSRF: c.csrfToken(w, r)})
}

// actionForm reads and checks an action's form: the CSRF token and the
// idempotency key. It answers the refusal itself and returns false.
func (c *Console) actionForm(w http.ResponseWriter, r *http.Request) bool {
	r.Body = http.MaxBytesReader(w, r.Body, formBytesMax)
	if err := r.ParseForm(); err != nil {
		c.fail(w, r, http.StatusBadRequest, "Bad form", "The form could not be read.")
		return false
	}
	if !csrfValid(r) {
		c.fail(w, r, http.StatusForbidden, "Form refused",
			"This form's security token does not match this browser's: it expired, or it came from another site. "+
				"Go back to the payment's page and start again.")
		return false
	}
	if !validKey(r.PostFormValue("key")) {
		c.fail(w, r, http.StatusBadRequest, "Bad form", "The form's idempotency key (key) is missing or malformed.")
		return false
	}
	return true
}

// operatorCall is the engine call of an operator's action: the
// operator names the events' actor and the audit row, and the
// confirmation's key makes it idempotent.
func (c *Console) operatorCall(r *http.Request, body string) *engine.Call {
	actor := c.actor(r)
	return &engine.Call{MerchantID: r.PathValue("merchant"), KeyID: actor, Operator: actor,
		RequestID: surgepay.NewID("req"), IdempotencyKey: r.PostFormValue("key"),
		RequestHash: surgepay.RequestHash(http.MethodPost, r.URL.Path, []byte(body)), Render: renderStored}
}

// renderStored is what the idempotency record of an action stores: the
// payment (or delivery) ID and status, or the error's code; the console
// only needs to know that the action was done.
func renderStored(v any, err error) (int, []byte) {
	if err != nil {
		var e *surgepay.Error
		out := struct {
			Object string `json:"object"`
			Code   string `json:"code"`
			Reason string `json:"reason,omitempty"`
		}{Object: "error", Code: surgepay.ErrorCode(err)}
		if errors.As(err, &e) {
			out.Reason = e.Reason
		}
		b, _ := json.Marshal(out) // plain strings: cannot fail
		return statusOf(err), b
	}
	out := struct {
		Object string `json:"object"`
		ID     string `json:"id"`
		Status string `json:"status"`
	}{}
	switch x := v.(type) {
	case *surgepay.Payment:
		out.Object, out.ID, out.Status = "payment", x.ID, string(x.Status)
	case *surgepay.WebhookDeliveryInfo:
		out.Object, out.ID, out.Status = "webhook_delivery", surgepay.WebhookDeliveryID(x.EventID, x.EndpointID), x.Status
	}
	b, _ := json.Marshal(out) // plain strings: cannot fail
	return http.StatusOK, b
}

// act serves an action's POST: it runs the operation and sends the
// browser back to the payment's page, with what happened.
func (c *Console) act(w http.ResponseWriter, r *http.Request) {
	action := r.PathValue("action")
	a, ok := actions[action]
	if !ok {
		c.fail(w, r, http.StatusNotFound, "No such action", "The actions are capture, void and refund.")
		return
	}
	if !c.actionForm(w, r) {
		return
	}
	amount, err := amountParam(r.PostFormValue("amount"))
	if action == "void" {
		amount, err = 0, nil
	}
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	call := c.operatorCall(r, "amount="+strconv.FormatInt(amount, 10))
	id := r.PathValue("id")
	var p *surgepay.Payment
	switch action {
	case "capture":
		p, err = c.eng.CapturePayment(r.Context(), call, id, amount)
	case "void":
		p, err = c.eng.VoidPayment(r.Context(), call, id)
	default:
		p, err = c.eng.RefundPayment(r.Context(), call, id, amount)
	}
	done := a.done
	if p != nil && p.Status == surgepay.StatusProcessing {
		done = "pending"
	}
	c.finish(w, r, id, done, err)
}

// finish answers the outcome of an action: back to the payment's page
// with a notice, or a page that says why it was refused.
func (c *Console) finish(w http.ResponseWriter, r *http.Request, paymentID, done string, err error) {
	if _, ok := engine.IsReplay(err); ok {
		done, err = "replayed", nil
	}
	switch {
	case surgepay.ErrorReason(err) == "idempotency_key_reused":
		done, err = "duplicate", nil
	case surgepay.ErrorCode(err) == surgepay.EDECLINED:
		done, err = "declined", nil
	}
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	c.log.Info("console action", "actor", c.actor(r), "merchant", r.PathValue("merchant"), "payment", paymentID, "outcome", done)
	http.Redirect(w, r, paymentPath(r.PathValue("merchant"), paymentID)+"?done="+done, http.StatusSeeOther) //nolint:gosec // G710: a path of this console (paymentPath escapes both IDs), done one of notices' keys
}

// confirmResend serves the confirmation of a webhook delivery's resend.
func (c *Console) confirmResend(w http.ResponseWriter, r *http.Request) {
	call := &engine.Call{MerchantID: r.PathValue("merchant")}
	d, err := c.eng.GetWebhookDelivery(r.Context(), call, r.PathValue("delivery"))
	if err == nil && d.PaymentID != r.PathValue("id") {
		err = surgepay.NotFound("delivery", "webhook delivery of this payment")
	}
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	p, err := c.eng.GetPayment(r.Context(), call, d.PaymentID)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	self := paymentPath(p.MerchantID, p.ID)
	c.render(w, http.StatusOK, "confirm.html", confirmPage{Verb: "Resend", Action: r.URL.Path, Back: self, P: p,
		Delivery: d, Key: newKey(), CSRF: c.csrfToken(w, r)})
}

// resend serves the POST of a resend.
func (c *Console) resend(w http.ResponseWriter, r *http.Request) {
	if !c.actionForm(w, r) {
		return
	}
	call := c.operatorCall(r, "")
	id := r.PathValue("id")
	d, err := c.eng.GetWebhookDelivery(r.Context(), &engine.Call{MerchantID: call.MerchantID}, r.PathValue("delivery"))
	if err == nil && d.PaymentID != id {
		err = surgepay.NotFound("delivery", "webhook delivery of this payment")
	}
	if err == nil {
		_, err = c.eng.ResendWebhookDelivery(r.Context(), call, r.PathValue("delivery"))
	}
	c.finish(w, r, id, "resent", err)
}
