package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The run's bounds.
const (
	// triesMax is how often one request is sent before the client gives
	// up on it (each after Retry-After, at most retryAfterMax): a fault
	// lasting longer than about two minutes fails the run.
	triesMax = 120
	// retryAfterMax caps the wait a Retry-After asks for.
	retryAfterMax = 5 * time.Second
	// requestTimeout bounds one request, its answer included.
	requestTimeout = 15 * time.Second
	// flowsMax bounds the sales in flight (each waiting for its answer or
	// its next try); a sale due beyond it is dropped, which fails the run.
	flowsMax = 5000
	// answersMax bounds the answers kept for the report.
	answersMax = 2_000_000
	// webhookBodyMax bounds a webhook's body.
	webhookBodyMax = 1 << 20
	// endpointsSettle is how long run waits after registering the webhook
	// endpoints before it sends sales: every node learns of a new endpoint
	// within webhook.EndpointsRefreshInterval (10 s).
	endpointsSettle = 11 * time.Second
	// refundAmount is the partial refund of every third standard sale.
	refundAmount = 500
	// saleAmount is every sale's amount.
	saleAmount = 1500
)

// merchant is one of the cluster's two merchants, as keys.env gives it.
type merchant struct {
	kind   string // "standard" or "streamlined"
	key    string
	pm     string
	secret string // its webhook endpoint's signing secret
}

// answer is one answer the client got (or a request that got none: 0).
type answer struct {
	at         time.Time
	phase      int // index in runner.phases
	op         string
	status     int
	code       string // the JSON error's code, "" for a 200 or a body that is not surgepay's
	retryAfter bool
}

// phase is a name the script wrote to DIR/phase and when run saw it.
type phase struct {
	Name  string    `json:"name"`
	Start time.Time `json:"start"`
}

// Ledger is what run hands check: what the merchant was told.
type Ledger struct {
	Started   time.Time     `json:"started"`
	Sales     []Sale        `json:"sales"`
	Refunds   []Refund      `json:"refunds"`
	Failures  []string      `json:"failures"`
	Dropped   int64         `json:"dropped"`
	Phases    []PhaseReport `json:"phases"`
	Endpoints []string      `json:"endpoints"` // webhook endpoint IDs
}

// Sale is a sale answered 200.
type Sale struct {
	Key     string `json:"key"`
	Kind    string `json:"kind"`
	Payment string `json:"payment"`
	Status  string `json:"status"`
	Amount  int64  `json:"amount"`
}

// Refund is a refund answered 200.
type Refund struct {
	Key     string `json:"key"`
	Payment string `json:"payment"`
	Amount  int64  `json:"amount"`
}

// PhaseReport is what clients saw in one phase.
type PhaseReport struct {
	Name     string         `json:"name"`
	Seconds  float64        `json:"seconds"`
	Statuses map[string]int `json:"statuses"` // "200", "503 store_unavailable", "000 (no answer)"…
	// FailedFor is from the phase's first answer that was not a 200 to
	// its last; Recovered from the phase's start to its last one (0: none).
	FailedFor float64 `json:"failed_for_s"`
	Recovered float64 `json:"recovered_after_s"`
	// NoRetryAfter counts 503s and 429s without Retry-After; Status500
	// the 500s (both must be 0).
	NoRetryAfter int `json:"no_retry_after"`
	Status500    int `json:"status_500"`
}

type runner struct {
	url    string
	dir    string
	client *http.Client
	mers   [2]merchant

	mu       sync.Mutex
	phases   []phase
	answers  []answer
	ledger   Ledger
	webhooks *os.File
	badSigs  atomic.Int64
	phaseNow atomic.Int32
}

