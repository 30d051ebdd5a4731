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

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/engine"
	"github.com/surgepay/surgepay/telemetry"
)

// The operations views: what waits (staged captures, unknown outcomes,
// failing webhook endpoints) and how the processors fare, read-only.
// Each reads what the engine and telemetry already keep for /metrics,
// the dashboard and the API, with a few bounded statements.

// Bounds of the operations views.
const (
	// UnknownPageDefault and UnknownPageMax bound the unknown outcomes a
	// page lists (one statement: the reconciler's query).
	UnknownPageDefault = 50
	UnknownPageMax     = 500
	// FailedDeliveriesShown is how many failed deliveries of each failing
	// endpoint the webhooks view lists (one statement an endpoint), for
	// at most EndpointsDetailedMax endpoints.
	FailedDeliveriesShown = 5
	EndpointsDetailedMax  = 32
	// AuthorizationLifetimeDefault is settle's default
	// --authorization-lifetime (settle.AuthorizationLifetimeDefault:
	// Stripe keeps an uncaptured authorization about 7 days): a staged
	// capture's deadline is its authorization's time plus this.
	AuthorizationLifetimeDefault = 7 * 24 * time.Hour
)

// fields reads the named fields of a query string, each at most once
// and clean (cleanField); other fields are ignored.
func fields(raw string, names ...string) (map[string]string, *fieldError) {
	vals, err := url.ParseQuery(raw)
	if err != nil {
		return nil, badField("query", "the query string is malformed")
	}
	out := make(map[string]string, len(names))
	for _, name := range names {
		vs := vals[name]
		if len(vs) > 1 {
			return nil, badField(name, "is given %d times; give it once", len(vs))
		}
		if len(vs) == 1 {
			v, ferr := cleanField(name, vs[0])
			if ferr != nil {
				return nil, ferr
			}
			out[name] = v
		}
	}
	return out, nil
}

// limitField parses a page's limit: def when empty, 1 to maxLimit.
func limitField(v string, def, maxLimit int) (int, *fieldError) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxLimit {
		return 0, badField("limit", "must be a whole number from 1 to %d", maxLimit)
	}
	return n, nil
}

// narrow returns ms narrowed to the merchant id ("": all of them), a
// field error when there is no such merchant, or the store's error.
func (c *Console) narrow(ctx context.Context, ms []*surgepay.Merchant, id string) ([]*surgepay.Merchant, *fieldError, error) {
	if id == "" {
		return ms, nil, nil
	}
	m, err := c.eng.GetMerchant(ctx, id)
	switch {
	case surgepay.ErrorCode(err) == surgepay.ENOTFOUND:
		return nil, badField("merchant", "no such merchant"), nil
	case err != nil:
		return nil, nil, err
	}
	return []*surgepay.Merchant{m}, nil, nil
}

// until says how far t is from now: "in 3d 4h" or "2h 5m ago".
func until(now, t time.Time) string {
	if d := t.Sub(now); d >= 0 {
		return "in " + span(d)
	}
	return span(now.Sub(t)) + " ago"
}

// span formats a duration for people, to two units, the second left
// out when it is 0: "45s", "3m 20s", "5h", "6d 23h".
func span(d time.Duration) string {
	units := func(big int, bigUnit string, small int, smallUnit string) string {
		if small == 0 {
			return fmt.Sprintf("%d%s", big, bigUnit)
		}
		return fmt.Sprintf("%d%s %d%s", big, bigUnit, small, smallUnit)
	}
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return units(int(d.Minutes()), "m", int(d.Seconds())%60, "s")
	case d < 48*time.Hour:
		return units(int(d.Hours()), "h", int(d.Minutes())%60, "m")
	}
	return units(int(d.Hours())/24, "d", int(d.Hours())%24, "h")
}

// stagedPage is the data of staged.html.
type stagedPage struct {
	B       *engine.StagedBacklog
	Now     time.Time
	Age     string // of the oldest record
	Amounts []amount
	// Deadline is the nearest authorization deadline (zero if unknown),
	// Until how far it is, Past whether it has gone by, Near whether it
	// is within a day; FromStaging that it is reckoned from the oldest
	// record's staging time (JetStream), not from an authorization.
	Deadline          time.Time
	Until             string
	Past, Near        bool
	FromStaging       bool
	Lifetime          time.Duration
	SampleMax         int
	Partial           bool // the amounts are of the oldest Sampled records only
	SampleUnavailable bool // an embedded stage whose store cannot read payments in bulk
}

