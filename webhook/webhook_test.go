package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/internal/testenv"
	"github.com/surgepay/surgepay/vault"
	"github.com/surgepay/surgepay/webhook"
)

func TestSignatureVerify(t *testing.T) {
	secret := []byte("whsec_test")
	body := []byte(`{"id":"evt_1"}`)
	at := time.Unix(1_700_000_000, 0)
	h := webhook.Signature(at, body, secret)
	tests := []struct {
		name   string
		secret []byte
		header string
		body   []byte
		now    time.Time
		want   error
	}{
		{"OK", secret, h, body, at, nil},
		{"OKWithinTolerance", secret, h, body, at.Add(4 * time.Minute), nil},
		{"OKSecondSignature", secret, h + ",v1=00", body, at, nil},
		{"ErrBodyChanged", secret, h, []byte(`{"id":"evt_2"}`), at, webhook.ErrSignatureMismatch},
		{"ErrOtherSecret", []byte("whsec_other"), h, body, at, webhook.ErrSignatureMismatch},
		{"ErrTooOld", secret, h, body, at.Add(6 * time.Minute), webhook.ErrSignatureExpired},
		{"ErrMalformed", secret, "v1=zz", body, at, webhook.ErrSignatureMalformed},
		{"ErrNoSignature", secret, "t=1700000000", body, at, webhook.ErrSignatureMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := webhook.Verify(tt.secret, tt.header, tt.body, 5*time.Minute, tt.now); got != tt.want {
				t.Errorf("Verify = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestTruncateKeepsValidUTF8(t *testing.T) {
	// A receiver's malformed status line reaches the error text; cut in the
	// middle of a character it would be invalid UTF-8, which PostgreSQL
	// refuses (failing the whole batch of results).
	s := strings.Repeat("a", webhook.ErrorBytesMax-1) + "é" + strings.Repeat("b", 10) + "\xff"
	got := webhook.Truncate(s)
	if !utf8.ValidString(got) || len(got) > webhook.ErrorBytesMax || !strings.HasPrefix(got, strings.Repeat("a", webhook.ErrorBytesMax-1)) {
		t.Fatalf("Truncate: %d bytes, valid UTF-8 %v", len(got), utf8.ValidString(got))
	}
	if got := webhook.Truncate("ok\xffok"); got != "okok" {
		t.Fatalf("Truncate of a short invalid string: %q", got)
	}
}

func TestPublicAddr(t *testing.T) {
	for addr, want := range map[string]bool{
		"93.184.216.34": true, "2606:2800:220:1:248:1893:25c8:1946": true,
		"127.0.0.1": false, "::1": false, "10.1.2.3": false, "172.16.0.1": false, "192.168.1.1": false,
		"169.254.169.254": false, "100.64.0.1": false, "0.0.0.0": false, "::": false, "fc00::1": false,
		"fe80::1": false, "224.0.0.1": false, "::ffff:127.0.0.1": false,
		// IPv6 forms that carry an IPv4 address, and other non-public ranges.
		"64:ff9b::a00:5": false, "64:ff9b:1::a00:5": false, "2002:a00:5::1": false, "2001:0:a00:5::1": false,
		"::a00:5": false, "fec0::1": false, "198.18.0.1": false, "192.0.0.8": false, "240.0.0.1": false,
	} {
		if got := webhook.PublicAddr(netip.MustParseAddr(addr)); got != want {
			t.Errorf("PublicAddr(%s) = %v, want %v", addr, got, want)
		}
	}
}

// receiver is a real HTTP endpoint on 127.0.0.1 that answers the statuses
// of fail in turn, then 200, and records every request.
type receiver struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []received
	// fail holds the statuses of the first answers.
	fail []int
	// answered counts 2xx answers.
	answered int
}

type received struct {
	header http.Header
	body   []byte
	status int
}

func newReceiver(t *testing.T, fail ...int) *receiver {
	r := &receiver{fail: fail}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		status := http.StatusOK
		if n := len(r.got); n < len(r.fail) {
			status = r.fail[n]
		}
		r.got = append(r.got, received{header: req.Header.Clone(), body: body, status: status})
		if status < 300 {
			r.answered++
		}
		r.mu.Unlock()
		w.WriteHeader(status)
		w.Write(bytes.Repeat([]byte("x"), 100<<10)) // more than the dispatcher reads
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) requests() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

// clock is a test clock the dispatcher reads.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// fixture is a store with a merchant and one endpoint.
type fixture struct {
	store    surgepay.Store
	ws       surgepay.WebhookStore
	keys     *vault.Keyring
	merchant string
	endpoint *surgepay.WebhookEndpoint
	secret   []byte
	clock    *clock
	logs     *bytes.Buffer
	logMu    *sync.Mutex
}

func newFixture(t *testing.T, store surgepay.Store, url string) *fixture {
	t.Helper()
	keys, err := vault.Generate()
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{store: store, ws: store.(surgepay.WebhookStore), keys: keys, clock: &clock{now: time.Now().UTC().Add(time.Minute)}, // after the sales to come
		logs: &bytes.Buffer{}, logMu: &sync.Mutex{}}
	m := &surgepay.Merchant{ID: surgepay.NewID("mer"), Name: "m", Created: time.Now()}
	apply(t, store, &surgepay.Write{Merchant: m})
	f.merchant = m.ID
	f.endpoint = f.addEndpoint(t, url)
	return f
}

func (f *fixture) addEndpoint(t *testing.T, url string) *surgepay.WebhookEndpoint {
	t.Helper()
	ep := &surgepay.WebhookEndpoint{ID: surgepay.NewID("we"), MerchantID: f.merchant, URL: url, Created: time.Now()}
	f.secret = []byte("whsec_" + ep.ID)
	sealed, err := f.keys.Encrypt(f.secret, surgepay.WebhookSecretAAD(f.merchant, ep.ID))
	if err != nil {
		t.Fatal(err)
	}
	ep.SealedSecret = sealed
	apply(t, f.store, &surgepay.Write{WebhookEndpointInsert: ep})
	return ep
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (f *fixture) dispatcher(t *testing.T, cfg webhook.Config) *webhook.Dispatcher {
	t.Helper()
	cfg.Store, cfg.Vault, cfg.AllowPrivateNetworks = f.ws, f.keys, true
	if cfg.Now == nil {
		cfg.Now = f.clock.Now
	}
	cfg.Logger = slog.New(slog.NewJSONHandler(lockedWriter{f.logMu, f.logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	d, err := webhook.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func apply(t testing.TB, s surgepay.Store, w *surgepay.Write) {
	t.Helper()
	if err := s.Apply(context.Background(), w); err != nil {
		t.Fatalf("Apply: %v", err)
	}
}

// sale stores a sale of the merchant with its events, prepared by an
// Outbox as the engine does, and returns the Write.
func (f *fixture) sale(t testing.TB, ob *webhook.Outbox) *surgepay.Write {
	t.Helper()
	now := time.Now().UTC()
	p := &surgepay.Payment{ID: surgepay.NewID("pay"), MerchantID: f.merchant, PaymentMethodID: "pm_1", Amount: 1000,
		Currency: "usd", CaptureMethod: surgepay.CaptureAutomatic, Status: surgepay.StatusSucceeded,
		AmountAuthorized: 1000, AmountCaptured: 1000, Path: "standard", Version: 1, Created: now, Updated: now,
		Transactions: []surgepay.Transaction{{ID: surgepay.NewID("txn"), Type: surgepay.TxAuthorization,
			Status: surgepay.TxSucceeded, Amount: 1000, Created: now}}}
	w := &surgepay.Write{PaymentInsert: p, Events: []*surgepay.Event{{ID: surgepay.NewID("evt"), PaymentID: p.ID,
		MerchantID: f.merchant, Type: surgepay.TxAuthorization, ToStatus: surgepay.StatusSucceeded, Amount: 1000,
		ActorKeyID: "key_1", RequestID: "req_1", Created: now}}}
	ob.Prepare(w)
	if w.Webhook == nil {
		t.Fatal("Prepare set no webhook for a merchant with an endpoint")
	}
	apply(t, f.store, w)
	return w
}

func (f *fixture) outbox(t testing.TB) *webhook.Outbox {
	t.Helper()
	ob := webhook.NewOutbox(webhook.OutboxConfig{Store: f.ws})
	if err := ob.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	return ob
}

func deliverDue(t *testing.T, d *webhook.Dispatcher) int {
	t.Helper()
	n, err := d.DeliverDue(t.Context())
	if err != nil {
		t.Fatalf("DeliverDue: %v", err)
	}
	return n
}

func backlog(t *testing.T, ws surgepay.WebhookStore) surgepay.WebhookBacklog {
	t.Helper()
	b, err := ws.WebhookBacklog(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDeliverySigned: the receiver gets the event body, its ID in a
// header, and a signature that verifies with the endpoint's secret.
func TestDeliverySigned(t *testing.T) {
	for _, b := range testenv.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			rcv := newReceiver(t)
			f := newFixture(t, b.Open(t), rcv.srv.URL+"/hooks?token=abc")
			w := f.sale(t, f.outbox(t))
			d := f.dispatcher(t, webhook.Config{})
			if n := deliverDue(t, d); n != 1 {
				t.Fatalf("DeliverDue attempted %d, want 1", n)
			}
			got := rcv.requests()
			if len(got) != 1 {
				t.Fatalf("receiver got %d requests, want 1", len(got))
			}
			r := got[0]
			if err := webhook.Verify(f.secret, r.header.Get(webhook.HeaderSignature), r.body, 5*time.Minute, f.clock.Now()); err != nil {
				t.Errorf("signature %q does not verify: %v", r.header.Get(webhook.HeaderSignature), err)
			}
			var ev webhook.Event
			if err := json.Unmarshal(r.body, &ev); err != nil {
				t.Fatalf("body %s: %v", r.body, err)
			}
			last := w.Events[len(w.Events)-1]
			if ev.ID != last.ID || r.header.Get(webhook.HeaderEventID) != last.ID || ev.Type != surgepay.WebhookPaymentSucceeded ||
				r.header.Get(webhook.HeaderEventType) != ev.Type || r.header.Get(webhook.HeaderAttempt) != "1" {
				t.Errorf("event %+v, headers %v; want ID %s, type payment.succeeded, attempt 1", ev, r.header, last.ID)
			}
			if obj, _ := ev.Data.Object.(map[string]any); obj["id"] != w.PaymentInsert.ID || obj["status"] != "succeeded" {
				t.Errorf("data.object = %v, want the payment %s, succeeded", ev.Data.Object, w.PaymentInsert.ID)
			}
			if s := d.Stats(); s.Delivered != 1 || s.Retried != 0 {
				t.Errorf("Stats = %+v, want 1 delivered", s)
			}
			if bl := backlog(t, f.ws); bl.Pending != 0 {
				t.Errorf("backlog after delivery = %+v, want none pending", bl)
			}
			if deliverDue(t, d) != 0 || len(rcv.requests()) != 1 {
				t.Error("a delivered event was sent again")
			}
		})
	}
}

// TestRetriesThenSuccess: a receiver failing 3 times then answering 200
// gets 4 requests of the same event and answers one success; the waits
// grow; nothing is left.
func TestRetriesThenSuccess(t *testing.T) {
	for _, b := range testenv.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			rcv := newReceiver(t, 500, 503, 404)
			f := newFixture(t, b.Open(t), rcv.srv.URL)
			f.sale(t, f.outbox(t))
			d := f.dispatcher(t, webhook.Config{BackoffBase: time.Minute, BackoffMax: time.Hour})
			for round := 0; round < 10 && len(rcv.requests()) < 4; round++ {
				deliverDue(t, d)
				if deliverDue(t, d) != 0 {
					t.Fatal("a failed delivery was due again at once")
				}
				f.clock.Add(time.Hour) // past any backoff
			}
			got := rcv.requests()
			if len(got) != 4 || rcv.answered != 1 {
				t.Fatalf("receiver got %d requests, answered %d successes; want 4 and 1", len(got), rcv.answered)
			}
			for i, r := range got {
				if r.header.Get(webhook.HeaderAttempt) != strconv.Itoa(i+1) || r.header.Get(webhook.HeaderEventID) != got[0].header.Get(webhook.HeaderEventID) {
					t.Errorf("request %d: attempt %q event %q", i, r.header.Get(webhook.HeaderAttempt), r.header.Get(webhook.HeaderEventID))
				}
				if !bytes.Equal(r.body, got[0].body) {
					t.Errorf("request %d: body differs from the first", i)
				}
			}
			f.clock.Add(24 * time.Hour)
			if n := deliverDue(t, d); n != 0 {
				t.Errorf("after the success, %d more attempts", n)
			}
			if s := d.Stats(); s.Delivered != 1 || s.Retried != 3 || s.Failed != 0 {
				t.Errorf("Stats = %+v, want 1 delivered, 3 retried", s)
			}
		})
	}
}

// TestRetriesBounded: a receiver that always fails gets AttemptsMax
// requests, then the delivery is kept as failed and never sent again.
func TestRetriesBounded(t *testing.T) {
	for _, b := range testenv.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			fail := make([]int, 100)
			for i := range fail {
				fail[i] = 500
			}
			rcv := newReceiver(t, fail...)
			f := newFixture(t, b.Open(t), rcv.srv.URL)
			f.sale(t, f.outbox(t))
			d := f.dispatcher(t, webhook.Config{AttemptsMax: 4, BackoffBase: time.Minute, BackoffMax: time.Hour})
			for range 20 {
				deliverDue(t, d)
				f.clock.Add(time.Hour)
			}
			if n := len(rcv.requests()); n != 4 {
				t.Fatalf("receiver got %d requests, want AttemptsMax = 4", n)
			}
			if bl := backlog(t, f.ws); bl.Pending != 0 || bl.Failed != 1 {
				t.Errorf("backlog = %+v, want 1 failed, kept", bl)
			}
			if s := d.Stats(); s.Retried != 3 || s.Failed != 1 {
				t.Errorf("Stats = %+v, want 3 retried, 1 failed", s)
			}
		})
	}
}

// TestTimeoutAndPrivateAddressRetry: a receiver slower than the timeout,
// and a loopback URL while private networks are refused, are failed
// attempts, retried later; the logged reasons hold neither URL nor secret.
func TestTimeoutAndPrivateAddressRetry(t *testing.T) {
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
	defer slow.Close()
	defer close(release)
	f := newFixture(t, testenv.OpenSQLite(t), slow.URL+"/slow?token=sekrit")
	f.sale(t, f.outbox(t))
	d := f.dispatcher(t, webhook.Config{Timeout: 50 * time.Millisecond})
	deliverDue(t, d)
	if s := d.Stats(); s.Retried != 1 {
		t.Fatalf("Stats after a timeout = %+v, want 1 retried", s)
	}

	rcv := newReceiver(t)
	g := newFixture(t, testenv.OpenSQLite(t), rcv.srv.URL+"/hooks?token=sekrit")
	g.sale(t, g.outbox(t))
	cfg := webhook.Config{Store: g.ws, Vault: g.keys, Now: g.clock.Now,
		Logger: slog.New(slog.NewJSONHandler(lockedWriter{g.logMu, g.logs}, nil))}
	strict, err := webhook.New(cfg) // AllowPrivateNetworks false
	if err != nil {
		t.Fatal(err)
	}
	deliverDue(t, strict)
	if len(rcv.requests()) != 0 || strict.Stats().Retried != 1 {
		t.Fatalf("a loopback endpoint was reached with private networks refused (%d requests, %+v)", len(rcv.requests()), strict.Stats())
	}
	for _, logs := range []string{f.logs.String(), g.logs.String()} {
		for _, secret := range []string{"sekrit", string(f.secret), string(g.secret), "127.0.0.1"} {
			if bytes.Contains([]byte(logs), []byte(secret)) {
				t.Errorf("logs hold %q:\n%s", secret, logs)
			}
		}
	}
	if !bytes.Contains(g.logs.Bytes(), []byte("address not allowed")) || !bytes.Contains(f.logs.Bytes(), []byte("timeout")) {
		t.Errorf("logs do not say why the attempts failed:\n%s\n%s", f.logs.String(), g.logs.String())
	}
}

// TestDeletedEndpointDropped: the deliveries of a deleted endpoint are
// dropped, not sent.
func TestDeletedEndpointDropped(t *testing.T) {
	rcv := newReceiver(t)
	f := newFixture(t, testenv.OpenSQLite(t), rcv.srv.URL)
	f.sale(t, f.outbox(t))
	apply(t, f.store, &surgepay.Write{WebhookEndpointDelete: f.endpoint})
	d := f.dispatcher(t, webhook.Config{})
	deliverDue(t, d)
	if len(rcv.requests()) != 0 || d.Stats().Dropped != 1 || backlog(t, f.ws).Pending != 0 {
		t.Errorf("requests %d, stats %+v: want the delivery dropped", len(rcv.requests()), d.Stats())
	}
}

// TestRunDeliversAndStops: Run delivers what is queued, woken by the
// outbox, and returns once ctx ends, with every result recorded.
func TestRunDeliversAndStops(t *testing.T) {
	for _, b := range testenv.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			rcv := newReceiver(t, 500)
			f := newFixture(t, b.Open(t), rcv.srv.URL)
			ob := f.outbox(t)
			d := f.dispatcher(t, webhook.Config{Now: time.Now, Wake: ob.Wake(), Workers: 4,
				BackoffBase: time.Millisecond, BackoffMax: 2 * time.Millisecond, PollInterval: 5 * time.Millisecond})
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan struct{})
			go func() { defer close(done); d.Run(ctx) }()
			const n = 20
			for range n {
				w := f.sale(t, ob)
				ob.Committed(w)
			}
			for d.Stats().Delivered < n {
				select {
				case <-t.Context().Done():
					t.Fatalf("stats %+v: not all delivered", d.Stats())
				case <-time.After(5 * time.Millisecond):
				}
			}
			cancel()
			<-done
			if got := len(rcv.requests()); got != n+1 || rcv.answered != n {
				t.Errorf("receiver got %d requests with %d successes, want %d and %d (one retry)", got, rcv.answered, n+1, n)
			}
			if bl := backlog(t, f.ws); bl.Pending != 0 {
				t.Errorf("backlog after Run = %+v, want none pending", bl)
			}
		})
	}
}