func run(args []string) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	url := fs.String("url", "", "the cluster's API through HAProxy")
	dir := fs.String("dir", "", "the working folder (phase, stop, ledger.json, webhooks.tsv)")
	rate := fs.Float64("rate", 40, "sales a second (1 to 500)")
	hooks := fs.String("webhooks", "127.0.0.1:0", "the webhook receiver's address (loopback)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *url == "" || *dir == "" {
		return errors.New("run: -url and -dir are required")
	}
	if *rate < 1 || *rate > 500 {
		return fmt.Errorf("run: -rate %g: want 1 to 500", *rate)
	}
	r := &runner{url: strings.TrimRight(*url, "/"), dir: *dir}
	for i, kind := range []string{"standard", "streamlined"} {
		up := strings.ToUpper(kind)
		r.mers[i] = merchant{kind: kind, key: os.Getenv(up + "_KEY"), pm: os.Getenv(up + "_PM")}
		if r.mers[i].key == "" || r.mers[i].pm == "" {
			return fmt.Errorf("run: %s_KEY and %s_PM must be set (source the cluster's keys.env)", up, up)
		}
	}
	r.client = &http.Client{Transport: &http.Transport{
		MaxIdleConns: 256, MaxIdleConnsPerHost: 256, IdleConnTimeout: 30 * time.Second,
		DialContext: (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
	}}
	var err error
	if r.webhooks, err = os.OpenFile(filepath.Join(r.dir, "webhooks.tsv"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); err != nil {
		return err
	}
	defer func() { _ = r.webhooks.Close() }()

	ln, err := net.Listen("tcp", *hooks)
	if err != nil {
		return fmt.Errorf("run: webhook receiver: %w", err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(r.receive), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer func() { _ = srv.Close() }()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	for i := range r.mers {
		if err := r.register(ctx, &r.mers[i], "http://"+ln.Addr().String()+"/hooks/"+r.mers[i].kind); err != nil {
			return err
		}
	}
	log("webhook endpoints registered (receiver on %s); waiting %s for every node to learn of them", ln.Addr(), endpointsSettle)
	select {
	case <-time.After(endpointsSettle):
	case <-ctx.Done():
		return ctx.Err()
	}

	go r.watchPhase(ctx)
	r.ledger.Started = time.Now()
	if err := os.WriteFile(filepath.Join(r.dir, "ready"), nil, 0o600); err != nil {
		return err
	}
	log("sending %g sales a second", *rate)
	r.pace(ctx, time.Duration(float64(time.Second) / *rate))

	r.report()
	buf, err := json.MarshalIndent(&r.ledger, "", " ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(r.dir, "ledger.json"), buf, 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(r.dir, "stopped"), nil, 0o600); err != nil {
		return err
	}
	log("stopped sending; receiving webhooks until signalled")
	<-ctx.Done()
	if n := r.badSigs.Load(); n > 0 {
		return fmt.Errorf("%d webhooks with a signature that did not verify", n)
	}
	return nil
}

// pace starts a sale every interval until DIR/stop exists or ctx ends,
// then waits for the sales started to be answered.
func (r *runner) pace(ctx context.Context, interval time.Duration) {
	var wg sync.WaitGroup
	var flows atomic.Int64
	stopFile := filepath.Join(r.dir, "stop")
	next := time.Now()
	for i := 1; ctx.Err() == nil; i++ {
		if _, err := os.Stat(stopFile); err == nil {
			break
		}
		next = next.Add(interval)
		time.Sleep(time.Until(next))
		if flows.Load() >= flowsMax {
			r.mu.Lock()
			r.ledger.Dropped++
			r.mu.Unlock()
			continue
		}
		flows.Add(1)
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			defer flows.Add(-1)
			r.flow(ctx, i)
		}(i)
	}
	wg.Wait()
}

// flow is sale i: odd ones the standard merchant's, even ones the
// streamlined merchant's; every third standard sale is then refunded in
// part.
func (r *runner) flow(ctx context.Context, i int) {
	m := &r.mers[0]
	if i%2 == 0 {
		m = &r.mers[1]
	}
	key := fmt.Sprintf("smoke-%d", i)
	body := fmt.Sprintf(`{"amount":%d,"currency":"usd","payment_method":%q}`, saleAmount, m.pm)
	var pay struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	if !r.send(ctx, "sale", m.key, key, "POST", r.url+"/v1/payments", body, &pay) {
		return
	}
	r.mu.Lock()
	r.ledger.Sales = append(r.ledger.Sales, Sale{Key: key, Kind: m.kind, Payment: pay.ID, Status: pay.Status, Amount: saleAmount})
	r.mu.Unlock()
	if m.kind != "standard" || i%6 != 1 || pay.Status != "succeeded" {
		return
	}
	rkey := key + "-refund"
	body = fmt.Sprintf(`{"amount":%d}`, refundAmount)
	if r.send(ctx, "refund", m.key, rkey, "POST", r.url+"/v1/payments/"+pay.ID+"/refunds", body, &pay) {
		r.mu.Lock()
		r.ledger.Refunds = append(r.ledger.Refunds, Refund{Key: rkey, Payment: pay.ID, Amount: refundAmount})
		r.mu.Unlock()
	}
}

// send sends one request until it is answered 200 (decoded into out:
// true) or finally refused (recorded as a failure: false).
func (r *runner) send(ctx context.Context, op, apiKey, idemKey, method, url, body string, out any) bool {
	for try := 1; ; try++ {
		status, code, retryAfter, wait, resp := r.once(ctx, apiKey, idemKey, method, url, body)
		r.record(op, status, code, retryAfter)
		switch {
		case status == http.StatusOK:
			if err := json.Unmarshal(resp, out); err != nil {
				r.fail("%s %s: 200 with a body that does not decode: %v", op, idemKey, err)
				return false
			}
			return true
		case status >= 400 && status < 500 && status != http.StatusConflict && status != http.StatusTooManyRequests:
			r.fail("%s %s: %d %s: %s", op, idemKey, status, code, bytes.TrimSpace(resp))
			return false
		case try >= triesMax:
			r.fail("%s %s: still %d %s after %d tries", op, idemKey, status, code, try)
			return false
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			r.fail("%s %s: interrupted", op, idemKey)
			return false
		}
	}
}

// once sends a request once; status 0 is no answer (a refused or broken
// connection, a timeout). wait is what Retry-After asks (1 s without one).
func (r *runner) once(ctx context.Context, apiKey, idemKey, method, url, body string) (status int, code string, retryAfter bool, wait time.Duration, resp []byte) {
	wait = time.Second
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		return 0, err.Error(), false, wait, nil
	}
	req.Header.Set("Authorization", "Bearer "+apiKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", idemKey)
	res, err := r.client.Do(req)
	if err != nil {
		return 0, "", false, wait, nil
	}
	defer func() { _ = res.Body.Close() }()
	resp, err = io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return 0, "", false, wait, nil
	}
	if ra := res.Header.Get("Retry-After"); ra != "" {
		retryAfter = true
		if s, err := strconv.Atoi(ra); err == nil && s >= 0 {
			wait = min(time.Duration(s)*time.Second, retryAfterMax)
		}
	}
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if res.StatusCode != http.StatusOK && json.Unmarshal(resp, &e) == nil {
		code = e.Error.Code
	}
	return res.StatusCode, code, retryAfter, wait, resp
}

func (r *runner) record(op string, status int, code string, retryAfter bool) {
	if op == "endpoint" {
		return // before the load: not a phase's
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.answers) < answersMax {
		r.answers = append(r.answers, answer{at: time.Now(), phase: int(r.phaseNow.Load()), op: op,
			status: status, code: code, retryAfter: retryAfter})
	}
}

func (r *runner) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.mu.Lock()
	r.ledger.Failures = append(r.ledger.Failures, msg)
	r.mu.Unlock()
	log("FAIL: %s", msg)
}

