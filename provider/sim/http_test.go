package sim_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/provider/sim"
)

// rawServer accepts connections on 127.0.0.1, reads one request from
// each, and hands the connection to respond.
func rawServer(t *testing.T, respond func(c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, req.Body)
				respond(c)
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

func newClient(t *testing.T, url string, hc *http.Client) *sim.Client {
	t.Helper()
	c, err := sim.NewClient(url, hc)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestClientErrorMapping(t *testing.T) {
	status := func(code int, body string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(code)
			_, _ = io.WriteString(w, body)
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	refused := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		return "http://" + addr
	}
	tests := []struct {
		name    string
		url     string
		timeout time.Duration
		outcome string
		target  error
	}{
		{"ConnectionRefused", refused(), 0, surgepay.NotPerformed, nil},
		{"ClosedMidResponse", rawServer(t, func(c net.Conn) {
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"approved\":tr")
		}), 0, surgepay.Unknown, nil},
		{"ClosedWithoutResponse", rawServer(t, func(net.Conn) {}), 0, surgepay.Unknown, nil},
		{"TimeoutAfterWrite", rawServer(t, func(net.Conn) { time.Sleep(2 * time.Second) }), 100 * time.Millisecond, surgepay.Unknown, nil},
		{"Status503", status(503, `{"outcome":"not_performed","code":"outage","error":"network outage"}`), 0, surgepay.NotPerformed, sim.ErrOutage},
		{"Status503Bare", status(503, "busy"), 0, surgepay.NotPerformed, nil},
		{"Status429", status(429, `{"outcome":"not_performed","code":"rate_limited","error":"x"}`), 0, surgepay.NotPerformed, sim.ErrRateLimited},
		{"Status409", status(409, `{"outcome":"not_performed","code":"key_reused","error":"x"}`), 0, surgepay.NotPerformed, sim.ErrKeyReused},
		{"Status400", status(400, `{}`), 0, surgepay.NotPerformed, nil},
		{"Status504", status(504, `{"outcome":"unknown","code":"answer_lost","error":"x"}`), 0, surgepay.Unknown, sim.ErrAnswerLost},
		{"Status500", status(500, "oops"), 0, surgepay.Unknown, nil},
		{"Status502", status(502, ""), 0, surgepay.Unknown, nil},
		{"Status302", status(302, ""), 0, surgepay.Unknown, nil},
		{"Status200Garbage", status(200, "<html>"), 0, surgepay.Unknown, nil},
		{"Status200Oversized", status(200, `{"approved":true,"message":"`+strings.Repeat("x", sim.BodyBytesMax)+`"}`), 0, surgepay.Unknown, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClient(t, tt.url, sim.NewHTTPClient(tt.timeout))
			_, err := c.Authorize(t.Context(), authReq("pay_1/authorization", visa, 1000, false))
			wantProviderError(t, "authorize", err, tt.outcome, tt.target)
			if strings.Contains(err.Error(), visa) || strings.Contains(err.Error(), "42424242") {
				t.Fatalf("error %q contains the card number", err)
			}
		})
	}
}

func TestClientCancelledBeforeSend(t *testing.T) {
	_, c := newHTTP(t, sim.DefaultConfig())
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := c.Authorize(ctx, authReq("k", visa, 1000, false))
	wantProviderError(t, "authorize", err, surgepay.NotPerformed, context.Canceled)
}

func TestNewClientErrors(t *testing.T) {
	for _, u := range []string{"", "127.0.0.1:8181", "ftp://x", "http://"} {
		if _, err := sim.NewClient(u, nil); err == nil {
			t.Errorf("NewClient(%q): got nil error", u)
		}
	}
}

func TestUnknownOverHTTP(t *testing.T) {
	for _, drop := range []bool{false, true} {
		cfg := sim.DefaultConfig()
		cfg.UnknownDropsConnection = drop
		p, c := newHTTP(t, cfg)
		ctx := t.Context()
		_, err := c.Authorize(ctx, authReq("k", visa, sim.AmountUnknown, false))
		wantProviderError(t, "authorize 9102", err, surgepay.Unknown, nil)
		if !drop && !errors.Is(err, sim.ErrAnswerLost) {
			t.Errorf("status 504: got %v, want ErrAnswerLost", err)
		}
		res, err := c.Lookup(ctx, "k")
		if err != nil || !res.Approved {
			t.Fatalf("lookup (drop=%v): got %+v, %v; want the approved authorization", drop, res, err)
		}
		if e := p.Effects("pay_k"); e.Authorizations != 1 {
			t.Fatalf("effects (drop=%v): got %+v, want one authorization", drop, e)
		}
	}
}

