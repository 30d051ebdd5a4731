package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Bounds of the crash test.
const (
	crashRounds          = 3                       // kill/restart rounds
	crashWorkers         = 16                      // concurrent clients
	crashLoadDuration    = 1500 * time.Millisecond // load before the SIGKILL
	crashCreatesMax      = 3000                    // per round: SIGKILL once this many payments were answered
	crashOpsPerWorkerMax = 2000                    // per round and worker; above crashCreatesMax/crashWorkers, so the kill lands mid-flight
	crashCustomers       = 4
	crashTestTimeout     = 4 * time.Minute // one backend's whole run
	crashRetriesMax      = 5               // attempts at one in-flight request after the restart
	crashErrorsMax       = 20              // mismatches reported before giving up
	crashPagesMax        = 1000            // list pages per customer
)

// TestCrashRecovery starts `surgepay serve` as a process, drives payments
// from concurrent clients, kills it with SIGKILL mid-flight, restarts it
// on the same data, and checks that every payment that got a 2xx is there
// in the state the client was last told. Requests that were in flight at
// the kill are retried after the restart with the same Idempotency-Key and
// body; they must answer 2xx.
//
// The card network is a `surgepay simulator` process that lives through
// the server's kills, as a real network would. The in-process simulator
// would restart empty with the server, so captures and refunds of earlier
// authorizations would be declined as unknown, and a second authorization
// could not be told from a first. With the network outside, the test
// compares what the network did (GET /v1/effects) with the payments the
// server holds: a retried request that reached the network twice under two
// provider keys shows as an extra authorization, capture or refund.
func TestCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("builds surgepay and kills it: not in -short")
	}
	bin := buildSurgepay(t)
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), crashTestTimeout)
			defer cancel()
			newCrashRun(t, bin, b.env(t)).run(ctx)
		})
	}
}

// buildSurgepay builds this package's command into a temporary folder.
func buildSurgepay(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "surgepay")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	t.Logf("built %s in %s", bin, time.Since(start).Round(time.Millisecond))
	return bin
}

// process is a child surgepay process.
type process struct {
	t       *testing.T
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed when the process has exited
	err     error         // of Wait, once done is closed
}

// startProcess runs bin with args and, of the parent's environment, all
// but the SURGEPAY_* variables, plus env. Its output goes to a file that
// is printed if the test fails. Cleanup kills it if it still runs.
func startProcess(t *testing.T, name, bin string, args []string, env map[string]string) *process {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SURGEPAY_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	p := &process{t: t, name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("%s output (last 4KiB):\n%s", name, b[max(0, len(b)-4096):])
		}
	})
	return p
}

// kill sends SIGKILL and waits for the process to exit.
func (p *process) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		p.t.Logf("kill %s: %v", p.name, err)
	}
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.t.Errorf("%s did not exit within 10s of SIGKILL", p.name)
	}
}

// terminate sends SIGTERM and returns the exit error, nil for status 0.
func (p *process) terminate(timeout time.Duration) error {
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		return fmt.Errorf("%s did not exit within %s of SIGTERM", p.name, timeout)
	}
}

// doneErr returns a channel that receives the process's exit, for
// waitHealthy.
func (p *process) doneErr() <-chan error {
	c := make(chan error, 1)
	go func() {
		<-p.done
		c <- fmt.Errorf("%s exited: %v", p.name, p.err)
	}()
	return c
}

// told is what the client was last told about a payment.
type told struct {
	status                    string
	total, captured, refunded int64
	lastPath                  string
	retried                   bool // the last answer was to a retry after a restart
}

// request is a POST the client sent; kept to retry it after a kill.
type request struct {
	path, key string
	body      map[string]any
}

// crashRun is one backend's run: the processes, the clients' ledger.
type crashRun struct {
	t        *testing.T
	bin      string
	dataDir  string
	env      map[string]string // storage and provider variables of the server
	simURL   string
	server   *process
	api      *client
	key      string
	cards    []card
	mu       sync.Mutex
	ledger   map[string]*told // payment ID → what the client was last told
	inflight []request        // unanswered at the kill
	errs     atomic.Int32
}

type card struct{ customer, method string }