// watchPhase follows DIR/phase: each new name starts a phase.
func (r *runner) watchPhase(ctx context.Context) {
	file := filepath.Join(r.dir, "phase")
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		b, err := os.ReadFile(file) //nolint:gosec // G304: the folder is the operator's -dir
		name := strings.TrimSpace(string(b))
		if err == nil && name != "" {
			r.mu.Lock()
			if len(r.phases) == 0 || r.phases[len(r.phases)-1].Name != name {
				r.phases = append(r.phases, phase{Name: name, Start: time.Now()})
				r.phaseNow.Store(int32(len(r.phases) - 1)) //nolint:gosec // G115: a script's phases, a dozen
			}
			r.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// report sums the answers by phase into the ledger and prints them.
func (r *runner) report() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.phases) == 0 {
		r.phases = []phase{{Name: "all", Start: r.ledger.Started}}
	}
	reports := make([]PhaseReport, len(r.phases))
	first := make([]time.Time, len(r.phases))
	last := make([]time.Time, len(r.phases))
	for i, p := range r.phases {
		end := time.Now()
		if i+1 < len(r.phases) {
			end = r.phases[i+1].Start
		}
		reports[i] = PhaseReport{Name: p.Name, Seconds: round(end.Sub(p.Start)), Statuses: map[string]int{}}
	}
	for _, a := range r.answers {
		pr := &reports[a.phase]
		label := strconv.Itoa(a.status)
		switch {
		case a.status == 0:
			label = "000 (no answer)"
		case a.code != "":
			label += " " + a.code
		case a.status != http.StatusOK:
			label += " (not surgepay's)"
		}
		pr.Statuses[a.op+" "+label]++
		if a.status == http.StatusOK {
			continue
		}
		if first[a.phase].IsZero() {
			first[a.phase] = a.at
		}
		last[a.phase] = a.at
		if (a.status == http.StatusServiceUnavailable || a.status == http.StatusTooManyRequests) && a.code != "" && !a.retryAfter {
			pr.NoRetryAfter++
		}
		if a.status == http.StatusInternalServerError {
			pr.Status500++
		}
	}
	for i := range reports {
		if !first[i].IsZero() {
			reports[i].FailedFor = round(last[i].Sub(first[i]))
			reports[i].Recovered = round(last[i].Sub(r.phases[i].Start))
		}
	}
	r.ledger.Phases = reports
	log("what clients saw, by phase (answers; not-200 from first to last; recovered: last not-200 after the phase began):")
	for _, pr := range reports {
		labels := make([]string, 0, len(pr.Statuses))
		for l := range pr.Statuses {
			labels = append(labels, l)
		}
		sort.Strings(labels)
		var b strings.Builder
		for _, l := range labels {
			fmt.Fprintf(&b, "%s: %d; ", l, pr.Statuses[l])
		}
		fmt.Printf("  %-16s %5.1f s  %s", pr.Name, pr.Seconds, b.String())
		if pr.Recovered > 0 {
			fmt.Printf("not 200 for %.1f s, recovered %.1f s after the phase began", pr.FailedFor, pr.Recovered)
		}
		fmt.Println()
	}
}

