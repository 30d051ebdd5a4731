package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/surgepay/surgepay/internal/testenv"
	"github.com/surgepay/surgepay/settle"
	"github.com/surgepay/surgepay/stage"
	"github.com/surgepay/surgepay/stage/stagetest"
)

// Bounds of the streamlined crash test.
const (
	slRounds          = 3                      // serve SIGKILL/restart rounds; one settle SIGKILL in each
	slWorkers         = 16                     // concurrent clients
	slLoadDuration    = time.Second            // load before serve's SIGKILL
	slSettleDelay     = 300 * time.Millisecond // load before settle starts, so records are staged
	slSettleKillWait  = 3 * time.Second        // the longest settle runs before its SIGKILL, captures or not
	slSettleKillAfter = 150                    // network captures by settle before its SIGKILL: past its first batch of 100
	slCreatesMax      = 3000                   // per round: SIGKILL serve once this many sales were answered
	slOpsPerWorkerMax = 2000                   // per round and worker; above slCreatesMax/slWorkers
	slCustomers       = 4
	slDeclineOneIn    = 8 // one sale in this many uses the card whose capture is declined
	slRetriesMax      = 5 // attempts at one unanswered sale after the restart
	slErrorsMax       = 20
	// Settle's flags, so that the test need not wait out the defaults (1m,
	// 2m): a settle --until-empty run on JetStream waits out the --ack-wait
	// of the records a killed run had fetched (the shortest settle accepts
	// with provider.timeout slProviderTimeout; the simulator answers in
	// milliseconds), and acknowledges orphan records (staged by a serve
	// killed before its commit) once --orphan-grace has passed (sales
	// commit milliseconds after they are staged).
	slProviderTimeout  = 2 * time.Second
	slOrphanGrace      = 3 * time.Second
	slFinalRunsMax     = 20
	slSQLiteTimeout    = 3 * time.Minute
	slJetStreamTimeout = 4 * time.Minute
	slTestCard         = "4242424242424242"
	slDeclineCard      = "4000000000000259" // authorized; its capture is declined
	slSimLatency       = "uniform:1ms-4ms"  // so that a settle batch lasts long enough to be killed in
)

var (
	slAckWait          = settle.AckWaitMin(slProviderTimeout)
	slSettleRunTimeout = slAckWait + slOrphanGrace + time.Minute     // one run, with room for a slow machine
	slFinalSettleMax   = 2*(slAckWait+slOrphanGrace) + 2*time.Minute // all final runs together
)

// TestCrashStreamlined kills `surgepay serve` with SIGKILL several times
// during a load of streamlined sales, and `surgepay settle` several times
// mid-batch, then settles to the end. Every sale the client was told
// succeeded is captured exactly once at the card network (counted by the
// `surgepay simulator` process's own effect record, which lives through
// the kills), the sales whose capture the network declines end failed with
// no capture, and nothing the client was not told of is captured.
//
// SQLite with the embedded stage always; PostgreSQL with the JetStream
// stage when SURGEPAY_TEST_POSTGRES_URL is set (and nats-server is
// installed; under CI both must be). Settle runs with --ack-wait and
// --orphan-grace of seconds (slAckWait, slOrphanGrace): records a killed
// settle had fetched come back after the consumer's AckWait, and records
// staged by a serve killed before its commit are dropped as orphans after
// the orphan grace; records a run leaves for later come back after its
// backoff.
func TestCrashStreamlined(t *testing.T) {
	if testing.Short() {
		t.Skip("builds surgepay and kills it: not in -short")
	}
	bin := buildSurgepay(t)
	t.Run("sqlite-embedded", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), slSQLiteTimeout)
		defer cancel()
		newSLRun(t, bin, map[string]string{"SURGEPAY_STAGE": "embedded"}).run(ctx)
	})
	pgURL := testenv.PostgresURL(t)
	if pgURL == "" {
		t.Log("SURGEPAY_TEST_POSTGRES_URL is not set: PostgreSQL with JetStream skipped")
		return
	}
	t.Run("postgres-jetstream", func(t *testing.T) {
		nats := stagetest.StartNATS(t) // skips without nats-server, fails under CI
		ctx, cancel := context.WithTimeout(context.Background(), slJetStreamTimeout)
		defer cancel()
		newSLRun(t, bin, map[string]string{"SURGEPAY_STORAGE": "postgres", "SURGEPAY_POSTGRES_DSN": pgURL,
			"SURGEPAY_POSTGRES_SCHEMA": pgSchema(t, pgURL), "SURGEPAY_STAGE": "jetstream",
			"SURGEPAY_NATS_URL": nats.URL}).run(ctx)
	})
}

