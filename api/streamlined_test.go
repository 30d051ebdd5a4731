package api_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/engine"
	"github.com/surgepay/surgepay/internal/testenv"
	"github.com/surgepay/surgepay/settle"
	"github.com/surgepay/surgepay/stage"
	"github.com/surgepay/surgepay/stage/jetstream"
	"github.com/surgepay/surgepay/stage/stagetest"
)

// streamlinedEnv is an env whose merchant A is on the streamlined path with
// the embedded stage (or JetStream, see newStreamlinedEnvJetStream), and
// the settlement opener for its records.
type streamlinedEnv struct {
	*env
	opener surgepay.Opener
	js     *jetstream.Stage // nil: the embedded stage
}

func newStreamlinedEnv(t *testing.T, store surgepay.Store, audit string) *streamlinedEnv {
	return newStreamlinedEnvOn(t, store, audit, nil)
}

// newStreamlinedEnvJetStream is newStreamlinedEnv with the production stage:
// a JetStream stream on a real nats-server.
func newStreamlinedEnvJetStream(t *testing.T, store surgepay.Store, audit, name string) *streamlinedEnv {
	nats := stagetest.StartNATS(t)
	js, err := jetstream.Open(context.Background(), jetstream.Config{URL: nats.URL,
		Stream: "T_" + strings.ToUpper(name), Subject: "t." + name + ".captures"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { js.Close() })
	return newStreamlinedEnvOn(t, store, audit, js)
}

func newStreamlinedEnvOn(t *testing.T, store surgepay.Store, audit string, js *jetstream.Stage) *streamlinedEnv {
	pub, priv, err := stage.GenerateKeys()
	if err != nil {
		t.Fatal(err)
	}
	sealer, err := stage.NewSealer(pub)
	if err != nil {
		t.Fatal(err)
	}
	opener, err := stage.NewOpener(priv)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvWith(t, store, func(c *engine.Config) {
		c.Sealer = sealer
		if js != nil {
			c.Stage = js
		}
	})
	e.setPath(e.merchants[0], surgepay.PathStreamlined, audit)
	return &streamlinedEnv{env: e, opener: opener, js: js}
}

func (e *env) setPath(merchantID, path, audit string) {
	s := surgepay.DefaultMerchantSettings()
	s.Processing, s.Audit = path, audit
	e.eng.SetSettings(&engine.Settings{Default: surgepay.DefaultMerchantSettings(),
		Merchants: map[string]surgepay.MerchantSettings{merchantID: s}})
}

func (e *streamlinedEnv) settle(t *testing.T) *settle.Report {
	t.Helper()
	var consumer surgepay.StageConsumer = e.js
	if e.js == nil {
		emb, err := stage.NewEmbedded(e.store, 0)
		if err != nil {
			t.Fatal(err)
		}
		consumer = emb
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rep, err := settle.Run(ctx, settle.Config{Store: e.store, Provider: e.sim, Opener: e.opener,
		Consumer: consumer, UntilEmpty: true, RetryBackoff: time.Millisecond, BatchWait: 50 * time.Millisecond})
	if err != nil {
		t.Fatalf("settle: %v", err)
	}
	return rep
}

func captureTx(t *testing.T, r *response) map[string]any {
	t.Helper()
	txs, _ := r.JSON["transactions"].([]any)
	for _, tx := range txs {
		m := tx.(map[string]any)
		if m["type"] == "capture" {
			return m
		}
	}
	t.Fatalf("no capture transaction: %s", r.Raw)
	return nil
}

func TestStreamlinedSale(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ee *env) {
		e := newStreamlinedEnv(t, ee.store, "minimal")
		e.setAnalytics(e.merchants[0], "off") // the path's own budget; with analytics on see TestSQLBudgetAnalytics
		cus, pm := e.customerWithCard(e.keyA, "4242424242424242")
		r := e.do(e.keyA, "POST", "/v1/payments", paymentBody(cus, pm, 2500, "automatic"), "sl-1")
		if r.Status != 200 || r.str("status") != "succeeded" || r.num("amount_captured") != 2500 {
			t.Fatalf("sale: %d %s", r.Status, r.Raw)
		}
		if tx := captureTx(t, r); tx["status"] != "pending" {
			t.Fatalf("capture transaction %v, want pending", tx)
		}
		// The SQL budget of a streamlined sale: one write (with analytics
		// off; on, the batch's analytics upsert is one more), and with an
		// Idempotency-Key one read of the stored key before the provider
		// (none on SQLite, whose filter knows the key is new).
		reads := newKeyReads(ee.store)
		if sql := r.Header.Get("Surgepay-Sql"); !strings.HasPrefix(sql, sqlBudget(1+reads, reads)) {
			t.Fatalf("Surgepay-Sql %q, want %s", sql, sqlBudget(1+reads, reads))
		}
		id := r.str("id")
		if fx := e.sim.Effects(id); fx.Authorizations != 1 || fx.Captures != 0 {
			t.Fatalf("before settlement the network saw %+v, want one authorization and no capture", fx)
		}
		if replay := e.do(e.keyA, "POST", "/v1/payments", paymentBody(cus, pm, 2500, "automatic"), "sl-1"); string(replay.Raw) != string(r.Raw) {
			t.Fatalf("replay differs:\n%s\n%s", replay.Raw, r.Raw)
		}
		if rf := e.do(e.keyA, "POST", "/v1/payments/"+id+"/refunds", ``, ""); rf.Status != 409 || rf.errField("code") != "capture_pending" {
			t.Fatalf("refund before settlement: %d %s", rf.Status, rf.Raw)
		}
		// The card that authorizes but whose capture is declined.
		_, pmBad := e.customerWithCard(e.keyA, "4000000000000259")
		bad := e.must(200, e.keyA, "POST", "/v1/payments", paymentBody("", pmBad, 700, "automatic")).str("id")

		rep := e.settle(t)
		if rep.Captured != 1 || rep.Failed != 1 {
			t.Fatalf("settle report: captured %d failed %d (%+v)", rep.Captured, rep.Failed, rep.Failures)
		}
		p := e.must(200, e.keyA, "GET", "/v1/payments/"+id, "")
		if tx := captureTx(t, p); p.str("status") != "succeeded" || tx["status"] != "succeeded" || tx["provider_reference"] == "" {
			t.Fatalf("after settlement: %s", p.Raw)
		}
		if fx := e.sim.Effects(id); fx.Captures != 1 || fx.AmountCaptured != 2500 {
			t.Fatalf("network %+v, want one capture of 2500", fx)
		}
		f := e.must(200, e.keyA, "GET", "/v1/payments/"+bad, "")
		if f.str("status") != "failed" || f.num("amount_captured") != 0 || f.str("decline_code") == "" {
			t.Fatalf("declined capture: %s", f.Raw)
		}
		// Refunds work once settled; settling again captures nothing more.
		e.must(200, e.keyA, "POST", "/v1/payments/"+id+"/refunds", `{"amount":500}`)
		if rep := e.settle(t); rep.Captured != 0 {
			t.Fatalf("second settle captured %d", rep.Captured)
		}
		if fx := e.sim.Effects(id); fx.Captures != 1 {
			t.Fatalf("network captured %d times", fx.Captures)
		}
		// Merchant B stays on the standard path.
		cusB, pmB := e.customerWithCard(e.keyB, "4242424242424242")
		rb := e.must(200, e.keyB, "POST", "/v1/payments", paymentBody(cusB, pmB, 100, "automatic"))
		if tx := captureTx(t, rb); tx["status"] != "succeeded" {
			t.Fatalf("standard sale: %s", rb.Raw)
		}
	})
}

