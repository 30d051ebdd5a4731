package sim_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/provider/sim"
)

const visa = "4242424242424242"

func authReq(key, number string, amount int64, capture bool) *surgepay.AuthorizeRequest {
	return &surgepay.AuthorizeRequest{
		IdempotencyKey: key, MerchantID: "mer_1", PaymentID: "pay_" + key,
		Amount: amount, Currency: "usd", Capture: capture,
		Card: surgepay.ProviderCard{Number: surgepay.PAN(number), ExpMonth: 12, ExpYear: 2034, CVC: "123"},
	}
}

func wantProviderError(t *testing.T, what string, err error, outcome string, target error) {
	t.Helper()
	var pe *surgepay.ProviderError
	if !errors.As(err, &pe) {
		t.Fatalf("%s: got error %v, want a *surgepay.ProviderError %s", what, err, outcome)
	}
	if pe.Outcome != outcome {
		t.Fatalf("%s: got outcome %s (%v), want %s", what, pe.Outcome, err, outcome)
	}
	if target != nil && !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want %v", what, err, target)
	}
}

// providers runs fn against the simulator in process and over HTTP.
func providers(t *testing.T, cfg sim.Config, fn func(t *testing.T, p *sim.Provider, c surgepay.Provider)) {
	t.Run("InProcess", func(t *testing.T) {
		p := sim.New(cfg)
		fn(t, p, p)
	})
	t.Run("HTTP", func(t *testing.T) {
		p, c := newHTTP(t, cfg)
		fn(t, p, c)
	})
}

func TestAmountTriggers(t *testing.T) {
	providers(t, sim.DefaultConfig(), func(t *testing.T, p *sim.Provider, c surgepay.Provider) {
		ctx := t.Context()
		t.Run("Timeout", func(t *testing.T) {
			_, err := c.Authorize(ctx, authReq("k9101", visa, sim.AmountTimeout, false))
			wantProviderError(t, "authorize 9101", err, surgepay.NotPerformed, sim.ErrTimeout)
			_, err = c.Lookup(ctx, "k9101")
			wantProviderError(t, "lookup after 9101", err, surgepay.NotPerformed, sim.ErrNoSuchOperation)
			if e := p.Effects("pay_k9101"); e != (sim.Effects{}) {
				t.Errorf("effects after 9101: got %+v, want none", e)
			}
		})
		t.Run("Unknown", func(t *testing.T) {
			_, err := c.Authorize(ctx, authReq("k9102", visa, sim.AmountUnknown, false))
			wantProviderError(t, "authorize 9102", err, surgepay.Unknown, nil)
			res, err := c.Lookup(ctx, "k9102")
			if err != nil || !res.Approved || res.Amount != sim.AmountUnknown || res.Operation != surgepay.TxAuthorization {
				t.Fatalf("lookup after 9102: got %+v, %v; want the approved authorization", res, err)
			}
			again, err := c.Authorize(ctx, authReq("k9102", visa, sim.AmountUnknown, false))
			if err != nil || again.Reference != res.Reference {
				t.Fatalf("replay after 9102: got %+v, %v; want reference %s", again, err, res.Reference)
			}
			want := sim.Effects{Authorizations: 1, AmountAuthorized: sim.AmountUnknown, Currency: "usd"}
			if diff := cmp.Diff(want, p.Effects("pay_k9102")); diff != "" {
				t.Errorf("effects after 9102 (-want +got):\n%s", diff)
			}
		})
		t.Run("RateLimited", func(t *testing.T) {
			_, err := c.Authorize(ctx, authReq("k9103", visa, sim.AmountRateLimited, false))
			wantProviderError(t, "authorize 9103", err, surgepay.NotPerformed, sim.ErrRateLimited)
			_, err = c.Lookup(ctx, "k9103")
			wantProviderError(t, "lookup after 9103", err, surgepay.NotPerformed, sim.ErrNoSuchOperation)
		})
		t.Run("Decline", func(t *testing.T) {
			res, err := c.Authorize(ctx, authReq("k9104", visa, sim.AmountDecline, false))
			if err != nil || res.Approved || res.DeclineCode != surgepay.DeclineGeneric {
				t.Fatalf("authorize 9104: got %+v, %v; want declined %s", res, err, surgepay.DeclineGeneric)
			}
			if e := p.Effects("pay_k9104"); e.Authorizations != 0 || e.AuthorizationsDeclined != 1 {
				t.Errorf("effects after 9104: got %+v, want one declined authorization", e)
			}
		})
		t.Run("CaptureAndRefund", func(t *testing.T) {
			a, err := c.Authorize(ctx, authReq("kcap", visa, 20000, false))
			if err != nil || !a.Approved {
				t.Fatalf("authorize: %+v, %v", a, err)
			}
			capture := func(key string, amount int64) (*surgepay.ProviderResult, error) {
				return c.Capture(ctx, &surgepay.CaptureRequest{IdempotencyKey: key, AuthorizationRef: a.Reference, Amount: amount, Currency: "usd"})
			}
			refund := func(key string, amount int64) (*surgepay.ProviderResult, error) {
				return c.Refund(ctx, &surgepay.RefundRequest{IdempotencyKey: key, AuthorizationRef: a.Reference, Amount: amount, Currency: "usd"})
			}
			_, err = capture("c1", sim.AmountTimeout)
			wantProviderError(t, "capture 9101", err, surgepay.NotPerformed, sim.ErrTimeout)
			_, err = capture("c2", sim.AmountRateLimited)
			wantProviderError(t, "capture 9103", err, surgepay.NotPerformed, sim.ErrRateLimited)
			res, err := capture("c3", sim.AmountDecline)
			if err != nil || res.Approved || res.DeclineCode != surgepay.DeclineGeneric {
				t.Fatalf("capture 9104: got %+v, %v; want declined", res, err)
			}
			_, err = capture("c4", sim.AmountUnknown)
			wantProviderError(t, "capture 9102", err, surgepay.Unknown, nil)
			if res, err := c.Lookup(ctx, "c4"); err != nil || !res.Approved || res.Operation != surgepay.TxCapture {
				t.Fatalf("lookup capture 9102: got %+v, %v; want approved capture", res, err)
			}
			_, err = refund("r1", sim.AmountTimeout)
			wantProviderError(t, "refund 9101", err, surgepay.NotPerformed, sim.ErrTimeout)
			_, err = refund("r2", sim.AmountUnknown)
			wantProviderError(t, "refund 9102", err, surgepay.Unknown, nil)
			want := sim.Effects{Authorizations: 1, Captures: 1, Refunds: 1, AmountAuthorized: 20000,
				AmountCaptured: sim.AmountUnknown, AmountRefunded: sim.AmountUnknown, Currency: "usd"}
			if diff := cmp.Diff(want, p.Effects("pay_kcap")); diff != "" {
				t.Errorf("effects (-want +got):\n%s", diff)
			}
		})
	})
}

