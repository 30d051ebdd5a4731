package settle_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/groupcommit"
	"github.com/surgepay/surgepay/internal/testenv"
	"github.com/surgepay/surgepay/provider/sim"
	"github.com/surgepay/surgepay/settle"
	"github.com/surgepay/surgepay/stage"
	"github.com/surgepay/surgepay/stage/stagetest"
)

const (
	cardOK             = "4242424242424242"
	cardCaptureDecline = "4000000000000259"
)

type env struct {
	store  surgepay.Store
	mem    *stagetest.MemStore // store, when it is the in-memory one
	sim    *sim.Provider
	sealer *stage.Sealer
	opener *stage.Opener
	cons   *stage.Embedded
	merch  string
}

func newEnv(t testing.TB) *env {
	t.Helper()
	mem := stagetest.NewMemStore()
	e := newEnvStore(t, mem)
	e.mem = mem
	return e
}

// newEnvStore makes an environment on st, with a merchant stored.
func newEnvStore(t testing.TB, st surgepay.Store) *env {
	t.Helper()
	pub, priv, err := stage.GenerateKeys()
	if err != nil {
		t.Fatal(err)
	}
	s, _ := stage.NewSealer(pub)
	o, _ := stage.NewOpener(priv)
	cons, err := stage.NewEmbedded(st, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	m, err := stagetest.NewMerchant(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	return &env{store: st, sim: sim.New(sim.DefaultConfig()), sealer: s, opener: o, cons: cons, merch: m.ID}
}

func (e *env) sale(t testing.TB, amount int64, card surgepay.PAN) *stagetest.Staged {
	t.Helper()
	s, err := stagetest.MakeSale(context.Background(), e.store, e.sim, e.sealer, nil,
		stagetest.Sale{MerchantID: e.merch, Amount: amount, Card: card})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (e *env) config(p surgepay.Provider) settle.Config {
	if p == nil {
		p = e.sim
	}
	return settle.Config{Store: e.store, Provider: p, Opener: e.opener, Consumer: e.cons, UntilEmpty: true,
		BatchSizeMax: 50, BatchWait: 10 * time.Millisecond, Workers: 8, RetryBackoff: time.Millisecond}
}

func run(t testing.TB, cfg settle.Config) *settle.Report {
	t.Helper()
	return runWithin(t, cfg, 30*time.Second)
}

// runWithin is run with its bound, a hang guard.
func runWithin(t testing.TB, cfg settle.Config, bound time.Duration) *settle.Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	rep, err := settle.Run(ctx, cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatal("Run did not stop by itself in UntilEmpty mode")
	}
	return rep
}

// state returns the payment's settlement state: "captured", "failed" or
// "staged"; it fails the test on any other combination.
func state(t testing.TB, st surgepay.Store, p *surgepay.Payment) string {
	t.Helper()
	got, err := st.FindPayment(context.Background(), p.MerchantID, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	var capture *surgepay.Transaction
	for i := range got.Transactions {
		if got.Transactions[i].Type == surgepay.TxCapture {
			if capture != nil {
				t.Fatalf("%s: two capture transactions", p.ID)
			}
			capture = &got.Transactions[i]
		}
	}
	switch {
	case got.Status == surgepay.StatusSucceeded && capture.Status == surgepay.TxSucceeded && capture.ProviderRef != "":
		return "captured"
	case got.Status == surgepay.StatusFailed && capture.Status == surgepay.TxFailed && got.AmountCaptured == 0:
		return "failed"
	case got.Status == surgepay.StatusSucceeded && capture.Status == surgepay.TxPending:
		return "staged"
	}
	t.Fatalf("%s: status %s with capture %s: not a settlement state", p.ID, got.Status, capture.Status)
	return ""
}

func wantCaptures(t testing.TB, e *env, p *surgepay.Payment, want int) {
	t.Helper()
	if got := e.sim.Effects(p.ID).Captures; got != want {
		t.Errorf("%s: network captures %d, want %d", p.ID, got, want)
	}
}

// backends are the stores settlement runs on: in memory, SQLite, and
// PostgreSQL when configured (there, a batch's payments load in one
// statement and its results store in one: FindPayments, ApplySettlements).
func backends(t *testing.T) map[string]func(*testing.T) *env {
	bs := map[string]func(*testing.T) *env{
		"memory": func(t *testing.T) *env { return newEnv(t) },
		"sqlite": func(t *testing.T) *env { return newEnvStore(t, testenv.OpenSQLite(t)) },
	}
	if testenv.PostgresURL(t) != "" {
		bs["postgres"] = func(t *testing.T) *env { return newEnvStore(t, testenv.OpenPostgres(t)) }
	}
	return bs
}

func TestSettleOutcomes(t *testing.T) {
	for name, mk := range backends(t) {
		t.Run(name, func(t *testing.T) { testSettleOutcomes(t, mk(t)) })
	}
}

func testSettleOutcomes(t *testing.T, e *env) {
	ok := e.sale(t, 1000, cardOK)
	ok2 := e.sale(t, 2500, cardOK)
	declined := e.sale(t, 1500, cardCaptureDecline)
	lost := e.sale(t, 9102, cardOK) // capture performed, answer lost: found by Lookup

	rep := run(t, e.config(nil))
	for _, c := range []struct {
		s     *stagetest.Staged
		state string
		caps  int
	}{{ok, "captured", 1}, {ok2, "captured", 1}, {declined, "failed", 0}, {lost, "captured", 1}} {
		if got := state(t, e.store, c.s.Payment); got != c.state {
			t.Errorf("%s: got %s, want %s", c.s.Payment.ID, got, c.state)
		}
		wantCaptures(t, e, c.s.Payment, c.caps)
	}
	if rep.Captured != 3 || rep.Failed != 1 || rep.Failures["declined:generic_decline"] != 1 || rep.Left != 0 || rep.BacklogDepth != 0 {
		t.Errorf("report: %+v", rep)
	}
	if got := rep.Currencies["usd"]; got == nil || got.AmountCaptured != 1000+2500+9102 || got.AmountFailed != 1500 {
		t.Errorf("usd totals %+v, want captured %d failed 1500", got, 1000+2500+9102)
	}
	evs, _ := e.store.ListEvents(context.Background(), e.merch, declined.Payment.ID)
	if len(evs) != 1 || evs[0].Type != settle.EventCaptureFailed || evs[0].ActorKeyID != settle.Actor || evs[0].ToStatus != surgepay.StatusFailed {
		t.Errorf("declined payment's events: %+v", evs)
	}

	t.Run("SecondRunCapturesNothing", func(t *testing.T) {
		// Stage the same records again, as a redelivery after a crash would.
		for _, s := range []*stagetest.Staged{ok, ok2, declined, lost} {
			if err := e.store.Apply(context.Background(), &surgepay.Write{Staged: s.Record}); err != nil {
				t.Fatal(err)
			}
		}
		rep := run(t, e.config(nil))
		if rep.Captured != 0 || rep.Failed != 0 || rep.AlreadySettled != 4 || rep.BacklogDepth != 0 {
			t.Errorf("second run: %+v", rep)
		}
		for _, s := range []*stagetest.Staged{ok, ok2, lost} {
			wantCaptures(t, e, s.Payment, 1)
		}
		wantCaptures(t, e, declined.Payment, 0)
	})
}

// faulty wraps a provider and fails captures of chosen payments.
type faulty struct {
	surgepay.Provider
	mu sync.Mutex
	// notPerformed fails this many captures per key before passing them on.
	notPerformed map[string]int
	// unknownAfter passes captures of these keys on, then answers Unknown.
	unknownAfter map[string]bool
	// lookupUnknown answers Unknown to every Lookup of these keys.
	lookupUnknown map[string]bool
}

func (f *faulty) Capture(ctx context.Context, req *surgepay.CaptureRequest) (*surgepay.ProviderResult, error) {
	f.mu.Lock()
	k := req.IdempotencyKey
	if f.notPerformed[k] != 0 {
		f.notPerformed[k]--
		f.mu.Unlock()
		return nil, &surgepay.ProviderError{Outcome: surgepay.NotPerformed, Op: "capture", Err: sim.ErrTimeout}
	}
	after := f.unknownAfter[k]
	f.mu.Unlock()
	res, err := f.Provider.Capture(ctx, req)
	if after && err == nil {
		return nil, &surgepay.ProviderError{Outcome: surgepay.Unknown, Op: "capture", Err: sim.ErrAnswerLost}
	}
	return res, err
}

func (f *faulty) Lookup(ctx context.Context, key string) (*surgepay.ProviderResult, error) {
	f.mu.Lock()
	u := f.lookupUnknown[key]
	f.mu.Unlock()
	if u {
		return nil, &surgepay.ProviderError{Outcome: surgepay.Unknown, Op: "lookup", Err: sim.ErrAnswerLost}
	}
	return f.Provider.Lookup(ctx, key)
}

func key(s *stagetest.Staged) string { return s.Payment.ID + "/capture" }

func TestSettleInjectedFailures(t *testing.T) {
	for name, mk := range backends(t) {
		t.Run(name, func(t *testing.T) { testSettleInjectedFailures(t, mk(t)) })
	}
}

func testSettleInjectedFailures(t *testing.T, e *env) {
	retried := e.sale(t, 1100, cardOK)      // not performed twice, then captured within the batch
	down := e.sale(t, 1200, cardOK)         // never performed: left for later
	lostAnswer := e.sale(t, 1300, cardOK)   // performed, answer lost, Lookup finds it
	neverSent := e.sale(t, 1400, cardOK)    // unknown, but Lookup says not performed: retried
	stillUnknown := e.sale(t, 1500, cardOK) // unknown and Lookup unknown: left
	declined := e.sale(t, 1600, cardCaptureDecline)
	f := &faulty{Provider: e.sim,
		notPerformed:  map[string]int{key(retried): 2, key(down): 1 << 30},
		unknownAfter:  map[string]bool{key(lostAnswer): true, key(stillUnknown): true},
		lookupUnknown: map[string]bool{key(stillUnknown): true}}
	cfg := e.config(&onceUnknown{faulty: f, key: key(neverSent)})
	cfg.RetryMax = 3

	rep := run(t, cfg)
	want := map[*stagetest.Staged]struct {
		state string
		caps  int
	}{retried: {"captured", 1}, down: {"staged", 0}, lostAnswer: {"captured", 1}, neverSent: {"captured", 1},
		stillUnknown: {"staged", 1}, declined: {"failed", 0}}
	for s, w := range want {
		if got := state(t, e.store, s.Payment); got != w.state {
			t.Errorf("%d: got %s, want %s", s.Payment.Amount, got, w.state)
		}
		wantCaptures(t, e, s.Payment, w.caps)
	}
	// Each left record came back LeftRedeliveriesMax times within the run.
	deliveries := 1 + settle.LeftRedeliveriesMax
	if rep.Failures[settle.ReasonRetryLater] != deliveries || rep.Failures[settle.ReasonUnknown] != deliveries || rep.Left != 2 || rep.BacklogDepth != 2 {
		t.Errorf("report: left %d backlog %d failures %v, want retry_later and unknown %d each", rep.Left, rep.BacklogDepth, rep.Failures, deliveries)
	}

	t.Run("LaterRunFinishes", func(t *testing.T) {
		// A new process: a fresh consumer, the network healthy again.
		cons, _ := stage.NewEmbedded(e.store, time.Minute)
		cfg := e.config(nil)
		cfg.Consumer = cons
		rep := run(t, cfg)
		if rep.Captured != 2 || rep.Left != 0 || rep.BacklogDepth != 0 {
			t.Errorf("report: %+v", rep)
		}
		for s := range want {
			st := state(t, e.store, s.Payment)
			if st == "staged" {
				t.Errorf("%d: still staged", s.Payment.Amount)
			}
			if caps := e.sim.Effects(s.Payment.ID).Captures; caps > 1 || (st == "captured") != (caps == 1) {
				t.Errorf("%d: %s with %d network captures", s.Payment.Amount, st, caps)
			}
		}
	})
}

// onceUnknown answers the first capture of key Unknown without sending it.
type onceUnknown struct {
	*faulty
	key  string
	done sync.Once
}

func (o *onceUnknown) Capture(ctx context.Context, req *surgepay.CaptureRequest) (*surgepay.ProviderResult, error) {
	first := false
	if req.IdempotencyKey == o.key {
		o.done.Do(func() { first = true })
	}
	if first {
		return nil, &surgepay.ProviderError{Outcome: surgepay.Unknown, Op: "capture", Err: sim.ErrAnswerLost}
	}
	return o.faulty.Capture(ctx, req)
}

// TestSettleTamperedRecordLeft: a record that fails to open is left at the
// stage for an operator, like a mismatch: never captured, not
// acknowledged (it was acknowledged and deleted until session 4, a silent
// loss), counted tampered and left by every run, logged by record ID only
// (its cleartext payment ID cannot be trusted).
func TestSettleTamperedRecordLeft(t *testing.T) {
	for name, mk := range backends(t) {
		t.Run(name, func(t *testing.T) { testSettleTamperedRecordLeft(t, mk(t)) })
	}
}

func testSettleTamperedRecordLeft(t *testing.T, e *env) {
	s := e.sale(t, 1000, cardOK)
	bad := tampered(s.Record)
	// Replace the genuine record by the tampered one.
	if err := e.store.Apply(context.Background(), &surgepay.Write{Staged: bad, StagedAck: []string{s.Record.ID}}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 { // every run: a new consumer, as a new process has
		var logs bytes.Buffer
		cfg := e.config(nil)
		cfg.Consumer, _ = stage.NewEmbedded(e.store, time.Minute)
		cfg.Logger = slogJSON(&logs)
		var last settle.Stats
		cfg.OnStats = func(s settle.Stats) { last = s }
		rep := run(t, cfg)
		if rep.Failures[settle.ReasonTampered] != 1 || rep.Captured != 0 || rep.Left != 1 || rep.BacklogDepth != 1 {
			t.Errorf("run %d: report %+v; want tampered 1, left 1, backlog 1", i, rep)
		}
		if last.Left != 1 || last.Failures[settle.ReasonTampered] != 1 || last.BacklogDepth != 1 {
			t.Errorf("run %d: last stats %+v; want left 1, tampered 1, backlog 1 (for settle's /metrics)", i, last)
		}
		checkTamperedLogs(t, logs.String(), bad, s.Payment)
	}
	if got := state(t, e.store, s.Payment); got != "staged" {
		t.Errorf("payment %s, want staged", got)
	}
	wantCaptures(t, e, s.Payment, 0)
}

// tampered returns a copy of rec, under a new ID, with one byte of its
// sealed instruction modified.
func tampered(rec *surgepay.StagedRecord) *surgepay.StagedRecord {
	bad := *rec
	bad.ID = surgepay.NewID("stg")
	bad.Sealed = append([]byte(nil), rec.Sealed...)
	bad.Sealed[len(bad.Sealed)-20] ^= 1
	return &bad
}

func checkTamperedLogs(t *testing.T, logs string, bad *surgepay.StagedRecord, p *surgepay.Payment) {
	t.Helper()
	if !strings.Contains(logs, bad.ID) || strings.Contains(logs, p.ID) || strings.Contains(logs, p.AuthorizationRef) {
		t.Errorf("log should name the record only: %s", logs)
	}
}

func TestSettleWrongKeyLeavesRecords(t *testing.T) {
	e := newEnv(t)
	s := e.sale(t, 1000, cardOK)
	_, other, _ := stage.GenerateKeys()
	cfg := e.config(nil)
	cfg.Opener, _ = stage.NewOpener(other)
	rep := run(t, cfg)
	if rep.Failures[settle.ReasonWrongKey] != 1 || rep.Left != 1 || rep.BacklogDepth != 1 {
		t.Errorf("report: %+v", rep)
	}
	wantCaptures(t, e, s.Payment, 0)
}

func TestSettleOrphans(t *testing.T) {
	e := newEnv(t)
	mk := func(age time.Duration) *surgepay.StagedRecord {
		created := time.Now().Add(-age)
		sealed, _ := e.sealer.Seal(&surgepay.CaptureInstruction{PaymentID: surgepay.NewID("pay"), MerchantID: e.merch,
			Amount: 100, Currency: "usd", AuthorizationRef: "auth_x", IdempotencyKey: "k/capture", Authorized: created})
		r := &surgepay.StagedRecord{ID: surgepay.NewID("stg"), MerchantID: e.merch, Sealed: sealed, Created: created}
		if err := e.store.Apply(context.Background(), &surgepay.Write{Staged: r}); err != nil {
			t.Fatal(err)
		}
		return r
	}
	mk(time.Hour)
	young := mk(0)
	rep := run(t, e.config(nil))
	if rep.Failures[settle.ReasonOrphan] != 1 || rep.Failures[settle.ReasonOrphanWait] != 1+settle.LeftRedeliveriesMax || rep.Left != 1 {
		t.Errorf("report: %+v", rep)
	}
	if n, _, _ := e.mem.StagedBacklog(context.Background()); n != 1 {
		t.Errorf("backlog %d, want the young record only", n)
	}
	if recs, _ := e.mem.FetchStaged(context.Background(), "", 10); len(recs) != 1 || recs[0].ID != young.ID {
		t.Errorf("left %v, want %s", recs, young.ID)
	}
}

// TestSettlePendingWithoutRecord: once an UntilEmpty run has drained the
// stage, a streamlined payment whose capture is pending and whose record
// is gone (lost at the stage) is reported by payment ID and not captured;
// a payment whose record the run left at the stage (here a mismatch) is
// not reported; with no check window nothing is.
func TestSettlePendingWithoutRecord(t *testing.T) {
	for name, mk := range backends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			e := mk(t)
			ok, lost, mismatched := e.sale(t, 1000, cardOK), e.sale(t, 1200, cardOK), e.sale(t, 1300, cardOK)
			sealed, _ := e.sealer.Seal(&surgepay.CaptureInstruction{PaymentID: mismatched.Payment.ID, MerchantID: e.merch,
				Amount: 9999, Currency: "usd", AuthorizationRef: mismatched.Payment.AuthorizationRef,
				IdempotencyKey: key(mismatched), Authorized: time.Now()})
			forged := &surgepay.StagedRecord{ID: surgepay.NewID("stg"), MerchantID: e.merch, PaymentID: mismatched.Payment.ID,
				Sealed: sealed, Created: time.Now()}
			// lost's record disappears from the stage; mismatched's is replaced.
			if err := e.store.Apply(ctx, &surgepay.Write{Staged: forged, StagedAck: []string{lost.Record.ID, mismatched.Record.ID}}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(settle.OrphanGraceMin + 100*time.Millisecond) // all three older than the grace
			var logs bytes.Buffer
			cfg := e.config(nil)
			cfg.OrphanGrace, cfg.PendingCheckWindow, cfg.Logger = settle.OrphanGraceMin, time.Hour, slogJSON(&logs)
			rep := run(t, cfg)
			if rep.Captured != 1 || rep.PendingWithoutRecord != 1 || rep.Failures[settle.ReasonPendingNoRecord] != 1 ||
				rep.Failures[settle.ReasonMismatch] != 1 {
				t.Fatalf("report: %+v", rep)
			}
			if !strings.Contains(logs.String(), lost.Payment.ID) || strings.Contains(logs.String(), ok.Payment.ID) {
				t.Errorf("the log should name %s (and not %s):\n%s", lost.Payment.ID, ok.Payment.ID, logs.String())
			}
			wantCaptures(t, e, ok.Payment, 1)
			wantCaptures(t, e, lost.Payment, 0)
			if got := state(t, e.store, lost.Payment); got != "staged" {
				t.Errorf("lost: %s, want its capture still pending", got)
			}

			cfg.PendingCheckWindow = 0
			cfg.Consumer, _ = stage.NewEmbedded(e.store, time.Minute) // a new process: the left record comes at once
			if rep := run(t, cfg); rep.PendingWithoutRecord != 0 {
				t.Errorf("no check window: %d reported", rep.PendingWithoutRecord)
			}
		})
	}
}

// interruptingLister is a store whose ListMerchants ends the run's context,
// as an operator's interrupt during the pending check would.
type interruptingLister struct {
	surgepay.Store
	cancel context.CancelFunc
}

func (s interruptingLister) ListMerchants(ctx context.Context) ([]*surgepay.Merchant, error) {
	s.cancel()
	return nil, ctx.Err()
}

// TestSettlePendingCheckInterrupted: a run interrupted during the pending
// check says so in its report rather than passing for a clean check.
func TestSettlePendingCheckInterrupted(t *testing.T) {
	e := newEnv(t)
	e.sale(t, 1000, cardOK)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := e.config(nil)
	cfg.Store, cfg.PendingCheckWindow = interruptingLister{Store: e.store, cancel: cancel}, time.Hour
	rep, err := settle.Run(ctx, cfg)
	if err != nil || rep.Captured != 1 || !rep.PendingCheckInterrupted {
		t.Fatalf("Run = %v, report %+v; want 1 captured and the check marked interrupted", err, rep)
	}
}

func TestSettleMismatchNotCaptured(t *testing.T) {
	e := newEnv(t)
	s := e.sale(t, 1000, cardOK)
	// A forged record for the same payment, sealed with the public key,
	// asking for more than was authorized.
	sealed, _ := e.sealer.Seal(&surgepay.CaptureInstruction{PaymentID: s.Payment.ID, MerchantID: e.merch,
		Amount: 5000, Currency: "usd", AuthorizationRef: s.Payment.AuthorizationRef, IdempotencyKey: key(s), Authorized: time.Now()})
	forged := &surgepay.StagedRecord{ID: surgepay.NewID("stg"), MerchantID: e.merch, PaymentID: s.Payment.ID, Sealed: sealed, Created: time.Now()}
	if err := e.store.Apply(context.Background(), &surgepay.Write{Staged: forged, StagedAck: []string{s.Record.ID}}); err != nil {
		t.Fatal(err)
	}
	rep := run(t, e.config(nil))
	if rep.Failures[settle.ReasonMismatch] != 1 || rep.Captured != 0 {
		t.Errorf("report: %+v", rep)
	}
	wantCaptures(t, e, s.Payment, 0)
}

func TestSettleConcurrentUpdateRetried(t *testing.T) {
	e := newEnv(t)
	s := e.sale(t, 1000, cardOK)
	var once sync.Once
	e.mem.BeforeApply = func(w *surgepay.Write) error {
		var err error
		if w.PaymentUpdate != nil {
			once.Do(func() {
				// Someone else changed the payment meanwhile (metadata).
				p, _ := e.store.FindPayment(context.Background(), e.merch, s.Payment.ID)
				p.Description, p.Version = "edited", p.Version+1
				e.mem.BeforeApply = nil
				if aerr := e.store.Apply(context.Background(), &surgepay.Write{PaymentUpdate: p}); aerr != nil {
					t.Error(aerr)
				}
				err = surgepay.Conflict("concurrent_update", "moved")
			})
		}
		return err
	}
	rep := run(t, e.config(nil))
	if rep.Captured != 1 || rep.BacklogDepth != 0 {
		t.Errorf("report: %+v", rep)
	}
	got, _ := e.store.FindPayment(context.Background(), e.merch, s.Payment.ID)
	if got.Description != "edited" || state(t, e.store, s.Payment) != "captured" {
		t.Errorf("payment %q %s: the concurrent change or the capture was lost", got.Description, state(t, e.store, s.Payment))
	}
	wantCaptures(t, e, s.Payment, 1)
}

// TestSettleStoreFailureKeepsRecord: a result that cannot be stored leaves
// the record, and a later run records the provider's replayed answer.
func TestSettleStoreFailureKeepsRecord(t *testing.T) {
	e := newEnv(t)
	s := e.sale(t, 1000, cardOK)
	e.mem.BeforeApply = func(w *surgepay.Write) error {
		if w.PaymentUpdate != nil {
			return errors.New("disk full")
		}
		return nil
	}
	rep := run(t, e.config(nil))
	if rep.Failures[settle.ReasonStore] != 1+settle.LeftRedeliveriesMax || rep.Left != 1 {
		t.Errorf("report: %+v", rep)
	}
	e.mem.BeforeApply = nil
	cons, _ := stage.NewEmbedded(e.store, time.Minute)
	cfg := e.config(nil)
	cfg.Consumer = cons
	rep = run(t, cfg)
	if rep.Captured != 1 || state(t, e.store, s.Payment) != "captured" {
		t.Errorf("second run: %+v", rep)
	}
	wantCaptures(t, e, s.Payment, 1)
}

func TestSettleContinuousStopsWithContext(t *testing.T) {
	e := newEnv(t)
	var stats []settle.Stats
	var mu sync.Mutex
	ctx, cancel := context.WithCancel(context.Background())
	cfg := e.config(nil)
	cfg.UntilEmpty = false
	cfg.OnStats = func(s settle.Stats) {
		mu.Lock()
		stats = append(stats, s)
		mu.Unlock()
	}
	done := make(chan *settle.Report)
	go func() {
		rep, err := settle.Run(ctx, cfg)
		if err != nil {
			t.Error(err)
		}
		done <- rep
	}()
	s := e.sale(t, 1000, cardOK) // arrives while Run waits
	deadline := time.Now().Add(10 * time.Second)
	for state(t, e.store, s.Payment) != "captured" && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	rep := <-done
	if rep.Captured != 1 {
		t.Errorf("captured %d, want 1", rep.Captured)
	}
	mu.Lock()
	defer mu.Unlock()
	var last settle.Stats
	for _, s := range stats {
		if s.LastBatchSize > 0 {
			last = s
		}
	}
	if last.Captured != 1 || last.LastBatchSize != 1 {
		t.Errorf("stats after the batch: %+v", last)
	}
}

func TestReportWriters(t *testing.T) {
	e := newEnv(t)
	e.sale(t, 1000, cardOK)
	e.sale(t, 1500, cardCaptureDecline)
	rep := run(t, e.config(nil))
	var js, txt bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back settle.Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.Captured != 1 || back.Failures["declined:generic_decline"] != 1 || back.Currencies["usd"].AmountCaptured != 1000 {
		t.Errorf("JSON round trip: %s", js.String())
	}
	if err := rep.WriteText(&txt); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"captured 1", "declined:generic_decline", "usd"} {
		if !strings.Contains(txt.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, txt.String())
		}
	}
}