// amount is a sum in one currency.
type amount struct {
	Currency string
	Minor    int64
}

// staged serves GET /console/staged: the captures waiting for settle.
func (c *Console) staged(w http.ResponseWriter, r *http.Request) {
	b, err := c.eng.StagedBacklog(r.Context())
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	now := c.eng.Now()
	d := stagedPage{B: b, Now: now, Lifetime: AuthorizationLifetimeDefault, SampleMax: engine.StagedSampleMax}
	if !b.Oldest.IsZero() {
		d.Age = span(now.Sub(b.Oldest))
	}
	for cur, n := range b.Amounts {
		d.Amounts = append(d.Amounts, amount{Currency: cur, Minor: n})
	}
	slices.SortFunc(d.Amounts, func(a, b amount) int { return strings.Compare(a.Currency, b.Currency) })
	d.Partial = b.Sampled < b.Depth
	d.SampleUnavailable = b.Kind == engine.StageEmbedded && b.Depth > 0 && b.Sampled == 0
	from := b.OldestAuthorized
	if from.IsZero() && b.Kind == engine.StageJetStream && !b.Oldest.IsZero() {
		from, d.FromStaging = b.Oldest, true
	}
	if !from.IsZero() {
		d.Deadline = from.Add(AuthorizationLifetimeDefault)
		d.Until = until(now, d.Deadline)
		d.Past = !d.Deadline.After(now)
		d.Near = !d.Past && d.Deadline.Sub(now) < 24*time.Hour
	}
	c.render(w, http.StatusOK, "staged.html", d)
}

// unknownPage is the data of unknown.html.
type unknownPage struct {
	Err               *fieldError
	Limit             string
	Rows              []unknownRow
	More              bool // more than the page are waiting
	ReconcileInterval time.Duration
	BatchMax          int
	PageMax           int
}

// unknownRow is a payment waiting for the reconciler.
type unknownRow struct {
	P         *surgepay.Payment
	Merchant  string
	Link      string
	Processor string
	Waiting   string // since its last change
	InBatch   bool   // among the oldest ReconcileBatchMax: the reconciler's next pass looks at it
}

// unknown serves GET /console/unknown: the payments whose outcome the
// reconciler has yet to learn, oldest first.
func (c *Console) unknown(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	d := unknownPage{ReconcileInterval: c.cfg.ReconcileInterval, BatchMax: engine.ReconcileBatchMax, PageMax: UnknownPageMax}
	f, ferr := fields(r.URL.RawQuery, "limit")
	limit := 0
	if ferr == nil {
		d.Limit = f["limit"]
		limit, ferr = limitField(f["limit"], UnknownPageDefault, UnknownPageMax)
	}
	if ferr != nil {
		d.Err = ferr
		c.render(w, http.StatusBadRequest, "unknown.html", d)
		return
	}
	ps, err := c.eng.ListUnknownOutcomes(ctx, limit+1)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	if len(ps) > limit {
		ps, d.More = ps[:limit], true
	}
	names, err := c.merchantNames(ctx)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	now := c.eng.Now()
	for i, p := range ps {
		d.Rows = append(d.Rows, unknownRow{P: p, Merchant: names[p.MerchantID], Link: paymentPath(p.MerchantID, p.ID),
			Processor: processorOf(p), Waiting: span(now.Sub(p.Updated)), InBatch: i < engine.ReconcileBatchMax})
	}
	c.render(w, http.StatusOK, "unknown.html", d)
}

// merchantNames returns every merchant's name by ID.
func (c *Console) merchantNames(ctx context.Context) (map[string]string, error) {
	ms, err := c.eng.ListMerchants(ctx)
	if err != nil {
		return nil, err
	}
	names := make(map[string]string, len(ms))
	for _, m := range ms {
		names[m.ID] = m.Name
	}
	return names, nil
}

// processorsPage is the data of processors.html.
type processorsPage struct {
	Rows     []processorRow
	Router   bool // [processors] are configured
	NoStates bool // this console was given no processor states
}

// processorRow is a processor and, when known, its state.
type processorRow struct {
	Name  string
	State *telemetry.ProcessorState
}

