package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/api"
	"github.com/surgepay/surgepay/engine"
	"github.com/surgepay/surgepay/provider/route"
	"github.com/surgepay/surgepay/provider/sim"
	"github.com/surgepay/surgepay/telemetry"
	"github.com/surgepay/surgepay/vault"
)

// newAdmissionEnv is an env whose API server runs with cfg's admission
// bounds (InflightMax, MerchantInflightMax, BodyReadTimeout).
func newAdmissionEnv(t *testing.T, cfg api.Config) (*env, *api.Server) {
	t.Helper()
	e := newEnv(t, openSQLite(t))
	cfg.Engine, cfg.Debug = e.eng, true
	s := api.New(cfg)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	e.url, e.http = srv.URL, srv.Client()
	return e, s
}

// slowBody is a POST whose headers (Content-Length 64) and first body
// byte were sent, and whose body then stops coming, as an attacker's or a
// stalled mobile client's would.
type slowBody struct {
	conn net.Conn
	res  chan *response // the answer, when one comes
}

// openSlowBody sends a slow-body POST of path as key.
func openSlowBody(t *testing.T, e *env, key, path string) *slowBody {
	t.Helper()
	return openSlowBodyMethod(t, e, key, "POST", path)
}

func openSlowBodyMethod(t *testing.T, e *env, key, method, path string) *slowBody {
	t.Helper()
	u, _ := url.Parse(e.url)
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	head := method + " " + path + " HTTP/1.1\r\nHost: " + u.Host + "\r\nAuthorization: Bearer " + key +
		"\r\nContent-Type: application/json\r\nContent-Length: 64\r\n\r\n{"
	if _, err := io.WriteString(c, head); err != nil {
		t.Fatal(err)
	}
	s := &slowBody{conn: c, res: make(chan *response, 1)}
	go func() {
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			close(s.res)
			return
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		out := &response{Status: res.StatusCode, Header: res.Header, Raw: raw}
		_ = json.Unmarshal(raw, &out.JSON)
		s.res <- out
	}()
	return s
}

// mustConcurrencyLimited fails the test unless r is the merchant share's
// 429.
func mustConcurrencyLimited(t *testing.T, r *response) {
	t.Helper()
	if r == nil || r.Status != http.StatusTooManyRequests || r.errField("type") != "rate_limit_error" ||
		r.errField("code") != "merchant_concurrency_limit" || r.Header.Get("Retry-After") != "1" {
		t.Fatalf("got %+v, want 429 rate_limit_error merchant_concurrency_limit with Retry-After 1", r)
	}
}

