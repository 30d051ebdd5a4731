package settle_test

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/internal/testenv"
	"github.com/surgepay/surgepay/settle"
	"github.com/surgepay/surgepay/stage/jetstream"
	"github.com/surgepay/surgepay/stage/stagetest"
)

func openJS(t testing.TB, url string) *jetstream.Stage {
	t.Helper()
	s, err := jetstream.Open(context.Background(), jetstream.Config{URL: url, AckWait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestSettleJetStream runs the production path end to end: sales staged
// at a real nats-server before their payments commit (as the engine
// does), an orphan, settlement through the durable consumer, and a second
// delivery of every record.
func TestSettleJetStream(t *testing.T) {
	srv := stagetest.StartNATS(t)
	js := openJS(t, srv.URL)
	e := newEnvStore(t, testenv.OpenSQLite(t))
	var sales []*stagetest.Staged
	for _, c := range []struct {
		amount int64
		card   surgepay.PAN
	}{{1000, cardOK}, {2000, cardOK}, {9102, cardOK}, {3000, cardCaptureDecline}} {
		s, err := stagetest.MakeSale(context.Background(), e.store, e.sim, e.sealer, js,
			stagetest.Sale{MerchantID: e.merch, Amount: c.amount, Card: c.card})
		if err != nil {
			t.Fatal(err)
		}
		sales = append(sales, s)
	}
	// An orphan: staged, then the engine died before its payment committed.
	old := time.Now().Add(-time.Hour)
	sealed, _ := e.sealer.Seal(&surgepay.CaptureInstruction{PaymentID: surgepay.NewID("pay"), MerchantID: e.merch,
		Amount: 100, Currency: "usd", AuthorizationRef: "auth_x", IdempotencyKey: "x/capture", Authorized: old})
	if err := js.Put(context.Background(), &surgepay.StagedRecord{ID: surgepay.NewID("stg"), MerchantID: e.merch,
		Sealed: sealed, Created: old}); err != nil {
		t.Fatal(err)
	}

	cfg := e.config(nil)
	cfg.Consumer = js
	cfg.BatchWait = 100 * time.Millisecond
	rep := run(t, cfg)
	if rep.Captured != 3 || rep.Failed != 1 || rep.Failures[settle.ReasonOrphan] != 1 || rep.BacklogDepth != 0 || rep.Left != 0 {
		t.Errorf("report: %+v", rep)
	}
	wantStates := []string{"captured", "captured", "captured", "failed"}
	for i, s := range sales {
		if got := state(t, e.store, s.Payment); got != wantStates[i] {
			t.Errorf("%d: got %s, want %s", s.Payment.Amount, got, wantStates[i])
		}
		wantCaptures(t, e, s.Payment, map[string]int{"captured": 1, "failed": 0}[wantStates[i]])
	}

	t.Run("RepeatedIDNotStagedAgain", func(t *testing.T) {
		for _, s := range sales {
			if err := js.Put(context.Background(), s.Record); err != nil {
				t.Fatal(err)
			}
		}
		if n, _, _ := js.Backlog(context.Background()); n != 0 {
			t.Errorf("backlog %d after re-putting settled IDs within the duplicates window, want 0", n)
		}
	})
	t.Run("SecondDeliveryCapturesNothing", func(t *testing.T) {
		for _, s := range sales {
			again := *s.Record
			again.ID = surgepay.NewID("stg")
			if err := js.Put(context.Background(), &again); err != nil {
				t.Fatal(err)
			}
		}
		rep := run(t, cfg)
		if rep.Captured != 0 || rep.Failed != 0 || rep.AlreadySettled != len(sales) || rep.BacklogDepth != 0 {
			t.Errorf("report: %+v", rep)
		}
		for i, s := range sales {
			wantCaptures(t, e, s.Payment, map[string]int{"captured": 1, "failed": 0}[wantStates[i]])
		}
	})
}

// TestSettleJetStreamTwoProcessors: two settlement processors share the
// durable consumer; every payment is captured exactly once.
func TestSettleJetStreamTwoProcessors(t *testing.T) {
	srv := stagetest.StartNATS(t)
	js := openJS(t, srv.URL)
	e := newEnvStore(t, testenv.OpenSQLite(t))
	const n = 300
	sales := make([]*stagetest.Staged, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			card := surgepay.PAN(cardOK)
			if i%10 == 0 {
				card = cardCaptureDecline
			}
			s, err := stagetest.MakeSale(context.Background(), e.store, e.sim, e.sealer, js,
				stagetest.Sale{MerchantID: e.merch, Amount: int64(1000 + i), Card: card})
			if err != nil {
				t.Error(err)
			}
			sales[i] = s
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	reps := make([]*settle.Report, 2)
	for i := range reps {
		wg.Go(func() {
			cfg := e.config(nil)
			cfg.Consumer = openJS(t, srv.URL)
			cfg.BatchWait = 50 * time.Millisecond
			rep, err := settle.Run(context.Background(), cfg)
			if err != nil {
				t.Error(err)
			}
			reps[i] = rep
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if got := reps[0].Captured + reps[1].Captured; got != n-n/10 {
		t.Errorf("captured %d (%d + %d), want %d", got, reps[0].Captured, reps[1].Captured, n-n/10)
	}
	for i, s := range sales {
		want, wantCaps := "captured", 1
		if i%10 == 0 {
			want, wantCaps = "failed", 0
		}
		if got := state(t, e.store, s.Payment); got != want {
			t.Errorf("%d: got %s, want %s", i, got, want)
		}
		wantCaptures(t, e, s.Payment, wantCaps)
	}
}

// TestSettleJetStreamLeftForLaterComesBack: records a delivery leaves for
// later (retry_later, orphan_wait) are released with the settle backoff
// and come back, and are settled, within the same run: each is released
// (counted), not left to come back after the consumer's AckWait. AckWait
// is the shortest settle accepts, not an hour: a delivery the server sends
// as a pull expires on a loaded machine is lost to that pull and comes
// back only after AckWait (seen once in CI: the run, waiting for it,
// outlived its 30 s bound); the run's bound here outlasts one AckWait.
func TestSettleJetStreamLeftForLaterComesBack(t *testing.T) {
	srv := stagetest.StartNATS(t)
	ackWait := settle.AckWaitMin(0)
	js, err := jetstream.Open(context.Background(), jetstream.Config{URL: srv.URL, AckWait: ackWait})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { js.Close() })
	e := newEnvStore(t, testenv.OpenSQLite(t))
	flaky, late, f, onStats := leftForLater(t, e, js, settle.RetryMaxDefault)
	cfg := e.config(f)
	rel := &countingReleaser{Stage: js, released: map[string]int{}}
	cfg.Consumer, cfg.OnStats, cfg.AckWait = rel, onStats, js.AckWait()
	checkLeftForLater(t, e, runWithin(t, cfg, 2*ackWait+30*time.Second), flaky, late)
	for _, s := range []*stagetest.Staged{flaky, late} {
		if n := rel.count(s.Record.ID); n == 0 {
			t.Errorf("record of the %d sale never released, want released to come back before AckWait", s.Payment.Amount)
		}
	}
}

// countingReleaser is a JetStream stage that counts the releases of each
// record.
type countingReleaser struct {
	*jetstream.Stage
	mu       sync.Mutex
	released map[string]int
}

func (c *countingReleaser) Release(ctx context.Context, recs []*surgepay.StagedRecord, delay time.Duration) error {
	c.mu.Lock()
	for _, r := range recs {
		c.released[r.ID]++
	}
	c.mu.Unlock()
	return c.Stage.Release(ctx, recs, delay)
}

func (c *countingReleaser) count(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.released[id]
}

// TestSettleJetStreamTamperedRecordLeft: on JetStream too, a record that
// fails to open is left in the stream (released for RedeliveryDelayMax),
// never acknowledged away.
func TestSettleJetStreamTamperedRecordLeft(t *testing.T) {
	srv := stagetest.StartNATS(t)
	js := openJS(t, srv.URL)
	e := newEnvStore(t, testenv.OpenSQLite(t))
	s := e.sale(t, 1000, cardOK) // staged in the store: only its tampered copy goes to JetStream
	bad := tampered(s.Record)
	if err := js.Put(context.Background(), bad); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	cfg := e.config(nil)
	cfg.Consumer, cfg.Logger, cfg.BatchWait = js, slogJSON(&logs), 50*time.Millisecond
	rep := run(t, cfg)
	if rep.Failures[settle.ReasonTampered] != 1 || rep.Captured != 0 || rep.Left != 1 || rep.BacklogDepth != 1 {
		t.Errorf("report %+v; want tampered 1, left 1, backlog 1", rep)
	}
	checkTamperedLogs(t, logs.String(), bad, s.Payment)
	if n, _, err := js.Backlog(context.Background()); err != nil || n != 1 {
		t.Errorf("stream holds %d records (%v), want the tampered one", n, err)
	}
	wantCaptures(t, e, s.Payment, 0)
}
