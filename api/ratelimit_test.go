package api_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/api"
	"github.com/surgepay/surgepay/engine"
	"github.com/surgepay/surgepay/internal/testenv"
	"github.com/surgepay/surgepay/telemetry"
)

// clock is a settable clock for the rate limiter: buckets refill only
// when a test advances it, so no test depends on how fast it runs.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// newRateLimitEnv is an env whose API server runs the rate limiter on a
// clock that moves only when the test advances it.
func newRateLimitEnv(t *testing.T, store surgepay.Store) (*env, *clock) {
	t.Helper()
	e := newEnv(t, store)
	c := &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	srv := httptest.NewServer(api.New(api.Config{Engine: e.eng, Debug: true, Now: c.Now}))
	t.Cleanup(srv.Close)
	e.url, e.http = srv.URL, srv.Client()
	return e, c
}

// setRate sets the merchant's rate_limit and rate_burst, as a settings
// reload does; the other merchant keeps the defaults (unlimited).
func (e *env) setRate(merchantID string, limit float64, burst int) {
	s := surgepay.DefaultMerchantSettings()
	s.RateLimit, s.RateBurst = limit, burst
	e.eng.SetSettings(&engine.Settings{Default: surgepay.DefaultMerchantSettings(),
		Merchants: map[string]surgepay.MerchantSettings{merchantID: s}})
}

// mustOK fails the test unless r is a 200, and returns it.
func mustOK(t *testing.T, r *response) *response {
	t.Helper()
	if r.Status != http.StatusOK {
		t.Fatalf("got %d %s, want 200", r.Status, r.Raw)
	}
	return r
}

// mustLimited fails the test unless r is the rate limit's 429 with
// Retry-After retry.
func mustLimited(t *testing.T, r *response, retry string) {
	t.Helper()
	if r.Status != http.StatusTooManyRequests || r.errField("type") != "rate_limit_error" ||
		r.errField("code") != "rate_limited" || r.errField("message") == "" {
		t.Fatalf("got %d %s, want 429 with type rate_limit_error and code rate_limited", r.Status, r.Raw)
	}
	if got := r.Header.Get("Retry-After"); got != retry {
		t.Errorf("Retry-After = %q, want %q", got, retry)
	}
	if got := r.Header.Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", got)
	}
}

func TestRateLimit(t *testing.T) {
	e, clk := newRateLimitEnv(t, openSQLite(t))
	a := e.merchants[0]

	t.Run("BurstThen429", func(t *testing.T) {
		e.setRate(a, 1, 3)
		for range 3 {
			mustOK(t, e.do(e.keyA, "GET", "/v1/customers", "", ""))
		}
		mustLimited(t, e.do(e.keyA, "GET", "/v1/customers", "", ""), "1")
		// A 429 takes no token: the next one is refused as well.
		mustLimited(t, e.do(e.keyA, "POST", "/v1/customers", `{"name":"Ada"}`, ""), "1")
	})
	t.Run("OtherMerchantUnaffected", func(t *testing.T) {
		for range 20 {
			mustOK(t, e.do(e.keyB, "GET", "/v1/customers", "", ""))
		}
		mustLimited(t, e.do(e.keyA, "GET", "/v1/customers", "", ""), "1")
	})
	t.Run("ProbesNotLimited", func(t *testing.T) {
		for _, path := range []string{"/healthz", "/readyz", "/v1/openapi.json"} {
			if r := e.do(e.keyA, "GET", path, "", ""); r.Status != 200 {
				t.Errorf("GET %s while merchant A is limited: got %d, want 200", path, r.Status)
			}
		}
	})
	t.Run("UnauthenticatedIs401", func(t *testing.T) {
		if r := e.do("sk_not_a_key", "GET", "/v1/customers", "", ""); r.Status != 401 {
			t.Errorf("a bad key: got %d, want 401 (the limit applies once the merchant is known)", r.Status)
		}
	})
	t.Run("RefillsAtTheRate", func(t *testing.T) {
		clk.Advance(999 * time.Millisecond)
		mustLimited(t, e.do(e.keyA, "GET", "/v1/customers", "", ""), "1")
		clk.Advance(time.Millisecond)
		mustOK(t, e.do(e.keyA, "GET", "/v1/customers", "", ""))
		mustLimited(t, e.do(e.keyA, "GET", "/v1/customers", "", ""), "1")
	})
	t.Run("RetryAfterRoundsUp", func(t *testing.T) {
		e.setRate(a, 0.4, 1) // one token per 2.5 s
		clk.Advance(10 * time.Second)
		mustOK(t, e.do(e.keyA, "GET", "/v1/customers", "", ""))
		mustLimited(t, e.do(e.keyA, "GET", "/v1/customers", "", ""), "3")
		clk.Advance(2 * time.Second)
		mustLimited(t, e.do(e.keyA, "GET", "/v1/customers", "", ""), "1")
	})
	t.Run("DefaultSectionLimitsEveryMerchant", func(t *testing.T) {
		s := surgepay.DefaultMerchantSettings()
		s.RateLimit, s.RateBurst = 1, 2
		e.eng.SetSettings(&engine.Settings{Default: s, Merchants: map[string]surgepay.MerchantSettings{}})
		clk.Advance(10 * time.Second)
		for _, key := range []string{e.keyA, e.keyB} {
			mustOK(t, e.do(key, "GET", "/v1/customers", "", ""))
			mustOK(t, e.do(key, "GET", "/v1/customers", "", ""))
			mustLimited(t, e.do(key, "GET", "/v1/customers", "", ""), "1")
		}
	})
}