// eventually retries f (a request that may still meet the slots of
// connections just closed) until it returns true, at most 200 times.
func eventually(t *testing.T, what string, f func() bool) {
	t.Helper()
	for range 200 {
		if f() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s: never happened", what)
}

// TestMerchantInflightShare: a merchant holding its share of in-flight
// requests with slow bodies gets 429 merchant_concurrency_limit for its
// next requests, while another merchant is served; its slots come back
// when its requests end, and a new share applies at once.
func TestMerchantInflightShare(t *testing.T) {
	const share, inflightMax = 3, 5
	tel, err := telemetry.New(telemetry.DefaultConfig(), telemetry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, s := newAdmissionEnv(t, api.Config{InflightMax: inflightMax, MerchantInflightMax: share, BodyReadTimeout: time.Minute,
		Telemetry: tel})
	held := map[int]*slowBody{}
	answers := make(chan int, inflightMax)
	for i := range inflightMax {
		sb := openSlowBody(t, e, e.keyA, "/v1/customers")
		held[i] = sb
		go func() {
			if r := <-sb.res; r != nil {
				answers <- i
				sb.res <- r
			}
		}()
	}
	// The server's inflight_max slow bodies: the ones beyond A's share
	// (whichever the server admits last) are refused at once; the others
	// wait for their bodies.
	for range inflightMax - share {
		select {
		case i := <-answers:
			mustConcurrencyLimited(t, <-held[i].res)
			delete(held, i)
		case <-time.After(time.Minute):
			t.Fatal("no 429 for the slow bodies beyond A's share")
		}
	}

	// Before issue 13, A's slow bodies held every slot of the server and
	// B got 503 overloaded.
	e.must(200, e.keyB, "POST", "/v1/customers", `{"name":"Bea"}`)
	e.must(200, e.keyB, "GET", "/v1/customers", "")
	mustConcurrencyLimited(t, e.do(e.keyA, "GET", "/v1/customers", "", ""))
	mustConcurrencyLimited(t, e.do(e.keyA, "POST", "/v1/customers", `{"name":"Ada"}`, ""))

	if got := shedCount(t, tel, telemetry.ShedMerchantConcurrency); got != inflightMax-share+2 {
		t.Errorf("requests_shed_total{reason=merchant_concurrency_limit} = %v, want %d", got, inflightMax-share+2)
	}

	t.Run("Reload", func(t *testing.T) {
		s.SetMerchantInflightMax(share + 1)
		e.must(200, e.keyA, "GET", "/v1/customers", "")
		s.SetMerchantInflightMax(share)
		mustConcurrencyLimited(t, e.do(e.keyA, "GET", "/v1/customers", "", ""))
	})
	t.Run("SlotsComeBack", func(t *testing.T) {
		for _, h := range held {
			h.conn.Close()
		}
		eventually(t, "A served after its slow connections closed", func() bool {
			return e.do(e.keyA, "GET", "/v1/customers", "", "").Status == 200
		})
	})
}

// mustOverloaded fails the test unless r is the server's own 503.
func mustOverloaded(t *testing.T, r *response) {
	t.Helper()
	if r == nil || r.Status != http.StatusServiceUnavailable || r.errField("code") != "overloaded" ||
		r.Header.Get("Retry-After") != "1" {
		t.Fatalf("got %+v, want 503 overloaded with Retry-After 1", r)
	}
}

// fillServer holds one of the server's slots with a slow body for each
// of keys, and returns once probe's read is refused 503 overloaded (the
// server full). A probe holds a slot while it is served, so a slow body
// arriving meanwhile may be refused 503 itself: such a one is opened
// again. A hang guard of 30 s, not a measurement.
func fillServer(t *testing.T, e *env, keys []string, probe string) []*slowBody {
	t.Helper()
	held := make([]*slowBody, len(keys))
	for i, k := range keys {
		held[i] = openSlowBody(t, e, k, "/v1/customers")
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		r := e.do(probe, "GET", "/v1/customers", "", "")
		if r.Status != http.StatusOK {
			mustOverloaded(t, r)
			return held
		}
		for i, h := range held {
			select {
			case r, ok := <-h.res:
				if !ok || r.Status != http.StatusServiceUnavailable {
					t.Fatalf("slow body %d answered %+v, want it held (or refused 503 while a probe held a slot)", i, r)
				}
				held[i] = openSlowBody(t, e, keys[i], "/v1/customers")
			default:
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the server's slots not all held by slow bodies 30 s after they were sent")
		}
	}
}

// TestLoneMerchantMeetsNodeBound (issue 35 item 5): a merchant alone on
// its server holds all of inflight_max; at that bound its next request
// is the node's overload, 503 overloaded with Retry-After, not 429
// merchant_concurrency_limit, which tells a client it is over a share of
// its own. Before, the tenant's slot was checked first and the lone
// merchant got 429.
func TestLoneMerchantMeetsNodeBound(t *testing.T) {
	const inflightMax = 4
	tel, err := telemetry.New(telemetry.DefaultConfig(), telemetry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, s := newAdmissionEnv(t, api.Config{InflightMax: inflightMax, BodyReadTimeout: time.Minute, Telemetry: tel})
	s.SetMerchantsEnabled(1)
	if got := s.MerchantInflightMax(); got != inflightMax {
		t.Fatalf("a lone merchant's share is %d, want all of inflight_max (%d)", got, inflightMax)
	}
	held := fillServer(t, e, []string{e.keyA, e.keyA, e.keyA, e.keyA}, e.keyA)
	mustOverloaded(t, e.do(e.keyA, "POST", "/v1/customers", `{"name":"Ada"}`, ""))
	if got := shedCount(t, tel, telemetry.ShedMerchantConcurrency); got != 0 {
		t.Errorf("requests_shed_total{reason=merchant_concurrency_limit} = %v, want 0 (the bound is the node's)", got)
	}
	for _, h := range held {
		h.conn.Close()
	}
	eventually(t, "served once its slow connections closed", func() bool {
		return e.do(e.keyA, "GET", "/v1/customers", "", "").Status == http.StatusOK
	})
}

// TestBodiesBoundedByNode (issue 35 item 5): bodies are read only under
// one of the server's inflight_max slots, so however the merchants'
// shares add up, at most inflight_max bodies are buffered at once. Three
// merchants' shares (each 4 of 4) add up to three times the node's bound;
// once two of them hold its four slots with slow bodies, the third's
// request with a body is refused 503 overloaded before its body is read.
// Before, it took its merchant's slot and read its body, and only then
// met the server's bound.
func TestBodiesBoundedByNode(t *testing.T) {
	const inflightMax = 4
	e, _ := newAdmissionEnv(t, api.Config{InflightMax: inflightMax, MerchantInflightMax: inflightMax, BodyReadTimeout: time.Minute})
	m, err := e.eng.CreateMerchant(context.Background(), "merchant C")
	if err != nil {
		t.Fatal(err)
	}
	keyC, _, err := e.eng.CreateAPIKey(context.Background(), m.ID)
	if err != nil {
		t.Fatal(err)
	}
	held := fillServer(t, e, []string{e.keyA, e.keyB, e.keyA, e.keyB}, keyC)
	// C's slow body: refused at once (within refusedBodyWait, 1 s), its
	// body never read; were it admitted, it would wait out the minute of
	// BodyReadTimeout.
	sb := openSlowBody(t, e, keyC, "/v1/customers")
	select {
	case r := <-sb.res:
		mustOverloaded(t, r)
	case <-time.After(30 * time.Second): // a hang guard, not a measurement
		t.Fatal("a slow body beyond the server's bound was admitted to be read")
	}
	for _, h := range held {
		h.conn.Close()
	}
	eventually(t, "C served once the slow connections closed", func() bool {
		return e.do(keyC, "GET", "/v1/customers", "", "").Status == http.StatusOK
	})
}

// TestMerchantOwnShare: merchants.*.inflight_max gives one merchant its
// own share, the others keep the node's.
func TestMerchantOwnShare(t *testing.T) {
	e, _ := newAdmissionEnv(t, api.Config{InflightMax: 8, MerchantInflightMax: 4, BodyReadTimeout: time.Minute})
	set := surgepay.DefaultMerchantSettings()
	set.InflightMax = 1
	e.eng.SetSettings(&engine.Settings{Default: surgepay.DefaultMerchantSettings(),
		Merchants: map[string]surgepay.MerchantSettings{e.merchants[0]: set}})
	first := openSlowBody(t, e, e.keyA, "/v1/customers")
	second := openSlowBody(t, e, e.keyA, "/v1/customers")
	var r *response
	select {
	case r = <-first.res:
	case r = <-second.res:
	case <-time.After(time.Minute):
		t.Fatal("no answer to either of A's slow bodies")
	}
	mustConcurrencyLimited(t, r)
	for range 3 { // B holds three slow bodies under the node's share of 4
		openSlowBody(t, e, e.keyB, "/v1/customers")
	}
	eventually(t, "B's fourth request served", func() bool {
		return e.do(e.keyB, "GET", "/v1/customers", "", "").Status == 200
	})
}

// TestLoneMerchantShare: with merchant_inflight_max at 0, a merchant
// alone (one enabled merchant counted) may hold all of InflightMax with
// slow bodies, where among several it holds a quarter; the processors'
// webhooks keep a quarter either way; an explicit share wins over the
// count; and before any count the quarter applies.
func TestLoneMerchantShare(t *testing.T) {
	const inflightMax = 8 // a quarter: 2
	e, s := newAdmissionEnv(t, api.Config{InflightMax: inflightMax, BodyReadTimeout: time.Minute})
	if n := s.MerchantInflightMax(); n != inflightMax/4 {
		t.Fatalf("before a count: share %d, want a quarter (%d)", n, inflightMax/4)
	}
	s.SetMerchantsEnabled(1)
	if n := s.MerchantInflightMax(); n != inflightMax {
		t.Fatalf("one merchant: share %d, want all of inflight_max (%d)", n, inflightMax)
	}
	// A holds five slow bodies, more than twice the quarter, and is still
	// served: with the whole of inflight_max, 5 of 8 leave it room (and
	// leave the webhooks below their share of 2 within the node's 8).
	for range 5 {
		openSlowBody(t, e, e.keyA, "/v1/customers")
	}
	eventually(t, "A's sixth request served", func() bool {
		return e.do(e.keyA, "GET", "/v1/customers", "", "").Status == 200
	})
	// The webhooks of a processor keep a quarter.
	hooks := []*slowBody{openSlowBody(t, e, "", "/v1/processor_webhooks/default"),
		openSlowBody(t, e, "", "/v1/processor_webhooks/default"), openSlowBody(t, e, "", "/v1/processor_webhooks/default")}
	select {
	case r := <-hooks[0].res:
		mustConcurrencyLimited(t, r)
	case r := <-hooks[1].res:
		mustConcurrencyLimited(t, r)
	case r := <-hooks[2].res:
		mustConcurrencyLimited(t, r)
	case <-time.After(time.Minute):
		t.Fatal("no answer to any of three slow webhooks over a share of 2")
	}
	// A second merchant: the quarter again, and A, holding five, is
	// refused at once.
	s.SetMerchantsEnabled(2)
	if n := s.MerchantInflightMax(); n != inflightMax/4 {
		t.Fatalf("two merchants: share %d, want %d", n, inflightMax/4)
	}
	mustConcurrencyLimited(t, e.do(e.keyA, "GET", "/v1/customers", "", ""))
	// An explicit share wins over the count.
	s.SetMerchantInflightMax(3)
	s.SetMerchantsEnabled(1)
	if n := s.MerchantInflightMax(); n != 3 {
		t.Fatalf("merchant_inflight_max 3 with one merchant: share %d, want 3", n)
	}
}

// TestProcessorWebhooksShare: the processors' webhooks (no API key) share
// one tenant's slots: slow webhook bodies beyond it get 429 while the
// merchants are served.
func TestProcessorWebhooksShare(t *testing.T) {
	e, _ := newAdmissionEnv(t, api.Config{InflightMax: 2, MerchantInflightMax: 1, BodyReadTimeout: time.Minute})
	first := openSlowBody(t, e, "", "/v1/processor_webhooks/default")
	second := openSlowBody(t, e, "", "/v1/processor_webhooks/default")
	var r *response
	select {
	case r = <-first.res:
	case r = <-second.res:
	case <-time.After(time.Minute):
		t.Fatal("no answer to either slow webhook")
	}
	mustConcurrencyLimited(t, r)
	e.must(200, e.keyA, "GET", "/v1/customers", "")
	e.must(200, e.keyB, "POST", "/v1/customers", `{"name":"Bea"}`)
}

// shedCount returns surgepay_http_requests_shed_total{reason}.
func shedCount(t *testing.T, tel *telemetry.Telemetry, reason string) float64 {
	t.Helper()
	mfs, err := tel.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "surgepay_http_requests_shed_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == reason {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// TestBodyReadTimeout: a body that stops coming is answered 408
// body_timeout naming the body once BodyReadTimeout has passed, and its
// merchant's slot is free again.
func TestBodyReadTimeout(t *testing.T) {
	e, _ := newAdmissionEnv(t, api.Config{MerchantInflightMax: 1, BodyReadTimeout: 100 * time.Millisecond})
	sb := openSlowBody(t, e, e.keyA, "/v1/customers")
	r := <-sb.res
	if r == nil || r.Status != http.StatusRequestTimeout || r.errField("code") != "body_timeout" ||
		r.errField("param") != "body" {
		t.Fatalf("got %+v, want 408 body_timeout with param body", r)
	}
	e.must(200, e.keyA, "POST", "/v1/customers", `{"name":"Ada"}`)

	// A DELETE's body is read under the same timeout, in the merchant's
	// slot (it was read by the handler, under the server's slot, with no
	// timeout but the listener's).
	cus := e.must(200, e.keyA, "POST", "/v1/customers", `{"name":"Grace"}`).str("id")
	sb = openSlowBodyMethod(t, e, e.keyA, "DELETE", "/v1/customers/"+cus)
	select {
	case r = <-sb.res:
	case <-time.After(30 * time.Second): // a hang guard, not a measurement
		t.Fatal("a slow DELETE body still open after 30 s")
	}
	if r == nil || r.Status != http.StatusRequestTimeout || r.errField("code") != "body_timeout" {
		t.Fatalf("slow DELETE body: got %+v, want 408 body_timeout", r)
	}
}

// TestFairnessSlowBodyFlood is issue 13's test: merchant A floods the
// server with slow bodies, three times its inflight_max; merchant B,
// meanwhile, gets no 503 (before the fix: 503 overloaded for every
// request, the flood holding every slot), and B's p99 latency stays
// within 2x of its p99 measured just before in the same run, without
// the flood. No absolute time is compared: the two phases run on the
// same machine, back to back, each from a collected heap, with 2000
// requests (the p99 is the 20th slowest, not one hiccup); a pair is tried
// again (up to fairnessAttempts) only when the ratio, never when a 503,
// fails, so that a neighbour's burst of CPU on a shared machine does not
// fail the test. The flood's clients run in this process and take CPU
// from the server, which a real attacker's would not: under -race the
// ratio is 1-2.4 with one attempt in five or so over 2 (measured on the
// shared 2-core machine), so five attempts fail together about once in
// 3000 runs, while a server that lets the flood delay B fails them all.
func TestFairnessSlowBodyFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("a flood of slow connections")
	}
	const (
		inflightMax      = 64
		share            = 16
		floodConns       = 3 * inflightMax
		samples          = 2000
		fairnessAttempts = 5
	)
	e, _ := newAdmissionEnv(t, api.Config{InflightMax: inflightMax, MerchantInflightMax: share, BodyReadTimeout: time.Minute})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	t.Cleanup(client.CloseIdleConnections)
	u, _ := url.Parse(e.url)
	const created = `{"name":"Bea"}`
	cus := e.do(e.keyB, "POST", "/v1/customers", created, "bea-1").str("id")

	// measure runs B's requests, one at a time, and returns their p99 and
	// how many were not 200. They are a read and a POST with a body (an
	// Idempotency-Key's replay, answered from memory): every step of
	// admission, body included, and no fsync, whose time is the disk's
	// and not the server's.
	measure := func() (p99 time.Duration, statuses map[int]int) {
		statuses = map[int]int{}
		d := make([]time.Duration, 0, samples)
		// Both phases start from a collected heap: the flood's set-up
		// garbage must not put a collection in one phase only.
		runtime.GC()
		for i := range samples {
			req, _ := http.NewRequest("GET", e.url+"/v1/customers/"+cus, nil)
			if i%2 == 1 {
				req, _ = http.NewRequest("POST", e.url+"/v1/customers", strings.NewReader(created))
				req.Header.Set("Idempotency-Key", "bea-1")
			}
			req.Header.Set("Authorization", "Bearer "+e.keyB)
			req.Header.Set("Content-Type", "application/json")
			start := time.Now()
			res, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, res.Body) // drained so the connection is reused; the status is what is counted
			res.Body.Close()
			d = append(d, time.Since(start))
			if res.StatusCode != 200 {
				statuses[res.StatusCode]++
			}
		}
		slices.Sort(d)
		return d[len(d)*99/100], statuses
	}

	measure() // warm the caches, the connections and the store
	var ratios []float64
	for attempt := range fairnessAttempts {
		unloaded, bad := measure()
		if len(bad) > 0 {
			t.Fatalf("unloaded: B got non-200 answers %v", bad)
		}
		stop, refused := flood(t, u.Host, e.keyA, floodConns)
		// Wait until the flood has its share and the rest was refused.
		// (Before issue 13 the flood was not refused but held every slot:
		// the wait ends without, and B's 503s fail the test below.)
		for deadline := time.Now().Add(10 * time.Second); refused.Load() < floodConns-share; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Logf("the flood: %d refused, want %d (all beyond A's share)", refused.Load(), floodConns-share)
				break
			}
		}
		loaded, bad := measure()
		stop()
		if bad[http.StatusServiceUnavailable] > 0 || len(bad) > 0 {
			t.Fatalf("with A flooding slow bodies, B got non-200 answers %v (want none: A's flood must cost A alone)", bad)
		}
		ratio := float64(loaded) / float64(unloaded)
		t.Logf("attempt %d: B's p99 %s unloaded, %s while A floods (%.2fx)", attempt+1, unloaded, loaded, ratio)
		if ratio <= 2 {
			return
		}
		ratios = append(ratios, ratio)
	}
	t.Errorf("B's p99 while A floods was more than 2x its unloaded p99 in %d attempts: %.2f", fairnessAttempts, ratios)
}

