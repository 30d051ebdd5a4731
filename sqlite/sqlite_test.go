package sqlite_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/groupcommit"
	"github.com/surgepay/surgepay/sqlite"
	"github.com/surgepay/surgepay/storetest"
)

// open opens a fresh database in a temporary directory, closed at the end
// of the test.
func open(t testing.TB, cfg sqlite.Config) *sqlite.DB {
	t.Helper()
	if cfg.Path == "" {
		cfg.Path = filepath.Join(t.TempDir(), "surgepay.db")
	}
	db, err := sqlite.Open(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return db
}

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) surgepay.Store { return open(t, sqlite.Config{}) })
}

// TestProbeBesideBusyReads: Probe answers while the API's reads hold every
// connection of their pool (a read through that pool waits for one), and
// fails once the database is closed.
func TestProbeBesideBusyReads(t *testing.T) {
	db := open(t, sqlite.Config{})
	release, err := db.HoldReads(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	// A hang guard, not a measure: the probe needs no connection of the
	// read pool, so it never waits for one.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := db.Probe(ctx); err != nil {
		t.Fatalf("Probe beside busy reads: %v, want nil", err)
	}
	// The condition is real: a read through the pool waits for it.
	short, cancelShort := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancelShort()
	if _, err := db.FindMerchant(short, "mer_x"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("FindMerchant with the read pool held: %v, want it to wait past its deadline", err)
	}
	release()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Probe(t.Context()); err == nil {
		t.Fatal("Probe on a closed database: nil, want an error")
	}
}

// purchase returns a sale's Write: idempotency record, payment, two events.
func purchase(merchantID string) (*surgepay.Write, *surgepay.Payment) {
	now := time.Now().UTC()
	p := &surgepay.Payment{ID: surgepay.NewID("pay"), MerchantID: merchantID, PaymentMethodID: surgepay.NewID("pm"),
		Amount: 1999, Currency: "usd", CaptureMethod: surgepay.CaptureAutomatic, Status: surgepay.StatusSucceeded,
		AmountAuthorized: 1999, AmountCaptured: 1999, Path: "streamlined", Version: 1, Created: now, Updated: now,
		Transactions: []surgepay.Transaction{{ID: surgepay.NewID("tx"), Type: surgepay.TxAuthorization,
			Status: surgepay.TxSucceeded, Amount: 1999, Created: now}}}
	event := func(typ string, from, to surgepay.Status) *surgepay.Event {
		return &surgepay.Event{ID: surgepay.NewID("evt"), PaymentID: p.ID, MerchantID: merchantID, Type: typ,
			FromStatus: from, ToStatus: to, Amount: p.Amount, ActorKeyID: "key_bench", RequestID: "req", Created: now}
	}
	return &surgepay.Write{
		Idempotency: &surgepay.IdempotencyRecord{MerchantID: merchantID, Key: surgepay.NewID("idem"),
			StatusCode: 201, Body: []byte(`{"status":"succeeded"}`), Created: now},
		PaymentInsert: p,
		Events: []*surgepay.Event{event(surgepay.TxAuthorization, "", surgepay.StatusRequiresCapture),
			event(surgepay.TxCapture, surgepay.StatusRequiresCapture, surgepay.StatusSucceeded)},
	}, p
}

func newMerchant(t testing.TB, db *sqlite.DB) *surgepay.Merchant {
	t.Helper()
	m := &surgepay.Merchant{ID: surgepay.NewID("mch"), Name: "test", Created: time.Now().UTC()}
	if err := db.Apply(t.Context(), &surgepay.Write{Merchant: m}); err != nil {
		t.Fatalf("Apply(merchant): %v", err)
	}
	return m
}

// applyAll applies ws concurrently and returns each one's error.
func applyAll(t testing.TB, db *sqlite.DB, ws []*surgepay.Write) []error {
	errs := make([]error, len(ws))
	var wg sync.WaitGroup
	for i := range ws {
		wg.Go(func() { errs[i] = db.Apply(t.Context(), ws[i]) })
	}
	wg.Wait()
	return errs
}

func TestDurableAcrossReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "surgepay.db")
	db, err := sqlite.Open(t.Context(), sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	m := newMerchant(t, db)
	var ws []*surgepay.Write
	var ps []*surgepay.Payment
	for range 100 {
		w, p := purchase(m.ID)
		ws, ps = append(ws, w), append(ps, p)
	}
	for i, err := range applyAll(t, db, ws) {
		if err != nil {
			t.Fatalf("Apply(%d): %v", i, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	// Reopening runs the migrations again: they must be a no-op.
	db = open(t, sqlite.Config{Path: path})
	if _, err := db.FindMerchant(t.Context(), m.ID); err != nil {
		t.Fatalf("FindMerchant after reopen: %v", err)
	}
	for i, want := range ps {
		got, err := db.FindPayment(t.Context(), m.ID, want.ID)
		if err != nil {
			t.Fatalf("FindPayment(%d) after reopen: %v", i, err)
		}
		if got.Version != want.Version || got.Status != want.Status || !got.Created.Equal(want.Created) ||
			len(got.Transactions) != 1 {
			t.Fatalf("FindPayment(%d) after reopen = %+v, want %+v", i, got, want)
		}
		evs, err := db.ListEvents(t.Context(), m.ID, want.ID)
		if err != nil || len(evs) != 2 {
			t.Fatalf("ListEvents(%d) after reopen = %d events, %v; want 2", i, len(evs), err)
		}
		if _, err := db.FindIdempotency(t.Context(), m.ID, ws[i].Idempotency.Key); err != nil {
			t.Fatalf("FindIdempotency(%d) after reopen: %v", i, err)
		}
	}
}

// lockWriter takes SQLite's write lock from another connection, as another
// process would, until the returned func is called.
func lockWriter(t *testing.T, path string) (unlock func()) {
	t.Helper()
	other, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := other.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(t.Context(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatalf("BEGIN IMMEDIATE: %v", err)
	}
	return func() {
		if _, err := conn.ExecContext(context.Background(), "ROLLBACK"); err != nil {
			t.Errorf("ROLLBACK: %v", err)
		}
		conn.Close()
		other.Close()
	}
}

// waitFor polls cond until it holds, failing t after a few seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func TestApplyErrQueueFull(t *testing.T) {
	path := filepath.Join(t.TempDir(), "surgepay.db")
	db := open(t, sqlite.Config{Path: path, QueueDepthMax: 1, BatchSizeMax: 1})
	m := newMerchant(t, db)

	// The writer blocks in BEGIN on the lock, holding write #1; #2 waits in
	// the queue, which is then full.
	unlock := lockWriter(t, path)
	w1, _ := purchase(m.ID)
	w2, _ := purchase(m.ID)
	errs := make(chan error, 2)
	go func() { errs <- db.Apply(t.Context(), w1) }()
	// Committing, not Items: Items already counts the merchant's Write,
	// and write #2 sent while #1 still sits in the queue is refused.
	waitFor(t, "the writer to take write #1", func() bool { return db.CommitStats().Committing == 1 && db.QueueDepth() == 0 })
	go func() { errs <- db.Apply(t.Context(), w2) }()
	waitFor(t, "write #2 to be queued", func() bool { return db.QueueDepth() == 1 })

	w3, p3 := purchase(m.ID)
	start := time.Now()
	err := db.Apply(t.Context(), w3)
	var se *surgepay.Error
	if !errors.As(err, &se) || se.Code != surgepay.EUNAVAILABLE || se.Reason != "write_queue_full" || se.RetryAfter <= 0 {
		t.Fatalf("Apply with a full queue = %#v, want EUNAVAILABLE write_queue_full with RetryAfter", err)
	}
	// Measured against the wait it must not do (a Write the provider acted
	// on waits up to SubmitWaitMax for room), not against this machine's
	// speed.
	if d := time.Since(start); d > groupcommit.SubmitWaitMax/2 {
		t.Errorf("Apply with a full queue took %v, the order of SubmitWaitMax: it waited for room", d)
	}
	if _, err := db.FindPayment(t.Context(), m.ID, p3.ID); surgepay.ErrorCode(err) != surgepay.ENOTFOUND {
		t.Errorf("FindPayment(refused write) = %v, want ENOTFOUND", err)
	}

	unlock()
	for range 2 {
		if err := <-errs; err != nil {
			t.Errorf("queued Apply after the lock was released: %v", err)
		}
	}
}

// TestBatchFailureIsolatesBadWrite puts one bad Write in a batch with good
// ones. A constraint error (not a guard) in either statement of a sale
// rolls back the batch's transaction (INSERT OR ROLLBACK, migration 0012),
// each Write is retried alone, and only the bad one fails, with nothing of
// it stored. A key already in idempotency_index is the trigger's guard,
// raised before the sale changes anything: the bad Write alone is refused.
// What was stored before is unchanged in every case.
func TestBatchFailureIsolatesBadWrite(t *testing.T) {
	for _, tt := range []struct {
		name   string
		spoil  func(bad *surgepay.Write, stored *surgepay.Write)
		reason string // the bad Write's error reason; "" for an internal error
	}{
		{"EventConstraint", func(bad, stored *surgepay.Write) {
			dup := *stored.Events[0] // an event ID that exists: the events' INSERT fails
			dup.PaymentID = bad.PaymentInsert.ID
			bad.Events = append(bad.Events, &dup)
		}, ""},
		{"PaymentConstraint", func(bad, stored *surgepay.Write) {
			p := *bad.PaymentInsert // a payment ID that exists: the sale's INSERT fails in its trigger
			p.ID = stored.PaymentInsert.ID
			bad.PaymentInsert = &p
		}, ""},
		{"KeyInIndex", func(bad, stored *surgepay.Write) {
			bad.Idempotency.Key = stored.Idempotency.Key // merged into idempotency_index: the trigger refuses it
		}, "idempotency_key_exists"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "surgepay.db")
			db := open(t, sqlite.Config{Path: path, FlushInterval: 50 * time.Millisecond, IdempotencyTableMax: 16})
			m := newMerchant(t, db)
			stored, storedPayment := purchase(m.ID)
			if err := db.Apply(t.Context(), stored); err != nil {
				t.Fatal(err)
			}
			// Enough sales after it that its key leaves the memory table
			// for idempotency_index.
			var more []*surgepay.Write
			for range 100 {
				w, _ := purchase(m.ID)
				more = append(more, w)
			}
			for i, err := range applyAll(t, db, more) {
				if err != nil {
					t.Fatalf("Apply %d: %v", i, err)
				}
			}
			if n := rawCount(t, path, "SELECT count(*) FROM idempotency_index"); n < 50 {
				t.Fatalf("idempotency_index holds %d keys after 101 sales; the test needs the first merged", n)
			}

			const n = 20
			ws := make([]*surgepay.Write, n)
			for i := range ws {
				ws[i], _ = purchase(m.ID)
			}
			const bad = 7
			tt.spoil(ws[bad], stored)
			before := db.CommitStats()
			errs := applyAll(t, db, ws)
			after := db.CommitStats()
			if after.Batches-before.Batches >= n {
				t.Fatalf("%d writes took %d batches: the test needs them batched", n, after.Batches-before.Batches)
			}
			for i, err := range errs {
				switch {
				case i == bad && tt.reason == "" && (err == nil || surgepay.ErrorCode(err) != surgepay.EINTERNAL):
					t.Errorf("bad write: Apply = %v, want an internal error", err)
				case i == bad && tt.reason != "" && surgepay.ErrorReason(err) != tt.reason:
					t.Errorf("bad write: Apply = %v, want %s", err, tt.reason)
				case i != bad:
					_, ferr := db.FindPayment(t.Context(), m.ID, ws[i].PaymentInsert.ID)
					if err != nil || ferr != nil {
						t.Errorf("write %d beside a bad one: Apply = %v, FindPayment = %v; want both nil", i, err, ferr)
					}
				}
			}
			// Nothing of the bad Write is stored.
			if ws[bad].PaymentInsert.ID != storedPayment.ID {
				if _, err := db.FindPayment(t.Context(), m.ID, ws[bad].PaymentInsert.ID); surgepay.ErrorCode(err) != surgepay.ENOTFOUND {
					t.Errorf("bad write: FindPayment = %v, want ENOTFOUND", err)
				}
			}
			if ws[bad].Idempotency.Key != stored.Idempotency.Key {
				if _, err := db.FindIdempotency(t.Context(), m.ID, ws[bad].Idempotency.Key); surgepay.ErrorCode(err) != surgepay.ENOTFOUND {
					t.Errorf("bad write: FindIdempotency = %v, want ENOTFOUND", err)
				}
			}
			// What was stored before is as it was.
			got, err := db.FindPayment(t.Context(), m.ID, storedPayment.ID)
			if err != nil || got.PaymentMethodID != storedPayment.PaymentMethodID || got.Version != storedPayment.Version {
				t.Errorf("stored payment after the batch: %+v, %v; want it unchanged", got, err)
			}
			rec, err := db.FindIdempotency(t.Context(), m.ID, stored.Idempotency.Key)
			if err != nil || !bytes.Equal(rec.Body, stored.Idempotency.Body) {
				t.Errorf("stored key after the batch: %+v, %v; want it unchanged", rec, err)
			}
			if got := rawCount(t, path, "SELECT count(*) FROM payments"); got != 101+n-1 {
				t.Errorf("%d payments stored, want %d", got, 101+n-1)
			}
		})
	}
}

// TestApplyBudgetSplitsABatch queues Writes behind a held write lock: with
// a budget too short for a second Write every transaction commits one and
// leaves the rest of its batch to the next, none lost or stored twice;
// with none, those queued together are committed together.
func TestApplyBudgetSplitsABatch(t *testing.T) {
	for _, tc := range []struct {
		name   string
		budget time.Duration
	}{{"Tiny", time.Nanosecond}, {"Off", -1}} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "surgepay.db")
			db := open(t, sqlite.Config{Path: path, ApplyBudget: tc.budget})
			m := newMerchant(t, db)
			const n = 40
			ws := make([]*surgepay.Write, n)
			ps := make([]*surgepay.Payment, n)
			for i := range ws {
				ws[i], ps[i] = purchase(m.ID)
			}
			before := db.CommitStats()
			unlock := lockWriter(t, path)
			errs := make([]error, n)
			var started atomic.Int64
			var wg sync.WaitGroup
			for i := range ws {
				wg.Go(func() { started.Add(1); errs[i] = db.Apply(t.Context(), ws[i]) })
			}
			// Two queued behind what the writer holds, or all of them taken
			// by it: a batch of several at least.
			waitFor(t, "writes to queue behind the lock", func() bool {
				return db.QueueDepth() >= 2 || started.Load() == n && db.QueueDepth() == 0
			})
			unlock()
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Fatalf("Apply %d: %v", i, err)
				}
				if _, err := db.FindPayment(t.Context(), m.ID, ps[i].ID); err != nil {
					t.Fatalf("payment %d: %v", i, err)
				}
			}
			after := db.CommitStats()
			batches, items := after.Batches-before.Batches, after.Items-before.Items
			if items != n {
				t.Fatalf("%d items committed, want %d", items, n)
			}
			switch {
			case tc.budget > 0 && batches != n:
				t.Fatalf("%d Writes in %d transactions, want one each: the budget left none for later", n, batches)
			case tc.budget < 0 && batches >= n:
				t.Fatalf("%d Writes in %d transactions without a budget, want those queued together in one", n, batches)
			}
			// None was stored twice: its events' IDs would have failed its Apply.
		})
	}
}

