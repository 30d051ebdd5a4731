package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The fill's shape: each customer has one saved card and makes about
// paymentsPerCustomer payments over fillSpan, created in the fillSpan
// before; the small merchant has smallShare of the payments (at least
// smallPaymentsMin).
const (
	fillSpan            = 30 * 24 * time.Hour
	paymentsPerCustomer = 10
	smallShare          = 100 // 1 %
	smallPaymentsMin    = 1000
	// batchRows is the rows of one transaction (SQLite) or one COPY
	// (PostgreSQL).
	batchRows = 100_000
	// samplesMax is how many payments the fill keeps for the searches
	// to draw from (reservoir sampling), and as many idempotency keys.
	samplesMax = 4000
)

// state is fill.json: what a fill made, so that a run (and a second fill
// with the same N) can reuse it.
type state struct {
	Store       string    `json:"store"`
	N           int       `json:"n"`
	Keys        int       `json:"keys"`
	Seed        uint64    `json:"seed"`
	Database    string    `json:"database,omitempty"` // PostgreSQL: host/name, no password
	Merchant    string    `json:"merchant"`
	Small       string    `json:"small_merchant"`
	SmallKey    string    `json:"small_merchant_api_key"` // a benchmark's key, mode 0600
	Customers   int       `json:"customers"`
	Payments    int       `json:"payments_total"`
	FillSeconds float64   `json:"fill_seconds"`
	SizeBytes   int64     `json:"size_bytes"`
	Start       time.Time `json:"start"` // the payments' time span
	End         time.Time `json:"end"`
	Finished    time.Time `json:"finished"`
}

// sample is a payment the searches may look for.
type sample struct {
	ID, Customer, Email, Last4, Ref, Status string
	Amount                                  int64 // total, minor units
	Created                                 time.Time
}

// samples is samples.json.
type samples struct {
	Payments []sample
	Keys     []string
}

// pay is one generated payment.
type pay struct {
	merchant, id, customer, pm, status, ref string
	amount                                  int64
	created                                 time.Time
}

// store is what the fill needs of a database: a dialect of the same steps.
type store interface {
	// ts is a time as the store's columns hold it.
	ts(t time.Time) any
	// timeOf reads a time column's value back.
	timeOf(v any) time.Time
	// template reads the newest row of merchant in table (of that
	// status, for payments) with its column names.
	template(ctx context.Context, table, merchant, status string) (*row, error)
	// transactions is p's transactions column, from the template t's.
	transactions(t *row, p *pay, newTxID func() string) (any, error)
	dropIndexes(ctx context.Context) error
	write(ctx context.Context, table string, cols []string, rows [][]any) error
	// finish creates the indexes again and what the store derives.
	finish(ctx context.Context) error
	size(ctx context.Context) (int64, error)
	count(ctx context.Context, merchant string) (int, error)
	close()
}

// row is a template row.
type row struct {
	cols []string
	vals []any
}

func (r *row) index(col string) int { return slices.Index(r.cols, col) }

func (r *row) str(col string) string {
	if i := r.index(col); i >= 0 {
		if s, ok := r.vals[i].(string); ok {
			return s
		}
	}
	return ""
}

func (r *row) int(col string) int64 {
	if i := r.index(col); i >= 0 {
		switch v := r.vals[i].(type) {
		case int64:
			return v
		case int32:
			return int64(v)
		}
	}
	return 0
}

