package console

import (
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/surgepay/surgepay"
)

// The disputes view, /console/disputes: by default the disputes needing
// a response, soonest deadline first, of one merchant or all; and any
// dispute state, which is the console's search by dispute state (the
// search page's "Dispute state" form comes here). It reads the store's
// table of disputes through engine.ListDisputes: one statement a page.

// Values of the disputes view's status field besides the states.
const (
	// disputesNeedingResponse (the default, an empty field) is the
	// states in which the merchant must answer by the deadline.
	disputesNeedingResponse = ""
	// disputesAny is every state.
	disputesAny = "any"
)

// DisputeDueSoon is how near a deadline is marked as due soon on the
// disputes view (as the staged captures' deadline is).
const DisputeDueSoon = 24 * time.Hour

// disputesForm is the disputes view's filter as the operator filled it in.
type disputesForm struct {
	Merchant, Status, After, Limit string
}

func (f disputesForm) values() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"merchant": f.Merchant, "status": f.Status, "after": f.After, "limit": f.Limit} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v
}

// disputesPage is the data of disputes.html.
type disputesPage struct {
	Form      disputesForm
	Err       *fieldError
	Merchants []*surgepay.Merchant
	Statuses  []string // the states to choose from
	Needing   []string // the states the default shows
	Rows      []disputeRow
	Next      string // the next page's URL
	DueSoon   time.Duration
}

// disputeRow is a dispute, its merchant's name and its payment's page;
// Until says how far its deadline is, Past that it has gone by and Near
// that it is within DisputeDueSoon, for a dispute still needing a
// response.
type disputeRow struct {
	*surgepay.Dispute
	Merchant   string
	Link       string
	Until      string
	Past, Near bool
}

// parseDisputes reads the disputes view's filter from a query string.
func parseDisputes(raw string) (disputesForm, surgepay.DisputeQuery, *fieldError) {
	var q surgepay.DisputeQuery
	f, ferr := fields(raw, "merchant", "status", "after", "limit")
	if ferr != nil {
		return disputesForm{}, q, ferr
	}
	form := disputesForm{Merchant: f["merchant"], Status: f["status"], After: f["after"], Limit: f["limit"]}
	q.MerchantID, q.After = form.Merchant, form.After
	switch s := form.Status; {
	case s == disputesNeedingResponse:
		q.Statuses = surgepay.DisputeStatusesNeedingResponse
	case s == disputesAny:
	case slices.Contains(surgepay.DisputeStatuses, s):
		q.Statuses = []string{s}
	default:
		return form, q, badField("status", "%q is not a dispute state", s)
	}
	if q.After != "" {
		if _, err := surgepay.ParseDisputeCursor(q.After); err != nil {
			return form, q, badField("after", "is not a cursor of this list (the next page's link sets it)")
		}
	}
	q.Limit, ferr = limitField(form.Limit, PageLimitDefault, surgepay.DisputeListLimitMax)
	return form, q, ferr
}

// disputes serves GET /console/disputes: a page of the disputes the
// filter selects, by deadline (unknown last), 25 a page by default.
func (c *Console) disputes(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ms, err := c.eng.ListMerchants(ctx)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	form, q, ferr := parseDisputes(r.URL.RawQuery)
	d := disputesPage{Form: form, Merchants: ms, Statuses: surgepay.DisputeStatuses,
		Needing: surgepay.DisputeStatusesNeedingResponse, DueSoon: DisputeDueSoon}
	if ferr == nil {
		if _, ferr, err = c.narrow(ctx, ms, form.Merchant); err != nil {
			c.failErr(w, r, err)
			return
		}
	}
	if ferr != nil {
		d.Err = ferr
		c.render(w, http.StatusBadRequest, "disputes.html", d)
		return
	}
	page, err := c.eng.ListDisputes(ctx, q)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	names := make(map[string]string, len(ms))
	for _, m := range ms {
		names[m.ID] = m.Name
	}
	now := c.eng.Now()
	for _, x := range page.Disputes {
		row := disputeRow{Dispute: x, Merchant: names[x.MerchantID], Link: paymentPath(x.MerchantID, x.PaymentID)}
		if !x.DueBy.IsZero() {
			row.Until = until(now, x.DueBy)
			if slices.Contains(surgepay.DisputeStatusesNeedingResponse, x.Status) {
				row.Past = !x.DueBy.After(now)
				row.Near = !row.Past && x.DueBy.Sub(now) < DisputeDueSoon
			}
		}
		d.Rows = append(d.Rows, row)
	}
	if page.Next != "" {
		f := form
		f.After = page.Next
		d.Next = Prefix + "disputes?" + f.values().Encode()
	}
	c.render(w, http.StatusOK, "disputes.html", d)
}