func TestConfigErrors(t *testing.T) {
	e := newEnv(t)
	for name, mod := range map[string]func(*settle.Config){
		"ErrNoStore":       func(c *settle.Config) { c.Store = nil },
		"ErrBatchTooBig":   func(c *settle.Config) { c.BatchSizeMax = settle.BatchSizeMaxLimit + 1 },
		"ErrWorkers":       func(c *settle.Config) { c.Workers = -1 },
		"ErrRetryNegative": func(c *settle.Config) { c.RetryMax = -2 },
		"ErrAckWaitShort": func(c *settle.Config) {
			c.CallTimeout, c.AckWait = time.Second, settle.AckWaitMin(time.Second)-time.Millisecond
		},
		"ErrAckWaitLong":      func(c *settle.Config) { c.AckWait = settle.AckWaitMax + time.Second },
		"ErrOrphanGraceShort": func(c *settle.Config) { c.OrphanGrace = settle.OrphanGraceMin - time.Millisecond },
		"ErrOrphanGraceLong":  func(c *settle.Config) { c.OrphanGrace = settle.OrphanGraceMax + time.Second },
		"ErrBatchIntervalNeg": func(c *settle.Config) { c.BatchIntervalMin = -time.Millisecond },
		"ErrPendingCheckLong": func(c *settle.Config) { c.PendingCheckWindow = settle.PendingCheckWindowMax + time.Hour },
		"ErrBatchIntervalLong": func(c *settle.Config) {
			c.BatchIntervalMin = settle.BatchIntervalMax + time.Second
		},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := e.config(nil)
			mod(&cfg)
			if _, err := settle.Run(context.Background(), cfg); err == nil {
				t.Error("got nil error")
			}
		})
	}
}

