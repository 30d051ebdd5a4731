package webhook_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/internal/testenv"
	"github.com/surgepay/surgepay/vault"
	"github.com/surgepay/surgepay/webhook"
)

// stuckReceiver is a real endpoint on 127.0.0.1 that never answers: it
// holds every request until release is closed, then answers 200. over is
// closed once it holds more than bound requests at once.
type stuckReceiver struct {
	srv     *httptest.Server
	bound   int
	release chan struct{}
	over    chan struct{}

	mu       sync.Mutex
	held     int
	heldMax  int
	events   []string // Surgepay-Event-Id of each request, in arrival order
	attempts []string // Surgepay-Delivery-Attempt of each request
}

func newStuckReceiver(t *testing.T, bound int) *stuckReceiver {
	r := &stuckReceiver{bound: bound, release: make(chan struct{}), over: make(chan struct{})}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.events = append(r.events, req.Header.Get(webhook.HeaderEventID))
		r.attempts = append(r.attempts, req.Header.Get(webhook.HeaderAttempt))
		r.held++
		if r.held > r.bound && r.heldMax <= r.bound {
			close(r.over)
		}
		r.heldMax = max(r.heldMax, r.held)
		r.mu.Unlock()
		select {
		case <-r.release:
		case <-req.Context().Done():
		}
		r.mu.Lock()
		r.held--
		r.mu.Unlock()
	}))
	t.Cleanup(r.srv.Close) // after the test has released it
	return r
}

// stats returns the requests held now, the most held at once, and the
// event IDs and attempt numbers received.
func (r *stuckReceiver) stats() (held, heldMax int, events, attempts []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.held, r.heldMax, slices.Clone(r.events), slices.Clone(r.attempts)
}

// otherMerchant returns a fixture for another merchant of f's store, with
// f's keyring and clock (so that one dispatcher serves both) and one
// endpoint at url.
func (f *fixture) otherMerchant(t *testing.T, url string) *fixture {
	t.Helper()
	g := *f
	m := &surgepay.Merchant{ID: surgepay.NewID("mer"), Name: "other", Created: time.Now()}
	apply(t, g.store, &surgepay.Write{Merchant: m})
	g.merchant = m.ID
	g.endpoint = g.addEndpoint(t, url)
	return &g
}

// TestSlowEndpointDoesNotHoldEveryWorker: merchant A's endpoint never
// answers, merchant B's answers at once, and A's deliveries are all older
// than B's. A's endpoint holds EndpointInflightMax workers and no more;
// B's deliveries all arrive while it is stuck; A's others wait, due and
// unattempted, and go once it answers. Before the bound, the oldest-first
// claims gave every worker to A's endpoint and B's waited for A's timeouts.
func TestSlowEndpointDoesNotHoldEveryWorker(t *testing.T) {
	for _, b := range testenv.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			const bound, n = 2, 8
			stuck := newStuckReceiver(t, bound)
			healthy := newReceiver(t)
			a := newFixture(t, b.Open(t), stuck.srv.URL)
			other := a.otherMerchant(t, healthy.srv.URL)
			ob := a.outbox(t)
			var aEvents []string
			for range n {
				w := a.sale(t, ob)
				aEvents = append(aEvents, w.Webhook.ID)
			}
			for range n {
				other.sale(t, ob)
			}
			d := a.dispatcher(t, webhook.Config{Now: time.Now, Wake: ob.Wake(), Workers: 2 * bound,
				EndpointInflightMax: bound, Timeout: webhook.TimeoutMax, PollInterval: 5 * time.Millisecond})
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan struct{})
			go func() { defer close(done); d.Run(ctx) }()
			var releaseOnce sync.Once
			release := func() { releaseOnce.Do(func() { close(stuck.release) }) }
			defer func() { release(); cancel(); <-done }()

			waitFor(t, stuck, "A's endpoint to hold its bound and B's deliveries to arrive", func() bool {
				held, _, _, _ := stuck.stats()
				return held == bound && healthy.answeredCount() == n
			})
			_, _, events, _ := stuck.stats()
			slices.Sort(events)
			oldest := slices.Sorted(slices.Values(aEvents[:bound]))
			if !slices.Equal(events, oldest) {
				t.Errorf("while B's %d arrived, A's endpoint got events %v; want only A's %d oldest, %v",
					n, events, bound, oldest)
			}
			if got := len(healthy.requests()); got != n {
				t.Errorf("B's endpoint got %d requests, want %d", got, n)
			}

			release()
			waitFor(t, nil, "A's deliveries", func() bool { return d.Stats().Delivered == 2*n })
			_, heldMax, events, attempts := stuck.stats()
			if heldMax != bound || len(events) != n {
				t.Errorf("A's endpoint held at most %d requests at once and got %d; want %d and %d", heldMax, len(events), bound, n)
			}
			for i, at := range attempts {
				if at != "1" {
					t.Errorf("A's request %d was attempt %s, want 1: a delivery left for later is not an attempt", i, at)
				}
			}
			if s := d.Stats(); s.Retried != 0 || s.Failed != 0 {
				t.Errorf("Stats = %+v, want no failed attempt", s)
			}
		})
	}
}