// TestTwoWritersOfOneFile: two DBs on one file (surgepay serve and
// surgepay settle) both write through a stretch where each holds the lock
// in turn: every Write of each is stored, none fails with SQLITE_BUSY.
func TestTwoWritersOfOneFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "surgepay.db")
	serve := open(t, sqlite.Config{Path: path, BatchSizeMax: 4})
	settle := open(t, sqlite.Config{Path: path, BatchSizeMax: 4, WriteLockRetryMax: sqlite.WriteLockRetryYield})
	m := newMerchant(t, serve)
	const n = 200
	var ws [2][]*surgepay.Write
	var ps [2][]*surgepay.Payment
	for i := range ws {
		for range n {
			w, p := purchase(m.ID)
			ws[i], ps[i] = append(ws[i], w), append(ps[i], p)
		}
	}
	var errs [2][]error
	var wg sync.WaitGroup
	for i, db := range []*sqlite.DB{serve, settle} {
		wg.Go(func() { errs[i] = applyAll(t, db, ws[i]) })
	}
	wg.Wait()
	for i := range errs {
		for j, err := range errs[i] {
			if err != nil {
				t.Fatalf("writer %d, Write %d: %v", i, j, err)
			}
			if _, err := serve.FindPayment(t.Context(), m.ID, ps[i][j].ID); err != nil {
				t.Fatalf("writer %d, payment %d: %v", i, j, err)
			}
		}
	}
}