// TestOutboxLocalChangesSurviveRefresh: a merchant that got an endpoint on
// this node stays known while a refresh that read before it runs.
func TestOutboxLocalChanges(t *testing.T) {
	store := testenv.OpenSQLite(t)
	ws := store.(surgepay.WebhookStore)
	ob := webhook.NewOutbox(webhook.OutboxConfig{Store: ws})
	// Until a load succeeds, any merchant may have endpoints: the store's
	// fan-out decides, and nothing is left out.
	if !ob.HasEndpoints("mer_x") {
		t.Fatal("HasEndpoints false before the first load; a webhook would be lost")
	}
	if err := ob.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ob.HasEndpoints("mer_x") {
		t.Fatal("HasEndpoints before any endpoint")
	}
	ob.EndpointsChanged("mer_x", true)
	if !ob.HasEndpoints("mer_x") {
		t.Fatal("EndpointsChanged(true) not seen at once")
	}
	if err := ob.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if ob.HasEndpoints("mer_x") {
		t.Error("a refresh that started after the change, with no endpoint stored, kept the merchant")
	}
	w := &surgepay.Write{PaymentInsert: &surgepay.Payment{ID: "pay_1", MerchantID: "mer_y"},
		Events: []*surgepay.Event{{ID: "evt_1", MerchantID: "mer_y"}}}
	ob.Prepare(w)
	if w.Webhook != nil {
		t.Error("Prepare queued a webhook for a merchant without endpoints")
	}
}
