package postgres_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/postgres"
)

// now is the current time at the precision the store keeps.
func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

func newMerchant(t testing.TB, db *postgres.DB) *surgepay.Merchant {
	t.Helper()
	m := &surgepay.Merchant{ID: surgepay.NewID("mch"), Name: "test", Created: now()}
	mustApply(t, db, &surgepay.Write{Merchant: m})
	return m
}

func mustApply(t testing.TB, db *postgres.DB, w *surgepay.Write) {
	t.Helper()
	if err := db.Apply(context.Background(), w); err != nil {
		t.Fatalf("Apply: %v", err)
	}
}

func idem(merchantID, key string) *surgepay.IdempotencyRecord {
	return &surgepay.IdempotencyRecord{MerchantID: merchantID, Key: key,
		RequestHash: surgepay.RequestHash("POST", "/v1/payments", []byte(key)),
		StatusCode:  200, Body: []byte(`{}`), Created: now()}
}

func payment(merchantID string) *surgepay.Payment {
	t := now()
	return &surgepay.Payment{ID: surgepay.NewID("pay"), MerchantID: merchantID, PaymentMethodID: "pm_1",
		Amount: 1000, Currency: "usd", CaptureMethod: surgepay.CaptureManual,
		Status: surgepay.StatusRequiresCapture, AmountAuthorized: 1000, Path: "standard",
		Version: 1, Created: t, Updated: t}
}

// captured returns p's next version, as a capture stores it.
func captured(p *surgepay.Payment) *surgepay.Payment {
	u := p.Clone()
	u.Status, u.AmountCaptured = surgepay.StatusSucceeded, u.AmountAuthorized
	u.Version, u.Updated = p.Version+1, now()
	return u
}

func event(p *surgepay.Payment, typ string) *surgepay.Event {
	return &surgepay.Event{ID: surgepay.NewID("evt"), PaymentID: p.ID, MerchantID: p.MerchantID, Type: typ,
		ToStatus: p.Status, Amount: p.Amount, ActorKeyID: "key_test", RequestID: "req", Created: now()}
}

func purchase(merchantID string) (*surgepay.Write, *surgepay.Payment) {
	p := payment(merchantID)
	p.Status, p.AmountCaptured = surgepay.StatusSucceeded, p.Amount
	return &surgepay.Write{Idempotency: idem(merchantID, surgepay.NewID("k")), PaymentInsert: p,
		Events: []*surgepay.Event{event(p, surgepay.TxAuthorization), event(p, surgepay.TxCapture)}}, p
}

// stagedSale returns a streamlined sale's Write: idempotency record,
// payment with its capture pending, and the staged capture; no events.
func stagedSale(merchantID string) (*surgepay.Write, *surgepay.StagedRecord) {
	p := payment(merchantID)
	p.Status, p.AmountCaptured, p.Path = surgepay.StatusSucceeded, p.Amount, surgepay.PathStreamlined
	p.Transactions = []surgepay.Transaction{
		{ID: surgepay.NewID("tx"), Type: surgepay.TxAuthorization, Status: surgepay.TxSucceeded, Amount: p.Amount, Created: p.Created},
		{ID: surgepay.NewID("tx"), Type: surgepay.TxCapture, Status: surgepay.TxPending, Amount: p.Amount, Created: p.Created},
	}
	rec := &surgepay.StagedRecord{ID: surgepay.NewID("stg"), MerchantID: merchantID, PaymentID: p.ID,
		Sealed: bytes.Repeat([]byte{0xa5}, 245), Created: p.Created} // about the size of a sale's sealed instruction (stage.Seal)
	return &surgepay.Write{Idempotency: idem(merchantID, surgepay.NewID("k")), PaymentInsert: p, Staged: rec}, rec
}

func customer(merchantID string) *surgepay.Customer {
	t := now()
	return &surgepay.Customer{ID: surgepay.NewID("cus"), MerchantID: merchantID, Name: "A",
		Created: t, Updated: t, Version: 1}
}