func round(d time.Duration) float64 { return float64(d.Milliseconds()/100) / 10 }

// register makes m's webhook endpoint at url and keeps its secret.
func (r *runner) register(ctx context.Context, m *merchant, url string) error {
	body, err := json.Marshal(map[string]string{"url": url, "description": "deploy/local/smoke.sh"})
	if err != nil {
		return err
	}
	var we struct {
		ID     string `json:"id"`
		Secret string `json:"secret"`
	}
	key := fmt.Sprintf("smoke-endpoint-%s-%d", m.kind, time.Now().UnixNano())
	if !r.send(ctx, "endpoint", m.key, key, "POST", r.url+"/v1/webhook_endpoints", string(body), &we) || we.Secret == "" {
		return fmt.Errorf("registering %s's webhook endpoint failed", m.kind)
	}
	m.secret = we.Secret
	r.ledger.Endpoints = append(r.ledger.Endpoints, we.ID)
	return nil
}

// receive is the webhook receiver: it verifies the signature as
// docs/webhooks.md tells a merchant to, then writes a line to
// webhooks.tsv: event ID, merchant kind, event type, payment ID.
func (r *runner) receive(w http.ResponseWriter, req *http.Request) {
	kind := strings.TrimPrefix(req.URL.Path, "/hooks/")
	var m *merchant
	for i := range r.mers {
		if r.mers[i].kind == kind {
			m = &r.mers[i]
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, webhookBodyMax))
	if m == nil || err != nil || m.secret == "" {
		http.Error(w, "unknown endpoint or unreadable body", http.StatusBadRequest)
		return
	}
	if !verify(m.secret, req.Header.Get("Surgepay-Signature"), body) {
		r.badSigs.Add(1)
		http.Error(w, "bad signature", http.StatusBadRequest)
		return
	}
	var ev struct {
		ID   string `json:"id"`
		Type string `json:"type"`
		Data struct {
			Object struct {
				ID string `json:"id"`
			} `json:"object"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &ev); err != nil || ev.ID == "" {
		http.Error(w, "not an event", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	_, err = fmt.Fprintf(r.webhooks, "%s\t%s\t%s\t%s\n", ev.ID, kind, ev.Type, ev.Data.Object.ID)
	r.mu.Unlock()
	if err != nil {
		http.Error(w, "cannot record", http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// verify checks a Surgepay-Signature header (t=…,v1=…[,v1=…]) over body.
func verify(secret, header string, body []byte) bool {
	var ts string
	var sigs []string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sigs = append(sigs, v)
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || time.Since(time.Unix(sec, 0)).Abs() > 5*time.Minute {
		return false
	}
	mac := hmac.New(sha256.New, []byte(secret))
	_, _ = mac.Write([]byte(ts + "."))
	_, _ = mac.Write(body)
	want := hex.EncodeToString(mac.Sum(nil))
	for _, s := range sigs {
		if hmac.Equal([]byte(s), []byte(want)) {
			return true
		}
	}
	return false
}

func log(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s faultclient: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}