func newCrashRun(t *testing.T, bin string, env map[string]string) *crashRun {
	r := &crashRun{t: t, bin: bin, dataDir: t.TempDir(), env: env, ledger: map[string]*told{}}
	simAddr := freeAddr(t)
	sim := startProcess(t, "simulator", bin, []string{"simulator", "--listen", simAddr}, nil)
	r.simURL = "http://" + simAddr
	if err := waitHealthy(r.simURL, startTimeout, sim.doneErr()); err != nil {
		t.Fatalf("simulator: %v", err)
	}
	return r
}

// errorf reports a mismatch; after crashErrorsMax of them the rest are
// counted, not printed.
func (r *crashRun) errorf(format string, args ...any) {
	r.t.Helper()
	if n := r.errs.Add(1); n <= crashErrorsMax {
		r.t.Errorf(format, args...)
	}
}

func (r *crashRun) run(ctx context.Context) {
	t := r.t
	for round := 1; round <= crashRounds+1; round++ {
		start := time.Now()
		r.start(ctx)
		if round == 1 {
			r.setUp(ctx)
		}
		retried := len(r.inflight)
		replayed := r.retryInflight(ctx)
		r.verify(ctx)
		if t.Failed() {
			return
		}
		checked := len(r.ledger)
		if round > crashRounds {
			t.Logf("final restart: %d requests in flight at the kill retried (%d replayed), %d payments checked; %s",
				retried, replayed, checked, time.Since(start).Round(time.Millisecond))
			break
		}
		answered := r.load(ctx, round)
		t.Logf("round %d: %d requests in flight at the kill retried (%d replayed), %d payments checked, then %d POSTs answered and %d in flight at SIGKILL; %s",
			round, retried, replayed, checked, answered, len(r.inflight), time.Since(start).Round(time.Millisecond))
	}
	r.checkNoDuplicates(ctx)
	r.checkNetwork(ctx)
	r.checkAnalytics(ctx)
	if err := r.server.terminate(stopTimeout); err != nil {
		t.Errorf("serve after SIGTERM: %v, want exit status 0", err)
	}
}

// start starts the server on the data folder and a fresh port.
func (r *crashRun) start(ctx context.Context) {
	t := r.t
	addr := freeAddr(t)
	env := map[string]string{"SURGEPAY_DATA_DIR": r.dataDir, "SURGEPAY_LISTEN": addr,
		"SURGEPAY_ADMIN_LISTEN": freeAddr(t), "SURGEPAY_LOG_LEVEL": "warn",
		"SURGEPAY_PROVIDER": "sim-http", "SURGEPAY_PROVIDER_URL": r.simURL}
	for k, v := range r.env {
		env[k] = v
	}
	r.server = startProcess(t, "serve", r.bin, []string{"serve"}, env)
	if err := waitHealthy("http://"+addr, startTimeout, r.server.doneErr()); err != nil {
		t.Fatalf("serve: %v", err)
	}
	if r.key == "" {
		r.key = readDevKey(t, r.dataDir)
	}
	r.api = newClient("http://"+addr, r.key)
}

func (r *crashRun) setUp(ctx context.Context) {
	for i := range crashCustomers {
		var cus, pm object
		r.api.must(r.t, "POST", "/v1/customers", fmt.Sprintf("setup-cus-%d", i),
			map[string]any{"name": fmt.Sprintf("Customer %d", i)}, 200, &cus)
		r.api.must(r.t, "POST", "/v1/payment_methods", fmt.Sprintf("setup-pm-%d", i), map[string]any{"customer": cus.ID,
			"card": map[string]any{"number": "4242424242424242", "exp_month": 12, "exp_year": 2035, "cvc": "123"}}, 200, &pm)
		r.cards = append(r.cards, card{cus.ID, pm.ID})
	}
}

// load runs the clients until crashLoadDuration passes or crashCreatesMax
// payments were answered, then kills the server with SIGKILL while they
// still send. It returns the number of answered POSTs.
func (r *crashRun) load(ctx context.Context, round int) int64 {
	var (
		wg       sync.WaitGroup
		stopped  atomic.Bool
		creates  atomic.Int64
		answered atomic.Int64
	)
	for w := range crashWorkers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(round), uint64(w)))
			for n := 0; n < crashOpsPerWorkerMax && !stopped.Load() && ctx.Err() == nil; n++ {
				ok := r.payment(ctx, rng, r.cards[w%len(r.cards)], fmt.Sprintf("r%d-w%d-n%d", round, w, n),
					&creates, &answered)
				if !ok {
					return // The server is gone: this worker's request is in flight.
				}
			}
		})
	}
	deadline := time.Now().Add(crashLoadDuration)
	for time.Now().Before(deadline) && creates.Load() < crashCreatesMax && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
	r.server.kill()
	stopped.Store(true)
	wg.Wait()
	return answered.Load()
}

