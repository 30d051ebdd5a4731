package sim_test

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/provider/sim"
)

// recordBytesMax is the heap an approved sale may take in the simulator,
// its key and payment ID included, and recordsHeapMax the heap of
// RecordsMaxDefault of them: the simulator's share of the 256 MB `surgepay
// serve` must stay within (docs/simulator.md, Memory).
const (
	recordBytesMax = 140
	recordsHeapMax = 28 << 20
)

// heapInUse returns the bytes of live heap objects after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// saleAt is a sale as the engine sends it: a fresh 40-byte key, a 30-byte
// payment ID, the card number and currency decoded for this request.
func saleAt(i int) *surgepay.AuthorizeRequest {
	id := fmt.Sprintf("pay_%026d", i)
	return &surgepay.AuthorizeRequest{
		IdempotencyKey: fmt.Sprintf("%s/auth_%04d", id, i%10_000), MerchantID: "mer_1", PaymentID: id,
		Amount: 1000 + int64(i%5000), Currency: strings.Clone("usd"), Capture: true,
		Card: surgepay.ProviderCard{Number: surgepay.PAN(strings.Clone(visa)), ExpMonth: 12, ExpYear: 2034},
	}
}

// TestRecordBytes measures the heap a stored sale takes at
// RecordsMaxDefault once every shard holds its share, the steady state of
// a long run, and checks it against recordBytesMax and recordsHeapMax.
func TestRecordBytes(t *testing.T) {
	if testing.Short() {
		t.Skip("fills the simulator with RecordsMaxDefault records")
	}
	if len(saleAt(0).IdempotencyKey) != 40 || len(saleAt(0).PaymentID) != 30 {
		t.Fatalf("key %q and payment ID %q: want 40 and 30 bytes", saleAt(0).IdempotencyKey, saleAt(0).PaymentID)
	}
	before := heapInUse()
	p := sim.New(sim.DefaultConfig())
	// Half as many again as the bound: every shard fills and evicts.
	for i := range sim.RecordsMaxDefault * 3 / 2 {
		res, err := p.Authorize(t.Context(), saleAt(i))
		if err != nil || !res.Approved {
			t.Fatalf("sale %d: %+v, %v", i, res, err)
		}
	}
	heap := heapInUse() - before
	tot := p.TotalEffects()
	if tot.Records != sim.RecordsMaxDefault {
		t.Fatalf("records: got %d, want every shard full: %d", tot.Records, sim.RecordsMaxDefault)
	}
	perRecord := float64(heap) / float64(tot.Records)
	t.Logf("%.0f heap bytes per stored sale, %.1f MiB for %d (40-byte keys, 30-byte payment IDs)",
		perRecord, float64(heap)/(1<<20), tot.Records)
	if perRecord > recordBytesMax || heap > recordsHeapMax {
		t.Errorf("%.0f heap bytes per stored sale, %d in all; want at most %d and %d", perRecord, heap, recordBytesMax, recordsHeapMax)
	}
	runtime.KeepAlive(p)
}

