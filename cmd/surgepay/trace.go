package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/internal/cli"
)

// traceRequestTimeout bounds one request of `surgepay trace`.
const traceRequestTimeout = 30 * time.Second

// traceScenarios are the flows `surgepay trace` runs.
var traceScenarios = map[string]string{
	"checkout":  "a new customer: create the customer, save the card, purchase (sale)",
	"returning": "a returning customer's saved card: authorize, then capture",
	"refund":    "a purchase on a saved card, then a partial refund",
}

const traceUsage = `Usage: surgepay trace --scenario checkout|returning|refund --url URL --api-key KEY

Runs one payment flow against a server started with debug = true and prints,
per request: route, status, time, SQL statements by kind, store time, cache
hits and misses, provider time and trace ID (from the Surgepay-* debug
headers). Like dbitrace: know what each request costs before load-testing it.
`

// cmdTrace runs `surgepay trace`.
func cmdTrace(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := cli.New("trace", traceUsage)
	fs := c.Flags
	scenario := fs.String("scenario", "checkout", "flow to run: checkout, returning or refund")
	url := fs.String("url", "http://127.0.0.1:8080", "the API's base URL")
	key := fs.String("api-key", "", "API key (default: $SURGEPAY_API_KEY)")
	card := fs.String("card", "4242424242424242", "card number (a simulator test card)")
	amount := fs.Int64("amount", 2000, "amount in minor units")
	if code, ok := c.Parse(args, stdout, stderr); !ok {
		return code
	}
	if *key == "" {
		*key = os.Getenv("SURGEPAY_API_KEY")
	}
	if _, ok := traceScenarios[*scenario]; !ok {
		return c.Fail(stderr, "unknown --scenario %q: checkout, returning or refund", *scenario)
	}
	if *key == "" {
		return c.Fail(stderr, "--api-key or SURGEPAY_API_KEY is required")
	}
	t := &tracer{base: strings.TrimRight(*url, "/"), key: *key, client: &http.Client{Timeout: traceRequestTimeout},
		card: *card, amount: *amount, run: surgepay.NewID("trace")}
	err := t.scenario(ctx, *scenario)
	t.print(stdout, *scenario)
	if err != nil {
		fmt.Fprintf(stderr, "surgepay trace: %v\n", err)
		return 1
	}
	return 0
}

// tracer runs a scenario and keeps one traceStep per request.
type tracer struct {
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

func (t *tracer) scenario(ctx context.Context, name string) error {
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
func (t *tracer) call(ctx context.Context, method, path, route, body string) (string, error) {
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
	defer res.Body.Close()
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

func (t *tracer) print(w io.Writer, scenario string) {
	fmt.Fprintf(w, "surgepay trace: %s — %s\n\n", scenario, traceScenarios[scenario])
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
