package console

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/engine"
)

// paymentPage is the data of payment.html. It holds no card data beyond
// brand, last 4 and expiry: the payment method is copied into card, so
// that no template can reach its sealed number.
type paymentPage struct {
	P          *surgepay.Payment
	Merchant   *surgepay.Merchant
	Card       *card
	Customer   *surgepay.Customer
	Processor  string
	Staged     string // "", "staged", "settled" or "failed": a streamlined sale's capture
	Events     []*surgepay.Event
	EventsMore bool
	Disputes   []surgepay.Dispute
	Deliveries []delivery
	// WebhooksNote says why no deliveries are listed, when not for want
	// of any.
	WebhooksNote      string
	Audit             []*surgepay.AuditEvent
	ReconcileInterval time.Duration
	Notice            string
	Refundable        int64
	CanCapture        bool
	CanVoid           bool
	CanRefund         bool
	Self              string
	// ReadOnly leaves the actions out: a read-only operator (readonly.go).
	ReadOnly bool
}

// card is what a page shows of a payment method.
type card struct {
	ID, Brand, Last4  string
	ExpMonth, ExpYear int
}

// delivery is a webhook delivery of one of the payment's events.
type delivery struct {
	*surgepay.WebhookDeliveryInfo
	ID     string
	Resend string // the resend confirmation's path; "" if it cannot be resent now
}

// notices are the messages an action's redirect names (?done=): fixed
// texts, so that no link can put words on the page.
var notices = map[string]string{
	"captured":  "Captured.",
	"voided":    "Voided: the authorization is released.",
	"refunded":  "Refunded.",
	"declined":  "The processor declined the operation: see the transactions below.",
	"pending":   "The processor's answer is unknown: the reconciler will look it up (see Pending below).",
	"resent":    "The webhook delivery is queued again.",
	"replayed":  "This confirmation was submitted before: nothing more was done. The page shows the payment as it is.",
	"duplicate": "This confirmation was already used with other values: nothing was done. Start again from this page.",
}

// payment serves a payment's page.
func (c *Console) payment(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	call := &engine.Call{MerchantID: r.PathValue("merchant")}
	p, err := c.eng.GetPayment(ctx, call, r.PathValue("id"))
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	d, err := c.paymentData(ctx, call, p)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	d.Notice = notices[r.URL.Query().Get("done")]
	d.ReadOnly = c.readOnly(r)
	c.render(w, http.StatusOK, "payment.html", d)
}

// paymentData reads what a payment's page shows: a few statements, and
// one per event (at most EventsShownMax) for its webhook deliveries.
func (c *Console) paymentData(ctx context.Context, call *engine.Call, p *surgepay.Payment) (*paymentPage, error) {
	d := &paymentPage{P: p, Processor: processorOf(p), Disputes: p.Disputes(),
		ReconcileInterval: c.cfg.ReconcileInterval, Self: paymentPath(p.MerchantID, p.ID)}
	var err error
	if d.Merchant, err = c.eng.GetMerchant(ctx, p.MerchantID); err != nil {
		return nil, err
	}
	if pm, err := c.eng.GetPaymentMethod(ctx, call, p.PaymentMethodID); err == nil {
		d.Card = &card{ID: pm.ID, Brand: pm.Brand, Last4: pm.Last4, ExpMonth: pm.ExpMonth, ExpYear: pm.ExpYear}
	} else if surgepay.ErrorCode(err) != surgepay.ENOTFOUND {
		return nil, err
	}
	if p.CustomerID != "" {
		if cu, err := c.eng.GetCustomer(ctx, call, p.CustomerID); err == nil {
			d.Customer = cu
		} else if surgepay.ErrorCode(err) != surgepay.ENOTFOUND {
			return nil, err
		}
	}
	if p.Path == "streamlined" {
		d.Staged = stagedState(p)
	}
	if d.Events, err = c.eng.ListEvents(ctx, call, p.ID); err != nil {
		return nil, err
	}
	if len(d.Events) > EventsShownMax {
		d.Events, d.EventsMore = d.Events[len(d.Events)-EventsShownMax:], true
	}
	if err := c.deliveries(ctx, call, d); err != nil {
		return nil, err
	}
	audit, _, err := c.eng.ListAuditEvents(ctx, surgepay.AuditFilter{ObjectID: p.ID, MerchantID: p.MerchantID,
		Page: surgepay.Page{Limit: surgepay.ListLimitMax}})
	if err != nil {
		return nil, err
	}
	d.Audit = audit
	_, err = p.CheckCapture(0)
	d.CanCapture = err == nil
	d.CanVoid = p.CheckVoid() == nil
	_, err = p.CheckRefund(0)
	d.CanRefund, d.Refundable = err == nil, p.AmountRefundable()
	return d, nil
}

// deliveries reads the webhook deliveries of the page's events.
func (c *Console) deliveries(ctx context.Context, call *engine.Call, d *paymentPage) error {
	for _, ev := range d.Events {
		ds, _, err := c.eng.ListWebhookDeliveries(ctx, call, surgepay.WebhookDeliveryFilter{EventID: ev.ID,
			Limit: surgepay.ListLimitMax})
		if surgepay.ErrorCode(err) == surgepay.EUNAVAILABLE {
			d.WebhooksNote = errMessage(err)
			return nil
		}
		if err != nil {
			return err
		}
		for _, x := range ds {
			id := surgepay.WebhookDeliveryID(x.EventID, x.EndpointID)
			dv := delivery{WebhookDeliveryInfo: x, ID: id}
			if !x.InFlight && x.Resends < surgepay.WebhookResendsMax {
				dv.Resend = d.Self + "/webhooks/" + id + "/resend"
			}
			d.Deliveries = append(d.Deliveries, dv)
		}
	}
	return nil
}

// processorOf names where a payment was authorized: the processor of a
// qualified reference ("stripe_eu:pi_…"), else the default provider.
func processorOf(p *surgepay.Payment) string {
	if name, _, ok := strings.Cut(p.AuthorizationRef, ":"); ok {
		return name
	}
	if p.Pending != nil && p.Pending.Processor != "" {
		return p.Pending.Processor
	}
	return "default provider"
}

// stagedState tells where a streamlined sale's capture stands.
func stagedState(p *surgepay.Payment) string {
	if p.StagedCapture() != nil {
		return "staged"
	}
	for _, t := range p.Transactions {
		if t.Type == surgepay.TxCapture {
			if t.Status == surgepay.TxFailed {
				return "failed"
			}
			return "settled"
		}
	}
	return ""
}

// money formats an amount in minor units in its currency: "12.50 EUR".
func money(amount int64, currency string) string {
	cur, ok := surgepay.LookupCurrency(currency)
	code := strings.ToUpper(currency)
	if !ok || cur.Exponent == 0 {
		return strconv.FormatInt(amount, 10) + " " + code
	}
	sign := ""
	if amount < 0 {
		sign, amount = "-", -amount
	}
	unit := int64(1)
	for range cur.Exponent {
		unit *= 10
	}
	return fmt.Sprintf("%s%d.%0*d %s", sign, amount/unit, cur.Exponent, amount%unit, code)
}