// flood opens n slow-body connections of key, each of which sends a
// body byte a second. A refused connection (429) is counted in refused
// and opened again after Retry-After and a jitter, as a client that
// honours it would.
// stop closes them all and waits.
func flood(t *testing.T, host, key string, n int) (stop func(), refused *atomic.Int64) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	refused = &atomic.Int64{}
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for ctx.Err() == nil {
				status := slowRequest(ctx, host, key)
				if status == http.StatusTooManyRequests {
					refused.Add(1)
				}
				// Retry-After (1 s) and a jitter, as a client should:
				// without it the refused connections come back together.
				select {
				case <-ctx.Done():
				case <-time.After(time.Second + rand.N(time.Second)):
				}
			}
		})
	}
	return func() { cancel(); wg.Wait() }, refused
}

// slowRequest sends a slow-body POST and returns its status once
// answered, or 0 when ctx ends first.
func slowRequest(ctx context.Context, host, key string) int {
	c, err := net.Dial("tcp", host)
	if err != nil {
		return 0
	}
	defer c.Close()
	context.AfterFunc(ctx, func() { c.Close() })
	fmt.Fprintf(c, "POST /v1/customers HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: 64\r\n\r\n{", host, key)
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if _, err := c.Write([]byte(" ")); err != nil {
					return
				}
			}
		}
	}()
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0
	}
	res.Body.Close()
	return res.StatusCode
}