// slCustomer is a customer with a card that settles and one whose capture
// is declined.
type slCustomer struct{ id, card, declineCard string }

// slSale is a create request, kept to retry it after a kill.
type slSale struct {
	key     string
	body    map[string]any
	decline bool // the card whose capture is declined
}

// slTold is what the client was told of one payment.
type slTold struct {
	sale    slSale
	total   int64
	retried bool // answered to a retry after a restart
}

// slTx is a payment's transaction as the API shows it.
type slTx struct {
	Type              string `json:"type"`
	Status            string `json:"status"`
	Amount            int64  `json:"amount"`
	ProviderReference string `json:"provider_reference"`
	DeclineCode       string `json:"decline_code"`
}

// slPayment is a payment with its transactions.
type slPayment struct {
	payment
	FailureMessage string `json:"failure_message"`
	Transactions   []slTx `json:"transactions"`
}

// captures returns the payment's capture transactions.
func (p *slPayment) captures() []slTx {
	var out []slTx
	for _, tx := range p.Transactions {
		if tx.Type == "capture" {
			out = append(out, tx)
		}
	}
	return out
}

// slEffects is the simulator's GET /v1/effects?payment=ID.
type slEffects struct {
	Authorizations int   `json:"authorizations"`
	Captures       int   `json:"captures"`
	Voids          int   `json:"voids"`
	Refunds        int   `json:"refunds"`
	AmountCaptured int64 `json:"amount_captured"`
}

// slTotals is the simulator's GET /v1/effects.
type slTotals struct {
	Authorizations         int64            `json:"authorizations"`
	AuthorizationsDeclined int64            `json:"authorizations_declined"`
	Captures               int64            `json:"captures"`
	Voids                  int64            `json:"voids"`
	Refunds                int64            `json:"refunds"`
	Declines               int64            `json:"declines"`
	AmountCaptured         map[string]int64 `json:"amount_captured"`
	RecordsEvicted         int64            `json:"records_evicted"`
}

// slOperation is the simulator's GET /v1/operations/{key}.
type slOperation struct {
	Approved    bool   `json:"approved"`
	Operation   string `json:"operation"`
	Amount      int64  `json:"amount"`
	DeclineCode string `json:"decline_code"`
}

// slRun is one backend's run.
type slRun struct {
	t       *testing.T
	bin     string
	dataDir string            // serve's and settle's data folder (SQLite, keyring, dev key)
	keyDir  string            // settlement.pub and settlement.key
	config  string            // settle's config file: provider.timeout
	env     map[string]string // storage and stage variables of serve and settle
	simURL  string
	sim     *client
	server  *process
	api     *client
	key     string
	custs   []slCustomer

	mu       sync.Mutex
	ledger   map[string]*slTold // payment ID → what the client was told
	byKey    map[string]string  // Idempotency-Key → payment ID
	inflight []slSale           // unanswered at the kill
	errs     atomic.Int32

	settleRuns int
}