func TestStreamlinedDetailedAuditCostsOneMoreStatement(t *testing.T) {
	e := newStreamlinedEnv(t, testenv.OpenSQLite(t), "detailed")
	e.setAnalytics(e.merchants[0], "off") // with analytics on see TestSQLBudgetAnalytics
	cus, pm := e.customerWithCard(e.keyA, "4242424242424242")
	r := e.do(e.keyA, "POST", "/v1/payments", paymentBody(cus, pm, 2500, "automatic"), "sl-2")
	if sql := r.Header.Get("Surgepay-Sql"); !strings.HasPrefix(sql, "total=2 select=0 ") { // no read: the filter knows the key is new
		t.Fatalf("Surgepay-Sql %q, want total=2 select=0", sql)
	}
	ev := e.must(200, e.keyA, "GET", "/v1/payments/"+r.str("id")+"/events", "")
	if data, _ := ev.JSON["data"].([]any); len(data) != 2 {
		t.Fatalf("audit rows: %s", ev.Raw)
	}
}

// TestSwitchPathUnderLoad flips merchant A between the standard and the
// streamlined path while sales run: after settlement every sale the client
// saw succeed is captured exactly once, and nothing else is.
// TestSwitchPathUnderLoad flips a merchant between the standard and the
// streamlined path while sales run, on the embedded stage and on
// JetStream: every sale answered succeeded is captured exactly once.
func TestSwitchPathUnderLoad(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ee *env) {
		t.Run("embedded", func(t *testing.T) { switchPathUnderLoad(t, newStreamlinedEnv(t, ee.store, "minimal")) })
		t.Run("jetstream", func(t *testing.T) {
			switchPathUnderLoad(t, newStreamlinedEnvJetStream(t, ee.store, "minimal", "switch"))
		})
	})
}