// fill makes the store of o, or reuses the one fill.json describes.
func fill(ctx context.Context, o *options) error {
	if err := os.MkdirAll(o.work, 0o700); err != nil {
		return err
	}
	if st, err := readState(o.dir); err == nil && st.matches(o) {
		if s, err := openStore(ctx, o); err == nil {
			n, cerr := s.count(ctx, st.Merchant)
			s.close()
			if cerr == nil && n >= st.N {
				fmt.Fprintf(os.Stderr, "fill: reusing %s (%d payments, filled %s in %.0f s, %s)\n",
					o.dir, n, st.Finished.Format(time.RFC3339), st.FillSeconds, bytesText(st.SizeBytes))
				return nil
			}
		}
	}
	began := time.Now()
	if err := reset(ctx, o); err != nil {
		return err
	}
	st, err := templates(ctx, o)
	if err != nil {
		return err
	}
	s, err := openStore(ctx, o)
	if err != nil {
		return err
	}
	defer s.close()
	g := newGen(o, s)
	st.End = began.UTC().Truncate(time.Second)
	st.Start = st.End.Add(-fillSpan)
	if err := g.run(ctx, st); err != nil {
		return err
	}
	if st.SizeBytes, err = s.size(ctx); err != nil {
		return err
	}
	st.FillSeconds = time.Since(began).Seconds()
	st.Finished = time.Now().UTC()
	fmt.Fprintf(os.Stderr, "fill: %d payments of %s (+%d of %s), %d customers, in %.0f s; %s: %s\n",
		o.n, st.Merchant, st.Payments-o.n, st.Small, st.Customers, st.FillSeconds, o.store, bytesText(st.SizeBytes))
	if err := writeJSON(filepath.Join(o.dir, "samples.json"), g.samples); err != nil {
		return err
	}
	return writeJSON(filepath.Join(o.dir, "fill.json"), st)
}

func (st *state) matches(o *options) bool {
	return st.Store == o.store && st.N == o.n && st.Keys == o.keys && st.Seed == o.seed &&
		st.Database == databaseName(o)
}

