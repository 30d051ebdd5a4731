package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/surgepay/surgepay/cache/redistest"
	"github.com/surgepay/surgepay/internal/testenv"
)

// Bounds of the two-node cache test.
const (
	cacheSeenWait       = 5 * time.Second        // a write on one node seen by the other (a Redis push)
	cacheLoadBefore     = 500 * time.Millisecond // load with Redis up, then the kill
	cacheLoadAfter      = time.Second            // load with Redis dead
	cacheWorkersPerNode = 2
	// redisWarningsMax bounds one node's warnings over the whole test: a
	// few changes of state (each cache scope's breaker, the engine's
	// cache writes), whatever the number of requests.
	redisWarningsMax = 10
)

// TestServeRedisSharedByTwoNodes runs a real redis-server and two
// `surgepay serve` processes on one PostgreSQL database (SQLite cannot be
// shared by two serving processes), every cache entity in scope "global".
// It checks that a write on one node reaches the other's cached copy,
// that killing Redis mid-run keeps both nodes' requests succeeding, and
// that a node started while Redis is down starts and serves.
func TestServeRedisSharedByTwoNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds surgepay and runs three servers: not in -short")
	}
	pgURL := testenv.PostgresURL(t) // under CI, unset fails
	if pgURL == "" {
		t.Skip("SURGEPAY_TEST_POSTGRES_URL not set: two serving processes need one PostgreSQL database")
	}
	redis := redistest.Start(t)
	bin := buildSurgepay(t)
	cl := &cacheCluster{t: t, bin: bin, dataDir: t.TempDir(), pgURL: pgURL, schema: pgSchema(t, pgURL),
		config: writeFile(t, "surgepay.toml", fmt.Sprintf(`
[cache]
fallback_timeout = "100ms"
breaker_open_duration = "200ms"

[cache.redis]
global_addrs = [%q]

[cache.entities.api_keys]
scope = "global"
[cache.entities.customers]
scope = "global"
[cache.entities.payment_methods]
scope = "global"
[cache.entities.idempotency]
scope = "global"
`, redis.Addr))}
	a := cl.start("serve-a") // first alone: it creates the merchant, key and keyring
	b := cl.start("serve-b")

	t.Run("WriteOnOneNodeInvalidatesTheOther", func(t *testing.T) {
		cus, pm := a.customerWithCard(t, "Ada")
		// B caches both: a read that issues no SELECT came from the cache.
		b.eventuallyCached(t, "/v1/payment_methods/"+pm)
		b.eventuallyCached(t, "/v1/customers/"+cus)
		if p := b.sale(t, cus, pm, "sale-before-delete"); p.status != http.StatusOK {
			t.Fatalf("sale on B with the card: status %d, want 200; body %s", p.status, p.body)
		}

		a.c.must(t, "DELETE", "/v1/payment_methods/"+pm, "", nil, http.StatusOK, nil)
		a.c.must(t, "POST", "/v1/customers/"+cus, "rename-"+cus, map[string]any{"name": "Grace"}, http.StatusOK, nil)

		// Without the invalidation reaching B, B would serve its copies for
		// client_side_ttl (30s).
		b.eventually(t, "B sees A's delete of the card", func() bool {
			return b.get(t, "/v1/payment_methods/"+pm).status == http.StatusNotFound
		})
		if p := b.sale(t, cus, pm, "sale-after-delete"); p.status != http.StatusNotFound {
			t.Errorf("sale on B with the card deleted on A: status %d, want 404; body %s", p.status, p.body)
		}
		b.eventually(t, "B sees A's rename of the customer", func() bool {
			var got struct{ Name string }
			r := b.get(t, "/v1/customers/"+cus)
			return r.status == http.StatusOK && json.Unmarshal(r.body, &got) == nil && got.Name == "Grace"
		})
	})

	t.Run("MerchantDisabledByCLIRefusedOnEveryNode", func(t *testing.T) {
		// A merchant and key made by the CLI, a third process; both nodes
		// cache the key (in Redis and their client-side copies).
		out := cl.cli(t, "merchants", "create", "Shared")
		mid := fieldOf(t, out, "mer_")
		key := fieldOf(t, cl.cli(t, "keys", "create", "--merchant", mid), "sk_")
		for _, n := range []*cacheNode{a, b} {
			n.eventually(t, n.name+" accepts the new key", func() bool {
				return n.as(key).get(t, "/v1/customers").status == http.StatusOK
			})
		}
		cl.cli(t, "merchants", "disable", mid)
		// Without the invalidation through Redis, each node would accept
		// the key for the api_keys TTL (5 minutes).
		for _, n := range []*cacheNode{a, b} {
			n.eventually(t, n.name+" refuses the disabled merchant's key", func() bool {
				return n.as(key).get(t, "/v1/customers").status == http.StatusForbidden
			})
		}
		cl.cli(t, "merchants", "enable", mid)
		for _, n := range []*cacheNode{a, b} {
			n.eventually(t, n.name+" accepts the enabled merchant's key", func() bool {
				return n.as(key).get(t, "/v1/customers").status == http.StatusOK
			})
		}
	})

	t.Run("RedisKilledMidRun", func(t *testing.T) {
		cus, pm := a.customerWithCard(t, "Load")
		b.eventuallyCached(t, "/v1/payment_methods/"+pm)
		var (
			stop           atomic.Bool
			killed         atomic.Bool
			wg             sync.WaitGroup
			ok, afterKill  atomic.Int64
			failed         atomic.Int64
			firstFailure   atomic.Value
			perNodeAfterMu sync.Mutex
			perNodeAfter   = map[string]int{}
		)
		for _, n := range []*cacheNode{a, b} {
			for w := range cacheWorkersPerNode {
				wg.Go(func() {
					for i := 0; !stop.Load(); i++ {
						r := n.saleOnce(cus, pm, fmt.Sprintf("%s-w%d-%d", n.name, w, i))
						if r.status != http.StatusOK {
							failed.Add(1)
							firstFailure.CompareAndSwap(nil, fmt.Sprintf("%s: status %d, err %v, body %s", n.name, r.status, r.err, r.body))
							continue
						}
						ok.Add(1)
						if killed.Load() {
							afterKill.Add(1)
							perNodeAfterMu.Lock()
							perNodeAfter[n.name]++
							perNodeAfterMu.Unlock()
						}
					}
				})
			}
		}
		time.Sleep(cacheLoadBefore)
		redis.Kill()
		killed.Store(true)
		time.Sleep(cacheLoadAfter)
		stop.Store(true)
		wg.Wait()
		t.Logf("%d sales answered 200 (%d after Redis was killed: %v), %d failed", ok.Load(), afterKill.Load(), perNodeAfter, failed.Load())
		if f := failed.Load(); f > 0 {
			t.Fatalf("%d sales failed; first: %v", f, firstFailure.Load())
		}
		for _, n := range []*cacheNode{a, b} {
			if perNodeAfter[n.name] == 0 {
				t.Errorf("%s answered no sale after Redis was killed, want some", n.name)
			}
			// A dead Redis is logged once per change of state (the cache's
			// breaker, the engine's cache writes), not once per request: it
			// was one warning per sale.
			b, err := os.ReadFile(n.p.logPath)
			if err != nil {
				t.Fatal(err)
			}
			var warns []string
			for _, l := range strings.Split(string(b), "\n") {
				if strings.Contains(l, "WARN") {
					warns = append(warns, l)
				}
			}
			if len(warns) > redisWarningsMax {
				t.Errorf("%s logged %d warnings for %d sales with Redis dead, want at most %d; first ones:\n%s",
					n.name, len(warns), perNodeAfter[n.name], redisWarningsMax, strings.Join(warns[:redisWarningsMax], "\n"))
			}
		}
	})

	t.Run("StartWithRedisDown", func(t *testing.T) {
		redis.Kill() // dead already if the previous subtest ran; make sure
		c := cl.start("serve-c")
		cus, pm := c.customerWithCard(t, "Cold")
		if p := c.sale(t, cus, pm, "sale-redis-down"); p.status != http.StatusOK {
			t.Fatalf("sale on a node started with Redis down: status %d, want 200; body %s", p.status, p.body)
		}
		if r := b.get(t, "/v1/customers/"+cus); r.status != http.StatusOK {
			t.Errorf("B reads C's customer: status %d, want 200", r.status)
		}
	})
}