// leftForLater stages two sales that a first delivery leaves for later: one
// whose capture the network does not perform on the first delivery
// (retry_later), and one whose payment is stored only after the first
// batch (orphan_wait), as when settle fetches a JetStream record before
// the engine's commit. st nil: the embedded stage. It returns them and
// the OnStats hook that stores the late payment after the first batch.
func leftForLater(t *testing.T, e *env, st surgepay.Stage, retryMax int) (flaky, late *stagetest.Staged, f *faulty, onStats func(settle.Stats)) {
	t.Helper()
	ctx := context.Background()
	if st == nil {
		flaky = e.sale(t, 1100, cardOK)
	} else {
		var err error
		if flaky, err = stagetest.MakeSale(ctx, e.store, e.sim, e.sealer, st, stagetest.Sale{MerchantID: e.merch, Amount: 1100, Card: cardOK}); err != nil {
			t.Fatal(err)
		}
	}
	// The late sale's payment goes to a scratch store; its record to the stage.
	late, err := stagetest.MakeSale(ctx, stagetest.NewMemStore(), e.sim, e.sealer, st, stagetest.Sale{MerchantID: e.merch, Amount: 1200, Card: cardOK})
	if err != nil {
		t.Fatal(err)
	}
	if st == nil {
		if err := e.store.Apply(ctx, &surgepay.Write{Staged: late.Record}); err != nil {
			t.Fatal(err)
		}
	}
	f = &faulty{Provider: e.sim, notPerformed: map[string]int{key(flaky): retryMax + 1}}
	var once sync.Once
	onStats = func(s settle.Stats) {
		if s.LastBatchSize == 0 {
			return
		}
		once.Do(func() {
			if err := e.store.Apply(ctx, &surgepay.Write{PaymentInsert: late.Payment}); err != nil {
				t.Error(err)
			}
		})
	}
	return flaky, late, f, onStats
}