func readState(dir string) (*state, error) {
	var st state
	b, err := os.ReadFile(filepath.Join(dir, "fill.json")) //nolint:gosec // the fill folder the operator gave
	if err != nil {
		return nil, err
	}
	return &st, json.Unmarshal(b, &st)
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

// reset empties the fill folder's data (and the PostgreSQL database).
func reset(ctx context.Context, o *options) error {
	for _, f := range []string{"fill.json", "samples.json"} {
		if err := os.Remove(filepath.Join(o.dir, f)); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	if err := os.RemoveAll(filepath.Join(o.dir, "data")); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(o.dir, "data"), 0o700); err != nil {
		return err
	}
	if o.store == "postgres" {
		return recreateDatabase(ctx, o.pgURL)
	}
	return nil
}

func openStore(ctx context.Context, o *options) (store, error) {
	if o.store == "postgres" {
		return openPostgres(ctx, o.pgURL)
	}
	return openSQLite(ctx, filepath.Join(o.dir, "data", "surgepay.db"))
}

// templates starts `surgepay serve` on the empty store (migrations, the
// dev merchant and its key), makes through the API a customer, a saved
// card and a payment of each status the fill makes, and the small
// merchant with an API key, then stops the server.
func templates(ctx context.Context, o *options) (*state, error) {
	cfg, err := serveConfig(o, "fill", false)
	if err != nil {
		return nil, err
	}
	srv, err := startServe(ctx, o, cfg, "fill-serve")
	if err != nil {
		return nil, err
	}
	defer srv.stop()
	st := &state{Store: o.store, N: o.n, Keys: o.keys, Seed: o.seed, Database: databaseName(o)}
	var obj struct {
		ID     string `json:"id"`
		Secret string `json:"secret"`
		Status string `json:"status"`
	}
	steps := []struct {
		method, path, body string
		admin              bool
		want               int
		keep               *string
	}{
		{"POST", "/v1/customers", `{"name":"Template Customer","email":"template@example.com"}`, false, 200, nil},
		{"POST", "/v1/payment_methods", `{"customer":"{cus}","card":{"number":"4242424242424242","exp_month":12,"exp_year":2040,"cvc":"123"}}`, false, 200, nil},
		{"POST", "/v1/payments", `{"amount":1234,"currency":"usd","customer":"{cus}","payment_method":"{pm}","capture_method":"automatic"}`, false, 200, nil},
		{"POST", "/v1/payments", `{"amount":1234,"currency":"usd","customer":"{cus}","payment_method":"{pm}","capture_method":"automatic"}`, false, 200, nil},
		{"POST", "/v1/payments/{pay}/refunds", `{"amount":1234}`, false, 200, nil},
		{"POST", "/v1/payments", `{"amount":1234,"currency":"usd","customer":"{cus}","payment_method":"{pm}","capture_method":"manual"}`, false, 200, nil},
		// 9104: the simulator's generic decline (provider/sim/doc.go).
		{"POST", "/v1/payments", `{"amount":9104,"currency":"usd","customer":"{cus}","payment_method":"{pm}","capture_method":"automatic"}`, false, 402, nil},
		{"POST", "/admin/v1/merchants", `{"name":"searchbench small"}`, true, 200, &st.Small},
		{"POST", "/admin/v1/api_keys", `{"merchant":"{small}"}`, true, 200, nil},
	}
	ids := map[string]string{}
	for _, s := range steps {
		body := s.body
		for k, v := range ids {
			body = strings.ReplaceAll(body, "{"+k+"}", v)
		}
		path := strings.ReplaceAll(s.path, "{pay}", ids["pay"])
		obj.ID, obj.Secret = "", ""
		code, err := srv.call(s.method, path, body, s.admin, &obj)
		if err != nil {
			return nil, fmt.Errorf("template: %w", err)
		}
		if code != s.want && (s.want != 200 || code != 201) {
			return nil, fmt.Errorf("template: %s %s: %d, want %d", s.method, path, code, s.want)
		}
		switch {
		case strings.HasPrefix(obj.ID, "cus_"):
			ids["cus"] = obj.ID
		case strings.HasPrefix(obj.ID, "pm_"):
			ids["pm"] = obj.ID
		case strings.HasPrefix(obj.ID, "pay_"):
			ids["pay"] = obj.ID
		case obj.Secret != "":
			st.SmallKey = obj.Secret
		case s.keep != nil:
			*s.keep = obj.ID
			ids["small"] = obj.ID
		}
	}
	if st.SmallKey == "" || st.Small == "" {
		return nil, fmt.Errorf("template: no small merchant or key made")
	}
	var ms struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if _, err := srv.call("GET", "/admin/v1/merchants", "", true, &ms); err != nil {
		return nil, err
	}
	for _, m := range ms.Data {
		if m.ID != st.Small {
			st.Merchant = m.ID
		}
	}
	if st.Merchant == "" {
		return nil, fmt.Errorf("template: the dev merchant is not listed")
	}
	return st, nil
}

// gen generates the rows.
type gen struct {
	o       *options
	s       store
	rng     *rand.Rand
	samples samples
	seen    int // payments offered to the reservoir
	keysOff int // keys offered to theirs

	// The batches go to one writer goroutine, in order, so that making
	// the next batch overlaps writing the last (the two cores).
	batches  chan batch
	written  chan error    // the writer's first error, when it ends
	failed   chan struct{} // closed when the writer failed, with writeErr set
	writeErr error
}

// batch is rows for one transaction or COPY.
type batch struct {
	table string
	cols  []string
	rows  [][]any
}

// startWriter starts the writer goroutine; stopWriter ends it and
// returns its error.
func (g *gen) startWriter(ctx context.Context) {
	g.batches, g.written, g.failed = make(chan batch, 1), make(chan error, 1), make(chan struct{})
	go func() {
		var err error
		for b := range g.batches {
			if err == nil {
				if err = g.s.write(ctx, b.table, b.cols, b.rows); err != nil {
					g.writeErr = err
					close(g.failed)
				}
			}
		}
		g.written <- err
	}()
}

func (g *gen) stopWriter() error {
	close(g.batches)
	return <-g.written
}

// write hands rows to the writer; it fails once the writer has.
func (g *gen) write(table string, cols []string, rows [][]any) error {
	select {
	case g.batches <- batch{table, cols, rows}:
		return nil
	case <-g.failed:
		return g.writeErr
	}
}

func newGen(o *options, s store) *gen {
	// Not crypto/rand: the fill is reproducible from its seed, and its
	// IDs and keys are test data.
	return &gen{o: o, s: s, rng: rand.New(rand.NewPCG(o.seed, 0x5ea4c4))} //nolint:gosec // see above
}

// statuses the fill makes, with their share in per mille.
var statusShares = []struct {
	status   string
	perMille int
}{{"succeeded", 900}, {"refunded", 40}, {"failed", 40}, {"requires_capture", 20}}

func (g *gen) run(ctx context.Context, st *state) error {
	tpl := map[string]*row{}
	var err error
	for _, t := range []struct{ name, table string }{{"customer", "customers"}, {"card", "payment_methods"}} {
		if tpl[t.name], err = g.s.template(ctx, t.table, st.Merchant, ""); err != nil {
			return err
		}
	}
	for _, s := range statusShares {
		if tpl[s.status], err = g.s.template(ctx, "payments", st.Merchant, s.status); err != nil {
			return fmt.Errorf("template of status %s: %w", s.status, err)
		}
	}
	if err := g.s.dropIndexes(ctx); err != nil {
		return err
	}
	small := max(smallPaymentsMin, g.o.n/smallShare)
	g.startWriter(ctx)
	stopped := false
	defer func() {
		if !stopped {
			g.stopWriter() //nolint:errcheck // an earlier error is returned
		}
	}()
	for _, m := range []struct {
		id   string
		n    int
		keys int
	}{{st.Merchant, g.o.n, g.o.keys}, {st.Small, small, 0}} {
		c, err := g.merchant(ctx, tpl, st, m.id, m.n, m.keys)
		if err != nil {
			return err
		}
		st.Customers += c
		st.Payments += m.n
	}
	stopped = true
	if err := g.stopWriter(); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "fill: rows written in %.0f s; indexes and derived tables\n", time.Since(st.End).Seconds())
	return g.s.finish(ctx)
}