// TestReplayOddParameters replays operations whose parameters do not fit
// the compact record (a currency that is not three lower-case letters, a
// card number shorter than four digits, a reference written otherwise than
// the simulator writes it, one it never wrote): the same parameters get the
// same answer, and changing any of them is a reused key.
func TestReplayOddParameters(t *testing.T) {
	providers(t, sim.DefaultConfig(), func(t *testing.T, p *sim.Provider, c surgepay.Provider) {
		ctx := t.Context()
		upper := authReq("upper", visa, 1000, false)
		upper.Currency = "USD" // valid, and kept as sent: captures must repeat it.
		auth, err := c.Authorize(ctx, upper)
		if err != nil || !auth.Approved {
			t.Fatalf("authorize in USD: %+v, %v", auth, err)
		}
		i := strings.LastIndexByte(auth.Reference, '_')
		padded := auth.Reference[:i+1] + "0" + auth.Reference[i+1:] // the same number, written otherwise.
		badCurrency := authReq("badcur", visa, 1000, false)
		badCurrency.Currency = "usdx"
		calls := []struct {
			name    string
			call    func(key string) (*surgepay.ProviderResult, error)
			changed func(key string) (*surgepay.ProviderResult, error)
			approve bool
		}{
			{"CurrencyNotThreeBytes", func(string) (*surgepay.ProviderResult, error) { return c.Authorize(ctx, badCurrency) },
				func(string) (*surgepay.ProviderResult, error) {
					return c.Authorize(ctx, authReq("badcur", visa, 1000, false))
				}, false},
			{"ShortCardNumber", func(string) (*surgepay.ProviderResult, error) {
				return c.Authorize(ctx, authReq("short", "424", 1000, false))
			}, func(string) (*surgepay.ProviderResult, error) {
				return c.Authorize(ctx, authReq("short", "4242", 1000, false))
			}, false},
			{"CaptureWrongCase", func(key string) (*surgepay.ProviderResult, error) {
				return c.Capture(ctx, &surgepay.CaptureRequest{IdempotencyKey: key, AuthorizationRef: auth.Reference, Amount: 500, Currency: "usd"})
			}, func(key string) (*surgepay.ProviderResult, error) {
				return c.Capture(ctx, &surgepay.CaptureRequest{IdempotencyKey: key, AuthorizationRef: auth.Reference, Amount: 500, Currency: "USD"})
			}, false},
			{"CapturePaddedReference", func(key string) (*surgepay.ProviderResult, error) {
				return c.Capture(ctx, &surgepay.CaptureRequest{IdempotencyKey: key, AuthorizationRef: padded, Amount: 500, Currency: "USD"})
			}, func(key string) (*surgepay.ProviderResult, error) {
				return c.Capture(ctx, &surgepay.CaptureRequest{IdempotencyKey: key, AuthorizationRef: auth.Reference, Amount: 500, Currency: "USD"})
			}, true},
			{"RefundNoCurrency", func(key string) (*surgepay.ProviderResult, error) {
				return c.Refund(ctx, &surgepay.RefundRequest{IdempotencyKey: key, AuthorizationRef: auth.Reference, Amount: 100})
			}, func(key string) (*surgepay.ProviderResult, error) {
				return c.Refund(ctx, &surgepay.RefundRequest{IdempotencyKey: key, AuthorizationRef: auth.Reference, Amount: 100, Currency: "USD"})
			}, false},
			{"VoidUnknownReference", func(key string) (*surgepay.ProviderResult, error) {
				return c.Void(ctx, &surgepay.VoidRequest{IdempotencyKey: key, AuthorizationRef: "auth_nope"})
			}, func(key string) (*surgepay.ProviderResult, error) {
				return c.Void(ctx, &surgepay.VoidRequest{IdempotencyKey: key, AuthorizationRef: auth.Reference})
			}, false},
		}
		for _, tc := range calls {
			t.Run(tc.name, func(t *testing.T) {
				first, err := tc.call(tc.name)
				if err != nil || first.Approved != tc.approve {
					t.Fatalf("first call: %+v, %v; want approved %v", first, err, tc.approve)
				}
				again, err := tc.call(tc.name)
				if err != nil {
					t.Fatalf("replay: %v", err)
				}
				if diff := cmp.Diff(first, again); diff != "" {
					t.Errorf("replay answered otherwise (-first +replay):\n%s", diff)
				}
				_, err = tc.changed(tc.name)
				wantProviderError(t, "changed parameters", err, surgepay.NotPerformed, sim.ErrKeyReused)
			})
		}
		// The padded reference captured the authorization, once.
		if e := p.Effects("pay_upper"); e.Captures != 1 || e.AmountCaptured != 500 || e.Currency != "USD" {
			t.Fatalf("effects: got %+v, want one capture of 500 USD", e)
		}
	})
}

// TestLongKeyAndPaymentID: a record keeps a digest of its key and, in
// place, a payment ID of up to 32 bytes. A key of the longest length, a
// payment ID longer than 32 bytes and another sharing its first 32 bytes
// each replay, look up, capture and count their effects as short ones do.
func TestLongKeyAndPaymentID(t *testing.T) {
	providers(t, sim.DefaultConfig(), func(t *testing.T, p *sim.Provider, c surgepay.Provider) {
		ctx := t.Context()
		key := strings.Repeat("k", surgepay.IdempotencyKeyBytesMax)
		long := "pay_" + strings.Repeat("0", 28) + "first-payment" // 45 bytes, past the 32 kept in place.
		other := long[:32] + "other-payment"
		req := authReq("x", visa, 1000, false)
		req.IdempotencyKey, req.PaymentID = key, long
		auth, err := c.Authorize(ctx, req)
		if err != nil || !auth.Approved || auth.PaymentID != long {
			t.Fatalf("authorize: %+v, %v; want approved for %s", auth, err, long)
		}
		again, err := c.Authorize(ctx, req)
		if err != nil || !cmp.Equal(auth, again) {
			t.Fatalf("replay: %+v, %v; want %+v", again, err, auth)
		}
		// A key one byte shorter is another key.
		req2 := authReq("x", visa, 700, true)
		req2.IdempotencyKey, req2.PaymentID = key[1:], other
		sale, err := c.Authorize(ctx, req2)
		if err != nil || !sale.Approved || sale.Reference == auth.Reference || sale.PaymentID != other {
			t.Fatalf("sale under the shorter key: %+v, %v; want a new sale for %s", sale, err, other)
		}
		if got, err := c.Lookup(ctx, key); err != nil || got.Reference != auth.Reference || got.PaymentID != long {
			t.Fatalf("lookup: %+v, %v; want %s of %s", got, err, auth.Reference, long)
		}
		capture, err := c.Capture(ctx, &surgepay.CaptureRequest{IdempotencyKey: key[2:], AuthorizationRef: auth.Reference, Amount: 600, Currency: "usd"})
		if err != nil || !capture.Approved {
			t.Fatalf("capture: %+v, %v", capture, err)
		}
		if e := p.Effects(long); e.Authorizations != 1 || e.AmountAuthorized != 1000 || e.AmountCaptured != 600 {
			t.Fatalf("effects of %s: %+v, want 1000 authorized, 600 captured", long, e)
		}
		if e := p.Effects(other); e.Authorizations != 1 || e.AmountCaptured != 700 {
			t.Fatalf("effects of %s: %+v, want the sale of 700", other, e)
		}
		if e := p.Effects(long[:32]); e != (sim.Effects{}) {
			t.Fatalf("effects of the shared 32-byte prefix: %+v, want none", e)
		}
	})
}