// TestBodyDeadlineEndsWithTheBody: the body's read deadline bounds the
// body only. A handler that runs longer than BodyReadTimeout after its
// body arrived (a slow card network) is not cut: net/http's background
// read of the connection would otherwise hit the deadline and cancel the
// request's context mid-payment.
func TestBodyDeadlineEndsWithTheBody(t *testing.T) {
	slow := sim.DefaultConfig()
	slow.Latency = sim.Latency{Kind: sim.LatencyFixed, Fixed: 400 * time.Millisecond}
	e := newEnvWith(t, openSQLite(t), func(c *engine.Config) { c.Provider = sim.New(slow) })
	srv := httptest.NewServer(api.New(api.Config{Engine: e.eng, BodyReadTimeout: 100 * time.Millisecond}))
	t.Cleanup(srv.Close)
	cus, pm := e.customerWithCard(e.keyA, "4242424242424242")
	e.url, e.http = srv.URL, srv.Client()
	r := e.do(e.keyA, "POST", "/v1/payments", paymentBody(cus, pm, 1500, "automatic"), "slow-1")
	if r.Status != http.StatusOK || r.str("status") != "succeeded" {
		t.Fatalf("a payment whose card network answers after the body timeout: got %d %s, want 200 succeeded", r.Status, r.Raw)
	}
}