// cacheCluster starts serve processes sharing one database, data folder
// (keyring, development key) and cache config.
type cacheCluster struct {
	t                                   *testing.T
	bin, dataDir, pgURL, schema, config string
	key                                 string
}

// env is the environment of the cluster's processes (addr: listen).
func (cl *cacheCluster) env(addr string) map[string]string {
	return map[string]string{"SURGEPAY_CONFIG": cl.config, "SURGEPAY_DATA_DIR": cl.dataDir, "SURGEPAY_LISTEN": addr,
		"SURGEPAY_ADMIN_LISTEN": "off", "SURGEPAY_LOG_LEVEL": "warn", "SURGEPAY_DEBUG": "true",
		"SURGEPAY_STORAGE": "postgres", "SURGEPAY_POSTGRES_DSN": cl.pgURL, "SURGEPAY_POSTGRES_SCHEMA": cl.schema}
}

// cli runs a surgepay command against the cluster's database and cache,
// as an operator would on another host, and returns its output.
func (cl *cacheCluster) cli(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, cl.bin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SURGEPAY_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	for k, v := range cl.env("127.0.0.1:0") {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("surgepay %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// fieldOf returns the first word of out that starts with prefix.
func fieldOf(t *testing.T, out, prefix string) string {
	t.Helper()
	for _, f := range strings.Fields(out) {
		if strings.HasPrefix(f, prefix) {
			return strings.TrimRight(f, ",.:")
		}
	}
	t.Fatalf("no %s… in %q", prefix, out)
	return ""
}

// as is the node with another API key.
func (n *cacheNode) as(key string) *cacheNode {
	c := *n.c
	c.key = key
	return &cacheNode{name: n.name, p: n.p, c: &c}
}

// cacheNode is one serve process and a client of it.
type cacheNode struct {
	name string
	p    *process
	c    *client
}

func (cl *cacheCluster) start(name string) *cacheNode {
	t := cl.t
	t.Helper()
	addr := freeAddr(t)
	p := startProcess(t, name, cl.bin, []string{"serve"}, cl.env(addr))
	if err := waitHealthy("http://"+addr, startTimeout, p.doneErr()); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if cl.key == "" {
		cl.key = readDevKey(t, cl.dataDir)
	}
	return &cacheNode{name: name, p: p, c: newClient("http://"+addr, cl.key)}
}

// customerWithCard creates a customer and saves a test card for it.
func (n *cacheNode) customerWithCard(t *testing.T, name string) (customer, method string) {
	t.Helper()
	var cus, pm object
	n.c.must(t, "POST", "/v1/customers", "cus-"+name, map[string]any{"name": name}, http.StatusOK, &cus)
	n.c.must(t, "POST", "/v1/payment_methods", "pm-"+name, map[string]any{"customer": cus.ID,
		"card": map[string]any{"number": "4242424242424242", "exp_month": 12, "exp_year": 2035, "cvc": "123"}}, http.StatusOK, &pm)
	return cus.ID, pm.ID
}

// cacheResponse is an answer, or the error of a request that got none.
type cacheResponse struct {
	status int
	body   []byte
	sql    string // Surgepay-Sql (debug)
	err    error
}

func (n *cacheNode) do(method, path, key string, body any) cacheResponse {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	r, err := n.c.do(ctx, method, path, key, body)
	if err != nil {
		return cacheResponse{err: err}
	}
	return cacheResponse{status: r.status, body: r.body, sql: r.header.Get("Surgepay-Sql")}
}

func (n *cacheNode) get(t *testing.T, path string) cacheResponse {
	t.Helper()
	r := n.do("GET", path, "", nil)
	if r.err != nil {
		t.Fatalf("%s GET %s: %v", n.name, path, r.err)
	}
	return r
}

// saleOnce authorizes and captures 10.00 with a saved card.
func (n *cacheNode) saleOnce(customer, method, key string) cacheResponse {
	return n.do("POST", "/v1/payments", key, map[string]any{"amount": 1000, "currency": "usd",
		"customer": customer, "payment_method": method, "capture_method": "automatic"})
}

func (n *cacheNode) sale(t *testing.T, customer, method, key string) cacheResponse {
	t.Helper()
	r := n.saleOnce(customer, method, key)
	if r.err != nil {
		t.Fatalf("%s sale: %v", n.name, r.err)
	}
	return r
}

// eventuallyCached waits until a GET of path answers 200 without a
// SELECT: from this node's memory or from Redis.
func (n *cacheNode) eventuallyCached(t *testing.T, path string) {
	t.Helper()
	n.eventually(t, n.name+" answers GET "+path+" from the cache", func() bool {
		r := n.get(t, path)
		return r.status == http.StatusOK && strings.Contains(r.sql, "select=0")
	})
}

func (n *cacheNode) eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(cacheSeenWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, cacheSeenWait)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
