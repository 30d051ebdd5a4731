package postgres_test

import (
	"testing"
	"time"

	"github.com/surgepay/surgepay/postgres"
)

// TestLease: one holder at a time; the holder renews; another takes an
// ended lease over, and a released one at once; a lease of one name says
// nothing of another's.
func TestLease(t *testing.T) {
	db := openTest(t, postgres.Config{})
	ctx := t.Context()
	take := func(name, holder string, ttl time.Duration) bool {
		t.Helper()
		ok, err := db.Lease(ctx, name, holder, ttl)
		if err != nil {
			t.Fatalf("Lease(%s, %s): %v", name, holder, err)
		}
		return ok
	}
	if !take("reconciler", "a", time.Minute) {
		t.Fatal("a did not take a lease no one held")
	}
	if take("reconciler", "b", time.Minute) {
		t.Fatal("b took a lease a holds")
	}
	if !take("reconciler", "a", time.Minute) {
		t.Fatal("a could not renew its lease")
	}
	if !take("purge", "b", time.Minute) {
		t.Fatal("b did not take another name's lease")
	}
	if err := db.ReleaseLease(ctx, "reconciler", "b"); err != nil {
		t.Fatal(err)
	}
	if take("reconciler", "b", time.Minute) {
		t.Fatal("b took a's lease after releasing a lease it did not hold")
	}
	if err := db.ReleaseLease(ctx, "reconciler", "a"); err != nil {
		t.Fatal(err)
	}
	if !take("reconciler", "b", 50*time.Millisecond) {
		t.Fatal("b did not take a lease a released")
	}
	// b stops renewing (it died or froze): once its lease ends, a has it.
	deadline := time.Now().Add(30 * time.Second)
	for !take("reconciler", "a", time.Minute) {
		if time.Now().After(deadline) { // a hang guard: b's lease is 50 ms
			t.Fatal("a could not take b's lease 30 s after it ended")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if take("reconciler", "b", time.Minute) {
		t.Fatal("b took its lease back from a")
	}
	if _, err := db.Lease(ctx, "x", "a", 0); err == nil {
		t.Error("Lease with a ttl of 0: no error")
	}
}
