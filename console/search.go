package console

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/engine"
)

// searchForm is the search form as the operator filled it in: the query
// of GET /console/.
type searchForm struct {
	Merchant, Payment, Customer, Email, Last4, IdempotencyKey, Ref string
	Status, AmountMin, AmountMax, From, To, After, Limit           string
}

// formFields names the query parameters of the form, in its order.
var formFields = []string{"merchant", "payment", "customer", "email", "last4", "idempotency_key", "ref",
	"status", "amount_min", "amount_max", "from", "to", "after", "limit"}

func (f *searchForm) fields() []*string {
	return []*string{&f.Merchant, &f.Payment, &f.Customer, &f.Email, &f.Last4, &f.IdempotencyKey, &f.Ref,
		&f.Status, &f.AmountMin, &f.AmountMax, &f.From, &f.To, &f.After, &f.Limit}
}

// values returns the form as a query, without empty fields.
func (f *searchForm) values() url.Values {
	v := url.Values{}
	for i, p := range f.fields() {
		if *p != "" {
			v.Set(formFields[i], *p)
		}
	}
	return v
}

// fieldError is a search field the console refuses: 400, naming it.
type fieldError struct {
	Field, Message string
}

func (e *fieldError) Error() string { return e.Field + ": " + e.Message }

func badField(field, format string, args ...any) *fieldError {
	return &fieldError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// query is a parsed search.
type query struct {
	form                 searchForm
	status               surgepay.Status
	amountGTE, amountLTE int64
	from, before         time.Time
	limit                int
}

// dateLayouts are the dates and times a search accepts, in UTC.
var dateLayouts = []string{"2006-01-02", "2006-01-02T15:04", "2006-01-02T15:04:05", time.RFC3339}

// parseSearch reads the search form from a query string. A field that
// holds what may be a card number is refused and emptied, so that the
// page never shows it back.
func parseSearch(raw string) (*query, *fieldError) {
	vals, err := url.ParseQuery(raw)
	if err != nil {
		return &query{}, badField("query", "the query string is malformed")
	}
	q := &query{limit: PageLimitDefault}
	for i, p := range q.form.fields() {
		name := formFields[i]
		vs := vals[name]
		if len(vs) > 1 {
			return q, badField(name, "is given %d times; give it once", len(vs))
		}
		if len(vs) == 0 {
			continue
		}
		v, ferr := cleanField(name, vs[0])
		if ferr != nil {
			return q, ferr
		}
		*p = v
	}
	return q, q.check()
}

// cleanField returns a query field's value trimmed, or the field's
// error: a card number (never echoed: pages show brand and last 4 only),
// more than FieldBytesMax bytes, or invalid, control or invisible
// characters.
func cleanField(name, v string) (string, *fieldError) {
	v = strings.TrimSpace(v)
	switch {
	case surgepay.TextHasCardNumber(v):
		return "", badField(name, "looks like a card number; search by the card's last 4 digits (last4) instead")
	case len(v) > FieldBytesMax:
		return "", badField(name, "is longer than %d bytes", FieldBytesMax)
	case !utf8.ValidString(v) || surgepay.TextHasControl(v) || surgepay.TextHasHidden(v):
		return "", badField(name, "holds invalid, control or invisible characters")
	}
	return v, nil
}

// check validates the fields whose form is known and parses the rest.
func (q *query) check() *fieldError {
	f := &q.form
	if f.Last4 != "" && (len(f.Last4) != 4 || strings.Trim(f.Last4, "0123456789") != "") {
		return badField("last4", "must be the card's last 4 digits")
	}
	if f.Status != "" {
		if q.status = surgepay.Status(f.Status); !q.status.Valid() {
			return badField("status", "%q is not a payment status", f.Status)
		}
	}
	var err *fieldError
	if q.amountGTE, err = amountField("amount_min", f.AmountMin); err != nil {
		return err
	}
	if q.amountLTE, err = amountField("amount_max", f.AmountMax); err != nil {
		return err
	}
	if q.amountLTE > 0 && q.amountGTE > q.amountLTE {
		return badField("amount_max", "is less than amount_min")
	}
	if q.from, err = dateField("from", f.From, false); err != nil {
		return err
	}
	if q.before, err = dateField("to", f.To, true); err != nil {
		return err
	}
	if !q.from.IsZero() && !q.before.IsZero() && !q.from.Before(q.before) {
		return badField("to", "is not after from")
	}
	if f.After != "" && (!strings.HasPrefix(f.After, "pay_") || len(f.After) > 64) {
		return badField("after", "must be a payment ID (the next page's link sets it)")
	}
	if f.Limit != "" {
		n, perr := strconv.Atoi(f.Limit)
		if perr != nil || n < 1 || n > surgepay.PaymentSearchLimitMax {
			return badField("limit", "must be a whole number from 1 to %d", surgepay.PaymentSearchLimitMax)
		}
		q.limit = n
	}
	return nil
}

// amountField parses an amount in minor units; "" is 0 (no bound).
func amountField(name, v string) (int64, *fieldError) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > surgepay.AmountMinorMax {
		return 0, badField(name, "must be a whole number of minor units from 0 to %d (1250 is 12.50 EUR)", surgepay.AmountMinorMax)
	}
	return n, nil
}