// checkLeftForLater checks that both sales of leftForLater came back in
// the same run and were captured once: the flaky one on its second
// delivery, the late one once its payment was stored (the batch fetched
// ahead may have delivered it once more before that).
func checkLeftForLater(t *testing.T, e *env, rep *settle.Report, flaky, late *stagetest.Staged) {
	t.Helper()
	retried, waited := rep.Failures[settle.ReasonRetryLater], rep.Failures[settle.ReasonOrphanWait]
	if rep.Captured != 2 || rep.Records != 2+retried+waited || rep.Batches < 2 || rep.Left != 0 || rep.BacklogDepth != 0 ||
		retried != 1 || waited < 1 {
		t.Errorf("report: captured %d, records %d, batches %d, left %d, backlog %d, failures %v; "+
			"want 2 captured in 2 or more batches, retry_later 1, orphan_wait 1 or more, a delivery for each, nothing left",
			rep.Captured, rep.Records, rep.Batches, rep.Left, rep.BacklogDepth, rep.Failures)
	}
	for _, s := range []*stagetest.Staged{flaky, late} {
		if got := state(t, e.store, s.Payment); got != "captured" {
			t.Errorf("%d: got %s, want captured", s.Payment.Amount, got)
		}
		wantCaptures(t, e, s.Payment, 1)
	}
}