func (r *receiver) answeredCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.answered
}

// waitFor waits until done reports true; it fails at once if stuck (when
// not nil) holds more requests than its bound.
func waitFor(t *testing.T, stuck *stuckReceiver, what string, done func() bool) {
	t.Helper()
	var over chan struct{}
	if stuck != nil {
		over = stuck.over
	}
	for !done() {
		select {
		case <-over:
			_, heldMax, events, _ := stuck.stats()
			t.Fatalf("waiting for %s: the stuck endpoint holds %d requests at once (%d events), more than its bound %d",
				what, heldMax, len(events), stuck.bound)
		case <-t.Context().Done():
			t.Fatalf("waiting for %s: %v", what, t.Context().Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestFailingEndpointOneAtATime: an endpoint whose attempts keep failing
// gets EndpointInflightMax deliveries a round until FailingEndpointStreak
// attempts in a row failed, then one a round, the others left due; once
// one succeeds, EndpointInflightMax again.
func TestFailingEndpointOneAtATime(t *testing.T) {
	const bound = 4
	rounds := (webhook.FailingEndpointStreak + bound - 1) / bound // of bound failed attempts each
	fail := make([]int, rounds*bound+1)                           // and one failed probe
	for i := range fail {
		fail[i] = http.StatusServiceUnavailable
	}
	rcv := newReceiver(t, fail...)
	f := newFixture(t, testenv.OpenSQLite(t), rcv.srv.URL)
	ob := f.outbox(t)
	for range len(fail) + 1 + bound {
		f.sale(t, ob)
	}
	d := f.dispatcher(t, webhook.Config{Workers: 2 * bound, EndpointInflightMax: bound,
		BackoffBase: time.Minute, BackoffMax: time.Minute})
	var got []int
	for range rounds {
		got = append(got, deliverDue(t, d))
	}
	got = append(got, deliverDue(t, d)) // a failing probe
	got = append(got, deliverDue(t, d)) // a probe that succeeds
	f.clock.Add(time.Hour)              // the retries are due
	got = append(got, deliverDue(t, d))
	want := append(slices.Repeat([]int{bound}, rounds), 1, 1, bound)
	if !slices.Equal(got, want) {
		t.Errorf("attempts per round = %v, want %v", got, want)
	}
	if n := rcv.answeredCount(); n != 1+bound {
		t.Errorf("receiver answered %d successes, want %d", n, 1+bound)
	}
}

func TestConfigEndpointInflightMax(t *testing.T) {
	store := testenv.OpenSQLite(t)
	keys, err := vault.Generate()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name                         string
		workers, endpointInflightMax int
		ok                           bool
	}{
		{"OKDefault", 0, 0, true},
		{"OKDefaultFewerWorkers", 2, 0, true},
		{"OKEqualsWorkers", 8, 8, true},
		{"ErrAboveWorkers", 8, 9, false},
		{"ErrNegative", 0, -1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := webhook.New(webhook.Config{Store: store.(surgepay.WebhookStore), Vault: keys,
				Workers: tt.workers, EndpointInflightMax: tt.endpointInflightMax})
			if (err == nil) != tt.ok {
				t.Errorf("New(Workers %d, EndpointInflightMax %d) = %v, want ok %v", tt.workers, tt.endpointInflightMax, err, tt.ok)
			}
		})
	}
}