func TestLookupOddKeys(t *testing.T) {
	_, c := newHTTP(t, sim.DefaultConfig())
	for _, key := range []string{"pay_1/refund/2", "a b?c=d&e#f", "100%", "../../v1/config", "ünïcode/..//x"} {
		a, err := c.Authorize(t.Context(), authReq(key, visa, 1000, false))
		if err != nil {
			t.Fatalf("authorize %q: %v", key, err)
		}
		res, err := c.Lookup(t.Context(), key)
		if err != nil || res.Reference != a.Reference {
			t.Fatalf("lookup %q: got %+v, %v; want %s", key, res, err, a.Reference)
		}
	}
}

func do(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestHandlerRejectsBadBodiesWithoutEcho(t *testing.T) {
	srv := httptest.NewServer(sim.NewHandler(sim.New(sim.DefaultConfig())))
	defer srv.Close()
	tests := []struct{ name, body string }{
		{"NumberAsJSONNumber", `{"amount":100,"currency":"usd","card":{"number":4242424242424242}}`},
		{"Truncated", `{"amount":100,"currency":"usd","card":{"number":"4242424242424242"`},
		{"UnknownField", `{"amount":100,"currency":"usd","card":{"number":"4242424242424242","pin":"4242424242424242"}}`},
		{"Oversized", `{"card":{"number":"4242424242424242"},"merchant_id":"` + strings.Repeat("4242424242424242", sim.BodyBytesMax/16) + `"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(t.Context(), "POST", srv.URL+"/v1/authorize", strings.NewReader(tt.body))
			req.Header.Set(sim.HeaderIdempotencyKey, "k")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 400 || !strings.Contains(string(b), `"outcome":"not_performed"`) {
				t.Fatalf("got %d %s, want 400 not_performed", resp.StatusCode, b)
			}
			if strings.Contains(string(b), "42424242") {
				t.Fatalf("response %s echoes the card number", b)
			}
		})
	}
}

func TestHandlerAdmin(t *testing.T) {
	p, url := newServer(t, sim.Config{Seed: 9})
	c := newClient(t, url, nil)
	ctx := t.Context()
	cfg, err := c.Config(ctx)
	if err != nil || cfg.Seed != 9 || cfg.RecordsMax != sim.RecordsMaxDefault || cfg.Retention != sim.Duration(sim.RetentionDefault) {
		t.Fatalf("config: got %+v, %v", cfg, err)
	}
	if code, body := do(t, "GET", url+"/v1/config", ""); code != 200 || !strings.Contains(body, `"retention":"24h0m0s"`) {
		t.Fatalf("GET config: got %d %s, want the retention as text", code, body)
	}
	lat, _ := sim.ParseLatency("lognormal:mean=20ms,p99=200ms")
	cfg.Latency = lat
	cfg.DeclineRate = 0.25
	got, err := c.SetConfig(ctx, cfg)
	if err != nil || got.Latency != lat || got.DeclineRate != 0.25 || p.Config().Latency != lat {
		t.Fatalf("set config: got %+v, %v", got, err)
	}
	if err := p.SetConfig(sim.Config{}); err != nil {
		t.Fatal(err)
	}
	// PUT merges: fields left out keep their values.
	if code, body := do(t, "PUT", url+"/v1/config", `{"timeout_rate":0.5,"latency":"uniform:1ms-2ms"}`); code != 200 ||
		!strings.Contains(body, `"timeout_rate":0.5`) || !strings.Contains(body, `"latency":"uniform:1ms-2ms"`) || !strings.Contains(body, `"seed":9`) {
		t.Fatalf("PUT config: got %d %s", code, body)
	}
	for _, body := range []string{`{"latency":"soon"}`, `{"seed":10}`, `{"decline_rate":2}`, `{"nope":1}`,
		`{"retention":"1h"}`, `{"retention":"soon"}`} {
		if code, resp := do(t, "PUT", url+"/v1/config", body); code != 400 || !strings.Contains(resp, "config: ") {
			t.Errorf("PUT config %s: got %d %s, want 400", body, code, resp)
		}
	}
	if err := p.SetConfig(sim.Config{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Authorize(ctx, authReq("k", visa, 700, true)); err != nil {
		t.Fatal(err)
	}
	e, err := c.Effects(ctx, "pay_k")
	if err != nil || e.Captures != 1 || e.AmountCaptured != 700 {
		t.Fatalf("effects: got %+v, %v", e, err)
	}
	tot, err := c.TotalEffects(ctx)
	if err != nil || tot.Captures != 1 || tot.AmountCaptured["usd"] != 700 || tot.Records != 1 {
		t.Fatalf("totals: got %+v, %v", tot, err)
	}
	if err := c.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	if tot := p.TotalEffects(); tot.Records != 0 {
		t.Fatalf("totals after reset: got %+v", tot)
	}
	if code, body := do(t, "GET", url+"/healthz", ""); code != 200 || body != "ok\n" {
		t.Fatalf("healthz: got %d %q", code, body)
	}
}

// syncBuffer is a bytes buffer safe for a writer and a poller.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestMainServesUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- sim.Main(ctx, []string{"--listen", "127.0.0.1:0", "--latency", "fixed:1m", "--seed", "5",
			"--records-max", "2000", "--retention", "2h", "--pages-url", "http://127.0.0.1:9", "--challenge-ttl", "90s"}, &stdout, &stderr)
	}()
	var base string
	for deadline := time.Now().Add(5 * time.Second); base == ""; {
		if i := strings.Index(stdout.String(), "http://"); i >= 0 {
			base = strings.Fields(stdout.String()[i:])[0]
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no address printed; stderr: %s", stderr.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if code, _ := do(t, "GET", base+"/healthz", ""); code != 200 {
		t.Fatalf("healthz: got %d", code)
	}
	if code, body := do(t, "GET", base+"/v1/config", ""); code != 200 ||
		!strings.Contains(body, `"records_max":2000`) || !strings.Contains(body, `"retention":"2h0m0s"`) ||
		!strings.Contains(body, `"pages_url":"http://127.0.0.1:9"`) || !strings.Contains(body, `"challenge_ttl":"1m30s"`) {
		t.Fatalf("config: got %d %s, want the flags' records_max, retention, pages_url and challenge_ttl", code, body)
	}
	c := newClient(t, base, nil)
	callErr := make(chan error, 1)
	go func() {
		_, err := c.Authorize(context.Background(), authReq("k", visa, 1000, false))
		callErr <- err
	}()
	time.Sleep(300 * time.Millisecond) // the call is sleeping through its minute of latency.
	cancel()
	select {
	case code := <-done:
		if code != sim.ExitOK {
			t.Fatalf("Main: got exit %d, want 0; stderr: %s", code, stderr.String())
		}
	case <-time.After(sim.ShutdownTimeout + 5*time.Second):
		t.Fatalf("Main did not return after cancel")
	}
	// The select above bounds shutdown far below the call's minute of
	// latency: a shutdown that waited it out would have failed there.
	if err := <-callErr; !surgepay.IsNotPerformed(err) {
		t.Fatalf("in-flight call at shutdown: got %v, want NotPerformed", err)
	}
}

func TestMainUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--latency", "soon"},
		{"--decline-rate", "2"},
		{"--decline-rate", "0.6", "--timeout-rate", "0.6"},
		{"--nope"},
		{"extra"},
		{"--records-max", "999"},
		{"--records-max", "100000001"},
		{"--retention", "59s"},
		{"--retention", "721h"},
		{"--retention", "a day"},
		{"--pages-url", "ftp://sim.example"},
		{"--pages-url", "http://sim.example/?x=1"},
		{"--challenge-ttl", "1s"},
		{"--challenge-ttl", "25h"},
	} {
		var stdout, stderr syncBuffer
		if code := sim.Main(t.Context(), args, &stdout, &stderr); code != sim.ExitUsage {
			t.Errorf("Main %v: got exit %d, want %d", args, code, sim.ExitUsage)
		}
		if stderr.String() == "" {
			t.Errorf("Main %v: nothing on stderr", args)
		}
	}
}