// payment creates one payment and, sometimes, captures, voids or refunds
// it. It returns false once a request went unanswered.
func (r *crashRun) payment(ctx context.Context, rng *rand.Rand, c card, key string, creates, answered *atomic.Int64) bool {
	method := "automatic"
	if rng.IntN(2) == 0 {
		method = "manual"
	}
	// Amounts 9101-9104 trigger the simulator's faults; stay below them.
	body := map[string]any{"amount": 100 + rng.Int64N(8000), "currency": "usd", "customer": c.customer,
		"payment_method": c.method, "capture_method": method, "metadata": map[string]string{"idem": key}}
	p, ok := r.send(ctx, request{"/v1/payments", key + "-create", body})
	if !ok {
		return false
	}
	creates.Add(1)
	answered.Add(1)
	id := "/v1/payments/" + p.ID
	if p.Status == "requires_capture" {
		switch x := rng.IntN(10); {
		case x < 2:
			p, ok = r.send(ctx, request{id + "/capture", key + "-capture", map[string]any{}})
		case x < 4:
			p, ok = r.send(ctx, request{id + "/capture", key + "-capture", map[string]any{"amount": p.AmountTotal / 2}})
		case x < 7:
			p, ok = r.send(ctx, request{id + "/void", key + "-void", map[string]any{}})
		}
		if !ok {
			return false
		}
		answered.Add(1)
	}
	if p.Status == "succeeded" && rng.IntN(4) == 0 {
		body := map[string]any{}
		if rng.IntN(2) == 0 {
			body["amount"] = max(1, p.AmountCaptured/3)
		}
		if _, ok := r.send(ctx, request{id + "/refunds", key + "-refund", body}); !ok {
			return false
		}
		answered.Add(1)
	}
	return true
}

// send POSTs req and records a 2xx answer in the ledger. A request
// without an answer (the server died, or 5xx) is kept in r.inflight and
// send returns false. Any other answer is an error.
func (r *crashRun) send(ctx context.Context, req request) (*payment, bool) {
	resp, err := r.api.do(ctx, "POST", req.path, req.key, req.body)
	if err != nil || resp.status >= 500 {
		r.mu.Lock()
		r.inflight = append(r.inflight, req)
		r.mu.Unlock()
		return nil, false
	}
	p, err := r.record(req, resp, false)
	if err != nil {
		r.errorf("%v", err)
		return nil, false
	}
	return p, true
}

