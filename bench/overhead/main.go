// Command overhead measures what surgepay adds on top of its processor:
// it sends sales to a running `surgepay serve` (debug on, so each answer
// carries Surgepay-Provider-Ms) for one or more merchants in the same run,
// and reports per merchant the sales/s, the latency seen by the client and
// the client's latency minus the processor's time (surgepay's own time:
// HTTP, engine, store, loopback), as p50 / p99 / max.
//
//	overhead -url http://127.0.0.1:8080 -key sim=sk_…@usd -key stripe=sk_…@eur -rate 1000 -duration 20s
//	overhead ... -concurrency 64 -duration 10s   # closed loop: capacity
//
// Bounded: at most -inflight requests at once (an arrival past it counts
// as dropped), and the run ends after -duration. Used by
// bench/processors.sh; figures in bench/RESULTS.md.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

type keys []string

func (k *keys) String() string     { return strings.Join(*k, ",") }
func (k *keys) Set(v string) error { *k = append(*k, v); return nil }

type target struct {
	label, key, pm, currency string
	mu                       sync.Mutex
	total, own               *hdrhistogram.Histogram
	ok, failed               atomic.Int64
}

func main() {
	var ks keys
	url := flag.String("url", "http://127.0.0.1:8080", "surgepay's API")
	flag.Var(&ks, "key", "LABEL=API_KEY[@CURRENCY] of a merchant, its sales in CURRENCY (default usd; repeat)")
	rate := flag.Float64("rate", 0, "sales per second per merchant (open model); 0: closed loop")
	conc := flag.Int("concurrency", 32, "closed loop: requests in flight per merchant")
	dur := flag.Duration("duration", 20*time.Second, "how long")
	inflight := flag.Int("inflight", 512, "open model: requests in flight at most, per merchant")
	token := flag.String("token", "", "save the card as this processor token (PROCESSOR:pm_…) instead of a card number")
	flag.Parse()
	if len(ks) == 0 {
		fmt.Fprintln(os.Stderr, "overhead: at least one -key LABEL=API_KEY")
		os.Exit(2)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1024, MaxConnsPerHost: 1024}, Timeout: 30 * time.Second}
	var ts []*target
	for _, kv := range ks {
		label, key, ok := strings.Cut(kv, "=")
		if !ok {
			fmt.Fprintln(os.Stderr, "overhead: -key wants LABEL=API_KEY[@CURRENCY]")
			os.Exit(2)
		}
		key, currency, _ := strings.Cut(key, "@")
		if currency == "" {
			currency = "usd"
		}
		t := &target{label: label, key: key, currency: currency, total: hdrhistogram.New(1, 60_000_000, 3), own: hdrhistogram.New(1, 60_000_000, 3)}
		t.pm = setup(client, *url, key, *token)
		ts = append(ts, t)
	}
	var dropped atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for _, t := range ts {
		if *rate > 0 {
			sem := make(chan struct{}, *inflight)
			wg.Go(func() {
				interval := time.Duration(float64(time.Second) / *rate)
				for next := time.Now(); time.Since(start) < *dur; next = next.Add(interval) {
					time.Sleep(time.Until(next))
					select {
					case sem <- struct{}{}:
						wg.Go(func() { sale(client, *url, t); <-sem })
					default:
						dropped.Add(1)
					}
				}
			})
			continue
		}
		for range *conc {
			wg.Go(func() {
				for time.Since(start) < *dur {
					sale(client, *url, t)
				}
			})
		}
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	fmt.Printf("%-10s %9s %8s %8s %8s %8s | %8s %8s %8s\n", "merchant", "ok/s", "failed", "p50_ms", "p99_ms", "max_ms", "own_p50", "own_p99", "own_max")
	for _, t := range ts {
		ms := func(h *hdrhistogram.Histogram, q float64) string {
			if q == 100 {
				return strconv.FormatFloat(float64(h.Max())/1000, 'f', 2, 64)
			}
			return strconv.FormatFloat(float64(h.ValueAtQuantile(q))/1000, 'f', 2, 64)
		}
		fmt.Printf("%-10s %9.0f %8d %8s %8s %8s | %8s %8s %8s\n", t.label, float64(t.ok.Load())/elapsed, t.failed.Load(),
			ms(t.total, 50), ms(t.total, 99), ms(t.total, 100), ms(t.own, 50), ms(t.own, 99), ms(t.own, 100))
	}
	if n := dropped.Load(); n > 0 {
		fmt.Printf("dropped (more than -inflight in flight): %d\n", n)
	}
}

// setup makes a customer and a saved card (or processor token) for the
// merchant.
func setup(c *http.Client, url, key, token string) string {
	var cus, pm struct{ ID string }
	if _, _, err := post(c, url+"/v1/customers", key, "", `{"name":"Bench"}`, &cus); err != nil {
		fmt.Fprintln(os.Stderr, "overhead: create a customer:", err)
		os.Exit(1)
	}
	card := `"card":{"number":"4242424242424242","exp_month":12,"exp_year":2034,"cvc":"123"}`
	if processor, tok, ok := strings.Cut(token, ":"); ok {
		card = `"processor_token":{"processor":"` + processor + `","token":"` + tok + `"}`
	}
	_, _, err := post(c, url+"/v1/payment_methods", key, "", `{"customer":"`+cus.ID+`",`+card+`}`, &pm)
	if err != nil || pm.ID == "" {
		fmt.Fprintln(os.Stderr, "overhead: could not save a card:", err)
		os.Exit(1)
	}
	return pm.ID
}

// post sends body and decodes a successful answer into out (when not nil);
// it returns the status and headers, the body read and closed.
func post(c *http.Client, url, key, idem, body string, out any) (status int, header http.Header, err error) {
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	if idem != "" {
		req.Header.Set("Idempotency-Key", idem)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close() //nolint:errcheck // read in full below; closing loses nothing
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, resp.Header, err
	}
	if out != nil && resp.StatusCode >= 300 {
		return resp.StatusCode, resp.Header, fmt.Errorf("%s answered %d: %s", url, resp.StatusCode, bytes.TrimSpace(b))
	}
	if out != nil {
		if err := json.NewDecoder(bytes.NewReader(b)).Decode(out); err != nil {
			return resp.StatusCode, resp.Header, fmt.Errorf("decode %s: %w", url, err)
		}
	}
	return resp.StatusCode, resp.Header, nil
}

var seq atomic.Int64

func sale(c *http.Client, url string, t *target) {
	begin := time.Now()
	status, header, err := post(c, url+"/v1/payments",
		t.key, fmt.Sprintf("ovh-%d-%d", begin.UnixNano(), seq.Add(1)),
		`{"amount":1000,"currency":"`+t.currency+`","payment_method":"`+t.pm+`","cvc":"123"}`, nil)
	d := time.Since(begin)
	if err != nil || status != 200 {
		t.failed.Add(1)
		return
	}
	prov, _ := strconv.ParseFloat(header.Get("Surgepay-Provider-Ms"), 64)
	own := d - time.Duration(prov*float64(time.Millisecond))
	t.mu.Lock()
	// A latency beyond the histograms' 60 s range counts as failed.
	if t.total.RecordValue(d.Microseconds()) != nil || t.own.RecordValue(max(own.Microseconds(), 1)) != nil {
		t.mu.Unlock()
		t.failed.Add(1)
		return
	}
	t.mu.Unlock()
	t.ok.Add(1)
}