// TestSettleLeftForLaterComesBack: on the embedded stage, records left for
// later are handed out again after the settle backoff, within the run,
// though the consumer's AckWait is an hour.
func TestSettleLeftForLaterComesBack(t *testing.T) {
	for name, mk := range backends(t) {
		t.Run(name, func(t *testing.T) {
			e := mk(t)
			cons, err := stage.NewEmbedded(e.store, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			cfg := e.config(nil)
			flaky, late, f, onStats := leftForLater(t, e, nil, settle.RetryMaxDefault)
			cfg.Consumer, cfg.Provider, cfg.OnStats, cfg.AckWait = cons, f, onStats, time.Hour
			checkLeftForLater(t, e, run(t, cfg), flaky, late)
		})
	}
}

// slowCaptures delays every capture.
type slowCaptures struct {
	surgepay.Provider
	delay time.Duration
}

func (s slowCaptures) Capture(ctx context.Context, req *surgepay.CaptureRequest) (*surgepay.ProviderResult, error) {
	time.Sleep(s.delay)
	return s.Provider.Capture(ctx, req)
}

// TestSettleBatchDeadline: a batch whose captures would outlast its plan
// within AckWait starts none after AckWait - CallTimeout - ResultReserve;
// the records not started are released at once and settled by the next
// batches of the same run.
func TestSettleBatchDeadline(t *testing.T) {
	e := newEnv(t)
	const n = 8
	var sales []*stagetest.Staged
	for i := range n {
		sales = append(sales, e.sale(t, int64(1000+i), cardOK))
	}
	cfg := e.config(slowCaptures{Provider: e.sim, delay: 400 * time.Millisecond})
	// One worker: the batch has BatchWorkMin to start captures, time for 3 of 8.
	cfg.Workers, cfg.CallTimeout = 1, time.Second
	cfg.AckWait = settle.AckWaitMin(cfg.CallTimeout)
	rep := run(t, cfg)
	if rep.Captured != n || rep.Failures[settle.ReasonDeadline] == 0 || rep.Batches < 2 || rep.Left != 0 || rep.BacklogDepth != 0 {
		t.Errorf("report: captured %d, batches %d, left %d, backlog %d, failures %v; want %d captured over 2 or more batches, some deadline",
			rep.Captured, rep.Batches, rep.Left, rep.BacklogDepth, rep.Failures, n)
	}
	for _, s := range sales {
		wantCaptures(t, e, s.Payment, 1)
	}
}

// TestSettlePrefetchKeepsItsTime: the next batch is fetched during the
// current one's tail, not when it begins, so that its AckWait window is
// not spent waiting for a slow batch to end: with batches that fit their
// window, none is handed back as deadline.
func TestSettlePrefetchKeepsItsTime(t *testing.T) {
	e := newEnv(t)
	const size, batches = 4, 2
	var sales []*stagetest.Staged
	for i := range size * batches {
		sales = append(sales, e.sale(t, int64(1000+i), cardOK))
	}
	const delay = 250 * time.Millisecond
	cfg := e.config(slowCaptures{Provider: e.sim, delay: delay})
	cfg.Workers, cfg.BatchSizeMax, cfg.CallTimeout = 1, size, time.Second
	// Time to start captures: 6 delays from a batch's fetch. A batch needs
	// 4 (its captures run one after the other); the second batch began
	// when the first did would need 4 + 3 = 7, fetched during its tail
	// (its last capture) 1 + 3 = 4.
	window := 6 * delay
	cfg.AckWait = cfg.CallTimeout + settle.ResultReserve + window
	rep := run(t, cfg)
	if rep.Captured != size*batches || rep.Failures[settle.ReasonDeadline] != 0 || rep.Batches != batches || rep.Left != 0 {
		t.Errorf("report: captured %d, batches %d, left %d, failures %v; want %d captured in %d batches, none deadline",
			rep.Captured, rep.Batches, rep.Left, rep.Failures, size*batches, batches)
	}
	for _, s := range sales {
		wantCaptures(t, e, s.Payment, 1)
	}
}

// countingCaptures counts the capture calls per key.
type countingCaptures struct {
	surgepay.Provider
	mu    sync.Mutex
	calls map[string]int
}

func (c *countingCaptures) Capture(ctx context.Context, req *surgepay.CaptureRequest) (*surgepay.ProviderResult, error) {
	c.mu.Lock()
	c.calls[req.IdempotencyKey]++
	c.mu.Unlock()
	return c.Provider.Capture(ctx, req)
}

// fullWriteQueue is a store whose group-commit queue is full for the
// first result Write (a payment update): that Write waits in a real
// groupcommit.Committer's SubmitWait, as the stores' do, which is full
// until the test ends. Later Writes go through; each must reach the store
// before its context's deadline.
type fullWriteQueue struct {
	surgepay.Store
	t    *testing.T
	c    *groupcommit.Committer[int]
	full atomic.Bool
	// The first Write: when it was issued, its deadline, when its wait ended.
	called, deadline, ended time.Time
}

func newFullWriteQueue(t *testing.T, st surgepay.Store) *fullWriteQueue {
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	c := groupcommit.New(groupcommit.Config{QueueDepthMax: 1, BatchSizeMax: 1}, func([]*groupcommit.Item[int]) error {
		once.Do(func() { close(entered) })
		<-release
		return nil
	})
	go func() { _ = c.Submit(context.Background(), 0) }() // held in its commit
	<-entered
	go func() { _ = c.Submit(context.Background(), 1) }() // fills the queue
	for c.QueueDepth() < 1 {
		time.Sleep(time.Millisecond)
	}
	t.Cleanup(func() { close(release); c.Close() })
	f := &fullWriteQueue{Store: st, t: t, c: c}
	f.full.Store(true)
	return f
}

func (f *fullWriteQueue) Apply(ctx context.Context, w *surgepay.Write) error {
	if w.PaymentUpdate == nil {
		return f.Store.Apply(ctx, w)
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		f.t.Error("a result Write without a deadline: recording is not bounded by AckWait")
		return errors.New("no deadline")
	}
	if f.full.CompareAndSwap(true, false) {
		called := time.Now()
		err := f.c.SubmitWait(ctx, 2)
		f.called, f.deadline, f.ended = called, deadline, time.Now()
		if !errors.Is(err, groupcommit.ErrQueueFull) {
			f.t.Errorf("SubmitWait on the full queue: got %v, want ErrQueueFull", err)
		}
		return &surgepay.Error{Code: surgepay.EUNAVAILABLE, Reason: "write_queue_full", Message: "busy"}
	}
	if !time.Now().Before(deadline) {
		f.t.Errorf("a result Write issued after its deadline %v", deadline)
	}
	return f.Store.Apply(ctx, w)
}

// TestSettleRecordingBoundedByAckWait: a result that cannot be recorded
// before its record may be delivered again (the store's write queue stays
// full) is given up at AckWait - AckReserve after the fetch, not after
// groupcommit.SubmitWaitMax; its record is not acknowledged, comes back,
// and the capture is asked again under the same key: the network replays
// it, and it is recorded once, captured once.
func TestSettleRecordingBoundedByAckWait(t *testing.T) {
	e := newEnv(t)
	s := e.sale(t, 1000, cardOK)
	store := newFullWriteQueue(t, e.store)
	prov := &countingCaptures{Provider: e.sim, calls: map[string]int{}}
	cfg := e.config(prov)
	cfg.Store, cfg.CallTimeout = store, 100*time.Millisecond
	cfg.AckWait = settle.AckWaitMin(cfg.CallTimeout)
	start := time.Now()
	rep := run(t, cfg)
	if store.deadline.IsZero() {
		t.Fatal("the full queue saw no result Write")
	}
	// The batch was fetched after start and before its first Write.
	if d := cfg.AckWait - settle.AckReserve; store.deadline.Before(start.Add(d)) || store.deadline.After(store.called.Add(d)) {
		t.Errorf("recording deadline %v after the run's start, want AckWait - AckReserve (%v) after the batch's fetch",
			store.deadline.Sub(start), d)
	}
	if waited := store.ended.Sub(store.deadline); waited > groupcommit.SubmitWaitMax/2 {
		t.Errorf("the wait for the full queue ended %v after the deadline, want at it (not after SubmitWaitMax)", waited)
	}
	if rep.Captured != 1 || rep.Failures[settle.ReasonStore] != 1 || rep.Batches != 2 || rep.Left != 0 || rep.BacklogDepth != 0 {
		t.Errorf("report: captured %d, batches %d, left %d, backlog %d, failures %v; want captured 1 on the second delivery, store_error 1",
			rep.Captured, rep.Batches, rep.Left, rep.BacklogDepth, rep.Failures)
	}
	if got := state(t, e.store, s.Payment); got != "captured" {
		t.Errorf("payment %s, want captured", got)
	}
	if calls := prov.calls[key(s)]; calls != 2 {
		t.Errorf("%d capture calls, want 2 (one per delivery)", calls)
	}
	wantCaptures(t, e, s.Payment, 1)
	if evs, _ := e.store.ListEvents(context.Background(), e.merch, s.Payment.ID); len(evs) != 1 {
		t.Errorf("%d audit events, want 1", len(evs))
	}
}

// TestSettleTwoRecordsOfOnePaymentInOneBatch: a payment staged twice
// (under two record IDs, as a retried publish might) is captured once,
// though both records are in one batch.
func TestSettleTwoRecordsOfOnePaymentInOneBatch(t *testing.T) {
	for name, mk := range backends(t) {
		t.Run(name, func(t *testing.T) {
			e := mk(t)
			s := e.sale(t, 1000, cardOK)
			again := *s.Record
			again.ID = surgepay.NewID("stg")
			if err := e.store.Apply(context.Background(), &surgepay.Write{Staged: &again}); err != nil {
				t.Fatal(err)
			}
			rep := run(t, e.config(nil))
			if rep.Captured != 1 || rep.AlreadySettled != 1 || rep.Batches != 1 || rep.BacklogDepth != 0 {
				t.Errorf("report: captured %d, already settled %d, batches %d, backlog %d; want 1, 1, 1, 0",
					rep.Captured, rep.AlreadySettled, rep.Batches, rep.BacklogDepth)
			}
			wantCaptures(t, e, s.Payment, 1)
			if evs, _ := e.store.ListEvents(context.Background(), e.merch, s.Payment.ID); len(evs) != 1 {
				t.Errorf("%d audit events, want 1", len(evs))
			}
		})
	}
}

// TestSettleDeclinedCaptureCounted: with a merchant's analytics on, a
// capture declined at settlement adds to its failed counters (a confirmed
// one adds nothing: it was counted when the sale was answered); off, it
// adds nothing.
func TestSettleDeclinedCaptureCounted(t *testing.T) {
	for name, mk := range backends(t) {
		if name == "memory" {
			continue // MemStore keeps no counters
		}
		t.Run(name, func(t *testing.T) {
			e := mk(t)
			declined := e.sale(t, 1500, cardCaptureDecline)
			for i := range 3 {
				e.sale(t, int64(1000+i), cardOK)
			}
			cfg := e.config(nil)
			cfg.Analytics = func(merchantID string) bool { return merchantID == e.merch }
			if rep := run(t, cfg); rep.Captured != 3 || rep.Failed != 1 {
				t.Fatalf("report: %+v", rep)
			}
			if got := state(t, e.store, declined.Payment); got != "failed" {
				t.Fatalf("declined sale: %s, want failed", got)
			}
			today := time.Now().UTC().Format(time.DateOnly)
			days, err := e.store.ListAnalytics(context.Background(), e.merch, surgepay.AnalyticsQuery{From: today, To: today})
			if err != nil {
				t.Fatal(err)
			}
			want := surgepay.AnalyticsCounters{FailedCount: 1, AmountFailed: 1500}
			if len(days) != 1 || days[0].AnalyticsCounters != want {
				t.Errorf("counters %+v, want one day with %+v", days, want)
			}
		})
	}
}

// TestSettleRateMax: with RateMax, captures start no faster than the cap
// (a lower bound on the run's length, which a slow machine only makes
// longer), and every sale is still captured once.
func TestSettleRateMax(t *testing.T) {
	e := newEnv(t)
	const sales, perSecond = 30, 100.0
	staged := make([]*stagetest.Staged, sales)
	for i := range staged {
		staged[i] = e.sale(t, 1000, cardOK)
	}
	cfg := e.config(nil)
	cfg.RateMax = perSecond
	start := time.Now()
	rep := run(t, cfg)
	// A burst of one, then one capture every 1/perSecond.
	if least := time.Duration(float64(sales-1) / perSecond * float64(time.Second)); time.Since(start) < least {
		t.Errorf("%d captures at most %g/s took %v, less than %v", sales, perSecond, time.Since(start), least)
	}
	if rep.Captured != sales || rep.Left != 0 {
		t.Fatalf("report: %+v", rep)
	}
	for _, s := range staged {
		wantCaptures(t, e, s.Payment, 1)
	}
	cfg.RateMax = -1
	if _, err := settle.Run(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "RateMax") {
		t.Errorf("RateMax -1: got %v, want a configuration error", err)
	}
}

// TestSettleBatchInterval: after a batch that was not full the next fetch
// waits BatchIntervalMin from its fetch; after a full batch it does not
// wait.
func TestSettleBatchInterval(t *testing.T) {
	const interval = 300 * time.Millisecond
	e := newEnv(t)
	for range 3 {
		e.sale(t, 1000, cardOK)
	}
	cfg := e.config(nil)
	cfg.BatchSizeMax, cfg.BatchIntervalMin = 2, interval
	var sizes []int
	cfg.OnStats = func(s settle.Stats) {
		if s.LastBatchSize > 0 {
			sizes = append(sizes, s.LastBatchSize)
		}
	}
	// Batches of 2 (full: the next is fetched at once) and 1 (not full:
	// the fetch that finds the stage empty waits the interval).
	start := time.Now()
	rep := run(t, cfg)
	if took := time.Since(start); took < interval {
		t.Errorf("run with a partial batch took %v, less than BatchIntervalMin %v", took, interval)
	}
	if rep.Captured != 3 || !slices.Equal(sizes, []int{2, 1}) {
		t.Fatalf("captured %d in batches %v, want 3 in [2 1]", rep.Captured, sizes)
	}

	// Full batches only: the longest interval is never waited (run fails
	// the test if Run does not end within 30 s).
	for range 4 {
		e.sale(t, 1000, cardOK)
	}
	cfg.BatchIntervalMin, sizes = settle.BatchIntervalMax, nil
	if rep := run(t, cfg); rep.Captured != 4 || !slices.Equal(sizes, []int{2, 2}) {
		t.Fatalf("captured %d in batches %v, want 4 in [2 2]", rep.Captured, sizes)
	}
}

// staleFinder is a store whose batch read (the preload, which may run a
// batch ahead) has not seen the payments yet.
type staleFinder struct{ surgepay.Store }

func (staleFinder) FindPayments(context.Context, []surgepay.PaymentKey) ([]*surgepay.Payment, error) {
	return nil, nil
}

// TestSettlePreloadMissIsReadAgain: a payment that committed after the
// batch's preload is found when its record is decided, and captured; it is
// never called an orphan on the preload's word, even past the grace.
func TestSettlePreloadMissIsReadAgain(t *testing.T) {
	e := newEnvStore(t, testenv.OpenSQLite(t))
	s := e.sale(t, 1200, cardOK)
	cfg := e.config(nil)
	cfg.Store = staleFinder{e.store}
	cfg.Now = func() time.Time { return time.Now().Add(time.Hour) } // every record is past its grace
	rep := run(t, cfg)
	if rep.Captured != 1 || rep.Failures[settle.ReasonOrphan] != 0 {
		t.Fatalf("report %+v: want the sale captured, no orphan", rep)
	}
	wantCaptures(t, e, s.Payment, 1)
}

// hiccupStage returns its first fetch's records together with an error,
// as a stage failing mid-fetch may.
type hiccupStage struct {
	*stage.Embedded
	failed bool
}

func (h *hiccupStage) Fetch(ctx context.Context, limit int, wait time.Duration) ([]*surgepay.StagedRecord, error) {
	recs, err := h.Embedded.Fetch(ctx, limit, wait)
	if err == nil && len(recs) > 0 && !h.failed {
		h.failed = true
		return recs, errors.New("stage hiccup")
	}
	return recs, err
}

// TestSettleFetchErrorReleasesRecords: records a failing fetch returned go
// back to the stage at once and are settled in the same run, not after
// the stage's AckWait (a minute here).
func TestSettleFetchErrorReleasesRecords(t *testing.T) {
	e := newEnvStore(t, testenv.OpenSQLite(t))
	s := e.sale(t, 1300, cardOK)
	cfg := e.config(nil)
	h := &hiccupStage{Embedded: e.cons}
	cfg.Consumer = h
	rep := run(t, cfg)
	if !h.failed || rep.Captured != 1 || rep.Left != 0 {
		t.Fatalf("hiccup %v, report %+v: want the record captured in this run", h.failed, rep)
	}
	wantCaptures(t, e, s.Payment, 1)
}

// TestSettleReportsExpiry: a capture attempted within ExpiryWarning of its
// authorization's deadline is counted near expiry, one past it past
// expiry; younger ones are neither. The clock is moved, not the records.
func TestSettleReportsExpiry(t *testing.T) {
	for _, tt := range []struct {
		name       string
		after      time.Duration
		near, past int
	}{
		{"Fresh", 0, 0, 0},
		{"NearExpiry", 6*24*time.Hour + time.Hour, 2, 0},
		{"PastExpiry", 8 * 24 * time.Hour, 0, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.sale(t, 1000, cardOK)
			e.sale(t, 1200, cardOK)
			cfg := e.config(nil)
			cfg.Now = func() time.Time { return time.Now().Add(tt.after) }
			cfg.OrphanGrace = settle.OrphanGraceMax
			rep := run(t, cfg)
			if rep.NearExpiry != tt.near || rep.PastExpiry != tt.past || rep.Captured != 2 {
				t.Fatalf("report: near %d past %d captured %d; want near %d past %d captured 2",
					rep.NearExpiry, rep.PastExpiry, rep.Captured, tt.near, tt.past)
			}
		})
	}
}

