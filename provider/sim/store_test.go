package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
)

// TestTable inserts and removes positions at random and checks that the
// table finds exactly the positions it holds. Hashes take 8 values only,
// so runs are long, wrap around the end of the slots and interleave: the
// cases backward-shift deletion must get right.
func TestTable(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	hashes := make([]uint64, 1000) // position → hash
	for i := range hashes {
		hashes[i] = uint64(rng.IntN(8)) << 61 // the top bits pick the home slot.
	}
	hashAt := func(pos uint32) uint64 { return hashes[pos] }
	var tb table
	held := make(map[uint32]bool)
	for step := range 20_000 {
		pos := uint32(rng.IntN(len(hashes)))
		if held[pos] {
			tb.remove(hashes[pos], pos, hashAt)
			delete(held, pos)
		} else {
			tb.insert(hashes[pos], pos, hashAt)
			held[pos] = true
		}
		if step%97 != 0 {
			continue
		}
		if tb.used != len(held) || 2*tb.used > len(tb.slots) {
			t.Fatalf("step %d: %d used in %d slots, want %d and at most half full", step, tb.used, len(tb.slots), len(held))
		}
		for p := range hashes {
			pos := uint32(p)
			_, found := tb.find(hashes[pos], func(q uint32) bool { return q == pos })
			if found != held[pos] {
				t.Fatalf("step %d: position %d found %v, want %v", step, pos, found, held[pos])
			}
		}
	}
	// Removing a position the table does not hold changes nothing.
	used := tb.used
	for p := range hashes {
		if !held[uint32(p)] {
			tb.remove(hashes[p], uint32(p), hashAt)
		}
	}
	if tb.used != used {
		t.Fatalf("removing absent positions: used %d, want %d", tb.used, used)
	}
}

// TestReleaseBoundedPerStore checks that a store releases at most
// releaseStepMax expired records, so no call pays for a long idle period,
// and that stores release them all in a few steps.
func TestReleaseBoundedPerStore(t *testing.T) {
	p := New(Config{Retention: Duration(time.Minute)})
	s := &p.shards[0]
	store := func(key string, now uint32) {
		r := record{key: digestOf(key), op: opCapture}
		s.store(&r, nil, now)
	}
	for i := range 100 {
		store(fmt.Sprint("old", i), 0)
	}
	late := uint32(61) // 61 s later: every old record is expired.
	store("new0", late)
	if got := s.count(); got != 100-releaseStepMax+1 {
		t.Fatalf("after one store: %d records, want %d: at most %d released", got, 100-releaseStepMax+1, releaseStepMax)
	}
	for i := 1; i <= 100/releaseStepMax; i++ {
		store(fmt.Sprint("new", i), late)
	}
	if got, want := s.count(), 100/releaseStepMax+1; got != want || s.totals.RecordsExpired != 100 {
		t.Fatalf("after %d stores: %d records and %d expired, want %d and 100", want, got, s.totals.RecordsExpired, want)
	}
	if _, ok := s.find(digestOf("old99"), late); ok {
		t.Fatal("an expired key is found")
	}
	if _, ok := s.find(digestOf("new0"), late); !ok {
		t.Fatal("a live key is not found")
	}
}

// TestRecordHoldsNoPointer: a record has no field the collector must
// follow, so the rings of hundreds of thousands of records are never
// scanned (docs/simulator.md, Memory). A string, slice, map or pointer
// added to record fails here.
func TestRecordHoldsNoPointer(t *testing.T) {
	var pointerFree func(reflect.Type) bool
	pointerFree = func(ty reflect.Type) bool {
		switch ty.Kind() {
		case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
			return true
		case reflect.Array:
			return pointerFree(ty.Elem())
		case reflect.Struct:
			for i := range ty.NumField() {
				if !pointerFree(ty.Field(i).Type) {
					t.Errorf("record field %s is a %s", ty.Field(i).Name, ty.Field(i).Type)
					return false
				}
			}
			return true
		}
		return false
	}
	pointerFree(reflect.TypeFor[record]())
}

// TestRareFieldsLeaveWithTheirRecords: declined operations and long
// payment IDs keep rare fields in the shard's map; evicted and expired
// records take theirs with them, so the map is bounded by the records.
func TestRareFieldsLeaveWithTheirRecords(t *testing.T) {
	p := New(Config{RecordsMax: shardCount * 8, Retention: Duration(time.Minute)})
	clock := time.Unix(1_900_000_000, 0)
	p.SetClock(func() time.Time { return clock })
	ctx := context.Background()
	authorize := func(i int) {
		req := &surgepay.AuthorizeRequest{IdempotencyKey: fmt.Sprint("k", i), PaymentID: fmt.Sprintf("pay_%040d", i),
			Amount: AmountDecline, Currency: "usd", Card: surgepay.ProviderCard{Number: "4242424242424242", ExpMonth: 1, ExpYear: 2040}}
		if res, err := p.Authorize(ctx, req); err != nil || res.Approved || !strings.HasSuffix(res.PaymentID, fmt.Sprint(i)) {
			t.Fatalf("authorization %d: %+v, %v; want declined, with its payment ID", i, res, err)
		}
	}
	rares := func() (n int) {
		for i := range p.shards {
			n += len(p.shards[i].rares)
		}
		return n
	}
	for i := range 5000 { // evicted: far more than RecordsMax
		authorize(i)
	}
	if got, want := rares(), int(p.TotalEffects().Records); got != want {
		t.Fatalf("after eviction: %d rare entries for %d records, want one each", got, want)
	}
	clock = clock.Add(2 * time.Minute)
	p.TotalEffects() // releases every expired record
	if got := rares(); got != 0 {
		t.Fatalf("after expiry: %d rare entries, want none", got)
	}
}