func newSLRun(t *testing.T, bin string, env map[string]string) *slRun {
	r := &slRun{t: t, bin: bin, dataDir: t.TempDir(), keyDir: filepath.Join(t.TempDir(), "keys"), env: env,
		config: filepath.Join(t.TempDir(), "settle.toml"), ledger: map[string]*slTold{}, byKey: map[string]string{}}
	// The rest of settle's configuration comes from the environment, as serve's.
	if err := os.WriteFile(r.config, []byte("[provider]\ntimeout = "+quote(slProviderTimeout.String())+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := startProcess(t, "keys-settlement", bin, []string{"keys", "settlement", "--out", r.keyDir}, nil)
	if code, err := waitExit(ctx, p); err != nil || code != 0 {
		t.Fatalf("surgepay keys settlement: exit %d, %v", code, err)
	}
	simAddr := freeAddr(t)
	sim := startProcess(t, "simulator", bin, []string{"simulator", "--listen", simAddr, "--latency", slSimLatency}, nil)
	r.simURL = "http://" + simAddr
	r.sim = &client{base: r.simURL, hc: &http.Client{Timeout: requestTimeout}}
	if err := waitHealthy(r.simURL, startTimeout, sim.doneErr()); err != nil {
		t.Fatalf("simulator: %v", err)
	}
	return r
}

// waitExit waits for p to exit and returns its exit code.
func waitExit(ctx context.Context, p *process) (int, error) {
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode(), nil
	case <-ctx.Done():
		p.kill()
		return -1, fmt.Errorf("%s still running: %w (killed)", p.name, ctx.Err())
	}
}

func (r *slRun) errorf(format string, args ...any) {
	r.t.Helper()
	if n := r.errs.Add(1); n <= slErrorsMax {
		r.t.Errorf(format, args...)
	}
}

// baseEnv is what serve and settle share: storage, stage, the network.
func (r *slRun) baseEnv() map[string]string {
	env := map[string]string{"SURGEPAY_DATA_DIR": r.dataDir, "SURGEPAY_LOG_LEVEL": "warn",
		"SURGEPAY_PROVIDER": "sim-http", "SURGEPAY_PROVIDER_URL": r.simURL}
	for k, v := range r.env {
		env[k] = v
	}
	return env
}

func (r *slRun) run(ctx context.Context) {
	t := r.t
	start := time.Now()
	for round := 1; round <= slRounds+1; round++ {
		roundStart := time.Now()
		r.start()
		if round == 1 {
			r.setUp()
		}
		retried := len(r.inflight)
		replayed := r.retryInflight(ctx)
		if t.Failed() {
			return
		}
		if round > slRounds {
			t.Logf("final restart: %d sales unanswered at the kill retried (%d replayed); %d payments told succeeded",
				retried, replayed, len(r.ledger))
			break
		}
		answered, captured := r.load(ctx, round)
		t.Logf("round %d: %d sales retried (%d replayed); then %d sales answered, %d unanswered at serve's SIGKILL; "+
			"settle SIGKILLed after %d captures at the network; %s",
			round, retried, replayed, answered, len(r.inflight), captured, time.Since(roundStart).Round(time.Millisecond))
		if t.Failed() {
			return
		}
	}
	settleStart := time.Now()
	r.settleToEnd(ctx)
	t.Logf("final settlement took %s", time.Since(settleStart).Round(time.Millisecond))
	if t.Failed() {
		return
	}
	r.check(ctx)
	if err := r.server.terminate(stopTimeout); err != nil {
		t.Errorf("serve after SIGTERM: %v, want exit status 0", err)
	}
	t.Logf("%d payments, %s in all", len(r.ledger), time.Since(start).Round(time.Millisecond))
}

// start starts serve on the data folder and a fresh port: every merchant
// streamlined, the settlement public key only.
func (r *slRun) start() {
	t := r.t
	addr := freeAddr(t)
	env := r.baseEnv()
	env["SURGEPAY_LISTEN"] = addr
	env["SURGEPAY_ADMIN_LISTEN"] = "off"
	env["SURGEPAY_PROCESSING"] = "streamlined"
	env["SURGEPAY_SETTLEMENT_PUBLIC_KEY_FILE"] = filepath.Join(r.keyDir, stage.PublicKeyFile)
	r.server = startProcess(t, "serve", r.bin, []string{"serve"}, env)
	if err := waitHealthy("http://"+addr, startTimeout, r.server.doneErr()); err != nil {
		t.Fatalf("serve: %v", err)
	}
	if r.key == "" {
		r.key = readDevKey(t, r.dataDir)
	}
	r.api = newClient("http://"+addr, r.key)
}

func (r *slRun) setUp() {
	for i := range slCustomers {
		var cus, pm, dpm object
		r.api.must(r.t, "POST", "/v1/customers", fmt.Sprintf("sl-cus-%d", i),
			map[string]any{"name": fmt.Sprintf("Customer %d", i)}, 200, &cus)
		r.api.must(r.t, "POST", "/v1/payment_methods", fmt.Sprintf("sl-pm-%d", i), map[string]any{"customer": cus.ID,
			"card": map[string]any{"number": slTestCard, "exp_month": 12, "exp_year": 2035, "cvc": "123"}}, 200, &pm)
		r.api.must(r.t, "POST", "/v1/payment_methods", fmt.Sprintf("sl-pm-decline-%d", i), map[string]any{"customer": cus.ID,
			"card": map[string]any{"number": slDeclineCard, "exp_month": 12, "exp_year": 2035, "cvc": "123"}}, 200, &dpm)
		r.custs = append(r.custs, slCustomer{cus.ID, pm.ID, dpm.ID})
	}
}

// load runs the clients for slLoadDuration (or until slCreatesMax sales
// were answered) and kills serve with SIGKILL while they still send.
// Meanwhile a continuous settle starts and is killed mid-batch. It returns
// the sales answered and the network's captures when settle was killed.
func (r *slRun) load(ctx context.Context, round int) (int64, int64) {
	var (
		wg       sync.WaitGroup
		stopped  atomic.Bool
		answered atomic.Int64
	)
	for w := range slWorkers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(round), uint64(w)))
			c := r.custs[w%len(r.custs)]
			for n := 0; n < slOpsPerWorkerMax && !stopped.Load() && ctx.Err() == nil; n++ {
				decline := rng.IntN(slDeclineOneIn) == 0
				pm := c.card
				if decline {
					pm = c.declineCard
				}
				key := fmt.Sprintf("sl-r%d-w%d-n%d", round, w, n)
				// Amounts 9101-9104 trigger the simulator's faults; stay below them.
				s := slSale{key: key, decline: decline, body: map[string]any{"amount": 100 + rng.Int64N(8000),
					"currency": "usd", "customer": c.id, "payment_method": pm, "capture_method": "automatic",
					"metadata": map[string]string{"idem": key}}}
				if !r.send(ctx, s) {
					return // serve is gone: this worker's sale is in flight
				}
				answered.Add(1)
			}
		})
	}
	var captured int64
	settleDone := make(chan struct{})
	go func() {
		defer close(settleDone)
		time.Sleep(slSettleDelay)
		captured = r.settleAndKill(ctx, round)
	}()
	deadline := time.Now().Add(slLoadDuration)
	for time.Now().Before(deadline) && answered.Load() < slCreatesMax && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
	r.server.kill()
	stopped.Store(true)
	wg.Wait()
	<-settleDone
	return answered.Load(), captured
}