// slowBacklog is a stage whose Backlog is a slow count: each moves the
// clock of the run on by cost.
type slowBacklog struct {
	*stage.Embedded // keeps its acknowledgement in the result Write
	clock           *fakeOffset
	cost            time.Duration
	calls           atomic.Int64
}

func (s *slowBacklog) Backlog(ctx context.Context) (int, time.Time, error) {
	s.calls.Add(1)
	s.clock.add(s.cost)
	return s.Embedded.Backlog(ctx)
}

// fakeOffset is the wall clock moved on by hand.
type fakeOffset struct{ d atomic.Int64 }

func (f *fakeOffset) add(d time.Duration) { f.d.Add(int64(d)) }
func (f *fakeOffset) now() time.Time      { return time.Now().Add(time.Duration(f.d.Load())) }

// clockedCaptures moves the clock on by each capture's cost.
type clockedCaptures struct {
	surgepay.Provider
	clock *fakeOffset
	cost  time.Duration
}

func (p *clockedCaptures) Capture(ctx context.Context, req *surgepay.CaptureRequest) (*surgepay.ProviderResult, error) {
	p.clock.add(p.cost)
	return p.Provider.Capture(ctx, req)
}

// TestSettleBacklogCountCost: while records flow, settle counts the
// backlog at most once a second, and after a slow count not again for
// its cost over the share the counts may take (at most a minute):
// batches a few seconds apart do not each pay a count of millions of
// records.
func TestSettleBacklogCountCost(t *testing.T) {
	e := newEnv(t)
	const sales = 20
	for range sales {
		e.sale(t, 1000, cardOK)
	}
	clock := &fakeOffset{}
	cons := &slowBacklog{Embedded: e.cons, clock: clock, cost: 2 * time.Second} // the next waits a minute
	cfg := e.config(&clockedCaptures{Provider: e.sim, clock: clock, cost: 1500 * time.Millisecond})
	cfg.Consumer, cfg.Now, cfg.BatchSizeMax, cfg.Workers = cons, clock.now, 2, 1
	var batches atomic.Int64
	cfg.OnStats = func(s settle.Stats) {
		if s.LastBatchSize > 0 {
			batches.Add(1)
		}
	}
	rep := run(t, cfg)
	if rep.Captured != sales || batches.Load() != sales/2 {
		t.Fatalf("captured %d in %d batches, want %d in %d", rep.Captured, batches.Load(), sales, sales/2)
	}
	// One count after the first batch (3 s of captures after the start),
	// none after the next nine (27 s, within the minute the 2 s count
	// earned), one after the empty fetch that ends the run, one for the
	// report: a count per batch would be 12.
	if n := cons.calls.Load(); n != 3 {
		t.Errorf("backlog counted %d times, want 3", n)
	}
}

