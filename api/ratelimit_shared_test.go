package api_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/surgepay/surgepay/api"
	"github.com/surgepay/surgepay/cache"
	"github.com/surgepay/surgepay/cache/redistest"
	"github.com/surgepay/surgepay/ratelimit"
	"github.com/surgepay/surgepay/telemetry"
)

// node is one API server ("node") of a two-node test: its URL, its
// telemetry.
type node struct {
	url string
	tel *telemetry.Telemetry
}

// sharedNodes starts n API servers on e's engine, each with its own
// rate limiter client on srv (as n processes on n hosts would have) and
// a clock for its own buckets that never moves.
func sharedNodes(t *testing.T, e *env, srv *redistest.Server, n int) []node {
	t.Helper()
	cc := cache.DefaultConfig()
	cc.Redis.GlobalAddrs = []string{srv.URL()}
	opt, err := cache.ClientOption(cache.ScopeGlobal, cc)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewJSONHandler(e.logs, nil))
	still := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var out []node
	for range n {
		// A generous timeout: a shared test machine may stall a call for
		// longer than the default's 20 ms, which would be a fallback.
		rl, err := ratelimit.New(ratelimit.Config{Client: opt, Namespace: cc.Namespace, Logger: log, Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(rl.Close)
		tel, err := telemetry.New(telemetry.DefaultConfig(), telemetry.Options{})
		if err != nil {
			t.Fatal(err)
		}
		s := httptest.NewServer(api.New(api.Config{Engine: e.eng, Logger: log, Telemetry: tel, SharedRateLimiter: rl,
			Now: func() time.Time { return still }}))
		t.Cleanup(s.Close)
		out = append(out, node{url: s.URL, tel: tel})
	}
	return out
}

// countAdmitted sends requests of key round the nodes and returns how
// many each admitted; any answer but 200 or the rate limit's 429 fails.
func countAdmitted(t *testing.T, e *env, nodes []node, key string, requests int) (perNode []int, lastRefusal *response) {
	t.Helper()
	perNode = make([]int, len(nodes))
	for i := range requests {
		n := i % len(nodes)
		e.url = nodes[n].url
		r := e.do(key, "GET", "/v1/customers", "", "")
		switch r.Status {
		case http.StatusOK:
			perNode[n]++
		case http.StatusTooManyRequests:
			mustLimited(t, r, r.Header.Get("Retry-After"))
			lastRefusal = r
		default:
			t.Fatalf("node %d: got %d %s, want 200 or 429", n, r.Status, r.Raw)
		}
	}
	return perNode, lastRefusal
}

// TestRateLimitAcrossNodes: two API servers sharing one Redis admit a
// merchant's burst in total, not once each; with Redis down each falls
// back to its own bucket (the per-node limit), with no 5xx.
func TestRateLimitAcrossNodes(t *testing.T) {
	srv := redistest.Start(t)
	e := newEnv(t, openSQLite(t))
	const burst = 8
	// One request per 100 s: nothing refills while the test runs.
	e.setRate(e.merchants[0], 0.01, burst)
	nodes := sharedNodes(t, e, srv, 2)

	perNode, refusal := countAdmitted(t, e, nodes, e.keyA, 4*burst)
	if total := perNode[0] + perNode[1]; total != burst {
		t.Errorf("two nodes admitted %v, %d in all; want %d in all (each node alone admits %d)", perNode, total, burst, burst)
	}
	if refusal == nil || !strings.Contains(refusal.errField("message"), "across the servers") {
		t.Errorf("the refusal %+v should say the limit holds across the servers", refusal)
	}
	if perB, _ := countAdmitted(t, e, nodes, e.keyB, 20); perB[0]+perB[1] != 20 {
		t.Errorf("merchant B (unlimited) admitted %v of 20", perB)
	}

	t.Run("RedisDown", func(t *testing.T) {
		srv.Kill()
		perNode, refusal := countAdmitted(t, e, nodes, e.keyA, 4*burst)
		if perNode[0] != burst || perNode[1] != burst {
			t.Errorf("with Redis down the nodes admitted %v, want %d each: their own buckets", perNode, burst)
		}
		if refusal == nil || !strings.Contains(refusal.errField("message"), "on this server") {
			t.Errorf("the refusal %+v should say the limit is this server's", refusal)
		}
		if n := strings.Count(e.logs.String(), "rate limits: redis unavailable"); n < 1 || n > len(nodes) {
			t.Errorf("%d log lines say Redis is unavailable, want one per node at most:\n%s", n, e.logs.String())
		}
		for i, n := range nodes {
			if got := counterValue(t, n.tel, "surgepay_http_rate_limit_fallbacks_total"); got < 1 {
				t.Errorf("node %d: surgepay_http_rate_limit_fallbacks_total = %v, want > 0", i, got)
			}
		}
	})
}

// counterValue returns the value of an unlabelled counter.
func counterValue(t *testing.T, tel *telemetry.Telemetry, name string) float64 {
	t.Helper()
	mfs, err := tel.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}
