package console

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/surgepay/surgepay"
)

// AuditExamineMax bounds the audit rows one page of the audit trail
// reads when it filters by action or actor (the store filters by
// merchant only: AuditFilter): ListLimitMax rows a statement, newest
// first, so at most 10 statements. A page that stops there before it is
// full says so, and "Older" goes on from where it stopped.
const AuditExamineMax = 10 * surgepay.ListLimitMax

// auditActions are the actions the audit trail records, for the filter.
var auditActions = []string{
	surgepay.AuditMerchantCreated, surgepay.AuditMerchantDisabled, surgepay.AuditMerchantEnabled,
	surgepay.AuditAPIKeyCreated, surgepay.AuditAPIKeyRolled, surgepay.AuditAPIKeyRevoked, surgepay.AuditAPIKeyExpirySet,
	surgepay.AuditPaymentCaptured, surgepay.AuditPaymentVoided, surgepay.AuditPaymentRefunded, surgepay.AuditWebhookResent,
}

// auditForm is the audit trail's filter as the operator filled it in.
type auditForm struct {
	Merchant, Action, Actor, After, Limit string
}

func (f auditForm) values() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"merchant": f.Merchant, "action": f.Action, "actor": f.Actor,
		"after": f.After, "limit": f.Limit} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v
}

// auditPage is the data of audit.html.
type auditPage struct {
	Form       auditForm
	Err        *fieldError
	Merchants  []*surgepay.Merchant
	Actions    []string
	Rows       []auditRow
	Next       string // the next page's URL
	Bounded    bool   // the scan stopped at AuditExamineMax before the page was full
	ExamineMax int
}

// auditRow is an audit event, its merchant's name and, for a payment,
// its page.
type auditRow struct {
	*surgepay.AuditEvent
	Merchant string
	Link     string
}

// auditQuery is a parsed filter of the audit trail.
type auditQuery struct {
	form  auditForm
	limit int
}

// parseAudit reads the audit trail's filter from a query string.
func parseAudit(raw string) (*auditQuery, *fieldError) {
	q := &auditQuery{}
	f, ferr := fields(raw, "merchant", "action", "actor", "after", "limit")
	if ferr != nil {
		return q, ferr
	}
	q.form = auditForm{Merchant: f["merchant"], Action: f["action"], Actor: f["actor"], After: f["after"], Limit: f["limit"]}
	if q.form.Action != "" && !slices.Contains(auditActions, q.form.Action) {
		return q, badField("action", "%q is not an audited action", q.form.Action)
	}
	if a := q.form.After; a != "" && (!strings.HasPrefix(a, "aud_") || len(a) > 64) {
		return q, badField("after", "must be an audit event ID (the next page's link sets it)")
	}
	q.limit, ferr = limitField(q.form.Limit, PageLimitDefault, surgepay.ListLimitMax)
	return q, ferr
}

// audit serves GET /console/audit: the audit trail, newest first,
// filtered by merchant (the store's index), action and actor (here, on
// at most AuditExamineMax rows a page).
func (c *Console) audit(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ms, err := c.eng.ListMerchants(ctx)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	q, ferr := parseAudit(r.URL.RawQuery)
	d := auditPage{Form: q.form, Merchants: ms, Actions: auditActions, ExamineMax: AuditExamineMax}
	if ferr == nil {
		if _, ferr, err = c.narrow(ctx, ms, q.form.Merchant); err != nil {
			c.failErr(w, r, err)
			return
		}
	}
	if ferr != nil {
		d.Err = ferr
		c.render(w, http.StatusBadRequest, "audit.html", d)
		return
	}
	events, next, bounded, err := c.auditScan(ctx, q)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	names := make(map[string]string, len(ms))
	for _, m := range ms {
		names[m.ID] = m.Name
	}
	for _, ev := range events {
		row := auditRow{AuditEvent: ev, Merchant: names[ev.MerchantID]}
		if strings.HasPrefix(ev.ObjectID, "pay_") {
			row.Link = paymentPath(ev.MerchantID, ev.ObjectID)
		}
		d.Rows = append(d.Rows, row)
	}
	d.Bounded = bounded
	if next != "" {
		f := q.form
		f.After = next
		d.Next = Prefix + "audit?" + f.values().Encode()
	}
	c.render(w, http.StatusOK, "audit.html", d)
}

// auditScan returns a page of the audit trail that q selects, the
// cursor of the next page ("" if none) and whether the scan stopped at
// AuditExamineMax before the page was full.
func (c *Console) auditScan(ctx context.Context, q *auditQuery) ([]*surgepay.AuditEvent, string, bool, error) {
	f := surgepay.AuditFilter{MerchantID: q.form.Merchant, Page: surgepay.Page{StartingAfter: q.form.After}}
	filtered := q.form.Action != "" || q.form.Actor != ""
	var out []*surgepay.AuditEvent
	for examined := 0; ; {
		f.Limit = q.limit
		if filtered {
			f.Limit = surgepay.ListLimitMax
		}
		evs, more, err := c.eng.ListAuditEvents(ctx, f)
		if err != nil {
			return nil, "", false, err
		}
		for _, ev := range evs {
			examined++
			f.StartingAfter = ev.ID
			if !matchAudit(q, ev) {
				continue
			}
			out = append(out, ev)
			if len(out) == q.limit {
				if !more && ev == evs[len(evs)-1] {
					return out, "", false, nil
				}
				return out, ev.ID, false, nil
			}
		}
		switch {
		case !more || len(evs) == 0:
			return out, "", false, nil
		case examined >= AuditExamineMax:
			return out, f.StartingAfter, true, nil
		}
	}
}

// matchAudit reports whether ev has q's action and an actor that starts
// with q's (case ignored).
func matchAudit(q *auditQuery, ev *surgepay.AuditEvent) bool {
	if q.form.Action != "" && ev.Action != q.form.Action {
		return false
	}
	return q.form.Actor == "" || strings.HasPrefix(strings.ToLower(ev.Actor), strings.ToLower(q.form.Actor))
}