func TestTimeoutLatencyHonoursContext(t *testing.T) {
	cfg := sim.DefaultConfig()
	cfg.TimeoutLatency = sim.Latency{Kind: sim.LatencyFixed, Fixed: time.Minute}
	p := sim.New(cfg)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	_, err := p.Authorize(ctx, authReq("k", visa, sim.AmountTimeout, false))
	wantProviderError(t, "authorize 9101", err, surgepay.NotPerformed, context.DeadlineExceeded)
}

func TestLatencyCancelledIsNotPerformed(t *testing.T) {
	providers(t, sim.Config{Latency: sim.Latency{Kind: sim.LatencyFixed, Fixed: time.Minute}},
		func(t *testing.T, p *sim.Provider, c surgepay.Provider) {
			ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
			defer cancel()
			_, err := c.Authorize(ctx, authReq("k", visa, 1000, false))
			if !surgepay.IsNotPerformed(err) && !surgepay.IsUnknown(err) {
				t.Fatalf("authorize: got %v, want a provider error", err)
			}
			// Cancelled during its latency, the call did nothing: the
			// client may only know Unknown, but the network knows.
			if tot := p.TotalEffects(); tot.Authorizations != 0 || tot.Records != 0 {
				t.Fatalf("after a call cancelled in its latency: got %+v, want nothing stored", tot)
			}
			if _, ok := c.(*sim.Provider); ok && !surgepay.IsNotPerformed(err) {
				t.Fatalf("in process: got %v, want NotPerformed", err)
			}
		})
}