// customer is a generated customer with its card.
type customer struct{ id, pm, email, last4 string }

// merchant writes n payments of merchant, their customers and cards, and
// keys idempotency records; it returns the customers made.
func (g *gen) merchant(ctx context.Context, tpl map[string]*row, st *state, merchant string, n, keys int) (int, error) {
	nc := max(1, n/paymentsPerCustomer)
	cs := make([]customer, nc)
	cusRows, cardRows := make([][]any, 0, batchRows), make([][]any, 0, batchRows)
	custStart := st.Start.Add(-fillSpan)
	var lastCus, lastPM int64
	for i := range cs {
		t := custStart.Add(time.Duration(float64(fillSpan) * (float64(i) + g.rng.Float64()) / float64(nc))).Truncate(time.Microsecond)
		first, last := firstNames[g.rng.IntN(len(firstNames))], lastNames[g.rng.IntN(len(lastNames))]
		c := customer{id: g.id("cus", t, &lastCus), pm: g.id("pm", t.Add(time.Second), &lastPM),
			email: fmt.Sprintf("%s.%s.%d@%s", strings.ToLower(first), strings.ToLower(last), i, domains[g.rng.IntN(len(domains))]),
			last4: fmt.Sprintf("%04d", g.rng.IntN(10000))}
		cs[i] = c
		cusRows = append(cusRows, g.customerRow(tpl["customer"], merchant, &c, first+" "+last, t))
		cardRows = append(cardRows, g.cardRow(tpl["card"], merchant, &c, first+" "+last, t.Add(time.Second)))
		if len(cusRows) == batchRows || i == nc-1 {
			if err := g.write("customers", tpl["customer"].cols, cusRows); err != nil {
				return 0, err
			}
			if err := g.write("payment_methods", tpl["card"].cols, cardRows); err != nil {
				return 0, err
			}
			cusRows, cardRows = make([][]any, 0, batchRows), make([][]any, 0, batchRows)
		}
	}
	fmt.Fprintf(os.Stderr, "fill: %s: %d customers and cards\n", merchant, nc)
	keyShare := float64(keys) / float64(n)
	payCols := tpl["succeeded"].cols
	rows := make([][]any, 0, batchRows)
	var idem [][]any
	var lastPay, lastTx int64
	txID := func(t time.Time) func() string { return func() string { return g.id("txn", t, &lastTx) } }
	for i := range n {
		t := st.Start.Add(time.Duration(float64(fillSpan) * (float64(i) + g.rng.Float64()) / float64(n))).Truncate(time.Microsecond)
		c := &cs[g.rng.IntN(nc)]
		p := &pay{merchant: merchant, id: g.id("pay", t, &lastPay), customer: c.id, pm: c.pm, status: g.status(t, st.End),
			amount: g.amount(), created: t}
		r, err := g.paymentRow(tpl[p.status], p, txID(t))
		if err != nil {
			return 0, err
		}
		rows = append(rows, r)
		if keys > 0 {
			g.offer(p, c)
		}
		if keys > 0 && p.status != "failed" && g.rng.Float64() < keyShare*1.12 {
			idem = append(idem, g.idempotencyRow(p))
		}
		if len(rows) == batchRows || i == n-1 {
			if err := g.write("payments", payCols, rows); err != nil {
				return 0, err
			}
			rows = make([][]any, 0, batchRows)
			if (i+1)%(10*batchRows) == 0 || i == n-1 {
				fmt.Fprintf(os.Stderr, "fill: %s: %d payments\n", merchant, i+1)
			}
		}
	}
	if len(idem) > 0 {
		cols := []string{"merchant_id", "key", "request_hash", "status_code", "body", "created"}
		for len(idem) > 0 {
			k := min(len(idem), batchRows)
			if err := g.write("idempotency", cols, idem[:k]); err != nil {
				return 0, err
			}
			idem = idem[k:]
		}
	}
	return nc, nil
}