func wantCode(t testing.TB, what string, err error, code, reason string) {
	t.Helper()
	if surgepay.ErrorCode(err) != code || (reason != "" && surgepay.ErrorReason(err) != reason) {
		t.Fatalf("%s: got error %v (code %q, reason %q), want code %q reason %q", what, err,
			surgepay.ErrorCode(err), surgepay.ErrorReason(err), code, reason)
	}
}

func findVersion(t testing.TB, db *postgres.DB, p *surgepay.Payment) int64 {
	t.Helper()
	got, err := db.FindPayment(context.Background(), p.MerchantID, p.ID)
	if err != nil {
		t.Fatalf("FindPayment: %v", err)
	}
	return got.Version
}

func eventCount(t testing.TB, db *postgres.DB, p *surgepay.Payment) int {
	t.Helper()
	es, err := db.ListEvents(context.Background(), p.MerchantID, p.ID)
	if err != nil {
		t.Fatalf("ListEvents: %v", err)
	}
	return len(es)
}

func idemStored(t testing.TB, db *postgres.DB, r *surgepay.IdempotencyRecord) bool {
	t.Helper()
	_, err := db.FindIdempotency(context.Background(), r.MerchantID, r.Key)
	if err != nil && surgepay.ErrorCode(err) != surgepay.ENOTFOUND {
		t.Fatalf("FindIdempotency: %v", err)
	}
	return err == nil
}

// A Write whose idempotency key is taken must not apply its payment update,
// although the update's own guard would hold: the row guard runs only after
// the idempotency insert held.
func TestApplyIdempotencyTakenSkipsRowGuard(t *testing.T) {
	db := openTest(t, postgres.Config{})
	m := newMerchant(t, db)
	w, p := purchase(m.ID)
	mustApply(t, db, w)
	u := captured(p)
	err := db.Apply(context.Background(), &surgepay.Write{Idempotency: idem(m.ID, w.Idempotency.Key),
		PaymentUpdate: u, Events: []*surgepay.Event{event(u, surgepay.TxCapture)}})
	wantCode(t, "Apply", err, surgepay.ECONFLICT, "idempotency_key_exists")
	if v := findVersion(t, db, p); v != 1 {
		t.Errorf("payment version = %d, want 1: the refused Write's update was stored", v)
	}
	if n := eventCount(t, db, p); n != 2 {
		t.Errorf("events = %d, want 2", n)
	}
}

// A Write with two row guards runs under a savepoint: if its second guard
// fails, its first is rolled back, and its idempotency key is not kept.
func TestApplyTwoRowGuards(t *testing.T) {
	db := openTest(t, postgres.Config{})
	ctx := context.Background()
	m := newMerchant(t, db)
	c := customer(m.ID)
	p := payment(m.ID)
	mustApply(t, db, &surgepay.Write{CustomerInsert: c, PaymentInsert: p})

	cu := *c
	cu.Name, cu.Version = "B", 2
	stale := captured(p)
	stale.Version = 3
	r := idem(m.ID, "two-guards")
	err := db.Apply(ctx, &surgepay.Write{Idempotency: r, CustomerUpdate: &cu, PaymentUpdate: stale})
	wantCode(t, "Apply(stale payment)", err, surgepay.ECONFLICT, "concurrent_update")
	if got, _ := db.FindCustomer(ctx, m.ID, c.ID); got.Version != 1 || got.Name != "A" {
		t.Errorf("customer = version %d name %q, want version 1 name A: rolled back", got.Version, got.Name)
	}
	if idemStored(t, db, r) {
		t.Error("idempotency key of the refused Write is stored")
	}

	gone := captured(payment(m.ID)) // never inserted
	err = db.Apply(ctx, &surgepay.Write{CustomerUpdate: &cu, PaymentUpdate: gone})
	wantCode(t, "Apply(missing payment)", err, surgepay.ENOTFOUND, "")

	mustApply(t, db, &surgepay.Write{Idempotency: r, CustomerUpdate: &cu, PaymentUpdate: captured(p)})
	if got, _ := db.FindCustomer(ctx, m.ID, c.ID); got.Version != 2 {
		t.Errorf("customer version = %d, want 2", got.Version)
	}
	if v := findVersion(t, db, p); v != 2 {
		t.Errorf("payment version = %d, want 2", v)
	}
}