func TestAuthorizeConcurrentOneKey(t *testing.T) {
	providers(t, sim.DefaultConfig(), func(t *testing.T, p *sim.Provider, c surgepay.Provider) {
		const callers = 50
		var wg sync.WaitGroup
		refs := make([]string, callers)
		for i := range callers {
			wg.Go(func() {
				res, err := c.Authorize(t.Context(), authReq("pay_x/authorization", visa, 4200, true))
				if err != nil {
					t.Errorf("caller %d: %v", i, err)
					return
				}
				refs[i] = res.Reference
			})
		}
		wg.Wait()
		for i := range refs {
			if refs[i] != refs[0] {
				t.Fatalf("caller %d: got reference %q, want %q", i, refs[i], refs[0])
			}
		}
		want := sim.Effects{Authorizations: 1, Captures: 1, AmountAuthorized: 4200, AmountCaptured: 4200, Currency: "usd"}
		if diff := cmp.Diff(want, p.Effects("pay_pay_x/authorization")); diff != "" {
			t.Errorf("effects (-want +got):\n%s", diff)
		}
		tot := p.TotalEffects()
		if tot.Authorizations != 1 || tot.Captures != 1 || tot.AmountCaptured["usd"] != 4200 || tot.Records != 1 {
			t.Errorf("totals: got %+v, want one sale of 4200 usd", tot)
		}
	})
}

func TestKeyReusedNamesNoCard(t *testing.T) {
	providers(t, sim.DefaultConfig(), func(t *testing.T, p *sim.Provider, c surgepay.Provider) {
		if _, err := c.Authorize(t.Context(), authReq("k", visa, 1000, false)); err != nil {
			t.Fatal(err)
		}
		other := "5555555555554444"
		_, err := c.Authorize(t.Context(), authReq("k", other, 1000, false))
		wantProviderError(t, "key reused", err, surgepay.NotPerformed, sim.ErrKeyReused)
		for _, n := range []string{visa, other, "424242424242", "555555555555"} {
			if contains(err.Error(), n) {
				t.Fatalf("error %q contains card digits %s", err, n)
			}
		}
	})
}

func contains(s, sub string) bool {
	return len(sub) > 0 && len(s) >= len(sub) && (s == sub || indexOf(s, sub) >= 0)
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

func TestInvalidRequests(t *testing.T) {
	p := sim.New(sim.DefaultConfig())
	ctx := t.Context()
	tests := []struct {
		name string
		req  *surgepay.AuthorizeRequest
		code string
	}{
		{"ErrAmountZero", authReq("a1", visa, 0, false), sim.DeclineInvalidRequest},
		{"ErrAmountTooLarge", authReq("a2", visa, surgepay.AmountMinorMax+1, false), sim.DeclineInvalidRequest},
		{"ErrCurrency", func() *surgepay.AuthorizeRequest { r := authReq("a3", visa, 100, false); r.Currency = "xxx"; return r }(), sim.DeclineInvalidRequest},
		{"ErrLuhn", authReq("a4", "4242424242424241", 100, false), sim.DeclineIncorrectNumber},
		{"ErrDigits", authReq("a5", "4242-4242-4242-4242", 100, false), sim.DeclineIncorrectNumber},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := p.Authorize(ctx, tt.req)
			if err != nil || res.Approved || res.DeclineCode != tt.code {
				t.Fatalf("got %+v, %v; want declined %s", res, err, tt.code)
			}
		})
	}
	t.Run("ErrKeyInvalid", func(t *testing.T) {
		_, err := p.Authorize(ctx, authReq("", visa, 100, false))
		wantProviderError(t, "empty key", err, surgepay.NotPerformed, sim.ErrKeyInvalid)
		long := string(make([]byte, surgepay.IdempotencyKeyBytesMax+1))
		_, err = p.Lookup(ctx, long)
		wantProviderError(t, "long key", err, surgepay.NotPerformed, sim.ErrKeyInvalid)
	})
	t.Run("ErrCurrencyMismatch", func(t *testing.T) {
		a, _ := p.Authorize(ctx, authReq("a6", visa, 100, false))
		res, err := p.Capture(ctx, &surgepay.CaptureRequest{IdempotencyKey: "c6", AuthorizationRef: a.Reference, Amount: 100, Currency: "eur"})
		if err != nil || res.Approved || res.DeclineCode != sim.DeclineInvalidRequest {
			t.Fatalf("got %+v, %v; want declined invalid_request", res, err)
		}
	})
}

