package sim

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
)

func TestParseLatency(t *testing.T) {
	tests := []struct {
		in   string
		want Latency
	}{
		{"0", Latency{Kind: LatencyFixed}},
		{"20ms", Latency{Kind: LatencyFixed, Fixed: 20 * time.Millisecond}},
		{"fixed:1s", Latency{Kind: LatencyFixed, Fixed: time.Second}},
		{"fixed:0", Latency{Kind: LatencyFixed}},
		{"uniform:5ms-50ms", Latency{Kind: LatencyUniform, Min: 5 * time.Millisecond, Max: 50 * time.Millisecond}},
		{" uniform:0-1s ", Latency{Kind: LatencyUniform, Max: time.Second}},
		{"lognormal:mean=20ms,p99=200ms", Latency{Kind: LatencyLognormal, Mean: 20 * time.Millisecond, P99: 200 * time.Millisecond}},
		{"lognormal:p99=200ms,mean=20ms", Latency{Kind: LatencyLognormal, Mean: 20 * time.Millisecond, P99: 200 * time.Millisecond}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseLatency(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
			again, err := ParseLatency(got.String())
			if err != nil || again != got {
				t.Fatalf("round trip through %q: got %+v, %v", got.String(), again, err)
			}
		})
	}
}

func TestParseLatencyErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", "not a duration"},
		{"fast", "not a duration"},
		{"gamma:1s", "unknown kind"},
		{"fixed:-1s", "between 0 and"},
		{"fixed:1h", "between 0 and"},
		{"uniform:5ms", "MIN-MAX"},
		{"uniform:50ms-5ms", "exceeds max"},
		{"uniform:x-5ms", "uniform min"},
		{"lognormal:mean=20ms", "both mean and p99"},
		{"lognormal:mean=20ms,p95=50ms", "unknown parameter"},
		{"lognormal:mean=20ms,p99=10ms", "at least the mean"},
		{"lognormal:mean=20ms,p99=1s", "at most 14.97"},
		{"lognormal:mean=0,p99=0", "positive"},
		{"lognormal:mean", "mean=D,p99=D"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			_, err := ParseLatency(tt.in)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func FuzzParseLatency(f *testing.F) {
	for _, s := range []string{"0", "fixed:1s", "uniform:5ms-50ms", "lognormal:mean=20ms,p99=200ms", "lognormal:mean=1ns,p99=14ns"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ParseLatency(s)
		if err != nil {
			return
		}
		again, err := ParseLatency(l.String())
		if err != nil || again != l {
			t.Fatalf("%q parsed to %+v, whose String %q parses to %+v, %v", s, l, l.String(), again, err)
		}
		smp := newSampler(l)
		r := rand.New(rand.NewPCG(1, 2))
		for range 100 {
			if d := smp.sample(r); d < 0 || d > LatencyMax {
				t.Fatalf("%q sampled %v, outside [0, %v]", s, d, LatencyMax)
			}
		}
	})
}

func TestSamplerFixed(t *testing.T) {
	s := newSampler(Latency{Kind: LatencyFixed, Fixed: 7 * time.Millisecond})
	r := rand.New(rand.NewPCG(1, 1))
	for range 1000 {
		if d := s.sample(r); d != 7*time.Millisecond {
			t.Fatalf("got %v, want exactly 7ms", d)
		}
	}
	if s.random() {
		t.Fatalf("a fixed latency needs no random numbers")
	}
}

func TestSamplerUniform(t *testing.T) {
	lo, hi := 5*time.Millisecond, 50*time.Millisecond
	s := newSampler(Latency{Kind: LatencyUniform, Min: lo, Max: hi})
	r := rand.New(rand.NewPCG(1, 1))
	const n = 100_000
	var sum time.Duration
	below, above := 0, 0
	for range n {
		d := s.sample(r)
		if d < lo || d > hi {
			t.Fatalf("got %v, want within [%v, %v]", d, lo, hi)
		}
		sum += d
		if d < lo+(hi-lo)/10 {
			below++
		}
		if d > hi-(hi-lo)/10 {
			above++
		}
	}
	if mean, want := sum/n, (lo+hi)/2; absDiff(mean, want) > want/100 {
		t.Errorf("mean: got %v, want %v ± 1%%", mean, want)
	}
	if below < n/20 || above < n/20 {
		t.Errorf("tails: got %d below and %d above the outer tenths, want about %d each", below, above, n/10)
	}
}