// heldBacklog is the embedded stage whose first Backlog query waits for
// release (at most 10 s): a count of millions of records, paced.
type heldBacklog struct {
	*stage.Embedded
	calls   atomic.Int32
	release chan struct{}
	expired atomic.Bool // the first query waited the whole 10 s
}

func (s *heldBacklog) Backlog(ctx context.Context) (int, time.Time, error) {
	if s.calls.Add(1) == 1 {
		select {
		case <-s.release:
		case <-time.After(10 * time.Second):
			s.expired.Store(true)
		}
	}
	return s.Embedded.Backlog(ctx)
}

// TestSettleBatchesDoNotWaitForBacklogCount: the backlog figures after a
// batch are counted in the background, so a count that takes seconds
// holds no batch back; Run waits for it before it returns.
func TestSettleBatchesDoNotWaitForBacklogCount(t *testing.T) {
	e := newEnv(t)
	for range 3 {
		e.sale(t, 1000, cardOK)
	}
	cons := &heldBacklog{Embedded: e.cons, release: make(chan struct{})}
	cfg := e.config(nil)
	cfg.Consumer, cfg.BatchSizeMax = cons, 1
	var once sync.Once
	cfg.OnStats = func(s settle.Stats) {
		if s.Captured == 3 { // every batch ran while the first count waited
			once.Do(func() { close(cons.release) })
		}
	}
	rep := run(t, cfg)
	if rep.Captured != 3 || rep.Batches < 3 {
		t.Errorf("report: captured %d in %d batches, want 3 in 3 or more", rep.Captured, rep.Batches)
	}
	if cons.expired.Load() {
		t.Error("the batches waited for the first backlog count")
	}
	if n := cons.calls.Load(); n < 2 {
		t.Errorf("%d backlog queries, want the one after the first batch and the forced one when idle", n)
	}
}