func TestOutage(t *testing.T) {
	providers(t, sim.DefaultConfig(), func(t *testing.T, p *sim.Provider, c surgepay.Provider) {
		ctx := t.Context()
		a, err := c.Authorize(ctx, authReq("before", visa, 1000, false))
		if err != nil {
			t.Fatal(err)
		}
		cfg := p.Config()
		cfg.Outage = true
		cfg.Latency = sim.Latency{Kind: sim.LatencyFixed, Fixed: time.Minute} // an outage answers at once.
		if err := p.SetConfig(cfg); err != nil {
			t.Fatal(err)
		}
		calls := map[string]func() error{
			"authorize": func() error { _, err := c.Authorize(ctx, authReq("k", visa, 1000, false)); return err },
			"capture": func() error {
				_, err := c.Capture(ctx, &surgepay.CaptureRequest{IdempotencyKey: "c", AuthorizationRef: a.Reference, Amount: 1000, Currency: "usd"})
				return err
			},
			"void": func() error {
				_, err := c.Void(ctx, &surgepay.VoidRequest{IdempotencyKey: "v", AuthorizationRef: a.Reference})
				return err
			},
			"refund": func() error {
				_, err := c.Refund(ctx, &surgepay.RefundRequest{IdempotencyKey: "r", AuthorizationRef: a.Reference, Amount: 1, Currency: "usd"})
				return err
			},
			"lookup": func() error { _, err := c.Lookup(ctx, "before"); return err },
		}
		for name, call := range calls {
			// A lookup that did not happen says nothing of the operation:
			// unknown, never "not performed" (issue 34: read as "no such
			// operation", it let a router fail over past a charge).
			want := surgepay.NotPerformed
			if name == "lookup" {
				want = surgepay.Unknown
			}
			wantProviderError(t, name, call(), want, sim.ErrOutage)
		}
		cfg.Outage = false
		cfg.Latency = sim.Latency{}
		if err := p.SetConfig(cfg); err != nil {
			t.Fatal(err)
		}
		if err := calls["capture"](); err != nil {
			t.Fatalf("capture after the outage: %v", err)
		}
		if e := p.Effects("pay_before"); e.Captures != 1 {
			t.Fatalf("effects after the outage: got %+v, want one capture", e)
		}
	})
}

func TestRandomFaults(t *testing.T) {
	ctx := t.Context()
	tests := []struct {
		name string
		cfg  sim.Config
		want func(t *testing.T, res *surgepay.ProviderResult, err error)
	}{
		{"DeclineRate", sim.Config{DeclineRate: 1}, func(t *testing.T, res *surgepay.ProviderResult, err error) {
			if err != nil || res.Approved || res.DeclineCode != surgepay.DeclineGeneric {
				t.Fatalf("got %+v, %v; want declined", res, err)
			}
		}},
		{"TimeoutRate", sim.Config{TimeoutRate: 1}, func(t *testing.T, _ *surgepay.ProviderResult, err error) {
			wantProviderError(t, "authorize", err, surgepay.NotPerformed, sim.ErrTimeout)
		}},
		{"RateLimitRate", sim.Config{RateLimitRate: 1}, func(t *testing.T, _ *surgepay.ProviderResult, err error) {
			wantProviderError(t, "authorize", err, surgepay.NotPerformed, sim.ErrRateLimited)
		}},
		{"UnknownRate", sim.Config{UnknownRate: 1}, func(t *testing.T, _ *surgepay.ProviderResult, err error) {
			wantProviderError(t, "authorize", err, surgepay.Unknown, sim.ErrAnswerLost)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := sim.New(tt.cfg)
			res, err := p.Authorize(ctx, authReq("k", visa, 1000, false))
			tt.want(t, res, err)
		})
	}
	t.Run("DeclineDeclinedCardKeepsCode", func(t *testing.T) {
		p := sim.New(sim.Config{DeclineRate: 1})
		res, err := p.Authorize(ctx, authReq("k", "4000000000009995", 1000, false))
		if err != nil || res.DeclineCode != surgepay.DeclineInsufficientFunds {
			t.Fatalf("got %+v, %v; want insufficient_funds", res, err)
		}
	})
}