func TestSamplerLognormal(t *testing.T) {
	tests := []struct{ mean, p99 time.Duration }{
		{20 * time.Millisecond, 200 * time.Millisecond},
		{5 * time.Millisecond, 10 * time.Millisecond},
		{time.Second, time.Second},
	}
	for _, tt := range tests {
		l := Latency{Kind: LatencyLognormal, Mean: tt.mean, P99: tt.p99}
		t.Run(l.String(), func(t *testing.T) {
			s := newSampler(l)
			r := rand.New(rand.NewPCG(42, 42))
			const n = 100_000
			samples := make([]time.Duration, n)
			var sum float64
			for i := range samples {
				samples[i] = s.sample(r)
				sum += float64(samples[i])
			}
			mean := time.Duration(sum / n)
			if absDiff(mean, tt.mean) > tt.mean/10 {
				t.Errorf("mean: got %v, want %v ± 10%%", mean, tt.mean)
			}
			slices.Sort(samples)
			p99 := samples[n*99/100]
			if absDiff(p99, tt.p99) > tt.p99/10 {
				t.Errorf("p99: got %v, want %v ± 10%%", p99, tt.p99)
			}
		})
	}
}

func TestLognormalSigma(t *testing.T) {
	// p99/mean = 10: σ = 2.326 − sqrt(2.326² − 2·ln 10) ≈ 1.4290.
	s := newSampler(Latency{Kind: LatencyLognormal, Mean: 20 * time.Millisecond, P99: 200 * time.Millisecond})
	if math.Abs(s.sigma-1.4290) > 1e-3 {
		t.Fatalf("sigma: got %.4f, want 1.4290", s.sigma)
	}
	if got := math.Exp(s.mu + s.sigma*s.sigma/2); math.Abs(got-20e6) > 1 {
		t.Fatalf("exp(μ+σ²/2): got %v ns, want 20e6", got)
	}
}

func absDiff(a, b time.Duration) time.Duration {
	if a > b {
		return a - b
	}
	return b - a
}

// fakeSleeper records the sleeps a Provider asks for and returns err.
type fakeSleeper struct {
	mu     sync.Mutex
	sleeps []time.Duration
	err    error
}

func (f *fakeSleeper) sleep(_ context.Context, d time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sleeps = append(f.sleeps, d)
	return f.err
}

func authRequest(key string, amount int64) *surgepay.AuthorizeRequest {
	return &surgepay.AuthorizeRequest{IdempotencyKey: key, PaymentID: "pay_" + key, Amount: amount, Currency: "usd",
		Card: surgepay.ProviderCard{Number: "4242424242424242", ExpMonth: 1, ExpYear: 2040}}
}

func TestSleeps(t *testing.T) {
	cfg := Config{
		Latency:        Latency{Kind: LatencyUniform, Min: time.Second, Max: 2 * time.Second},
		TimeoutLatency: Latency{Kind: LatencyFixed, Fixed: 30 * time.Second},
	}
	p := New(cfg)
	f := &fakeSleeper{}
	p.sleep = f.sleep
	ctx := t.Context()
	// Only the sleeps they ask for count here, not their outcomes.
	_, _ = p.Authorize(ctx, authRequest("a", 1000))
	_, _ = p.Authorize(ctx, authRequest("b", AmountTimeout))
	_, _ = p.Authorize(ctx, authRequest("c", AmountRateLimited)) // refused at once: no sleep.
	_, _ = p.Lookup(ctx, "a")
	if len(f.sleeps) != 3 {
		t.Fatalf("got sleeps %v, want 3", f.sleeps)
	}
	for _, i := range []int{0, 2} {
		if d := f.sleeps[i]; d < time.Second || d > 2*time.Second {
			t.Errorf("sleep %d: got %v, want within [1s, 2s]", i, d)
		}
	}
	if f.sleeps[1] != 30*time.Second {
		t.Errorf("timeout sleep: got %v, want 30s", f.sleeps[1])
	}
}

func TestSleepCancelledIsNotPerformed(t *testing.T) {
	p := New(Config{Latency: Latency{Kind: LatencyFixed, Fixed: time.Second}})
	p.sleep = (&fakeSleeper{err: context.Canceled}).sleep
	_, err := p.Authorize(t.Context(), authRequest("a", 1000))
	if !surgepay.IsNotPerformed(err) || !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want NotPerformed with context.Canceled", err)
	}
	p.sleep = (&fakeSleeper{}).sleep
	if _, err := p.Lookup(t.Context(), "a"); !errors.Is(err, ErrNoSuchOperation) {
		t.Fatalf("lookup: got %v, want ErrNoSuchOperation: the cancelled call did nothing", err)
	}
}

func TestRefNamesShard(t *testing.T) {
	p := New(DefaultConfig())
	for i := range p.shards {
		s := &p.shards[i]
		n := 5*shardCount + uint64(i) // the fifth record of shard i.
		ref := p.ref(opAuthorization, n)
		got, gotN, ok := p.authShard(ref)
		if !ok || got != s || gotN != n {
			t.Fatalf("ref %q: got shard %v n %d ok %v, want shard %d n %d", ref, got.index, gotN, ok, i, n)
		}
	}
	for _, ref := range []string{"", "auth_", "auth_00000000_1", p.authPrefix + "!!", "cap_" + p.instance + "_1"} {
		if _, _, ok := p.authShard(ref); ok {
			t.Errorf("ref %q: got ok, want not one of this simulator's authorizations", ref)
		}
	}
}