// A webhook for a name that is no configured processor is 404 before its
// body is read or a slot taken; each processor has its own share, so a
// flood under one name leaves another's webhooks their slots.
func TestProcessorWebhooksPerProcessor(t *testing.T) {
	keys, err := vault.Generate()
	if err != nil {
		t.Fatal(err)
	}
	r := route.New(nil)
	if err := r.Set([]route.Processor{{Name: route.DefaultName, Provider: sim.New(sim.DefaultConfig())},
		{Name: "other", Provider: sim.New(sim.DefaultConfig())}}, nil); err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(engine.Config{Store: openSQLite(t), Provider: r, Vault: keys})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.New(api.Config{Engine: eng, InflightMax: 8, MerchantInflightMax: 1, BodyReadTimeout: time.Minute}))
	t.Cleanup(srv.Close)
	e := &env{t: t, url: srv.URL, http: srv.Client()}

	unknown := openSlowBody(t, e, "", "/v1/processor_webhooks/nope")
	select {
	case res := <-unknown.res:
		if res == nil || res.Status != http.StatusNotFound || res.errField("param") != "processor" {
			t.Fatalf("a webhook for no processor: %+v, want 404 naming the processor, before its body", res)
		}
	case <-time.After(30 * time.Second): // a hang guard, not a measurement
		t.Fatal("a webhook for no processor still waiting for its body after 30 s")
	}

	// Two slow webhooks of default's, one slot: whichever the server
	// admits first holds it, the other is refused.
	first := openSlowBody(t, e, "", "/v1/processor_webhooks/"+route.DefaultName)
	second := openSlowBody(t, e, "", "/v1/processor_webhooks/"+route.DefaultName)
	select {
	case res := <-first.res:
		mustConcurrencyLimited(t, res)
	case res := <-second.res:
		mustConcurrencyLimited(t, res)
	case <-time.After(30 * time.Second): // a hang guard, not a measurement
		t.Fatal("no answer to either of two slow webhooks over a share of 1")
	}
	other := openSlowBody(t, e, "", "/v1/processor_webhooks/other")
	// The rest of its 64-byte body: admitted, it is read and answered (its
	// signature does not verify), not refused for its share.
	if _, err := io.WriteString(other.conn, `"a":"`+strings.Repeat("x", 56)+`"}`); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-other.res:
		if res == nil || res.Status == http.StatusTooManyRequests {
			t.Fatalf("the other processor's webhook under a flood of default's: %+v, want it admitted", res)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no answer to the other processor's webhook")
	}
}