// outcomes runs n authorizations one at a time and names each outcome.
func outcomes(p *sim.Provider, n int) []string {
	out := make([]string, n)
	for i := range out {
		res, err := p.Authorize(context.Background(), authReq(fmt.Sprint("k", i), visa, 1000, false))
		switch {
		case err != nil:
			out[i] = err.Error()
		case res.Approved:
			out[i] = "approved"
		default:
			out[i] = res.DeclineCode
		}
	}
	return out
}

func TestSeedRepeats(t *testing.T) {
	cfg := sim.Config{Seed: 42, DeclineRate: 0.2, TimeoutRate: 0.2, UnknownRate: 0.2, RateLimitRate: 0.2}
	a, b := outcomes(sim.New(cfg), 500), outcomes(sim.New(cfg), 500)
	if diff := cmp.Diff(a, b); diff != "" {
		t.Fatalf("same seed, different outcomes (-first +second):\n%s", diff)
	}
	counts := map[string]int{}
	for _, o := range a {
		counts[o]++
	}
	if len(counts) != 5 {
		t.Fatalf("got outcomes %v, want five kinds", counts)
	}
	for o, n := range counts {
		if n < 50 || n > 150 {
			t.Errorf("outcome %q: got %d of 500, want about 100", o, n)
		}
	}
	cfg.Seed = 43
	if c := outcomes(sim.New(cfg), 500); cmp.Equal(a, c) {
		t.Fatalf("seeds 42 and 43 gave the same outcomes")
	}
}

func TestSetConfig(t *testing.T) {
	p := sim.New(sim.Config{Seed: 7})
	tests := []struct {
		name string
		cfg  sim.Config
		ok   bool
	}{
		{"OK", sim.Config{DeclineRate: 0.5}, true},
		{"OKSameSeed", sim.Config{Seed: 7, RecordsMax: sim.RecordsMaxDefault}, true},
		{"ErrSeedChange", sim.Config{Seed: 8}, false},
		{"ErrRecordsMaxChange", sim.Config{RecordsMax: 10}, false},
		{"OKSameRetention", sim.Config{Retention: sim.Duration(sim.RetentionDefault)}, true},
		{"ErrRetentionChange", sim.Config{Retention: sim.Duration(time.Hour)}, false},
		{"ErrRetentionUnderMin", sim.Config{Retention: sim.Duration(sim.RetentionMin - time.Second)}, false},
		{"ErrRetentionOverMax", sim.Config{Retention: sim.Duration(sim.RetentionMax + time.Second)}, false},
		{"ErrRateNegative", sim.Config{DeclineRate: -0.1}, false},
		{"ErrRateSum", sim.Config{DeclineRate: 0.6, TimeoutRate: 0.6}, false},
		{"ErrLatency", sim.Config{Latency: sim.Latency{Kind: sim.LatencyUniform, Min: 2, Max: 1}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := p.SetConfig(tt.cfg)
			if (err == nil) != tt.ok {
				t.Fatalf("got %v, want ok=%v", err, tt.ok)
			}
		})
	}
	if got := p.Config(); got.Seed != 7 || got.RecordsMax != sim.RecordsMaxDefault || got.Retention != sim.Duration(sim.RetentionDefault) {
		t.Fatalf("config: got seed %d records_max %d retention %s, want 7 and the defaults", got.Seed, got.RecordsMax, got.Retention)
	}
}

func TestSetConfigConcurrent(t *testing.T) {
	p := sim.New(sim.Config{Seed: 1})
	ctx, cancel := context.WithCancel(t.Context())
	var wg, writer sync.WaitGroup
	writer.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			cfg := sim.Config{DeclineRate: float64(i%10) / 20, UnknownRate: 0.1,
				Latency: sim.Latency{Kind: sim.LatencyUniform, Max: time.Duration(i%3) * time.Microsecond}}
			if err := p.SetConfig(cfg); err != nil {
				t.Error(err)
				return
			}
		}
	})
	for g := range 4 {
		wg.Go(func() {
			for i := range 500 {
				key := fmt.Sprintf("g%d/%d", g, i)
				res, err := p.Authorize(t.Context(), authReq(key, visa, 1000, false))
				if err == nil && res.Approved {
					_, _ = p.Capture(t.Context(), &surgepay.CaptureRequest{IdempotencyKey: key + "/c", AuthorizationRef: res.Reference, Amount: 1000, Currency: "usd"})
				}
				p.Effects("pay_" + key)
			}
		})
	}
	wg.Wait()
	cancel()
	writer.Wait()
	tot := p.TotalEffects()
	if tot.Authorizations+tot.AuthorizationsDeclined != 2000 {
		t.Fatalf("totals: got %d authorizations and %d declined, want 2000 in all", tot.Authorizations, tot.AuthorizationsDeclined)
	}
}