func TestApplyErrBusyReturns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "surgepay.db")
	db := open(t, sqlite.Config{Path: path, BusyTimeout: 50 * time.Millisecond})
	m := newMerchant(t, db)
	unlock := lockWriter(t, path)
	w, p := purchase(m.ID)
	err := db.Apply(t.Context(), w)
	unlock()
	var se *surgepay.Error
	if !errors.As(err, &se) || se.Code != surgepay.EUNAVAILABLE || se.Reason != "store_locked" || se.RetryAfter <= 0 {
		t.Fatalf("Apply while another connection holds the write lock = %#v, want EUNAVAILABLE store_locked with RetryAfter", err)
	}
	// The writer recovers once the lock is free.
	if err := db.Apply(t.Context(), w); err != nil {
		t.Fatalf("Apply after the lock was released: %v", err)
	}
	if _, err := db.FindPayment(t.Context(), m.ID, p.ID); err != nil {
		t.Fatal(err)
	}
}

// TestApplyProviderActedOutwaitsBusyTimeout: a Write recording what the
// network already did is not refused when another process holds the write
// lock past BusyTimeout; it waits (up to groupcommit.SubmitWaitMax) and
// commits once the lock is free.
func TestApplyProviderActedOutwaitsBusyTimeout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "surgepay.db")
	db := open(t, sqlite.Config{Path: path, BusyTimeout: 20 * time.Millisecond})
	m := newMerchant(t, db)
	unlock := lockWriter(t, path)
	w, p := purchase(m.ID)
	w.ProviderActed = true
	errc := make(chan error, 1)
	go func() { errc <- db.Apply(t.Context(), w) }()
	// Held for many BusyTimeouts: a plain Write would have been refused.
	time.Sleep(300 * time.Millisecond)
	unlock()
	if err := <-errc; err != nil {
		t.Fatalf("Apply of a provider-acted Write while the lock was held past BusyTimeout: %v", err)
	}
	if _, err := db.FindPayment(t.Context(), m.ID, p.ID); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkApplyPurchaseParallel measures group-committed purchases (an
// idempotency record, a payment and two events; two statements) from many
// goroutines, each Apply durable (WAL, synchronous=FULL) on return.
func BenchmarkApplyPurchaseParallel(b *testing.B) {
	db := open(b, sqlite.Config{})
	m := newMerchant(b, db)
	b.SetParallelism(16) // 16 × GOMAXPROCS concurrent requests
	before := db.CommitStats()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			w, _ := purchase(m.ID)
			if err := db.Apply(context.Background(), w); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	st := db.CommitStats()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "writes/s")
	if batches := st.Batches - before.Batches; batches > 0 {
		b.ReportMetric(float64(st.Items-before.Items)/float64(batches), "writes/batch")
	}
}