// TestRateLimitedPostStoresNothing: a POST refused by the rate limit
// leaves no payment and no idempotency record, so its retry with the same
// Idempotency-Key is performed once; a replay takes a token like any
// request.
func TestRateLimitedPostStoresNothing(t *testing.T) {
	for _, b := range testenv.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			e, clk := newRateLimitEnv(t, b.Open(t))
			cus, pm := e.customerWithCard(e.keyA, "4242424242424242")
			body := paymentBody(cus, pm, 1500, "automatic")
			e.setRate(e.merchants[0], 1, 1)
			mustOK(t, e.do(e.keyA, "GET", "/v1/payments", "", ""))

			mustLimited(t, e.do(e.keyA, "POST", "/v1/payments", body, "order-1"), "1")

			clk.Advance(time.Second)
			first := e.do(e.keyA, "POST", "/v1/payments", body, "order-1")
			if first.Status != 200 || first.Header.Get("Idempotent-Replayed") != "" {
				t.Fatalf("the retry after the refill: got %d (Idempotent-Replayed %q) %s, want 200 performed, not replayed",
					first.Status, first.Header.Get("Idempotent-Replayed"), first.Raw)
			}
			// A replay is a request: with the bucket empty it is refused too.
			mustLimited(t, e.do(e.keyA, "POST", "/v1/payments", body, "order-1"), "1")
			clk.Advance(time.Second)
			again := e.do(e.keyA, "POST", "/v1/payments", body, "order-1")
			if again.Status != 200 || again.Header.Get("Idempotent-Replayed") != "true" || again.str("id") != first.str("id") {
				t.Fatalf("the replay: got %d %s, want 200 replaying %s", again.Status, again.Raw, first.str("id"))
			}
			mustLimited(t, e.do(e.keyA, "GET", "/v1/payments", "", ""), "1")

			clk.Advance(time.Second)
			list := mustOK(t, e.do(e.keyA, "GET", "/v1/payments", "", ""))
			if data, _ := list.JSON["data"].([]any); len(data) != 1 {
				t.Errorf("merchant A has %d payments, want 1: %s", len(data), list.Raw)
			}
		})
	}
}