// TestEffectsOfOnePaymentUnderEviction authorizes one payment ID many
// times under different keys while records are evicted: its effects count
// exactly the authorizations still stored.
func TestEffectsOfOnePaymentUnderEviction(t *testing.T) {
	p := sim.New(sim.Config{RecordsMax: 64 * 4})
	ctx := t.Context()
	for i := range 3000 {
		req := authReq(fmt.Sprint("k", i), visa, 10, true)
		req.PaymentID = "pay_same"
		if _, err := p.Authorize(ctx, req); err != nil {
			t.Fatal(err)
		}
		if i%101 != 0 {
			continue
		}
		e, tot := p.Effects("pay_same"), p.TotalEffects()
		if int64(e.Authorizations) != tot.Records || int64(e.Captures) != tot.Records || e.AmountCaptured != 10*tot.Records {
			t.Fatalf("after %d: effects %+v, want the %d stored sales", i+1, e, tot.Records)
		}
	}
}

// fakeClock is a clock that tests move forward by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock(p *sim.Provider) *fakeClock {
	c := &fakeClock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	p.SetClock(c.now)
	return c
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// TestExpiry stores a sale and an authorization, and checks that within
// the retention they replay and can be captured, and that past it they
// are forgotten as evicted records are: Lookup finds nothing, a capture is
// declined as an unknown authorization, Effects drops them, and
// RecordsExpired counts them.
func TestExpiry(t *testing.T) {
	cfg := sim.DefaultConfig()
	cfg.Retention = sim.Duration(time.Hour)
	providers(t, cfg, func(t *testing.T, p *sim.Provider, c surgepay.Provider) {
		clock := newFakeClock(p)
		ctx := t.Context()
		sale, err := c.Authorize(ctx, authReq("sale", visa, 1000, true))
		if err != nil || !sale.Approved {
			t.Fatalf("sale: %+v, %v", sale, err)
		}
		hold, err := c.Authorize(ctx, authReq("hold", visa, 800, false))
		if err != nil || !hold.Approved {
			t.Fatalf("authorization: %+v, %v", hold, err)
		}

		clock.advance(time.Hour - time.Second) // within the retention.
		again, err := c.Authorize(ctx, authReq("sale", visa, 1000, true))
		if err != nil || !cmp.Equal(sale, again) {
			t.Fatalf("replay within the retention: got %+v, %v; want %+v", again, err, sale)
		}
		if got, err := c.Lookup(ctx, "hold"); err != nil || got.Reference != hold.Reference {
			t.Fatalf("lookup within the retention: got %+v, %v", got, err)
		}
		if e := p.Effects("pay_sale"); e.Authorizations != 1 || e.Captures != 1 {
			t.Fatalf("effects within the retention: got %+v, want the sale", e)
		}

		clock.advance(2 * time.Second) // an hour and a second after they were stored.
		for _, key := range []string{"sale", "hold"} {
			_, err := c.Lookup(ctx, key)
			wantProviderError(t, "lookup of "+key+" past the retention", err, surgepay.NotPerformed, sim.ErrNoSuchOperation)
		}
		capture, err := c.Capture(ctx, &surgepay.CaptureRequest{IdempotencyKey: "hold/capture",
			AuthorizationRef: hold.Reference, Amount: 800, Currency: "usd"})
		if err != nil || capture.Approved || capture.DeclineCode != sim.DeclineInvalidRequest || capture.Message != "no such authorization" {
			t.Fatalf("capture of an expired authorization: got %+v, %v; want declined as unknown", capture, err)
		}
		if e := p.Effects("pay_sale"); e != (sim.Effects{}) {
			t.Fatalf("effects past the retention: got %+v, want none", e)
		}
		tot := p.TotalEffects()
		if tot.RecordsExpired != 2 || tot.Records != 1 || tot.RecordsEvicted != 0 || tot.Authorizations != 2 || tot.Captures != 1 {
			t.Fatalf("totals: got %+v; want 2 expired, the declined capture stored, the effects kept", tot)
		}
		// The key is forgotten: the sale is performed again.
		fresh, err := c.Authorize(ctx, authReq("sale", visa, 1000, true))
		if err != nil || !fresh.Approved || fresh.Reference == sale.Reference {
			t.Fatalf("sale under an expired key: got %+v, %v; want a new sale", fresh, err)
		}
		if got, err := c.Lookup(ctx, "sale"); err != nil || got.Reference != fresh.Reference {
			t.Fatalf("lookup of the new sale: got %+v, %v", got, err)
		}
	})
}
