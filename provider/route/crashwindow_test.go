package route_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/provider/route"
	"github.com/surgepay/surgepay/provider/sim"
	"github.com/surgepay/surgepay/sqlite"
)

// flakyProcessor is a simulator served over HTTP on a fixed loopback
// address that can stop accepting connections (down) and come back with
// the same state (up), as a processor refusing connections would.
type flakyProcessor struct {
	t    *testing.T
	p    *sim.Provider
	addr string
	srv  *http.Server
}

func newFlakyProcessor(t *testing.T) *flakyProcessor {
	f := &flakyProcessor{t: t, p: sim.New(sim.DefaultConfig())}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.addr = ln.Addr().String()
	f.serve(ln)
	t.Cleanup(func() { f.srv.Close() })
	return f
}

func (f *flakyProcessor) serve(ln net.Listener) {
	f.srv = &http.Server{Handler: sim.NewHandler(f.p)}
	go f.srv.Serve(ln)
}

func (f *flakyProcessor) down() { f.srv.Close() }

func (f *flakyProcessor) up() {
	var ln net.Listener
	var err error
	for try := 0; try < 100; try++ { // the port was just released
		if ln, err = net.Listen("tcp", f.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		f.t.Fatal(err)
	}
	f.serve(ln)
}

func (f *flakyProcessor) client() surgepay.Provider {
	c, err := sim.NewClient("http://"+f.addr, sim.NewHTTPClient(2*time.Second))
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

// TestCrashWindowNeverChargesTwice is the failover crash window (issue
// 34): processor a performs an authorization, the node dies before its
// commit (the answer is dropped), a then refuses connections, and the
// client's retry under the same key reaches a new process (a fresh router
// over the same database). Before the attempt journal, the retry failed
// over to b, which charged too, 20 times in 20. Now the retry goes back
// to a, whose refusal proves nothing about the first attempt: the outcome
// is unknown at a (the engine stores the payment in processing, for the
// reconciler), b is never called, and once a is back its lookup finds
// the first charge. SURGEPAY_CRASH_WINDOW_TRIALS sets the trials
// (default 100).
func TestCrashWindowNeverChargesTwice(t *testing.T) {
	trials := 100
	if s := os.Getenv("SURGEPAY_CRASH_WINDOW_TRIALS"); s != "" {
		trials, _ = strconv.Atoi(s)
	}
	db, err := sqlite.Open(t.Context(), sqlite.Config{Path: filepath.Join(t.TempDir(), "surgepay.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	a := newFlakyProcessor(t)
	b := sim.New(sim.DefaultConfig())
	process := func() *route.Router { // a node's router, as a fresh process builds it
		r := route.New(nil)
		if err := r.Set([]route.Processor{{Name: route.DefaultName, Provider: b}, {Name: "a", Provider: a.client()}},
			fixed("a", route.DefaultName)); err != nil {
			t.Fatal(err)
		}
		if err := r.SetAttempts(db); err != nil {
			t.Fatal(err)
		}
		return r
	}
	for i := range trials {
		key := fmt.Sprintf("auth/mer_1/crash-%d", i)
		first, err := process().Authorize(t.Context(), authReq(key))
		if err != nil || !first.Approved {
			t.Fatalf("trial %d: first attempt: %+v, %v; want approved at a", i, first, err)
		}
		// The node dies here, before its commit; a refuses from now on.
		a.down()
		node := process()
		res, err := node.Authorize(t.Context(), authReq(key))
		if err == nil || !surgepay.IsUnknown(err) || surgepay.ProcessorOf(err) != "a" {
			t.Fatalf("trial %d: retry while a refuses: %+v, %v; want unknown at a", i, res, err)
		}
		if got, _ := b.Lookup(t.Context(), key); got != nil {
			t.Fatalf("trial %d: b charged too: %+v", i, got)
		}
		a.up()
		got, err := node.LookupOperation(t.Context(), &surgepay.LookupQuery{Key: key, Operation: surgepay.TxAuthorization,
			Processor: surgepay.ProcessorOf(err), MerchantID: "mer_1"})
		if err != nil || !got.Approved || got.Reference != first.Reference {
			t.Fatalf("trial %d: lookup at a once back: %+v, %v; want the first charge %s", i, got, err, first.Reference)
		}
	}
}

// refusingAuthorize refuses every authorization before sending it (a 429,
// say) and answers lookups from its simulator.
type refusingAuthorize struct{ *sim.Provider }

func (refusingAuthorize) Authorize(context.Context, *surgepay.AuthorizeRequest) (*surgepay.ProviderResult, error) {
	return nil, &surgepay.ProviderError{Outcome: surgepay.NotPerformed, Op: "authorize", Err: errors.New("429")}
}

// TestCrashWindowFailsOverOnceNotPerformed: a retry whose recorded
// attempt at a is proven not performed (a refuses the call now, and its
// lookup finds no operation under the key) fails over to b, and the
// journal then names b, where a later retry goes first.
func TestCrashWindowFailsOverOnceNotPerformed(t *testing.T) {
	db, err := sqlite.Open(t.Context(), sqlite.Config{Path: filepath.Join(t.TempDir(), "surgepay.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	a := refusingAuthorize{sim.New(sim.DefaultConfig())}
	b := sim.New(sim.DefaultConfig())
	r := route.New(nil)
	if err := r.Set([]route.Processor{{Name: route.DefaultName, Provider: b}, {Name: "a", Provider: a}},
		fixed("a", route.DefaultName)); err != nil {
		t.Fatal(err)
	}
	if err := r.SetAttempts(db); err != nil {
		t.Fatal(err)
	}
	// The node died between recording the attempt at a and sending it.
	key := "auth/mer_1/never-sent"
	if err := db.Apply(t.Context(), &surgepay.Write{ProviderAttempt: &surgepay.ProviderAttempt{Key: key, Processor: "a",
		Created: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	res, err := r.Authorize(t.Context(), authReq(key))
	if err != nil || !res.Approved || strings.HasPrefix(res.Reference, "a:") {
		t.Fatalf("retry: %+v, %v; want approved at the default processor", res, err)
	}
	at, err := db.FindProviderAttempt(t.Context(), key)
	if err != nil || at.Processor != route.DefaultName {
		t.Fatalf("journal: %+v, %v; want the attempt at %s", at, err, route.DefaultName)
	}
	// A retry now goes to b first and replays its charge.
	again, err := r.Authorize(t.Context(), authReq(key))
	if err != nil || again.Reference != res.Reference {
		t.Fatalf("second retry: %+v, %v; want the replay of %s", again, err, res.Reference)
	}
}

// TestAttemptsOnlyWhenRouted: a merchant with one processor records no
// attempt (the hot path keeps its statements).
func TestAttemptsOnlyWhenRouted(t *testing.T) {
	db, err := sqlite.Open(t.Context(), sqlite.Config{Path: filepath.Join(t.TempDir(), "surgepay.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	r := route.New(nil)
	if err := r.Set([]route.Processor{{Name: route.DefaultName, Provider: sim.New(sim.DefaultConfig())}},
		fixed(route.DefaultName)); err != nil {
		t.Fatal(err)
	}
	if err := r.SetAttempts(db); err != nil {
		t.Fatal(err)
	}
	var n surgepay.StatementCounter
	ctx := surgepay.WithStatementCounter(t.Context(), &n)
	if res, err := r.Authorize(ctx, authReq("auth/mer_1/one")); err != nil || !res.Approved {
		t.Fatalf("authorize: %+v, %v", res, err)
	}
	if got := n.Total(); got != 0 {
		t.Fatalf("%d statements for a merchant with one processor, want 0", got)
	}
	if _, err := db.FindProviderAttempt(t.Context(), "auth/mer_1/one"); surgepay.ErrorCode(err) != surgepay.ENOTFOUND {
		t.Fatalf("attempt recorded for a single processor: %v", err)
	}
}
