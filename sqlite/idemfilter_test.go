package sqlite

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
)

// TestBloom: a filter takes the bits of the keys it is built for, to the
// word; no added hash is ever reported absent; at capacity about 1 % of
// other hashes are reported present; the filter is full past its
// capacity, and a full filter asks for a rebuild once.
func TestBloom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	b := newBloom(100_000)
	if b.capacity < 100_000 || len(b.words)*64 > 100_000*idemFilterBitsPerKey+64 {
		t.Fatalf("capacity %d in %d bits for 100,000 keys: want at least the keys, at %d bits a key",
			b.capacity, len(b.words)*64, idemFilterBitsPerKey)
	}
	added := make([]int64, b.capacity)
	for i := range added {
		added[i] = int64(r.Uint64())
		b.add(added[i])
	}
	for _, h := range added {
		if !b.mayContain(h) {
			t.Fatalf("added hash %x reported absent", h)
		}
	}
	fp := 0
	const tries = 200_000
	for range tries {
		if b.mayContain(int64(r.Uint64())) {
			fp++
		}
	}
	if rate := float64(fp) / tries; rate > 0.02 || rate == 0 {
		t.Errorf("false positives %.4f at capacity, want about 0.01", rate)
	}
	if b.full() {
		t.Error("full at capacity")
	}
	b.add(1)
	if !b.full() {
		t.Error("not full past capacity")
	}

	f := newIdemFilter()
	f.cur.Store(newBloom(10))
	small := f.cur.Load().capacity
	f.add(int(small)+1, func(i int) int64 { return int64(i) })
	select {
	case <-f.build:
	default:
		t.Fatal("a full filter did not ask for a rebuild")
	}
	next := newBloom(1000)
	f.next = next
	f.add(1, func(int) int64 { return 42 })
	if !next.mayContain(42) || !f.cur.Load().mayContain(42) {
		t.Error("a hash added during a build is not in both filters")
	}
}

// TestFindIdempotencyNewKeyWithoutTheTableLock: a lookup of a new key is
// answered by the filter without the memory table's lock, which the
// writer takes after each commit (readers queued on it held the writer
// up under load); a stored key in the memory table is still found, once
// the lock is free.
func TestFindIdempotencyNewKeyWithoutTheTableLock(t *testing.T) {
	db, err := Open(t.Context(), Config{Path: filepath.Join(t.TempDir(), "surgepay.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := time.Now().UTC()
	m := &surgepay.Merchant{ID: surgepay.NewID("mch"), Name: "m", Created: now}
	if err := db.Apply(t.Context(), &surgepay.Write{Merchant: m}); err != nil {
		t.Fatal(err)
	}
	p := &surgepay.Payment{ID: surgepay.NewID("pay"), MerchantID: m.ID, PaymentMethodID: surgepay.NewID("pm"),
		Amount: 1999, Currency: "usd", CaptureMethod: surgepay.CaptureAutomatic, Status: surgepay.StatusSucceeded,
		AmountAuthorized: 1999, AmountCaptured: 1999, Path: "streamlined", Version: 1, Created: now, Updated: now}
	key := surgepay.NewID("idem")
	sale := &surgepay.Write{PaymentInsert: p, Idempotency: &surgepay.IdempotencyRecord{MerchantID: m.ID, Key: key,
		StatusCode: 201, Body: []byte(`{"status":"succeeded"}`), Created: now}}
	if err := db.Apply(t.Context(), sale); err != nil {
		t.Fatal(err)
	}

	x := db.writer.idem
	// Open builds the first filter in the background: wait for it (a
	// hang guard, not a measurement); until it is built every lookup
	// reads the memory tables, under their lock.
	for deadline := time.Now().Add(time.Minute); x.filter.cur.Load() == nil; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first filter was not built within a minute of Open")
		}
	}
	x.mu.Lock()
	found := make(chan error, 1)
	go func() {
		_, err := db.FindIdempotency(context.Background(), m.ID, key)
		found <- err
	}()
	newKey := make(chan error, 1)
	go func() {
		_, err := db.FindIdempotency(context.Background(), m.ID, surgepay.NewID("idem"))
		newKey <- err
	}()
	select {
	case err := <-newKey:
		if surgepay.ErrorCode(err) != surgepay.ENOTFOUND {
			t.Errorf("FindIdempotency(new key) = %v, want ENOTFOUND", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("FindIdempotency(new key) waited for the memory table's lock")
	}
	x.mu.Unlock()
	if err := <-found; err != nil {
		t.Errorf("FindIdempotency(stored key, in the memory table) = %v", err)
	}
}