func switchPathUnderLoad(t *testing.T, e *streamlinedEnv) {
	t.Helper()
	cus, pm := e.customerWithCard(e.keyA, "4242424242424242")
	var stop atomic.Bool
	var mu sync.Mutex
	succeeded := map[string]bool{}
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load() && i < 200; i++ {
				r := e.do(e.keyA, "POST", "/v1/payments", paymentBody(cus, pm, 1000, "automatic"), fmt.Sprintf("sw-%d-%d", w, i))
				if r.Status == 200 && r.str("status") == "succeeded" {
					mu.Lock()
					succeeded[r.str("id")] = true
					mu.Unlock()
				}
			}
		}()
	}
	for i := 0; i < 20; i++ {
		path := surgepay.PathStandard
		if i%2 == 0 {
			path = surgepay.PathStreamlined
		}
		e.setPath(e.merchants[0], path, "minimal")
		time.Sleep(20 * time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()
	e.settle(t)
	if len(succeeded) < 20 {
		t.Fatalf("only %d sales succeeded", len(succeeded))
	}
	tot := e.sim.TotalEffects()
	if tot.Captures != int64(len(succeeded)) {
		t.Fatalf("network captured %d times for %d succeeded sales", tot.Captures, len(succeeded))
	}
	for id := range succeeded {
		if fx := e.sim.Effects(id); fx.Captures != 1 {
			t.Fatalf("%s captured %d times", id, fx.Captures)
		}
		p := e.must(200, e.keyA, "GET", "/v1/payments/"+id, "")
		if tx := captureTx(t, p); tx["status"] != "succeeded" {
			t.Fatalf("%s: %s", id, p.Raw)
		}
	}
}

// TestStreamlinedSaleOnJetStream pins the budget of a streamlined sale on
// the production stage: one SQL write statement and one publish, no read;
// settlement then captures it from JetStream.
func TestStreamlinedSaleOnJetStream(t *testing.T) {
	for _, b := range testenv.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			e := newStreamlinedEnvJetStream(t, b.Open(t), "minimal", b.Name)
			e.setAnalytics(e.merchants[0], "off") // the path's own budget; analytics on adds one statement
			cus, pm := e.customerWithCard(e.keyA, "4242424242424242")
			r := e.do(e.keyA, "POST", "/v1/payments", paymentBody(cus, pm, 1500, "automatic"), "js-1")
			if r.Status != 200 || captureTx(t, r)["status"] != "pending" {
				t.Fatalf("sale: %d %s", r.Status, r.Raw)
			}
			reads := newKeyReads(e.store) // the key's read (none on SQLite), the write
			if sql := r.Header.Get("Surgepay-Sql"); !strings.HasPrefix(sql, sqlBudget(1+reads, reads)) {
				t.Fatalf("Surgepay-Sql %q, want %s", sql, sqlBudget(1+reads, reads))
			}
			if depth, _, err := e.js.Backlog(context.Background()); err != nil || depth != 1 {
				t.Fatalf("JetStream backlog %d, %v; want 1", depth, err)
			}
			if rep := e.settle(t); rep.Captured != 1 {
				t.Fatalf("settle: %+v", rep)
			}
			if fx := e.sim.Effects(r.str("id")); fx.Captures != 1 {
				t.Fatalf("network captured %d times", fx.Captures)
			}
		})
	}
}

// switchStage is an external stage that is down while down is set, and
// otherwise keeps the records it takes.
type switchStage struct {
	down atomic.Bool
	mu   sync.Mutex
	recs []*surgepay.StagedRecord
}

