package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/surgepay/surgepay"
)

// TraceRequestTimeout bounds one request of a Tracer.
const TraceRequestTimeout = 30 * time.Second

// TraceScenarios are the flows a Tracer runs, by name.
var TraceScenarios = map[string]string{
	"checkout":  "a new customer: create the customer, save the card, purchase (sale)",
	"returning": "a returning customer's saved card: authorize, then capture",
	"refund":    "a purchase on a saved card, then a partial refund",
}

// NewTracer returns a Tracer of the API at base with apiKey, paying
// amount (minor units) with card.
func NewTracer(base, apiKey, card string, amount int64) *Tracer {
	return &Tracer{base: strings.TrimRight(base, "/"), key: apiKey, client: &http.Client{Timeout: TraceRequestTimeout},
		card: card, amount: amount, run: surgepay.NewID("trace")}
}

// Tracer runs a payment flow against a server started with debug = true
// and keeps, per request, what the server's Surgepay-* debug headers say
// it cost (`surgepay trace`). Not safe for concurrent use.
type Tracer struct {
	base, key, card string
	amount          int64
	run             string // prefix of idempotency keys
	client          *http.Client
	steps           []traceStep
}

// traceStep is one request and what the server reported about it.
type traceStep struct {
	route      string // method and route pattern
	status     int
	total      time.Duration
	sql        map[string]string // from Surgepay-Sql: total, select, ..., store_ms
	cache      map[string]string // from Surgepay-Cache: hits, misses
	providerMs string
	traceID    string
	errCode    string
}

// Run runs the scenario name (a key of TraceScenarios), one request after
// the other, and keeps what the server reported of each; it stops at the
// first request that fails.
func (t *Tracer) Run(ctx context.Context, name string) error {
	var cus, pm, pay string
	steps := []func() error{
		func() (err error) {
			cus, err = t.call(ctx, "POST", "/v1/customers", "", `{"name":"Trace","email":"trace@example.com"}`)
			return err
		},
		func() (err error) {
			pm, err = t.call(ctx, "POST", "/v1/payment_methods", "", `{"customer":"`+cus+`","card":{"number":"`+t.card+
				`","exp_month":12,"exp_year":2040,"cvc":"123"}}`)
			return err
		},
	}
	capture := "automatic"
	if name == "returning" {
		capture = "manual"
	}
	steps = append(steps, func() (err error) {
		pay, err = t.call(ctx, "POST", "/v1/payments", "", fmt.Sprintf(
			`{"amount":%d,"currency":"usd","customer":"%s","payment_method":"%s","capture_method":"%s"}`, t.amount, cus, pm, capture))
		return err
	})
	switch name {
	case "returning":
		steps = append(steps, func() error {
			_, err := t.call(ctx, "POST", "/v1/payments/"+pay+"/capture", "/v1/payments/{id}/capture", "")
			return err
		})
	case "refund":
		steps = append(steps, func() error {
			_, err := t.call(ctx, "POST", "/v1/payments/"+pay+"/refunds", "/v1/payments/{id}/refunds",
				fmt.Sprintf(`{"amount":%d}`, max(t.amount/2, 1)))
			return err
		})
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

// call sends one request (with an Idempotency-Key on POSTs), records it,
// and returns the ID in the answer. route names the path's pattern ("" if
// path is the pattern).
func (t *Tracer) call(ctx context.Context, method, path, route, body string) (string, error) {
	if route == "" {
		route = path
	}
	req, err := http.NewRequestWithContext(ctx, method, t.base+path, strings.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+t.key)
	req.Header.Set("Content-Type", "application/json")
	if method == "POST" {
		req.Header.Set("Idempotency-Key", fmt.Sprintf("%s-%d", t.run, len(t.steps)))
	}
	start := time.Now()
	res, err := t.client.Do(req)
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", method, route, err)
	}
	defer res.Body.Close() //nolint:errcheck // read-only: closing loses nothing
	b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	st := traceStep{route: method + " " + route, status: res.StatusCode, total: time.Since(start),
		sql: headerFields(res.Header.Get("Surgepay-Sql")), cache: headerFields(res.Header.Get("Surgepay-Cache")),
		providerMs: res.Header.Get("Surgepay-Provider-Ms"), traceID: res.Header.Get("Trace-Id")}
	var out struct {
		ID    string `json:"id"`
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.Unmarshal(b, &out)
	st.errCode = out.Error.Code
	t.steps = append(t.steps, st)
	if res.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s %s: status %d %s: %s", method, route, res.StatusCode, out.Error.Code,
			strings.TrimSpace(string(bytes.TrimSpace(b))))
	}
	if out.ID == "" {
		return "", errors.New(method + " " + route + ": the answer has no id")
	}
	return out.ID, nil
}

// headerFields parses "total=3 select=0 store_ms=1.2" into a map.
func headerFields(h string) map[string]string {
	m := map[string]string{}
	for _, f := range strings.Fields(h) {
		if k, v, ok := strings.Cut(f, "="); ok {
			m[k] = v
		}
	}
	return m
}

// Print writes one line per request of the scenario run, as a table.
func (t *Tracer) Print(w io.Writer, scenario string) {
	fmt.Fprintf(w, "surgepay trace: %s — %s\n\n", scenario, TraceScenarios[scenario])
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "request\tstatus\ttotal_ms\tsql\tselect\tinsert\tupdate\tdelete\tstore_ms\tcache_hit\tcache_miss\tprovider_ms\ttrace_id\t")
	var total time.Duration
	var stmts int
	debug := true
	for _, s := range t.steps {
		total += s.total
		n, _ := strconv.Atoi(s.sql["total"])
		stmts += n
		if len(s.sql) == 0 {
			debug = false
		}
		status := strconv.Itoa(s.status)
		if s.errCode != "" {
			status += " " + s.errCode
		}
		fmt.Fprintf(tw, "%s\t%s\t%.1f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", s.route, status,
			float64(s.total.Microseconds())/1000, or(s.sql["total"]), or(s.sql["select"]), or(s.sql["insert"]),
			or(s.sql["update"]), or(s.sql["delete"]), or(s.sql["store_ms"]), or(s.cache["hits"]), or(s.cache["misses"]),
			or(s.providerMs), or(s.traceID))
	}
	tw.Flush()
	fmt.Fprintf(w, "\n%d requests, %.1f ms, %d SQL statements\n", len(t.steps), float64(total.Microseconds())/1000, stmts)
	if !debug && len(t.steps) > 0 {
		fmt.Fprintln(w, "The server sent no Surgepay-Sql header: start it with debug = true (SURGEPAY_DEBUG=true).")
	}
}

func or(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