// TestEarlyRefusalKeepsConnection: a request refused before its body was
// read (here 429 merchant_concurrency_limit) keeps its connection when
// the body came with the headers: the next request on the same
// connection is served. A body that does not come is waited for a second
// at most (not BodyReadTimeout): then the refusal is answered and the
// connection closed.
func TestEarlyRefusalKeepsConnection(t *testing.T) {
	e, _ := newAdmissionEnv(t, api.Config{InflightMax: 8, MerchantInflightMax: 1, BodyReadTimeout: time.Minute})
	u, _ := url.Parse(e.url)
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	// send answers the response's status and whether it closes the
	// connection, its body drained and closed.
	send := func(key, body string) (status int, closes bool) {
		t.Helper()
		req := "POST /v1/customers HTTP/1.1\r\nHost: " + u.Host + "\r\nAuthorization: Bearer " + key +
			"\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode, res.Close
	}
	// A is over its share: refused, its whole body drained, the
	// connection kept.
	eventually(t, "A refused while its slot is held", func() bool {
		openSlowBody(t, e, e.keyA, "/v1/customers") // A's one slot, held (unless this request has it)
		status, closes := send(e.keyA, `{"name":"Ann"}`)
		if status != http.StatusTooManyRequests {
			return false
		}
		if closes {
			t.Fatal("a 429 whose body had arrived closed its connection")
		}
		return true
	})
	// The same connection serves B.
	if status, closes := send(e.keyB, `{"name":"Bea"}`); status != http.StatusOK || closes {
		t.Fatalf("B on the kept connection: %d close %v, want 200 and kept", status, closes)
	}
	// A body that stops coming: answered without waiting for the body
	// longer than a second (BodyReadTimeout is a minute), and the
	// connection closed.
	sb := openSlowBody(t, e, e.keyA, "/v1/customers")
	var r *response
	select {
	case r = <-sb.res:
	case <-time.After(30 * time.Second):
		t.Fatal("no answer to a refused slow body")
	}
	mustConcurrencyLimited(t, r)
	_ = sb.conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := sb.conn.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("the connection of a refused slow body: read %v, want EOF (closed)", err)
	}
}