func TestEviction(t *testing.T) {
	p := sim.New(sim.Config{RecordsMax: 64 * 2}) // two records per shard.
	ctx := t.Context()
	const n = 2000
	var first *surgepay.ProviderResult
	for i := range n {
		res, err := p.Authorize(ctx, authReq(fmt.Sprint("k", i), visa, 1000, false))
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = res
		}
	}
	tot := p.TotalEffects()
	if tot.Records > 128 || tot.Records+tot.RecordsEvicted != n || tot.Authorizations != n || tot.RecordsExpired != 0 {
		t.Fatalf("totals: got records %d evicted %d authorizations %d; want ≤128, %d in all, %d",
			tot.Records, tot.RecordsEvicted, tot.Authorizations, n, n)
	}
	// The first key is long evicted: Lookup forgets it, and its payment's effects go.
	_, err := p.Lookup(ctx, "k0")
	wantProviderError(t, "lookup of an evicted key", err, surgepay.NotPerformed, sim.ErrNoSuchOperation)
	if e := p.Effects("pay_k0"); e != (sim.Effects{}) {
		t.Fatalf("effects of an evicted authorization: got %+v, want none", e)
	}
	// It can no longer be captured: the network answers as for an unknown authorization.
	res, err := p.Capture(ctx, &surgepay.CaptureRequest{IdempotencyKey: "k0/capture", AuthorizationRef: first.Reference, Amount: 1000, Currency: "usd"})
	if err != nil || res.Approved || res.DeclineCode != sim.DeclineInvalidRequest || res.Message != "no such authorization" {
		t.Fatalf("capture of an evicted authorization: got %+v, %v; want declined as unknown", res, err)
	}
	if _, err := p.Lookup(ctx, fmt.Sprint("k", n-1)); err != nil {
		t.Fatalf("lookup of the newest key: %v", err)
	}
}

func TestReset(t *testing.T) {
	p := sim.New(sim.DefaultConfig())
	ctx := t.Context()
	a, _ := p.Authorize(ctx, authReq("k", visa, 1000, true))
	p.Reset()
	if tot := p.TotalEffects(); tot.Records != 0 || tot.Authorizations != 0 {
		t.Fatalf("totals after reset: got %+v, want zero", tot)
	}
	b, err := p.Authorize(ctx, authReq("k", visa, 1000, true))
	if err != nil || b.Reference == a.Reference {
		t.Fatalf("after reset: got %+v, %v; want a new authorization with a new reference", b, err)
	}
}

func BenchmarkAuthorizeParallel(b *testing.B) {
	p := sim.New(sim.DefaultConfig())
	ctx := context.Background()
	var seq sync.Mutex
	next := 0
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		seq.Lock()
		g := next
		next++
		seq.Unlock()
		req := authReq("", visa, 1000, false)
		for i := 0; pb.Next(); i++ {
			req.IdempotencyKey = fmt.Sprintf("pay_%d_%d/authorization", g, i)
			if _, err := p.Authorize(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkAuthorizeHTTPParallel(b *testing.B) {
	p := sim.New(sim.DefaultConfig())
	srv := httptest.NewServer(sim.NewHandler(p))
	defer srv.Close()
	c, err := sim.NewClient(srv.URL, nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var seq sync.Mutex
	next := 0
	b.SetParallelism(8) // in-flight calls per core, as an engine under load has.
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		seq.Lock()
		g := next
		next++
		seq.Unlock()
		req := authReq("", visa, 1000, false)
		for i := 0; pb.Next(); i++ {
			req.IdempotencyKey = fmt.Sprintf("pay_%d_%d/authorization", g, i)
			if _, err := c.Authorize(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
	})
}