// send POSTs a sale and records a 2xx answer. A sale without an answer
// (serve died, or 5xx) is kept in r.inflight and send returns false. Any
// other answer is an error.
func (r *slRun) send(ctx context.Context, s slSale) bool {
	resp, err := r.api.do(ctx, "POST", "/v1/payments", s.key, s.body)
	if err != nil || resp.status >= 500 {
		r.mu.Lock()
		r.inflight = append(r.inflight, s)
		r.mu.Unlock()
		return false
	}
	if err := r.record(s, resp, false); err != nil {
		r.errorf("%v", err)
		return false
	}
	return true
}

// record checks a sale's answer, the streamlined one: succeeded, captured
// in full, its capture pending settlement. It puts it in the ledger.
func (r *slRun) record(s slSale, resp *response, retried bool) error {
	if resp.status/100 != 2 {
		return fmt.Errorf("POST /v1/payments (key %s, retried %v): status %d, want 2xx; body %s", s.key, retried, resp.status, resp.body)
	}
	var p slPayment
	if err := json.Unmarshal(resp.body, &p); err != nil || p.ID == "" {
		return fmt.Errorf("POST /v1/payments (key %s): answer %s is not a payment (%v)", s.key, resp.body, err)
	}
	caps := p.captures()
	if p.Status != "succeeded" || p.AmountCaptured != p.AmountTotal || len(caps) != 1 || caps[0].Status != "pending" {
		return fmt.Errorf("POST /v1/payments (key %s, retried %v): %s, want a streamlined sale: succeeded, amount_captured = amount_total, one pending capture",
			s.key, retried, resp.body)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if id, ok := r.byKey[s.key]; ok && id != p.ID {
		return fmt.Errorf("Idempotency-Key %s answered payment %s, earlier %s", s.key, p.ID, id)
	}
	if prev, ok := r.ledger[p.ID]; ok && prev.sale.key != s.key {
		return fmt.Errorf("payment %s answered to keys %s and %s", p.ID, prev.sale.key, s.key)
	}
	r.byKey[s.key] = p.ID
	r.ledger[p.ID] = &slTold{sale: s, total: p.AmountTotal, retried: retried}
	return nil
}

// retryInflight sends again, with the same Idempotency-Key and body, every
// sale unanswered at the last kill. Each must now answer 2xx. It returns
// how many answers were replays of a stored answer.
func (r *slRun) retryInflight(ctx context.Context) (replayed int) {
	sales := r.inflight
	r.inflight = nil
	for _, s := range sales {
		var (
			resp *response
			err  error
		)
		for range slRetriesMax {
			resp, err = r.api.do(ctx, "POST", "/v1/payments", s.key, s.body)
			if err == nil && resp.status < 500 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			r.errorf("retry of sale %s after the restart: %v", s.key, err)
			continue
		}
		if err := r.record(s, resp, true); err != nil {
			r.errorf("retry after the restart: %v", err)
			continue
		}
		if resp.header.Get("Idempotent-Replayed") == "true" {
			replayed++
		}
	}
	return replayed
}

// simTotals returns the network's totals.
func (r *slRun) simTotals(ctx context.Context) (*slTotals, error) {
	resp, err := r.sim.do(ctx, "GET", "/v1/effects", "", nil)
	if err != nil {
		return nil, err
	}
	if resp.status != http.StatusOK {
		return nil, fmt.Errorf("simulator GET /v1/effects: status %d %s", resp.status, resp.body)
	}
	var tot slTotals
	if err := json.Unmarshal(resp.body, &tot); err != nil {
		return nil, err
	}
	return &tot, nil
}

// settleArgs are the arguments of a settle run; its JSON report goes to
// the returned path.
func (r *slRun) settleArgs(extra ...string) ([]string, string) {
	r.settleRuns++
	report := filepath.Join(r.t.TempDir(), fmt.Sprintf("settle-%d.json", r.settleRuns))
	args := append([]string{"settle", "--config", r.config, "--private-key", filepath.Join(r.keyDir, stage.PrivateKeyFile),
		"--ack-wait", slAckWait.String(), "--orphan-grace", slOrphanGrace.String(), "--report-json", report}, extra...)
	return args, report
}

// settleAndKill starts a continuous settle, waits until the network shows
// captures (or declined captures) it made, at most slSettleKillWait, and
// kills it with SIGKILL. It returns the captures the network had then.
func (r *slRun) settleAndKill(ctx context.Context, round int) int64 {
	t := r.t
	before, err := r.simTotals(ctx)
	if err != nil {
		r.errorf("settle kill %d: %v", round, err)
		return 0
	}
	// Small batches and few workers: many batches, each long enough to be
	// killed in.
	args, _ := r.settleArgs("--batch-size", "100", "--workers", "8")
	p := startProcess(t, fmt.Sprintf("settle-kill-%d", round), r.bin, args, r.baseEnv())
	deadline := time.Now().Add(slSettleKillWait)
	var now *slTotals
	for {
		if now, err = r.simTotals(ctx); err != nil {
			r.errorf("settle kill %d: %v", round, err)
			break
		}
		if now.Captures+now.Declines >= before.Captures+before.Declines+slSettleKillAfter || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		select {
		case <-p.done:
			r.errorf("settle (continuous) exited before its SIGKILL: %v", p.err)
			return 0
		case <-time.After(2 * time.Millisecond):
		}
	}
	p.kill()
	if now == nil {
		return 0
	}
	if n := now.Captures + now.Declines - before.Captures - before.Declines; n < slSettleKillAfter {
		t.Logf("settle kill %d: %d captures at the network within %s; killed anyway", round, n, slSettleKillWait)
	}
	return now.Captures
}

// settleToEnd runs `surgepay settle --until-empty` until it exits 0: exit
// 3 (records left for later: on JetStream, orphans still within their
// grace when the run stopped waiting for them) runs it again, within
// slFinalSettleMax and slFinalRunsMax.
func (r *slRun) settleToEnd(ctx context.Context) {
	t := r.t
	deadline := time.Now().Add(slFinalSettleMax)
	for run := 1; ; run++ {
		args, reportPath := r.settleArgs("--until-empty")
		p := startProcess(t, fmt.Sprintf("settle-final-%d", run), r.bin, args, r.baseEnv())
		runCtx, cancel := context.WithTimeout(ctx, slSettleRunTimeout)
		start := time.Now()
		code, err := waitExit(runCtx, p)
		cancel()
		if err != nil {
			t.Fatalf("settle --until-empty run %d: %v", run, err)
		}
		rep := &settle.Report{}
		b, rerr := os.ReadFile(reportPath)
		if rerr == nil {
			rerr = json.Unmarshal(b, rep)
		}
		if rerr != nil {
			t.Fatalf("settle --until-empty run %d: exit %d; report: %v", run, code, rerr)
		}
		t.Logf("settle --until-empty run %d: exit %d in %s: %d records, captured %d, declined %d, already settled %d, failures %v, left %d, backlog %d",
			run, code, time.Since(start).Round(time.Millisecond), rep.Records, rep.Captured, rep.Failed, rep.AlreadySettled,
			rep.Failures, rep.Left, rep.BacklogDepth)
		switch {
		case code == exitSettleOK:
			if rep.BacklogDepth != 0 {
				t.Errorf("settle --until-empty exited 0 with a backlog of %d", rep.BacklogDepth)
			}
			return
		case code != exitSettleLeft:
			t.Fatalf("settle --until-empty run %d: exit %d, want %d or %d", run, code, exitSettleOK, exitSettleLeft)
		case run >= slFinalRunsMax || time.Now().After(deadline):
			t.Fatalf("settle --until-empty still leaves records after %d runs (%s): %v", run, slFinalSettleMax, rep.Failures)
		}
		for reason := range rep.Failures {
			switch reason {
			case settle.ReasonOrphanWait, settle.ReasonRetryLater, settle.ReasonUnknown:
			default:
				if len(reason) < len(settle.ReasonDeclined) || reason[:len(settle.ReasonDeclined)] != settle.ReasonDeclined {
					t.Errorf("settle --until-empty run %d: failures %q", run, reason)
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("settle --until-empty: %v", ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// listAll pages through every payment of every customer.
func (r *slRun) listAll(ctx context.Context) []slPayment {
	customers := make([]string, len(r.custs))
	for i, c := range r.custs {
		customers[i] = c.id
	}
	return listCustomerPayments[slPayment](r.t, r.api, customers, r.errorf)
}

// check compares the network's effect record and the API with what the
// clients were told.
func (r *slRun) check(ctx context.Context) {
	t := r.t
	// Every payment the server holds was told to a client; one per key.
	all := r.listAll(ctx)
	seen := map[string]bool{}
	byKey := map[string][]string{}
	for _, p := range all {
		if seen[p.ID] {
			r.errorf("payment %s listed twice", p.ID)
		}
		seen[p.ID] = true
		byKey[p.Metadata["idem"]] = append(byKey[p.Metadata["idem"]], p.ID)
		if _, ok := r.ledger[p.ID]; !ok {
			var e slEffects
			r.sim.must(t, "GET", "/v1/effects?payment="+url.QueryEscape(p.ID), "", nil, 200, &e)
			r.errorf("payment %s (key %s, status %s) exists but no client was told of it; the network captured it %d times",
				p.ID, p.Metadata["idem"], p.Status, e.Captures)
		}
	}
	for key, ids := range byKey {
		if len(ids) > 1 {
			r.errorf("Idempotency-Key %s made %d payments: %v", key, len(ids), ids)
		}
	}
	for id := range r.ledger {
		if !seen[id] {
			r.errorf("payment %s, told succeeded, is not listed", id)
		}
	}

	// Each payment told succeeded, at the network and through the API.
	var (
		wantCaptures, wantDeclined, retried, ownAuth int64
		wantAmount                                   int64
	)
	for _, told := range r.ledger {
		if told.sale.decline {
			wantDeclined++
		} else {
			wantCaptures++
			wantAmount += told.total
		}
		if told.retried {
			retried++
		}
	}
	ids := make(chan string)
	var wg sync.WaitGroup
	var ownAuthN atomic.Int64
	for range slWorkers {
		wg.Go(func() {
			for id := range ids {
				if r.checkOne(ctx, id) {
					ownAuthN.Add(1)
				}
			}
		})
	}
	sorted := make([]string, 0, len(r.ledger))
	for id := range r.ledger {
		sorted = append(sorted, id)
	}
	sort.Strings(sorted)
	for _, id := range sorted {
		if r.errs.Load() > slErrorsMax || ctx.Err() != nil {
			break
		}
		ids <- id
	}
	close(ids)
	wg.Wait()
	ownAuth = ownAuthN.Load()

	// Totals: the network captured exactly the sales told succeeded with
	// the card that settles, and authorized once per payment. With checkOne
	// (each such sale has an approved capture under its own key, and the
	// network captures an authorization at most once) the equal count
	// means each was captured exactly once, including the sales whose
	// authorization the network counts under an earlier payment ID.
	tot, err := r.simTotals(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if tot.Captures != wantCaptures || tot.AmountCaptured["usd"] != wantAmount {
		r.errorf("the network made %d captures of %d in all; the clients were told of %d sales of %d that settle",
			tot.Captures, tot.AmountCaptured["usd"], wantCaptures, wantAmount)
	}
	if tot.Authorizations != int64(len(r.ledger)) || tot.AuthorizationsDeclined != 0 {
		r.errorf("the network made %d authorizations (%d declined); the clients were told of %d payments",
			tot.Authorizations, tot.AuthorizationsDeclined, len(r.ledger))
	}
	if tot.Voids != 0 || tot.Refunds != 0 || tot.RecordsEvicted != 0 {
		r.errorf("the network made %d voids, %d refunds, evicted %d records; want none", tot.Voids, tot.Refunds, tot.RecordsEvicted)
	}
	if tot.Declines < wantDeclined {
		r.errorf("the network declined %d operations; %d captures should have been declined", tot.Declines, wantDeclined)
	}
	t.Logf("told succeeded: %d sales that settle, %d whose capture is declined, %d answered after a restart "+
		"(%d of them authorized under an earlier, uncommitted payment); network: %d authorizations, %d captures, %d declines",
		wantCaptures, wantDeclined, retried, int64(len(r.ledger))-ownAuth, tot.Authorizations, tot.Captures, tot.Declines)
}

// checkOne checks one payment told succeeded: at the network, captured
// once (or its capture declined), and through the API, settled. It
// reports whether the network's authorization carries this payment's ID.
func (r *slRun) checkOne(ctx context.Context, id string) bool {
	told := r.ledger[id] // The clients are stopped: no writes race this read.
	resp, err := r.api.do(ctx, "GET", "/v1/payments/"+id, "", nil)
	if err != nil || resp.status != http.StatusOK {
		r.errorf("GET payment %s (told succeeded, key %s): %v %v", id, told.sale.key, err, resp)
		return false
	}
	var p slPayment
	if err := json.Unmarshal(resp.body, &p); err != nil {
		r.errorf("GET payment %s: %v", id, err)
		return false
	}
	caps := p.captures()
	if len(caps) != 1 {
		r.errorf("payment %s has %d capture transactions, want 1: %s", id, len(caps), resp.body)
		return false
	}
	if told.sale.decline {
		if p.Status != "failed" || p.AmountCaptured != 0 || p.DeclineCode == "" || caps[0].Status != "failed" {
			r.errorf("payment %s (card %s, capture declined at settlement): status %s, amount_captured %d, decline_code %q, capture %s; "+
				"want failed, 0, a decline code, failed", id, slDeclineCard[12:], p.Status, p.AmountCaptured, p.DeclineCode, caps[0].Status)
		}
	} else if p.Status != "succeeded" || p.AmountCaptured != told.total || caps[0].Status != "succeeded" || caps[0].ProviderReference == "" {
		r.errorf("payment %s (told succeeded, settled): status %s, amount_captured %d, capture %s ref %q; want succeeded, %d, succeeded with a reference",
			id, p.Status, p.AmountCaptured, caps[0].Status, caps[0].ProviderReference, told.total)
	}

	// The network's own record of this payment. The authorization carries
	// the ID of the payment that first sent it: a sale whose first attempt
	// reached the network but not the database was authorized under a
	// payment ID that was never stored, and its retry (same provider key)
	// is counted there. Its capture key, <payment>/capture, is its own.
	var e slEffects
	eresp, err := r.sim.do(ctx, "GET", "/v1/effects?payment="+url.QueryEscape(id), "", nil)
	if err == nil && eresp.status != http.StatusOK {
		err = fmt.Errorf("status %d %s", eresp.status, eresp.body)
	}
	if err == nil {
		err = json.Unmarshal(eresp.body, &e)
	}
	if err != nil {
		r.errorf("simulator effects of %s: %v", id, err)
		return false
	}
	own := e.Authorizations == 1
	switch {
	case e.Authorizations > 1 || e.Voids != 0 || e.Refunds != 0:
		r.errorf("payment %s at the network: %s; want one authorization, no void or refund", id, eresp.body)
	case e.Authorizations == 0 && !told.retried:
		r.errorf("payment %s (answered on its first attempt) has no authorization at the network: %s", id, eresp.body)
	case own && told.sale.decline && e.Captures != 0:
		r.errorf("payment %s (capture declined) captured %d times at the network", id, e.Captures)
	case own && !told.sale.decline && (e.Captures != 1 || e.AmountCaptured != told.total):
		r.errorf("payment %s captured %d times (amount %d) at the network, want exactly once (%d)", id, e.Captures, e.AmountCaptured, told.total)
	}
	oresp, err := r.sim.do(ctx, "GET", "/v1/operations/"+url.PathEscape(id+"/capture"), "", nil)
	if err != nil {
		r.errorf("simulator lookup of %s/capture: %v", id, err)
		return own
	}
	var op slOperation
	if oresp.status == http.StatusOK {
		_ = json.Unmarshal(oresp.body, &op)
	}
	switch {
	case told.sale.decline && oresp.status == http.StatusOK && (op.Approved || op.Operation != "capture"):
		r.errorf("payment %s (capture declined): the network has %s under %s/capture", id, oresp.body, id)
	case told.sale.decline && oresp.status != http.StatusOK && oresp.status != http.StatusNotFound:
		r.errorf("payment %s: simulator lookup of its capture: %d %s", id, oresp.status, oresp.body)
	case !told.sale.decline && (oresp.status != http.StatusOK || !op.Approved || op.Operation != "capture" || op.Amount != told.total):
		r.errorf("payment %s: the network's capture under %s/capture is %d %s; want an approved capture of %d",
			id, id, oresp.status, oresp.body, told.total)
	}
	return own
}