// Writes in one batch that fail (a stale update, a taken key, a duplicate
// event ID that aborts the whole transaction) do not fail their neighbours.
func TestApplyBatchNeighboursUnaffected(t *testing.T) {
	db := openTest(t, postgres.Config{Writers: 1, FlushInterval: 100 * time.Millisecond})
	m := newMerchant(t, db)
	taken, tp := purchase(m.ID)
	mustApply(t, db, taken)
	old := payment(m.ID)
	mustApply(t, db, &surgepay.Write{PaymentInsert: old})
	mustApply(t, db, &surgepay.Write{PaymentUpdate: captured(old)})

	type tc struct {
		name         string
		w            *surgepay.Write
		code, reason string
	}
	var cases []tc
	var good []*surgepay.Payment
	for i := range 6 {
		w, p := purchase(m.ID)
		good = append(good, p)
		cases = append(cases, tc{name: fmt.Sprintf("purchase %d", i), w: w})
	}
	staleW := &surgepay.Write{Idempotency: idem(m.ID, "stale"), PaymentUpdate: captured(old)}
	cases = append(cases,
		tc{"stale update", staleW, surgepay.ECONFLICT, "concurrent_update"},
		tc{"taken key", &surgepay.Write{Idempotency: idem(m.ID, taken.Idempotency.Key),
			PaymentInsert: payment(m.ID)}, surgepay.ECONFLICT, "idempotency_key_exists"},
		tc{"duplicate event", &surgepay.Write{Idempotency: idem(m.ID, "dup-event"),
			PaymentUpdate: captured(tp), Events: []*surgepay.Event{taken.Events[0]}}, surgepay.EINTERNAL, ""},
	)
	before := db.CommitStats()
	errs := make([]error, len(cases))
	var wg sync.WaitGroup
	for i := range cases {
		wg.Go(func() { errs[i] = db.Apply(context.Background(), cases[i].w) })
	}
	wg.Wait()
	for i, c := range cases {
		if c.code == "" {
			if errs[i] != nil {
				t.Errorf("%s: got %v, want nil", c.name, errs[i])
			}
			continue
		}
		wantCode(t, c.name, errs[i], c.code, c.reason)
	}
	for _, p := range good {
		if findVersion(t, db, p) != 1 || eventCount(t, db, p) != 2 {
			t.Errorf("purchase %s not stored whole", p.ID)
		}
	}
	if v := findVersion(t, db, tp); v != 1 {
		t.Errorf("payment of the duplicate-event Write: version %d, want 1", v)
	}
	for _, r := range []*surgepay.IdempotencyRecord{staleW.Idempotency, idem(m.ID, "dup-event")} {
		if idemStored(t, db, r) {
			t.Errorf("key %s of a refused Write is stored", r.Key)
		}
	}
	st := db.CommitStats()
	t.Logf("%d writes in %d batches", st.Items-before.Items, st.Batches-before.Batches)
}

