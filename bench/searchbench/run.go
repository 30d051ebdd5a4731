package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// searchTimeout bounds one console request: far above any answer worth
// measuring; a request past it counts as an error.
const searchTimeout = 60 * time.Second

// kind is a kind of search an operator makes, with its query drawn from
// the fill's samples.
type kind struct {
	name  string
	query func(c *console, r *rand.Rand) url.Values
}

var kinds = []kind{
	{"payment ID", func(c *console, r *rand.Rand) url.Values { return c.q("payment", c.pick(r).ID) }},
	{"customer ID", func(c *console, r *rand.Rand) url.Values { return c.q("customer", c.pick(r).Customer) }},
	{"email", func(c *console, r *rand.Rand) url.Values { return c.q("email", c.pick(r).Email) }},
	{"last 4", func(c *console, r *rand.Rand) url.Values { return c.q("last4", c.pick(r).Last4) }},
	{"idempotency key", func(c *console, r *rand.Rand) url.Values {
		return c.q("idempotency_key", c.samples.Keys[r.IntN(len(c.samples.Keys))])
	}},
	{"processor reference", func(c *console, r *rand.Rand) url.Values {
		p := c.pick(r)
		for p.Ref == "" {
			p = c.pick(r)
		}
		return c.q("ref", p.Ref)
	}},
	{"status", func(c *console, r *rand.Rand) url.Values {
		return c.q("status", statusShares[r.IntN(len(statusShares))].status)
	}},
	{"amount range", func(c *console, r *rand.Rand) url.Values {
		a := c.pick(r).Amount
		v := c.q("amount_min", strconv.FormatInt(a-a/100, 10))
		v.Set("amount_max", strconv.FormatInt(a+a/100, 10))
		return v
	}},
	{"date range (1 h)", func(c *console, r *rand.Rand) url.Values {
		t := c.pick(r).Created.Truncate(time.Hour)
		v := c.q("from", t.Format("2006-01-02T15:04"))
		v.Set("to", t.Add(time.Hour).Format("2006-01-02T15:04"))
		return v
	}},
	{"last 4 + date range (1 day)", func(c *console, r *rand.Rand) url.Values {
		p := c.pick(r)
		v := c.q("last4", p.Last4)
		v.Set("from", p.Created.Format("2006-01-02"))
		v.Set("to", p.Created.Format("2006-01-02"))
		return v
	}},
}

// console is an operator's client of the console.
type console struct {
	base, token, merchant string
	samples               *samples
	client                *http.Client
}

func (c *console) q(field, value string) url.Values {
	return url.Values{"merchant": {c.merchant}, field: {value}}
}

func (c *console) pick(r *rand.Rand) *sample {
	return &c.samples.Payments[r.IntN(len(c.samples.Payments))]
}

// outcome is one search's.
type outcome struct {
	took                time.Duration
	err                 bool // not 200, or no answer
	bounded, none, warn bool
}