// stagedSealedBytes is the size of stagedSale's sealed instruction: about
// a sale's (stage.Seal, record version 2).
const stagedSealedBytes = 245

// stagedSale returns a streamlined sale's Write: idempotency record,
// payment with its capture pending, and the staged capture; no events.
func stagedSale(merchantID string) (*surgepay.Write, *surgepay.StagedRecord) {
	w, p := purchase(merchantID)
	w.Events = nil
	p.Transactions = append(p.Transactions, surgepay.Transaction{ID: surgepay.NewID("tx"), Type: surgepay.TxCapture,
		Status: surgepay.TxPending, Amount: p.Amount, IdempotencyKey: p.ID + "/capture", Created: p.Created})
	w.Staged = &surgepay.StagedRecord{ID: surgepay.NewID("stg"), MerchantID: merchantID, PaymentID: p.ID,
		Sealed: bytes.Repeat([]byte{0xa5}, stagedSealedBytes), Created: p.Created}
	return w, w.Staged
}

// TestStagedDurableAcrossReopen closes and reopens the store: the staged
// record is there, and a second run of the migrations changes nothing.
func TestStagedDurableAcrossReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "surgepay.db")
	db, err := sqlite.Open(t.Context(), sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	m := newMerchant(t, db)
	w, rec := stagedSale(m.ID)
	if err := db.Apply(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = open(t, sqlite.Config{Path: path})
	recs, err := db.FetchStaged(t.Context(), "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].ID != rec.ID || !bytes.Equal(recs[0].Sealed, rec.Sealed) {
		t.Fatalf("FetchStaged after reopen = %+v, want [%+v]", recs, rec)
	}
}

// BenchmarkApplyStagedSaleParallel measures group-committed streamlined
// sales (idempotency record, payment and staged capture: ONE statement)
// from many goroutines, each Apply durable on return; compare
// BenchmarkApplyPurchaseParallel (two statements).
func BenchmarkApplyStagedSaleParallel(b *testing.B) {
	db := open(b, sqlite.Config{})
	m := newMerchant(b, db)
	b.SetParallelism(16) // 16 × GOMAXPROCS concurrent requests
	before := db.CommitStats()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			w, _ := stagedSale(m.ID)
			if err := db.Apply(context.Background(), w); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	st := db.CommitStats()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "writes/s")
	if batches := st.Batches - before.Batches; batches > 0 {
		b.ReportMetric(float64(st.Items-before.Items)/float64(batches), "writes/batch")
	}
}