// Concurrent committers race to store the same payment version: exactly
// one Write wins each round; the losers store nothing.
func TestApplyRacingWritersOneWins(t *testing.T) {
	const racers, rounds = 24, 5
	db := openTest(t, postgres.Config{Writers: 4})
	m := newMerchant(t, db)
	p := payment(m.ID)
	mustApply(t, db, &surgepay.Write{PaymentInsert: p})
	for round := range rounds {
		ws := make([]*surgepay.Write, racers)
		for i := range ws {
			u := captured(p)
			u.Description = fmt.Sprintf("racer %d", i)
			ws[i] = &surgepay.Write{Idempotency: idem(m.ID, fmt.Sprintf("r%d-%d", round, i)),
				PaymentUpdate: u, Events: []*surgepay.Event{event(u, surgepay.TxCapture)}}
		}
		errs := make([]error, racers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range ws {
			wg.Go(func() {
				<-start
				errs[i] = db.Apply(context.Background(), ws[i])
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range errs {
			if err == nil {
				if winner >= 0 {
					t.Fatalf("round %d: racers %d and %d both stored version %d", round, winner, i, p.Version+1)
				}
				winner = i
				continue
			}
			wantCode(t, fmt.Sprintf("round %d racer %d", round, i), err, surgepay.ECONFLICT, "concurrent_update")
			if idemStored(t, db, ws[i].Idempotency) {
				t.Errorf("round %d: loser %d's idempotency key is stored", round, i)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no racer won", round)
		}
		got, err := db.FindPayment(context.Background(), m.ID, p.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Version != p.Version+1 || got.Description != fmt.Sprintf("racer %d", winner) {
			t.Fatalf("round %d: stored version %d %q, want version %d by racer %d",
				round, got.Version, got.Description, p.Version+1, winner)
		}
		if n := eventCount(t, db, p); n != round+1 {
			t.Fatalf("round %d: %d events, want %d", round, n, round+1)
		}
		p = got
	}
}

// 200 concurrent Applies are all durable: a second store on the same
// schema, with its own connections, sees every one.
func TestApply200ConcurrentDurable(t *testing.T) {
	const writes = 200
	cfg := postgres.Config{DSN: testDSN(t), Schema: newSchema(t), Writers: 4}
	db := openAt(t, cfg)
	m := newMerchant(t, db)
	ps := make([]*surgepay.Payment, writes)
	ws := make([]*surgepay.Write, writes)
	for i := range ws {
		ws[i], ps[i] = purchase(m.ID)
	}
	var wg sync.WaitGroup
	errs := make([]error, writes)
	for i := range ws {
		wg.Go(func() { errs[i] = db.Apply(context.Background(), ws[i]) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	db.Close()

	other := openAt(t, cfg)
	for i, p := range ps {
		if findVersion(t, other, p) != 1 || eventCount(t, other, p) != 2 || !idemStored(t, other, ws[i].Idempotency) {
			t.Fatalf("write %d not durable whole", i)
		}
	}
}

func TestStatementCounts(t *testing.T) {
	db := openTest(t, postgres.Config{})
	m := newMerchant(t, db)
	type kinds struct{ total, sel, ins, upd, del int64 }
	counted := func(fn func(ctx context.Context) error) (kinds, error) {
		c := &surgepay.StatementCounter{}
		err := fn(surgepay.WithStatementCounter(context.Background(), c))
		return kinds{c.Total(), c.Kind(surgepay.StmtSelect), c.Kind(surgepay.StmtInsert),
			c.Kind(surgepay.StmtUpdate), c.Kind(surgepay.StmtDelete)}, err
	}
	w, p := purchase(m.ID)
	u := captured(p)
	u.Version = 2 // stale once "Update" has stored version 2
	tests := []struct {
		name    string
		fn      func(ctx context.Context) error
		want    kinds
		wantErr bool
	}{
		{"Purchase", func(ctx context.Context) error { return db.Apply(ctx, w) }, kinds{2, 0, 2, 0, 0}, false},
		{"Update", func(ctx context.Context) error {
			u := captured(p)
			return db.Apply(ctx, &surgepay.Write{Idempotency: idem(m.ID, "u"), PaymentUpdate: u,
				Events: []*surgepay.Event{event(u, surgepay.TxCapture)}})
		}, kinds{3, 0, 2, 1, 0}, false},
		// A failed row guard: its idempotency row is deleted again, and a
		// SELECT tells ECONFLICT from ENOTFOUND.
		{"UpdateStale", func(ctx context.Context) error {
			return db.Apply(ctx, &surgepay.Write{Idempotency: idem(m.ID, "s"), PaymentUpdate: u,
				Events: []*surgepay.Event{event(u, surgepay.TxCapture)}})
		}, kinds{4, 1, 1, 1, 1}, true},
		{"FindPayment", func(ctx context.Context) error { _, err := db.FindPayment(ctx, m.ID, p.ID); return err },
			kinds{1, 1, 0, 0, 0}, false},
		{"ListPayments", func(ctx context.Context) error {
			_, _, err := db.ListPayments(ctx, m.ID, surgepay.PaymentFilter{CustomerID: "c", CreatedGTE: now().Add(-time.Hour)})
			return err
		}, kinds{1, 1, 0, 0, 0}, false},
		{"DeleteIdempotencyBefore", func(ctx context.Context) error {
			_, err := db.DeleteIdempotencyBefore(ctx, now().Add(-time.Hour), 10)
			return err
		}, kinds{1, 0, 0, 0, 1}, false},
	}
	for _, tc := range tests {
		got, err := counted(tc.fn)
		if (err != nil) != tc.wantErr {
			t.Fatalf("%s: error %v, want error %v", tc.name, err, tc.wantErr)
		}
		if got != tc.want {
			t.Errorf("%s: statements {total select insert update delete} = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A full queue answers at once with EUNAVAILABLE and a retry hint.
func TestApplyQueueFull(t *testing.T) {
	schema := newSchema(t)
	cfg := postgres.Config{DSN: withAppName(testDSN(t), schema), Schema: schema,
		Writers: 1, BatchSizeMax: 1, QueueDepthMax: 1}
	db := openAt(t, cfg)
	ctx := context.Background()
	m := newMerchant(t, db)
	c := customer(m.ID)
	mustApply(t, db, &surgepay.Write{CustomerInsert: c})

	// Hold the customer's row lock so that the only committer blocks.
	conn, tx := lockRow(t, cfg, "customers", c.ID)
	cu := *c
	cu.Version = 2
	blocked := make(chan error, 2)
	go func() { blocked <- db.Apply(ctx, &surgepay.Write{CustomerUpdate: &cu}) }()
	waitFor(t, func() bool { return db.QueueDepth() == 0 && waiting(t, conn, schema) })
	go func() {
		blocked <- db.Apply(ctx, &surgepay.Write{Merchant: &surgepay.Merchant{ID: surgepay.NewID("mch")}})
	}()
	waitFor(t, func() bool { return db.QueueDepth() == 1 })

	err := db.Apply(ctx, &surgepay.Write{Merchant: &surgepay.Merchant{ID: surgepay.NewID("mch")}})
	wantCode(t, "Apply(queue full)", err, surgepay.EUNAVAILABLE, "write_queue_full")
	if se := (*surgepay.Error)(nil); !errors.As(err, &se) || se.RetryAfter != 1 {
		t.Errorf("got %#v, want RetryAfter 1", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := <-blocked; err != nil {
			t.Errorf("blocked Apply: %v", err)
		}
	}
}

// A batch whose connection breaks before COMMIT is retried on a fresh
// connection: the caller sees success, not the broken connection.
func TestApplyRetriesAfterConnectionLoss(t *testing.T) {
	schema := newSchema(t)
	cfg := postgres.Config{DSN: withAppName(testDSN(t), schema), Schema: schema, Writers: 1}
	db := openAt(t, cfg)
	ctx := context.Background()
	m := newMerchant(t, db)
	c := customer(m.ID)
	mustApply(t, db, &surgepay.Write{CustomerInsert: c})

	conn, tx := lockRow(t, cfg, "customers", c.ID)
	cu := *c
	cu.Name, cu.Version = "after reconnect", 2
	done := make(chan error, 1)
	go func() { done <- db.Apply(ctx, &surgepay.Write{CustomerUpdate: &cu}) }()
	waitFor(t, func() bool { return waiting(t, conn, schema) })
	if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE application_name = $1 AND wait_event_type = 'Lock'`, schema); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { // the retry, on a new connection
		select {
		case err := <-done:
			t.Fatalf("Apply returned %v before the lock was released", err)
		default:
		}
		return waiting(t, conn, schema)
	})
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Apply: %v", err)
	}
	got, err := db.FindCustomer(ctx, m.ID, c.ID)
	if err != nil || got.Version != 2 || got.Name != cu.Name {
		t.Fatalf("FindCustomer = %+v, %v; want version 2", got, err)
	}
}

// withAppName sets the DSN's application_name, so that a test finds its
// own backends in pg_stat_activity and no one else's.
func withAppName(dsn, name string) string {
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return dsn + sep + "application_name=" + name
}

// lockRow locks a row of table in cfg's schema in a transaction of another
// connection, which the caller rolls back to release it. It also returns a
// third connection to watch pg_stat_activity from: inside a transaction,
// pg_stat_activity is a snapshot that does not change.
func lockRow(t *testing.T, cfg postgres.Config, table, id string) (monitor *pgx.Conn, tx pgx.Tx) {
	t.Helper()
	ctx := context.Background()
	connect := func() *pgx.Conn {
		conn, err := pgx.Connect(ctx, cfg.DSN)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close(ctx) })
		return conn
	}
	monitor = connect()
	tx, err := connect().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(ctx) }) // a no-op once the caller rolled back; else the close of its connection ends the hold
	q := "SELECT 1 FROM " + pgx.Identifier{cfg.Schema, table}.Sanitize() + " WHERE id = $1 FOR UPDATE"
	if _, err := tx.Exec(ctx, q, id); err != nil {
		t.Fatal(err)
	}
	return monitor, tx
}

// waiting reports whether a backend named appName waits for a lock.
func waiting(t *testing.T, conn *pgx.Conn, appName string) bool {
	var n int
	err := conn.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
		WHERE application_name = $1 AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()`, appName).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n > 0
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 10s")
		}
	}
}

// Nodes starting at once apply each migration once.
func TestOpenConcurrentMigrations(t *testing.T) {
	cfg := postgres.Config{DSN: testDSN(t), Schema: newSchema(t)}
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Go(func() {
			db, err := postgres.Open(context.Background(), cfg)
			if err == nil {
				db.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("Open: %v", err)
	}
	conn, err := pgx.Connect(context.Background(), cfg.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM "+cfg.Schema+".schema_migrations").Scan(&n); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("migrations/*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("migrations: %v, %d files", err, len(files))
	}
	if n != len(files) {
		t.Errorf("schema_migrations has %d rows, want %d, one per migration", n, len(files))
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  postgres.Config
		want string // in the error; "" for no error
	}{
		{"OK", postgres.Config{DSN: "postgres://x"}, ""},
		{"ErrDSNMissing", postgres.Config{}, "DSN"},
		{"ErrSchemaInvalid", postgres.Config{DSN: "postgres://x", Schema: "Bad; DROP"}, "Schema"},
		{"ErrPoolSmallerThanWriters", postgres.Config{DSN: "postgres://x", PoolConnsMax: 4, Writers: 4}, "PoolConnsMax"},
		{"ErrNegative", postgres.Config{DSN: "postgres://x", FlushInterval: -1}, "negative"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("got %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want an error about %s", err, tc.want)
			}
		})
	}
}

// An error opening the store never shows the DSN's password.
func TestOpenErrHidesPassword(t *testing.T) {
	for _, dsn := range []string{"postgres://u:s3cr3t-pw@127.0.0.1:1/db?connect_timeout=1", "postgres://u:s3cr3t-pw@[::1"} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := postgres.Open(ctx, postgres.Config{DSN: dsn})
		cancel()
		if err == nil {
			t.Fatalf("Open(%q) succeeded, want an error", dsn)
		}
		if strings.Contains(err.Error(), "s3cr3t-pw") {
			t.Errorf("error shows the password: %v", err)
		}
	}
}

// A migration missing below the newest applied one (it landed after a
// later-numbered one was deployed) is refused at open, never skipped.
func TestMigrationOutOfOrderRefused(t *testing.T) {
	cfg := postgres.Config{DSN: testDSN(t), Schema: newSchema(t)}
	db, err := postgres.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	conn, err := pgx.Connect(context.Background(), cfg.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), "DELETE FROM "+cfg.Schema+".schema_migrations WHERE version = 2"); err != nil {
		t.Fatal(err)
	}
	db, err = postgres.Open(context.Background(), cfg)
	if err == nil {
		db.Close()
		t.Fatal("Open with migration 2 missing below later ones: nil error, want a refusal")
	}
	if !strings.Contains(err.Error(), "0002") || !strings.Contains(err.Error(), "later one") {
		t.Fatalf("Open: %v; want it to name 0002 and the later migration", err)
	}
}