// TestWritesOverloadedShedsWrites: while the store reports a standing
// write queue (Config.WritesOverloaded), a request with a body is
// answered 503 overloaded with Retry-After, counted as write_delay, and
// nothing is performed (no payment, no
// processor call); reads are served; once the queue is short again the
// same request succeeds.
func TestWritesOverloadedShedsWrites(t *testing.T) {
	var over atomic.Bool
	tel, err := telemetry.New(telemetry.DefaultConfig(), telemetry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, _ := newAdmissionEnv(t, api.Config{Telemetry: tel, WritesOverloaded: over.Load})
	cus, pm := e.customerWithCard(e.keyA, "4242424242424242")
	over.Store(true)
	r := e.do(e.keyA, "POST", "/v1/payments", paymentBody(cus, pm, 1234, "automatic"), "k1")
	if r.Status != http.StatusServiceUnavailable || r.errField("code") != "overloaded" || r.Header.Get("Retry-After") != "1" {
		t.Fatalf("a sale while the writes stand queued: %d %s, want 503 overloaded with Retry-After 1", r.Status, r.Raw)
	}
	if n := shedCount(t, tel, telemetry.ShedWritesBehind); n != 1 {
		t.Errorf("shed write_delay %v, want 1", n)
	}
	list := e.must(200, e.keyA, "GET", "/v1/payments", "")
	if data, _ := list.JSON["data"].([]any); len(data) != 0 {
		t.Fatalf("%d payments after a refused sale, want 0", len(data))
	}
	over.Store(false)
	r = e.do(e.keyA, "POST", "/v1/payments", paymentBody(cus, pm, 1234, "automatic"), "k1")
	if r.Status != http.StatusOK || r.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("the same sale once the queue is short: %d %s, want 200, not a replay", r.Status, r.Raw)
	}
}