// TestMigrationProcessorRef opens a database written before migration 0012
// (migrations 0001-0011 run from their files, a routed payment and a
// simulator's stored by SQL): the routed payment is found by its
// reference through the new index, the other is not, and a payment
// stored after the migration is found too.
func TestMigrationProcessorRef(t *testing.T) {
	path := filepath.Join(t.TempDir(), "surgepay.db")
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec("CREATE TABLE schema_migrations (version INTEGER NOT NULL PRIMARY KEY, applied INTEGER NOT NULL) STRICT"); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("migrations/00*.sql")
	if err != nil || len(files) < 12 {
		t.Fatalf("migrations: %v, %v", files, err)
	}
	for v, f := range files[:11] {
		b, err := os.ReadFile(f)
		if err == nil {
			_, err = raw.Exec(string(b))
		}
		if err == nil {
			_, err = raw.Exec("INSERT INTO schema_migrations (version, applied) VALUES (?, 0)", v+1)
		}
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	insert := func(id, ref string) {
		t.Helper()
		_, err := raw.Exec(`INSERT INTO payments (merchant_id, id, customer_id, payment_method_id, amount, amount_tax,
			currency, capture_method, status, amount_authorized, amount_captured, amount_refunded, description,
			decline_code, failure_message, authorization_ref, path, version)
			VALUES ('mch_old', ?, '', 'pm_old', 1999, 0, 'usd', 'automatic', 'succeeded', 1999, 1999, 0, '', '', '', ?, 'standard', 1)`,
			id, ref)
		if err != nil {
			t.Fatal(err)
		}
	}
	insert("pay_routed", "stripe_eu:pi_old")
	insert("pay_plain", "auth_old")
	raw.Close()

	db := open(t, sqlite.Config{Path: path})
	got, err := db.FindPaymentByRef(t.Context(), "stripe_eu:pi_old")
	if err != nil || got.ID != "pay_routed" || got.AuthorizationRef != "stripe_eu:pi_old" {
		t.Fatalf("FindPaymentByRef(a routed payment stored before 0012) = %+v, %v", got, err)
	}
	if _, err := db.FindPaymentByRef(t.Context(), "auth_old"); surgepay.ErrorCode(err) != surgepay.ENOTFOUND {
		t.Fatalf("FindPaymentByRef(a simulator's reference) = %v, want ENOTFOUND", err)
	}
	m := newMerchant(t, db)
	w, p := purchase(m.ID)
	p.AuthorizationRef = "stripe_us:pi_new"
	if err := db.Apply(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	if got, err := db.FindPaymentByRef(t.Context(), p.AuthorizationRef); err != nil || got.ID != p.ID {
		t.Fatalf("FindPaymentByRef(a sale stored after 0012) = %+v, %v", got, err)
	}
	if n := rawCount(t, path, "SELECT count(*) FROM payments WHERE processor_ref IS NOT NULL"); n != 2 {
		t.Fatalf("%d payments with a processor_ref, want the two routed ones", n)
	}
}

// migratedFile returns the path of a database file Open migrated and
// closed, and a raw connection to it.
func migratedFile(t *testing.T) (string, *sql.DB) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "surgepay.db")
	db, err := sqlite.Open(t.Context(), sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	return path, raw
}

// TestMigrationOutOfOrderRefused: a migration missing below the newest
// applied one (one that landed after a later-numbered one was deployed) is
// refused at open, never skipped.
func TestMigrationOutOfOrderRefused(t *testing.T) {
	path, raw := migratedFile(t)
	var latest int
	if err := raw.QueryRow("SELECT max(version) FROM schema_migrations").Scan(&latest); err != nil || latest < 3 {
		t.Fatalf("applied migrations: latest %d, %v", latest, err)
	}
	if _, err := raw.Exec("DELETE FROM schema_migrations WHERE version = 2"); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	db, err := sqlite.Open(t.Context(), sqlite.Config{Path: path})
	if err == nil {
		db.Close()
		t.Fatal("Open with migration 2 missing below later ones: nil error, want a refusal")
	}
	if !strings.Contains(err.Error(), "0002") || !strings.Contains(err.Error(), "later one") {
		t.Fatalf("Open: %v; want it to name 0002 and the later migration", err)
	}
}

// TestMigrationNewer: a file a newer surgepay migrated (a version above
// every embedded one) opens, as the previous release must when an
// upgrade is rolled back (docs/upgrade.md), unless one of its migrations
// is a contract that this release is too old for: then Open refuses it,
// naming the versions.
func TestMigrationNewer(t *testing.T) {
	for _, tt := range []struct {
		name          string
		contractAbove int // the newer migration's contract_before, less the newest embedded; -1: none
		wantErr       bool
	}{
		{"OK", -1, false},
		{"ContractMet", 0, false},
		{"ErrContract", 1, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path, raw := migratedFile(t)
			var latest int
			if err := raw.QueryRow("SELECT max(version) FROM schema_migrations").Scan(&latest); err != nil {
				t.Fatal(err)
			}
			before := 0
			if tt.contractAbove >= 0 {
				before = latest + tt.contractAbove
			}
			if _, err := raw.Exec("INSERT INTO schema_migrations (version, applied, contract_before) VALUES (?, 0, ?)",
				latest+1, before); err != nil {
				t.Fatal(err)
			}
			raw.Close()
			db, err := sqlite.Open(t.Context(), sqlite.Config{Path: path})
			if !tt.wantErr {
				if err != nil {
					t.Fatalf("Open of a file at migration %d (contract_before %d): %v, want it to open", latest+1, before, err)
				}
				db.Close()
				return
			}
			if err == nil {
				db.Close()
				t.Fatalf("Open of a file whose migration %d contracts binaries before %d: nil error, want a refusal",
					latest+1, before)
			}
			for _, want := range []string{strconv.Itoa(before), strconv.Itoa(latest), "upgrade.md"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Open: %v; want it to name %s", err, want)
				}
			}
		})
	}
}

// TestFilesPrivate: the database and its WAL and shared-memory files are
// readable by their owner only, also when an older version left the
// database file readable by all.
func TestFilesPrivate(t *testing.T) {
	for _, tt := range []struct {
		name    string
		preMode os.FileMode // 0: no file before Open
	}{{"New", 0}, {"NarrowsAnOpenFile", 0o644}} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "surgepay.db")
			if tt.preMode != 0 {
				if err := os.WriteFile(path, nil, tt.preMode); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(path, tt.preMode); err != nil {
					t.Fatal(err)
				}
			}
			db, err := sqlite.Open(t.Context(), sqlite.Config{Path: path})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			newMerchant(t, db) // a write: the WAL and shared memory exist
			for _, p := range []string{path, path + "-wal", path + "-shm"} {
				fi, err := os.Stat(p)
				if err != nil {
					t.Fatalf("%s: %v", p, err)
				}
				if perm := fi.Mode().Perm(); perm != 0o600 {
					t.Errorf("%s: mode %o, want 600", filepath.Base(p), perm)
				}
			}
		})
	}
}
