package main

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/surgepay/surgepay/cache/redistest"
	"github.com/surgepay/surgepay/internal/testenv"
)

// TestServeRateLimitAcrossNodes runs a real redis-server and two
// `surgepay serve` processes on one PostgreSQL database, the merchants
// limited to a burst of 10 and one request per 100 s: the two nodes admit
// 10 requests in all, not 10 each; with Redis killed each node admits its
// own burst and nothing answers 5xx.
func TestServeRateLimitAcrossNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds surgepay and runs three servers: not in -short")
	}
	pgURL := testenv.PostgresURL(t) // under CI, unset fails
	if pgURL == "" {
		t.Skip("SURGEPAY_TEST_POSTGRES_URL not set: two serving processes need one PostgreSQL database")
	}
	redis := redistest.Start(t)
	const burst = 10
	cl := &cacheCluster{t: t, bin: buildSurgepay(t), dataDir: t.TempDir(), pgURL: pgURL, schema: pgSchema(t, pgURL),
		config: writeFile(t, "surgepay.toml", fmt.Sprintf(`
[rate_limits]
timeout = "100ms"

[cache.redis]
global_addrs = [%q]

[merchants.default]
rate_limit = 0.01
rate_burst = %d
`, redis.Addr, burst))}
	nodes := []*cacheNode{cl.start("serve-a")} // first alone: it creates the merchant, key and keyring
	nodes = append(nodes, cl.start("serve-b"))

	count := func(requests int) []int {
		t.Helper()
		admitted := make([]int, len(nodes))
		for i := range requests {
			n := nodes[i%len(nodes)]
			r := n.get(t, "/v1/customers")
			switch r.status {
			case http.StatusOK:
				admitted[i%len(nodes)]++
			case http.StatusTooManyRequests:
			default:
				t.Fatalf("%s: got %d %s, want 200 or 429", n.name, r.status, r.body)
			}
		}
		return admitted
	}
	if got := count(4 * burst); got[0]+got[1] != burst {
		t.Errorf("the two nodes admitted %v, want %d in all (each alone admits %d)", got, burst, burst)
	}
	redis.Kill()
	if got := count(4 * burst); got[0] != burst || got[1] != burst {
		t.Errorf("with Redis down the nodes admitted %v, want %d each (their own buckets)", got, burst)
	}
}