// TestRateLimitReload: a settings change reaches the merchant's existing
// bucket on its next request, without a new server.
func TestRateLimitReload(t *testing.T) {
	e, clk := newRateLimitEnv(t, openSQLite(t))
	a := e.merchants[0]
	e.setRate(a, 1, 1)
	mustOK(t, e.do(e.keyA, "GET", "/v1/customers", "", ""))
	mustLimited(t, e.do(e.keyA, "GET", "/v1/customers", "", ""), "1")

	t.Run("RaisedRate", func(t *testing.T) {
		e.setRate(a, 100, 1)
		// The bucket keeps its (no) tokens and refills at 100/s from here.
		mustLimited(t, e.do(e.keyA, "GET", "/v1/customers", "", ""), "1")
		clk.Advance(10 * time.Millisecond) // a hundredth of a token at the old rate
		mustOK(t, e.do(e.keyA, "GET", "/v1/customers", "", ""))
	})
	t.Run("RaisedBurst", func(t *testing.T) {
		e.setRate(a, 100, 5)
		clk.Advance(time.Second)
		for range 5 {
			mustOK(t, e.do(e.keyA, "GET", "/v1/customers", "", ""))
		}
		mustLimited(t, e.do(e.keyA, "GET", "/v1/customers", "", ""), "1")
	})
	t.Run("LoweredRate", func(t *testing.T) {
		e.setRate(a, 0.5, 1)
		mustLimited(t, e.do(e.keyA, "GET", "/v1/customers", "", ""), "2")
		clk.Advance(time.Second)
		mustLimited(t, e.do(e.keyA, "GET", "/v1/customers", "", ""), "1")
		clk.Advance(time.Second)
		mustOK(t, e.do(e.keyA, "GET", "/v1/customers", "", ""))
	})
	t.Run("Off", func(t *testing.T) {
		e.setRate(a, 0, 0)
		for range 10 {
			mustOK(t, e.do(e.keyA, "GET", "/v1/customers", "", ""))
		}
	})
}

// TestRateLimitMetric: each 429 of the rate limit is counted for its
// merchant in surgepay_http_requests_rate_limited_total, whose merchant
// label has at most telemetry.RateLimitedMerchantsMax values.
func TestRateLimitMetric(t *testing.T) {
	tel, err := telemetry.New(telemetry.DefaultConfig(), telemetry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tel.Shutdown(context.Background()) })
	e := newEnv(t, openSQLite(t))
	c := &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	srv := httptest.NewServer(api.New(api.Config{Engine: e.eng, Telemetry: tel, Now: c.Now}))
	t.Cleanup(srv.Close)
	e.url, e.http = srv.URL, srv.Client()
	e.setRate(e.merchants[0], 1, 1)

	mustOK(t, e.do(e.keyA, "GET", "/v1/customers", "", ""))
	for range 3 {
		mustLimited(t, e.do(e.keyA, "GET", "/v1/customers", "", ""), "1")
	}
	mustOK(t, e.do(e.keyB, "GET", "/v1/customers", "", ""))
	if got := rateLimitedCounts(t, tel); len(got) != 1 || got[e.merchants[0]] != 3 {
		t.Errorf("rate-limited counts by merchant = %v, want %s: 3 only", got, e.merchants[0])
	}

	t.Run("LabelsBounded", func(t *testing.T) {
		for i := range telemetry.RateLimitedMerchantsMax + 10 {
			tel.ObserveRateLimited(fmt.Sprintf("mer_flood%d", i))
		}
		got := rateLimitedCounts(t, tel)
		if len(got) != telemetry.RateLimitedMerchantsMax+1 || got["other"] != 11 || got[e.merchants[0]] != 3 {
			t.Errorf("%d merchant labels, other = %v, %s = %v; want %d, 11, 3",
				len(got), got["other"], e.merchants[0], got[e.merchants[0]], telemetry.RateLimitedMerchantsMax+1)
		}
	})
}

// rateLimitedCounts returns surgepay_http_requests_rate_limited_total by
// merchant label.
func rateLimitedCounts(t *testing.T, tel *telemetry.Telemetry) map[string]float64 {
	t.Helper()
	mfs, err := tel.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "surgepay_http_requests_rate_limited_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "merchant" {
					out[l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}