// dateField parses a date or time in UTC; a date alone as the end of a
// range ends after that day.
func dateField(name, v string, end bool) (time.Time, *fieldError) {
	if v == "" {
		return time.Time{}, nil
	}
	for _, layout := range dateLayouts {
		t, err := time.Parse(layout, v)
		if err != nil {
			continue
		}
		if end && layout == dateLayouts[0] {
			t = t.AddDate(0, 0, 1)
		}
		return t.UTC(), nil
	}
	return time.Time{}, badField(name, "must be a date (2026-03-01) or a time (2026-03-01T14:30) in UTC")
}

// result is a search's answer.
type result struct {
	payments []*surgepay.Payment
	next     string   // the cursor of the next page; "" if none
	bounded  bool     // a scan stopped at its bound before the page was full
	notes    []string // what the search did, for the operator
}

// page is one source's page of a search: one merchant's scan, or one
// customer's payments.
type page struct {
	payments []*surgepay.Payment
	next     string
	bounded  bool
}

// merge returns the newest limit payments of pages that are each newest
// first, and where to go on: a page that stopped early (next set) holds
// nothing older than its next, so the others' payments older than that
// are left to the next page.
func merge(pages []page, limit int) result {
	floor := ""
	var out result
	for _, p := range pages {
		if p.next > floor {
			floor = p.next
		}
		out.bounded = out.bounded || p.bounded
	}
	for _, p := range pages {
		for _, pay := range p.payments {
			if pay.ID >= floor {
				out.payments = append(out.payments, pay)
			}
		}
	}
	slices.SortFunc(out.payments, func(a, b *surgepay.Payment) int { return strings.Compare(b.ID, a.ID) })
	out.next = floor
	if len(out.payments) > limit {
		out.payments = out.payments[:limit]
		out.next = out.payments[limit-1].ID
	}
	return out
}

// merchants returns the merchants a search covers: the one chosen, or
// all of them.
func (c *Console) merchants(ctx context.Context, q *query) ([]*surgepay.Merchant, error) {
	if q.form.Merchant != "" {
		m, err := c.eng.GetMerchant(ctx, q.form.Merchant)
		if surgepay.ErrorCode(err) == surgepay.ENOTFOUND {
			return nil, badField("merchant", "no such merchant")
		}
		return []*surgepay.Merchant{m}, err
	}
	return c.eng.ListMerchants(ctx)
}