// status draws a payment's status: an authorization waiting for its
// capture is at most 7 days old (it would have expired).
func (g *gen) status(t, end time.Time) string {
	x := g.rng.IntN(1000)
	for _, s := range statusShares {
		if x < s.perMille {
			if s.status == "requires_capture" && end.Sub(t) > 7*24*time.Hour {
				return "succeeded"
			}
			return s.status
		}
		x -= s.perMille
	}
	return "succeeded"
}

// amount draws a total from a log-normal around 45.00 (most baskets 15
// to 150), 1.00 to 5,000.00, half of them at a price ending in 99 or 00.
func (g *gen) amount() int64 {
	a := math.Exp(math.Log(4500) + 0.85*g.rng.NormFloat64())
	n := int64(min(max(a, 100), 500_000))
	switch g.rng.IntN(4) {
	case 0:
		n = n/100*100 + 99
	case 1:
		n = max(100, n/100*100)
	}
	return n
}

// id returns a surgepay ID made at t (surgepay.NewID's layout: 48 bits
// of milliseconds, 80 random bits, Crockford base32), greater than the
// one before of its prefix (*last is that one's millisecond).
func (g *gen) id(prefix string, t time.Time, last *int64) string {
	ms := max(t.UnixMilli(), *last+1)
	*last = ms
	hi := uint64(ms)<<16 | uint64(g.rng.Uint32()&0xffff)
	lo := g.rng.Uint64()
	var digits [26]byte
	for i := 25; i >= 0; i-- {
		digits[i] = crockford[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return prefix + "_" + string(digits[:])
}

// declinedMessage is a failed payment's message (the template's names
// the simulator's trigger amount).
const declinedMessage = "Your card was declined."

const crockford = "0123456789abcdefghjkmnpqrstvwxyz"

// ref returns a processor's reference as a routed payment stores it
// ("processor:reference"), so that the search by reference finds it
// through the index of routed payments (FindPaymentByRef).
func (g *gen) ref() string {
	const alnum = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	b := []byte("stripe_eu:pi_")
	for range 24 {
		b = append(b, alnum[g.rng.IntN(len(alnum))])
	}
	return string(b)
}

func (g *gen) set(t *row, r []any, col string, v any) {
	if i := t.index(col); i >= 0 {
		r[i] = v
	}
}

func (g *gen) customerRow(t *row, merchant string, c *customer, name string, created time.Time) []any {
	r := slices.Clone(t.vals)
	g.set(t, r, "merchant_id", merchant)
	g.set(t, r, "id", c.id)
	g.set(t, r, "name", name)
	g.set(t, r, "email", c.email)
	g.set(t, r, "created", g.s.ts(created))
	g.set(t, r, "updated", g.s.ts(created))
	return r
}

var brands = []string{"visa", "visa", "visa", "mastercard", "mastercard", "amex"}

// cardRow is c's saved card. Its sealed_pan is the template's (a card
// number nothing decrypts here: the searches never charge it), so the
// store's size is a real one's.
func (g *gen) cardRow(t *row, merchant string, c *customer, name string, created time.Time) []any {
	r := slices.Clone(t.vals)
	g.set(t, r, "merchant_id", merchant)
	g.set(t, r, "id", c.pm)
	g.set(t, r, "customer_id", c.id)
	g.set(t, r, "brand", brands[g.rng.IntN(len(brands))])
	g.set(t, r, "last4", c.last4)
	g.set(t, r, "exp_month", int64(1+g.rng.IntN(12)))
	g.set(t, r, "exp_year", int64(created.Year()+1+g.rng.IntN(5)))
	g.set(t, r, "fingerprint", strconv.FormatUint(g.rng.Uint64(), 36))
	g.set(t, r, "holder_name", strings.ToUpper(name))
	g.set(t, r, "created", g.s.ts(created))
	return r
}

// paymentRow is p as its template t of p's status would store it: the
// amounts equal to the template's amount become p's, the reference and
// the transactions p's own.
func (g *gen) paymentRow(t *row, p *pay, txID func() string) ([]any, error) {
	r := slices.Clone(t.vals)
	tplAmount := t.int("amount")
	g.set(t, r, "merchant_id", p.merchant)
	g.set(t, r, "id", p.id)
	g.set(t, r, "customer_id", p.customer)
	g.set(t, r, "payment_method_id", p.pm)
	for _, col := range []string{"amount", "amount_authorized", "amount_captured", "amount_refunded"} {
		if t.int(col) == tplAmount {
			g.set(t, r, col, p.amount)
		}
	}
	if t.str("failure_message") != "" {
		// The template's names the simulator's trigger amount.
		g.set(t, r, "failure_message", declinedMessage)
	}
	if t.str("authorization_ref") != "" {
		p.ref = g.ref()
		g.set(t, r, "authorization_ref", p.ref)
		g.set(t, r, "processor_ref", p.ref)
	}
	tc, tu := g.s.timeOf(r[t.index("created")]), g.s.timeOf(r[t.index("updated")])
	g.set(t, r, "created", g.s.ts(p.created))
	g.set(t, r, "updated", g.s.ts(p.created.Add(tu.Sub(tc))))
	txs, err := g.s.transactions(t, p, txID)
	if err != nil {
		return nil, err
	}
	g.set(t, r, "transactions", txs)
	return r, nil
}

// offer keeps p in the reservoir of samples.
func (g *gen) offer(p *pay, c *customer) {
	g.seen++
	s := sample{ID: p.id, Customer: c.id, Email: c.email, Last4: c.last4, Ref: p.ref, Status: p.status,
		Amount: p.amount, Created: p.created}
	if len(g.samples.Payments) < samplesMax {
		g.samples.Payments = append(g.samples.Payments, s)
	} else if j := g.rng.IntN(g.seen); j < samplesMax {
		g.samples.Payments[j] = s
	}
}

// idempotencyRow is the stored answer of p's create under a key of its
// own: a minimal payment object (the console reads its id and object),
// stored as JSON, which both stores read as it is.
func (g *gen) idempotencyRow(p *pay) []any {
	key := fmt.Sprintf("order-%016x-%04x", g.rng.Uint64(), g.rng.Uint32()&0xffff)
	g.keysOff++
	if len(g.samples.Keys) < samplesMax {
		g.samples.Keys = append(g.samples.Keys, key)
	} else if j := g.rng.IntN(g.keysOff); j < samplesMax {
		g.samples.Keys[j] = key
	}
	body := fmt.Sprintf(`{"id":%q,"object":"payment","status":%q,"amount":%d,"amount_total":%d,"currency":"usd","customer":%q,"payment_method":%q,"created":%d}`,
		p.id, p.status, p.amount, p.amount, p.customer, p.pm, p.created.Unix())
	hash := make([]byte, 32)
	for i := range hash {
		hash[i] = byte(g.rng.Uint32() & 0xff)
	}
	return []any{p.merchant, key, hash, int64(200), []byte(body), g.s.ts(p.created.Add(50 * time.Millisecond))}
}

func bytesText(n int64) string {
	return fmt.Sprintf("%.2f GB (%d bytes)", float64(n)/1e9, n)
}

var (
	firstNames = []string{"Maria", "Jan", "Anna", "Lucas", "Sofia", "Noah", "Emma", "Liam", "Mia", "Elias", "Lea",
		"Paul", "Hannah", "Ben", "Clara", "Louis", "Ines", "Mateo", "Julia", "Tom", "Sara", "David", "Alice", "Omar", "Yuki"}
	lastNames = []string{"Garcia", "Muller", "Rossi", "Martin", "Silva", "Nowak", "Jensen", "Smith", "Dubois", "Costa",
		"Schmidt", "Novak", "Lopez", "Moreau", "Ferrari", "Kowalski", "Berg", "Brown", "Meyer", "Santos", "Tanaka", "Ali"}
	domains = []string{"example.com", "mail.example", "example.org", "post.example", "example.net"}
)