func (s *switchStage) Put(_ context.Context, rec *surgepay.StagedRecord) error {
	if s.down.Load() {
		return fmt.Errorf("stage down")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recs = append(s.recs, rec)
	return nil
}

func (s *switchStage) staged(paymentID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.recs {
		if r.PaymentID == paymentID {
			n++
		}
	}
	return n
}

// TestStageFallback: a streamlined sale whose stage is down is captured at
// once (fallback capture), or refused with 503 stage_unavailable (fallback
// reject). A refused sale with an Idempotency-Key keeps its authorization,
// so that the retry completes the sale once the stage is back, with the
// same authorization and nothing voided; one without a key has its
// authorization voided. Nothing is stored for a refused sale.
func TestStageFallback(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ee *env) {
		pub, _, err := stage.GenerateKeys()
		if err != nil {
			t.Fatal(err)
		}
		sealer, _ := stage.NewSealer(pub)
		for _, fallback := range []string{engine.FallbackCapture, engine.FallbackReject} {
			t.Run(fallback, func(t *testing.T) {
				st := &switchStage{}
				e := newEnvWith(t, ee.store, func(c *engine.Config) {
					c.Sealer, c.Stage, c.StageFallback = sealer, st, fallback
				})
				e.setPath(e.merchants[0], surgepay.PathStreamlined, "minimal")
				cus, pm := e.customerWithCard(e.keyA, "4242424242424242")
				body := paymentBody(cus, pm, 1200, "automatic")
				st.down.Store(true)
				before := e.sim.TotalEffects()
				r := e.do(e.keyA, "POST", "/v1/payments", body, "fb-"+fallback)

				if fallback == engine.FallbackCapture {
					if r.Status != 200 || r.str("status") != "succeeded" || captureTx(t, r)["status"] != "succeeded" {
						t.Fatalf("sale with the stage down: %d %s", r.Status, r.Raw)
					}
					if fx := e.sim.Effects(r.str("id")); fx.Authorizations != 1 || fx.Captures != 1 || fx.AmountCaptured != 1200 {
						t.Fatalf("network %+v, want one authorization and one capture of 1200", fx)
					}
					if replay := e.do(e.keyA, "POST", "/v1/payments", body, "fb-"+fallback); string(replay.Raw) != string(r.Raw) {
						t.Fatalf("replay differs:\n%s\n%s", replay.Raw, r.Raw)
					}
					return
				}

				if r.Status != 503 || r.errField("code") != "stage_unavailable" || r.Header.Get("Retry-After") == "" {
					t.Fatalf("sale with the stage down: %d %s, want 503 stage_unavailable with Retry-After", r.Status, r.Raw)
				}
				mid := e.sim.TotalEffects()
				if mid.Authorizations-before.Authorizations != 1 || mid.Voids != before.Voids {
					t.Fatalf("network after the refusal: %+v, want one authorization kept, no void", mid)
				}
				if l := e.must(200, e.keyA, "GET", "/v1/payments", ""); len(l.JSON["data"].([]any)) != 0 {
					t.Fatalf("a refused sale was stored: %s", l.Raw)
				}
				// The stage is back: the retry completes the sale with the
				// same authorization.
				st.down.Store(false)
				r = e.do(e.keyA, "POST", "/v1/payments", body, "fb-"+fallback)
				if r.Status != 200 || r.str("status") != "succeeded" || captureTx(t, r)["status"] != "pending" {
					t.Fatalf("retry with the stage back: %d %s", r.Status, r.Raw)
				}
				id := r.str("id")
				if fx := e.sim.Effects(id); fx.Authorizations != 1 || fx.Voids != 0 || fx.Captures != 0 {
					t.Fatalf("network for %s: %+v, want the first authorization only", id, fx)
				}
				if n := st.staged(id); n != 1 {
					t.Fatalf("%d records staged for %s, want 1", n, id)
				}

				// Without a key no retry can reach the authorization: voided.
				st.down.Store(true)
				before = e.sim.TotalEffects()
				if r := e.do(e.keyA, "POST", "/v1/payments", body, ""); r.Status != 503 || r.errField("code") != "stage_unavailable" {
					t.Fatalf("sale without a key, stage down: %d %s", r.Status, r.Raw)
				}
				after := e.sim.TotalEffects()
				if after.Authorizations-before.Authorizations != 1 || after.Voids-before.Voids != 1 {
					t.Fatalf("network after a refused sale without a key: %+v (before %+v), want its authorization voided", after, before)
				}
			})
		}
	})
}