// run runs the search q over ms: an exact lookup when a payment ID, an
// Idempotency-Key or a processor's reference is given, a customer's
// payments (by ID or email) through the customer index, else a bounded
// scan per merchant.
func (c *Console) run(ctx context.Context, q *query, ms []*surgepay.Merchant) (result, error) {
	f := &q.form
	switch {
	case f.Payment != "":
		return c.probe(ctx, ms, "payment", func(m *surgepay.Merchant) (*surgepay.Payment, error) {
			return c.eng.GetPayment(ctx, &engine.Call{MerchantID: m.ID}, f.Payment)
		})
	case f.IdempotencyKey != "":
		return c.probe(ctx, ms, "idempotency_key", func(m *surgepay.Merchant) (*surgepay.Payment, error) {
			return c.eng.FindPaymentByIdempotencyKey(ctx, m.ID, f.IdempotencyKey)
		})
	case f.Ref != "":
		p, err := c.eng.FindPaymentByRef(ctx, f.Ref)
		if err == nil && (f.Merchant == "" || p.MerchantID == f.Merchant) {
			return result{payments: []*surgepay.Payment{p}, notes: []string{"Found by the processor's reference (an index)."}}, nil
		}
		if err != nil && surgepay.ErrorCode(err) != surgepay.ENOTFOUND {
			return result{}, err
		}
	case f.Customer != "" || f.Email != "":
		return c.customerSearch(ctx, q, ms)
	}
	return c.scan(ctx, q, ms)
}

// probe looks a payment up in each merchant (MerchantsProbedMax at
// most): one statement each.
func (c *Console) probe(ctx context.Context, ms []*surgepay.Merchant, field string,
	find func(*surgepay.Merchant) (*surgepay.Payment, error)) (result, error) {
	if len(ms) > MerchantsProbedMax {
		return result{}, badField("merchant", "choose a merchant: a lookup of all probes at most %d merchants, and there are %d",
			MerchantsProbedMax, len(ms))
	}
	var out result
	for _, m := range ms {
		p, err := find(m)
		if surgepay.ErrorCode(err) == surgepay.ENOTFOUND {
			continue
		}
		if err != nil {
			return result{}, err
		}
		out.payments = append(out.payments, p)
	}
	out.notes = []string{fmt.Sprintf("Exact lookup by %s (other filters are not applied).", field)}
	return out, nil
}

// scan runs the bounded scan (surgepay.OperatorSearcher) of each
// merchant, at most MerchantsScannedMax, sharing
// PaymentSearchExamineMax between them.
func (c *Console) scan(ctx context.Context, q *query, ms []*surgepay.Merchant) (result, error) {
	if len(ms) > MerchantsScannedMax {
		return result{}, badField("merchant", "choose a merchant: a search of all scans at most %d merchants, and there are %d",
			MerchantsScannedMax, len(ms))
	}
	examine := surgepay.PaymentSearchExamineMax / max(len(ms), 1)
	var pages []page
	for _, m := range ms {
		sp, err := c.eng.SearchPayments(ctx, surgepay.PaymentSearch{MerchantID: m.ID, Status: q.status,
			AmountGTE: q.amountGTE, AmountLTE: q.amountLTE, Last4: q.form.Last4, Ref: q.form.Ref,
			CreatedGTE: q.from, CreatedBefore: q.before, StartingAfter: q.form.After, Limit: q.limit, ExamineMax: examine})
		if err != nil {
			return result{}, err
		}
		pages = append(pages, page{payments: sp.Payments, next: sp.Next, bounded: sp.Bounded})
	}
	out := merge(pages, q.limit)
	out.notes = append(out.notes, fmt.Sprintf("Scanned newest first, at most %d payments per merchant for this page.", examine))
	return out, nil
}

// customersMax bounds the customers an email search lists the payments
// of (one statement each).
const customersMax = 20