// search sends GET /console/?v and reads what the page says.
func (c *console) search(ctx context.Context, v url.Values) outcome {
	ctx, cancel := context.WithTimeout(ctx, searchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", c.base+"/console/?"+v.Encode(), nil)
	if err != nil {
		return outcome{err: true}
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	began := time.Now()
	resp, err := c.client.Do(req)
	if err != nil {
		return outcome{took: time.Since(began), err: true}
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close() //nolint:errcheck // read to the end; nothing to report
	o := outcome{took: time.Since(began), err: err != nil || resp.StatusCode != http.StatusOK}
	// The wording of console/templates/search.html and console/search.go.
	o.bounded = bytes.Contains(body, []byte(`id="bounded"`))
	o.none = bytes.Contains(body, []byte(`id="none"`))
	o.warn = bytes.Contains(body, []byte("customers were searched for the email"))
	return o
}

// stats summarises outcomes.
type stats struct {
	n, errs, bounded, none, warn int
	p50, p99, max                time.Duration
}

func summarise(outs []outcome) stats {
	s := stats{n: len(outs)}
	ds := make([]time.Duration, 0, len(outs))
	for _, o := range outs {
		ds = append(ds, o.took)
		s.errs += b2i(o.err)
		s.bounded += b2i(o.bounded || o.warn)
		s.none += b2i(o.none)
		s.warn += b2i(o.warn)
	}
	slices.Sort(ds)
	if len(ds) > 0 {
		s.p50, s.p99, s.max = quantile(ds, 0.50), quantile(ds, 0.99), ds[len(ds)-1]
	}
	return s
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	i := int(float64(len(sorted))*q+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func ms(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 1, 64) }

// loadResult is what a loadtest phase reports.
type loadResult struct {
	Summary struct {
		RequestRate float64 `json:"request_rate"`
		Errors      int64   `json:"errors"`
		Dropped     int64   `json:"dropped"`
	} `json:"summary"`
	Latency struct {
		Corrected struct {
			P50 float64 `json:"p50_ms"`
			P99 float64 `json:"p99_ms"`
			Max float64 `json:"max_ms"`
		} `json:"corrected"`
	} `json:"latency"`
	StatusCodes map[string]int64 `json:"status_codes"`
}

func run(ctx context.Context, o *options) error {
	st, err := readState(o.dir)
	if err != nil {
		return fmt.Errorf("no fill in %s (run searchbench fill first): %w", o.dir, err)
	}
	if !st.matches(o) {
		return fmt.Errorf("the fill in %s is of another store or N (%s, %d)", o.dir, st.Store, st.N)
	}
	var sm samples
	b, err := os.ReadFile(filepath.Join(o.dir, "samples.json"))
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, &sm); err != nil || len(sm.Payments) == 0 || len(sm.Keys) == 0 {
		return fmt.Errorf("samples.json: no samples (%v)", err)
	}
	if err := os.MkdirAll(o.work, 0o700); err != nil {
		return err
	}
	cfg, err := serveConfig(o, "run", true)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "run: starting serve on %s (%s)\n", o.dir, o.store)
	srv, err := startServe(ctx, o, cfg, "run-serve")
	if err != nil {
		return err
	}
	defer srv.stop()
	c := &console{base: srv.admin, token: srv.adminToken, merchant: st.Merchant, samples: &sm,
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	rng := rand.New(rand.NewPCG(o.seed, 4)) //nolint:gosec // the searches' values: reproducible, not secret
	results := make([]stats, len(kinds))
	for i, k := range kinds {
		for range o.warmup {
			c.search(ctx, k.query(c, rng))
		}
		var outs []outcome
		for range o.requests {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			outs = append(outs, c.search(ctx, k.query(c, rng)))
		}
		results[i] = summarise(outs)
		fmt.Fprintf(os.Stderr, "run: %-28s p50 %6s p99 %6s max %6s ms, bounded %d, nothing %d, errors %d\n", k.name,
			ms(results[i].p50), ms(results[i].p99), ms(results[i].max), results[i].bounded, results[i].none, results[i].errs)
	}
	// The loadtest's set-up (its customers and cards) and the first
	// sales after the server's start stay out of the figures, as in
	// bench/cluster.sh.
	warm := *o
	warm.duration = 5 * time.Second
	if _, err := loadtest(ctx, &warm, srv, st, "api-warm-up"); err != nil {
		return err
	}
	quiet, err := loadtest(ctx, o, srv, st, "api-alone")
	if err != nil {
		return err
	}
	during, busy, err := loadWithOperators(ctx, o, srv, st, c)
	if err != nil {
		return err
	}
	report := markdown(o, st, results, quiet, during, busy)
	fmt.Print(report)
	return os.WriteFile(filepath.Join(o.work, fmt.Sprintf("search-%s-%d.md", o.store, o.n)), []byte(report), 0o600)
}

// loadtest runs `surgepay loadtest` (sales on a saved card, open model)
// on the small merchant's key, so that the large merchant's payments,
// which the searches read, stay the fill's.
func loadtest(ctx context.Context, o *options, srv *server, st *state, label string) (*loadResult, error) {
	out := filepath.Join(o.work, label+".json")
	secs := int(o.duration.Seconds())
	//nolint:gosec // the operator's own binary (-bin), flags of this program
	cmd := exec.CommandContext(ctx, o.bin, "loadtest", "--url", srv.api, "--api-key", st.SmallKey,
		"--scenario", "streamlined", "--rate", strconv.Itoa(o.rate), "--duration", o.duration.String(), "--quiet",
		"--max-iterations", strconv.Itoa(o.rate*secs+o.rate), "--out", out)
	logf, err := os.Create(filepath.Join(o.work, label+".txt")) //nolint:gosec // the work folder the operator gave
	if err != nil {
		return nil, err
	}
	defer logf.Close() //nolint:errcheck // the loadtest's log; its JSON report is what is read
	cmd.Stdout, cmd.Stderr = logf, logf
	fmt.Fprintf(os.Stderr, "run: %s: surgepay loadtest at %d/s for %s\n", label, o.rate, o.duration)
	// Exit 2 is thresholds or drops: the report says which.
	if err := cmd.Run(); err != nil && cmd.ProcessState.ExitCode() != 2 {
		return nil, fmt.Errorf("loadtest %s: %v: see %s", label, err, logf.Name())
	}
	var r loadResult
	b, err := os.ReadFile(out) //nolint:gosec // as logf
	if err != nil {
		return nil, err
	}
	return &r, json.Unmarshal(b, &r)
}

// loadWithOperators runs the load again with o.operators operators
// searching the console in a loop (the kinds at random, one search at a
// time each) from its start to its end.
func loadWithOperators(ctx context.Context, o *options, srv *server, st *state, c *console) (*loadResult, stats, error) {
	stop := make(chan struct{})
	var mu sync.Mutex
	var all []outcome
	var wg sync.WaitGroup
	for i := range o.operators {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(o.seed, uint64(100+i))) //nolint:gosec // as rng above
			for {
				select {
				case <-stop:
					return
				case <-ctx.Done():
					return
				default:
				}
				oc := c.search(ctx, kinds[r.IntN(len(kinds))].query(c, r))
				mu.Lock()
				all = append(all, oc)
				mu.Unlock()
			}
		}()
	}
	res, err := loadtest(ctx, o, srv, st, fmt.Sprintf("api-with-%d-operators", o.operators))
	close(stop)
	wg.Wait()
	return res, summarise(all), err
}

func markdown(o *options, st *state, results []stats, quiet, during *loadResult, busy stats) string {
	var b strings.Builder
	host, _ := os.Hostname()
	fmt.Fprintf(&b, "**%s, N = %s payments** (+ %s of a second merchant; %s customers with a card each; %s idempotency keys), "+
		"%s, %d CPU %s (%s), build %s; filled in %.0f s, %s. `bench/search.sh %s %d`.\n\n",
		storeName(o.store), thousands(o.n), thousands(st.Payments-o.n), thousands(st.Customers), thousands(o.keys),
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), runtime.NumCPU(), cpuModel(), host, buildName(),
		st.FillSeconds, bytesText(st.SizeBytes), o.store, o.n)
	fmt.Fprintf(&b, "Console searches, one at a time, %d of each kind (after %d not counted), values drawn from the filled data:\n\n", o.requests, o.warmup)
	b.WriteString("| search | p50 ms | p99 ms | max ms | bounded | found nothing | errors |\n|---|---:|---:|---:|---:|---:|---:|\n")
	for i, k := range kinds {
		s := results[i]
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %d | %d | %d |\n", k.name, ms(s.p50), ms(s.p99), ms(s.max), s.bounded, s.none, s.errs)
	}
	fmt.Fprintf(&b, "\nThe API under `surgepay loadtest --scenario streamlined --rate %d --duration %s` (open model, corrected latency), "+
		"without, then with %d operators searching the console in a loop (the kinds above at random), same run:\n\n", o.rate, o.duration, o.operators)
	b.WriteString("| phase | achieved /s | API p50 ms | API p99 ms | API max ms | errors | dropped | console searches | console p50 ms | console p99 ms |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	row := func(name string, r *loadResult, s *stats) {
		cons := "| – | – | – |"
		if s != nil {
			cons = fmt.Sprintf("| %d | %s | %s |", s.n, ms(s.p50), ms(s.p99))
		}
		fmt.Fprintf(&b, "| %s | %.0f | %.1f | %.1f | %.1f | %d | %d %s\n", name, r.Summary.RequestRate, r.Latency.Corrected.P50,
			r.Latency.Corrected.P99, r.Latency.Corrected.Max, r.Summary.Errors, r.Summary.Dropped, cons)
	}
	row("API alone", quiet, nil)
	row(fmt.Sprintf("with %d operator%s", o.operators, plural(o.operators)), during, &busy)
	ratio := func(a, b float64) string {
		if b == 0 {
			return "–"
		}
		return strconv.FormatFloat(a/b, 'f', 2, 64)
	}
	fmt.Fprintf(&b, "\nAPI p99 with operators / alone: **%s** (p50: %s). Console searches during the load: %d, %d errors, %d bounded.\n",
		ratio(during.Latency.Corrected.P99, quiet.Latency.Corrected.P99), ratio(during.Latency.Corrected.P50, quiet.Latency.Corrected.P50),
		busy.n, busy.errs, busy.bounded)
	b.WriteString("\n\"bounded\": the page said its scan stopped at its bound; it offers \"Older →\".\n")
	return b.String()
}

func storeName(s string) string {
	if s == "postgres" {
		return "PostgreSQL"
	}
	return "Embedded SQLite"
}

func thousands(n int) string {
	s := strconv.Itoa(n)
	var out []byte
	for i := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}

func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for _, l := range strings.Split(string(b), "\n") {
		if name, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(name) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}

// buildName is SEARCHBENCH_BUILD (bench/search.sh sets it to git
// describe of the tree it built), else "?".
func buildName() string {
	if s := os.Getenv("SEARCHBENCH_BUILD"); s != "" {
		return s
	}
	return "?"
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