// record puts a 2xx answer to req in the ledger.
func (r *crashRun) record(req request, resp *response, retried bool) (*payment, error) {
	if resp.status/100 != 2 {
		return nil, fmt.Errorf("POST %s (key %s): status %d, want 2xx; body %s", req.path, req.key, resp.status, resp.body)
	}
	var p payment
	if err := json.Unmarshal(resp.body, &p); err != nil || p.ID == "" {
		return nil, fmt.Errorf("POST %s (key %s): answer %s is not a payment (%v)", req.path, req.key, resp.body, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.ledger[p.ID]
	if e == nil {
		e = &told{}
		r.ledger[p.ID] = e
	}
	e.status, e.total, e.captured, e.refunded = p.Status, p.AmountTotal, p.AmountCaptured, p.AmountRefunded
	e.lastPath, e.retried = req.path, retried
	return &p, nil
}

// retryInflight sends again, with the same Idempotency-Key and body, every
// request that went unanswered at the last kill. Each must now answer 2xx:
// the stored answer if the first attempt committed, else a fresh success.
// It returns how many were replays of a stored answer.
func (r *crashRun) retryInflight(ctx context.Context) (replayed int) {
	reqs := r.inflight
	r.inflight = nil
	for _, req := range reqs {
		var (
			resp *response
			err  error
		)
		for range crashRetriesMax {
			resp, err = r.api.do(ctx, "POST", req.path, req.key, req.body)
			if err == nil && resp.status < 500 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			r.errorf("retry POST %s (key %s) after the restart: %v", req.path, req.key, err)
			continue
		}
		if _, err := r.record(req, resp, true); err != nil {
			r.errorf("retry after the restart: %v", err)
		}
		if resp.header.Get("Idempotent-Replayed") == "true" {
			replayed++
		}
	}
	return replayed
}

// verify reads every payment of the ledger and compares it with what the
// client was last told.
func (r *crashRun) verify(ctx context.Context) {
	ids := make(chan string)
	var wg sync.WaitGroup
	for range crashWorkers {
		wg.Go(func() {
			for id := range ids {
				r.verifyOne(ctx, id)
			}
		})
	}
	for id := range r.ledger {
		if r.errs.Load() > crashErrorsMax {
			break
		}
		ids <- id
	}
	close(ids)
	wg.Wait()
}

func (r *crashRun) verifyOne(ctx context.Context, id string) {
	want := r.ledger[id] // The clients are stopped: no writes race this read.
	resp, err := r.api.do(ctx, "GET", "/v1/payments/"+id, "", nil)
	if err != nil {
		r.errorf("GET payment %s: %v", id, err)
		return
	}
	if resp.status != http.StatusOK && want.retried {
		r.errorf("payment %s does not exist (GET answered %d), yet a retry after the restart of POST %s answered it, %s",
			id, resp.status, want.lastPath, want.status)
		return
	}
	if resp.status != http.StatusOK {
		r.errorf("payment %s (told %s after POST %s) lost after SIGKILL: GET answered %d %s",
			id, want.status, want.lastPath, resp.status, resp.body)
		return
	}
	var got payment
	if err := json.Unmarshal(resp.body, &got); err != nil {
		r.errorf("GET payment %s: %v", id, err)
		return
	}
	if got.Status != want.status || got.AmountTotal != want.total || got.AmountCaptured != want.captured ||
		got.AmountRefunded != want.refunded {
		r.errorf("payment %s after SIGKILL: status %s total %d captured %d refunded %d; the client was told %s %d %d %d (after POST %s)",
			id, got.Status, got.AmountTotal, got.AmountCaptured, got.AmountRefunded,
			want.status, want.total, want.captured, want.refunded, want.lastPath)
	}
	// The network knows the payment by the same ID, also when the create
	// was retried after a SIGKILL that came between its authorization and
	// its commit (the retry takes the first authorization's payment ID).
	var fx struct {
		Authorizations int   `json:"authorizations"`
		AmountCaptured int64 `json:"amount_captured"`
	}
	sim := &client{base: r.simURL, hc: &http.Client{Timeout: requestTimeout}}
	if resp, err := sim.do(ctx, "GET", "/v1/effects?payment="+id, "", nil); err != nil || resp.status != http.StatusOK {
		r.errorf("simulator effects of %s: %v %v", id, err, resp)
	} else if err := json.Unmarshal(resp.body, &fx); err != nil || fx.Authorizations != 1 || fx.AmountCaptured != got.AmountCaptured {
		r.errorf("the network's record of payment %s: %s; want 1 authorization and %d captured", id, resp.body, got.AmountCaptured)
	}
}

// listed is a payment as GET /v1/payments lists it.
type listed struct {
	payment
	Transactions []struct {
		Type   string `json:"type"`
		Status string `json:"status"`
	} `json:"transactions"`
}

// listAll pages through every payment of every customer.
func (r *crashRun) listAll(ctx context.Context) []listed {
	customers := make([]string, len(r.cards))
	for i, c := range r.cards {
		customers[i] = c.customer
	}
	return listCustomerPayments[listed](r.t, r.api, customers, r.errorf)
}

func (p payment) paymentID() string { return p.ID }

// listCustomerPayments pages through GET /v1/payments of each customer,
// at most crashPagesMax pages each (more is reported with errorf).
func listCustomerPayments[T interface{ paymentID() string }](t *testing.T, api *client, customers []string,
	errorf func(format string, args ...any)) []T {
	var all []T
	for _, cus := range customers {
		after := ""
		for page := 0; ; page++ {
			if page == crashPagesMax {
				errorf("customer %s has more than %d pages of payments", cus, crashPagesMax)
				break
			}
			q := url.Values{"limit": {"100"}, "customer": {cus}}
			if after != "" {
				q.Set("starting_after", after)
			}
			var list struct {
				Data    []T  `json:"data"`
				HasMore bool `json:"has_more"`
			}
			api.must(t, "GET", "/v1/payments?"+q.Encode(), "", nil, 200, &list)
			all = append(all, list.Data...)
			if !list.HasMore || len(list.Data) == 0 {
				break
			}
			after = list.Data[len(list.Data)-1].paymentID()
		}
	}
	return all
}

// checkNoDuplicates lists every payment: each Idempotency-Key made at most
// one payment, and the server holds exactly the payments the clients were
// told about (every unanswered create was retried).
func (r *crashRun) checkNoDuplicates(ctx context.Context) {
	all := r.listAll(ctx)
	byKey := map[string][]string{}
	seen := map[string]bool{}
	for _, p := range all {
		if seen[p.ID] {
			r.errorf("payment %s listed twice", p.ID)
		}
		seen[p.ID] = true
		byKey[p.Metadata["idem"]] = append(byKey[p.Metadata["idem"]], p.ID)
		if _, ok := r.ledger[p.ID]; !ok {
			r.errorf("payment %s (key %s, status %s) exists but no client was told of it", p.ID, p.Metadata["idem"], p.Status)
		}
	}
	for key, ids := range byKey {
		if len(ids) > 1 {
			r.errorf("Idempotency-Key %s-create made %d payments: %v", key, len(ids), ids)
		}
	}
	for id := range r.ledger {
		if !seen[id] {
			r.errorf("payment %s is not listed", id)
		}
	}
	if len(all) != len(r.ledger) {
		r.errorf("%d payments listed, the clients were told of %d", len(all), len(r.ledger))
	}
}

// networkTotals is the simulator's GET /v1/effects.
type networkTotals struct {
	Authorizations         int64            `json:"authorizations"`
	AuthorizationsDeclined int64            `json:"authorizations_declined"`
	Captures               int64            `json:"captures"`
	Voids                  int64            `json:"voids"`
	Refunds                int64            `json:"refunds"`
	AmountAuthorized       map[string]int64 `json:"amount_authorized"`
	AmountCaptured         map[string]int64 `json:"amount_captured"`
	AmountRefunded         map[string]int64 `json:"amount_refunded"`
	RecordsEvicted         int64            `json:"records_evicted"`
}

// checkNetwork compares what the card network did with the payments the
// server holds: no operation reached the network twice, none is missing.
func (r *crashRun) checkNetwork(ctx context.Context) {
	var got networkTotals
	sim := &client{base: r.simURL, hc: &http.Client{Timeout: requestTimeout}}
	sim.must(r.t, "GET", "/v1/effects", "", nil, 200, &got)
	want := networkTotals{AmountAuthorized: map[string]int64{}, AmountCaptured: map[string]int64{},
		AmountRefunded: map[string]int64{}}
	for _, p := range r.listAll(ctx) {
		if p.Status == "failed" || p.Status == "processing" {
			r.errorf("payment %s is %s; the simulator was set to approve everything", p.ID, p.Status)
			continue
		}
		want.Authorizations++
		want.AmountAuthorized["usd"] += p.AmountTotal
		want.AmountCaptured["usd"] += p.AmountCaptured
		want.AmountRefunded["usd"] += p.AmountRefunded
		for _, tx := range p.Transactions {
			if tx.Status != "succeeded" {
				continue
			}
			switch tx.Type {
			case "capture":
				want.Captures++
			case "void":
				want.Voids++
			case "refund":
				want.Refunds++
			}
		}
	}
	for _, m := range []map[string]int64{got.AmountAuthorized, got.AmountCaptured, got.AmountRefunded} {
		for k, v := range m {
			if v == 0 {
				delete(m, k)
			}
		}
	}
	for _, m := range []map[string]int64{want.AmountAuthorized, want.AmountCaptured, want.AmountRefunded} {
		if m["usd"] == 0 {
			delete(m, "usd")
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		r.errorf("the card network's effects differ from the payments the server holds:\nnetwork %+v\nserver  %+v", got, want)
	}
	r.t.Logf("network: %d authorizations, %d captures, %d voids, %d refunds", got.Authorizations, got.Captures,
		got.Voids, got.Refunds)
}