// customerSearch lists the payments of a customer (by ID), or of the
// customers of an email, through the customer index of each store;
// status and dates filter in the index, the amounts on each payment, and
// a card's last 4 and a reference are not applied.
func (c *Console) customerSearch(ctx context.Context, q *query, ms []*surgepay.Merchant) (result, error) {
	if len(ms) > MerchantsScannedMax {
		return result{}, badField("merchant", "choose a merchant: a search of all looks at most %d merchants, and there are %d",
			MerchantsScannedMax, len(ms))
	}
	type owner struct{ merchant, customer string }
	var owners []owner
	var notes []string
	for _, m := range ms {
		if q.form.Customer != "" {
			owners = append(owners, owner{m.ID, q.form.Customer})
			continue
		}
		cs, err := c.eng.FindCustomersByEmail(ctx, m.ID, q.form.Email)
		if err != nil {
			return result{}, err
		}
		for _, cu := range cs {
			owners = append(owners, owner{m.ID, cu.ID})
		}
	}
	if len(owners) > customersMax {
		notes = append(notes, fmt.Sprintf("%d customers have this email; the payments of the newest %d are listed.", len(owners), customersMax))
		owners = owners[:customersMax]
	}
	var pages []page
	for _, o := range owners {
		ps, more, err := c.eng.ListPayments(ctx, &engine.Call{MerchantID: o.merchant}, surgepay.PaymentFilter{
			Page:   surgepay.Page{Limit: q.limit, StartingAfter: q.form.After},
			Status: q.status, CustomerID: o.customer, CreatedGTE: q.from, CreatedBefore: q.before})
		if err != nil {
			return result{}, err
		}
		pg := page{}
		if more && len(ps) > 0 {
			pg.next = ps[len(ps)-1].ID
		}
		for _, p := range ps {
			total := p.AmountTotal()
			if (q.amountGTE == 0 || total >= q.amountGTE) && (q.amountLTE == 0 || total <= q.amountLTE) {
				pg.payments = append(pg.payments, p)
			}
		}
		pages = append(pages, pg)
	}
	out := merge(pages, q.limit)
	if q.form.Last4 != "" || q.form.Ref != "" {
		notes = append(notes, "Listed through the customer index: a card's last 4 and a reference are not applied with a customer.")
	}
	out.notes = append(notes, out.notes...)
	return out, nil
}

// searchPage is the data of search.html.
type searchPage struct {
	Form      searchForm
	Merchants []*surgepay.Merchant
	Statuses  []surgepay.Status
	Err       *fieldError
	Searched  bool
	Rows      []row
	Next      string // the next page's URL
	Bounded   bool
	Notes     []string
	All       bool // every merchant: rows name theirs
	// ExamineMax is the bound of a page's scan, said on the page.
	ExamineMax int
}

// row is a payment in the results.
type row struct {
	P        *surgepay.Payment
	Merchant string
	Link     string
}

// search serves GET /console/: the form and, once a search is asked for
// (any field, or the newest payments of a merchant), its results.
func (c *Console) search(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q, ferr := parseSearch(r.URL.RawQuery)
	data := searchPage{Form: q.form, Statuses: surgepay.Statuses, All: q.form.Merchant == "",
		ExamineMax: surgepay.PaymentSearchExamineMax}
	ms, err := c.eng.ListMerchants(ctx)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	data.Merchants = ms
	if ferr != nil {
		data.Err = ferr
		c.render(w, http.StatusBadRequest, "search.html", data)
		return
	}
	if len(r.URL.RawQuery) == 0 {
		c.render(w, http.StatusOK, "search.html", data)
		return
	}
	res, err := c.find(ctx, q)
	if fe, ok := err.(*fieldError); ok {
		data.Err = fe
		c.render(w, http.StatusBadRequest, "search.html", data)
		return
	}
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	data.Searched, data.Bounded, data.Notes = true, res.bounded, res.notes
	names := make(map[string]string, len(ms))
	for _, m := range ms {
		names[m.ID] = m.Name
	}
	for _, p := range res.payments {
		data.Rows = append(data.Rows, row{P: p, Merchant: names[p.MerchantID], Link: paymentPath(p.MerchantID, p.ID)})
	}
	if res.next != "" {
		next := q.form
		next.After = res.next
		data.Next = Prefix + "?" + next.values().Encode()
	}
	c.render(w, http.StatusOK, "search.html", data)
}

// find runs a parsed search.
func (c *Console) find(ctx context.Context, q *query) (result, error) {
	ms, err := c.merchants(ctx, q)
	if err != nil {
		return result{}, err
	}
	return c.run(ctx, q, ms)
}

// paymentPath is a payment's page.
func paymentPath(merchantID, id string) string {
	return Prefix + "merchants/" + url.PathEscape(merchantID) + "/payments/" + url.PathEscape(id)
}