// processors serves GET /console/processors: each configured
// processor's state as telemetry keeps it for /metrics and the dashboard.
func (c *Console) processors(w http.ResponseWriter, r *http.Request) {
	names := c.eng.ProcessorNames()
	d := processorsPage{Router: len(names) > 0, NoStates: c.cfg.ProcessorStates == nil}
	states := map[string]telemetry.ProcessorState{}
	if c.cfg.ProcessorStates != nil {
		for _, s := range c.cfg.ProcessorStates() {
			states[s.Processor] = s
			if !slices.Contains(names, s.Processor) {
				names = append(names, s.Processor) // removed by a reload, or known to telemetry alone
			}
		}
	}
	slices.Sort(names)
	for _, n := range names {
		row := processorRow{Name: n}
		if s, ok := states[n]; ok {
			row.State = &s
		}
		d.Rows = append(d.Rows, row)
	}
	c.render(w, http.StatusOK, "processors.html", d)
}

// webhooksPage is the data of webhooks.html.
type webhooksPage struct {
	Err       *fieldError
	Merchant  string
	Merchants []*surgepay.Merchant
	Rows      []endpointRow
	Scanned   int    // merchants whose endpoints were read
	Note      string // why none could be read
	Streak    int
	Shown     int
}

// endpointRow is an endpoint with failed attempts since its last success.
type endpointRow struct {
	E          *surgepay.WebhookEndpoint
	Merchant   string
	Failing    bool // WebhookFailingStreak failures in a row or more; else degraded
	Deliveries []failedDelivery
	Detailed   bool // its failed deliveries were read
}

// failedDelivery is a delivery out of attempts, linking to its payment.
type failedDelivery struct {
	*surgepay.WebhookDeliveryInfo
	Link string
}

// webhooks serves GET /console/webhooks: the endpoints whose last
// attempts failed, per merchant, with their newest failed deliveries.
func (c *Console) webhooks(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ms, err := c.eng.ListMerchants(ctx)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	d := webhooksPage{Merchants: ms, Streak: surgepay.WebhookFailingStreak, Shown: FailedDeliveriesShown}
	f, ferr := fields(r.URL.RawQuery, "merchant")
	if ferr == nil {
		d.Merchant = f["merchant"]
		if ms, ferr, err = c.narrow(ctx, ms, d.Merchant); err != nil {
			c.failErr(w, r, err)
			return
		}
	}
	if ferr != nil {
		d.Err = ferr
		c.render(w, http.StatusBadRequest, "webhooks.html", d)
		return
	}
	if len(ms) > MerchantsProbedMax {
		d.Note = fmt.Sprintf("Only the first %d of %d merchants were read (one statement each): choose a merchant.", MerchantsProbedMax, len(ms))
		ms = ms[:MerchantsProbedMax]
	}
	if err := c.failingEndpoints(ctx, ms, &d); err != nil {
		c.failErr(w, r, err)
		return
	}
	c.render(w, http.StatusOK, "webhooks.html", d)
}

// failingEndpoints reads the endpoints of ms (one statement a merchant)
// and the newest failed deliveries of the first EndpointsDetailedMax
// failing ones (one statement each).
func (c *Console) failingEndpoints(ctx context.Context, ms []*surgepay.Merchant, d *webhooksPage) error {
	for _, m := range ms {
		call := &engine.Call{MerchantID: m.ID}
		eps, err := c.eng.ListWebhookEndpoints(ctx, call)
		if surgepay.ErrorCode(err) == surgepay.EUNAVAILABLE {
			d.Note = errMessage(err)
			return nil
		}
		if err != nil {
			return err
		}
		d.Scanned++
		for _, ep := range eps {
			if ep.FailuresInARow == 0 {
				continue
			}
			row := endpointRow{E: ep, Merchant: m.Name, Failing: ep.FailuresInARow >= surgepay.WebhookFailingStreak}
			if len(d.Rows) < EndpointsDetailedMax {
				ds, _, err := c.eng.ListWebhookDeliveries(ctx, call, surgepay.WebhookDeliveryFilter{EndpointID: ep.ID,
					Status: surgepay.WebhookStatusFailed, Limit: FailedDeliveriesShown})
				if err != nil {
					return err
				}
				row.Detailed = true
				for _, x := range ds {
					row.Deliveries = append(row.Deliveries, failedDelivery{WebhookDeliveryInfo: x, Link: paymentPath(m.ID, x.PaymentID)})
				}
			}
			d.Rows = append(d.Rows, row)
		}
	}
	return nil
}
