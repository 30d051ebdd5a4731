package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/api"
	"github.com/surgepay/surgepay/engine"
	"github.com/surgepay/surgepay/settle"
	"github.com/surgepay/surgepay/stage"
	"github.com/surgepay/surgepay/webhook"
)

// webhookEnv is an env with the outbox in the engine, a dispatcher, and a
// receiver on 127.0.0.1 that records what it gets.
type webhookEnv struct {
	*env
	outbox     *webhook.Outbox
	dispatcher *webhook.Dispatcher
	opener     surgepay.Opener // for settle, with a sealer in the engine

	mu       sync.Mutex
	received []delivery
	rcv      *httptest.Server
}

type delivery struct {
	header http.Header
	body   []byte
	event  webhook.Event
}

func newWebhookEnv(t *testing.T, store surgepay.Store, streamlined bool) *webhookEnv {
	t.Helper()
	we := &webhookEnv{}
	we.rcv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		d := delivery{header: r.Header.Clone(), body: b}
		if err := json.Unmarshal(b, &d.event); err != nil {
			t.Errorf("webhook body %s: %v", b, err)
		}
		we.mu.Lock()
		we.received = append(we.received, d)
		we.mu.Unlock()
	}))
	t.Cleanup(we.rcv.Close)
	ws := store.(surgepay.WebhookStore)
	we.outbox = webhook.NewOutbox(webhook.OutboxConfig{Store: ws, RenderPayment: api.PaymentObject})
	if err := we.outbox.Refresh(context.Background()); err != nil { // as serve does at start
		t.Fatal(err)
	}
	var vault surgepay.Vault
	var log *slog.Logger
	var sealer surgepay.Sealer
	if streamlined {
		pub, priv, err := stage.GenerateKeys()
		if err != nil {
			t.Fatal(err)
		}
		if sealer, err = stage.NewSealer(pub); err != nil {
			t.Fatal(err)
		}
		if we.opener, err = stage.NewOpener(priv); err != nil {
			t.Fatal(err)
		}
	}
	we.env = newEnvWith(t, store, func(c *engine.Config) {
		c.Outbox, vault, log = we.outbox, c.Vault, c.Logger
		if sealer != nil {
			c.Sealer = sealer
		}
	})
	d, err := webhook.New(webhook.Config{Store: ws, Vault: vault, AllowPrivateNetworks: true, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	we.dispatcher = d
	return we
}

// endpoint registers the receiver for the key's merchant and returns the
// endpoint's ID and secret.
func (e *webhookEnv) endpoint(key string) (string, string) {
	e.t.Helper()
	r := e.must(200, key, "POST", "/v1/webhook_endpoints", `{"url":"`+e.rcv.URL+`/hooks","description":"orders"}`)
	return r.str("id"), r.str("secret")
}

// deliver sends what is due and returns what the receiver got since the
// last call.
func (e *webhookEnv) deliver() []delivery {
	e.t.Helper()
	for {
		n, err := e.dispatcher.DeliverDue(context.Background())
		if err != nil {
			e.t.Fatalf("DeliverDue: %v", err)
		}
		if n == 0 {
			break
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	out := e.received
	e.received = nil
	return out
}

func types(ds []delivery) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.event.Type)
	}
	return out
}

func TestWebhookEndpoints(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ee *env) {
		e := newWebhookEnv(t, ee.store, false)
		r := e.must(200, e.keyA, "POST", "/v1/webhook_endpoints", `{"url":"https://shop.example.com/hooks?x=1","description":"orders"}`)
		id, secret := r.str("id"), r.str("secret")
		if !strings.HasPrefix(id, "we_") || !strings.HasPrefix(secret, engine.WebhookSecretPrefix) || len(secret) < 40 ||
			r.str("object") != "webhook_endpoint" || r.str("url") != "https://shop.example.com/hooks?x=1" || r.str("description") != "orders" {
			t.Fatalf("create: %s", r.Raw)
		}
		got := e.must(200, e.keyA, "GET", "/v1/webhook_endpoints/"+id, "")
		if got.str("id") != id || strings.Contains(string(got.Raw), secret) || got.JSON["secret"] != nil {
			t.Errorf("GET shows the secret or another endpoint: %s", got.Raw)
		}
		list := e.must(200, e.keyA, "GET", "/v1/webhook_endpoints", "")
		if data, _ := list.JSON["data"].([]any); len(data) != 1 || strings.Contains(string(list.Raw), secret) {
			t.Errorf("list: %s", list.Raw)
		}
		// Merchant B sees none of A's.
		if r := e.do(e.keyB, "GET", "/v1/webhook_endpoints/"+id, "", ""); r.Status != 404 || r.errField("param") != "id" {
			t.Errorf("B's GET of A's endpoint: %d %s, want 404 naming id", r.Status, r.Raw)
		}
		if r := e.do(e.keyB, "DELETE", "/v1/webhook_endpoints/"+id, "", ""); r.Status != 404 {
			t.Errorf("B's DELETE of A's endpoint: %d %s, want 404", r.Status, r.Raw)
		}
		if l := e.must(200, e.keyB, "GET", "/v1/webhook_endpoints", ""); strings.Contains(string(l.Raw), id) {
			t.Errorf("B's list holds A's endpoint: %s", l.Raw)
		}

		// An Idempotency-Key replay answers the endpoint, not its secret,
		// and creates nothing more.
		body := `{"url":"https://shop.example.com/other"}`
		first := e.do(e.keyA, "POST", "/v1/webhook_endpoints", body, "we-1")
		again := e.do(e.keyA, "POST", "/v1/webhook_endpoints", body, "we-1")
		if first.Status != 200 || first.str("secret") == "" || again.Status != 200 || again.Header.Get("Idempotent-Replayed") != "true" ||
			again.str("id") != first.str("id") || again.JSON["secret"] != nil {
			t.Errorf("idempotent create:\n first %d %s\n again %d %s", first.Status, first.Raw, again.Status, again.Raw)
		}
		rec, err := e.store.FindIdempotency(context.Background(), e.merchants[0], "we-1")
		if err != nil || strings.Contains(string(rec.Body), first.str("secret")) || strings.Contains(string(rec.Body), "whsec_") {
			t.Errorf("stored idempotency record (%v) holds the secret: %s", err, rec.Body)
		}
		ep, err := e.store.(surgepay.WebhookStore).FindWebhookEndpoint(context.Background(), e.merchants[0], id)
		if err != nil || strings.Contains(string(ep.SealedSecret), secret) || strings.Contains(string(ep.SealedSecret), secret[6:]) {
			t.Errorf("stored endpoint (%v): the secret is not sealed", err)
		}
		if l := e.must(200, e.keyA, "GET", "/v1/webhook_endpoints", ""); len(l.JSON["data"].([]any)) != 2 {
			t.Errorf("after an idempotent create and its replay: %s, want 2 endpoints", l.Raw)
		}

		// The bound.
		for i := 2; i < surgepay.WebhookEndpointsPerMerchantMax; i++ {
			e.must(200, e.keyA, "POST", "/v1/webhook_endpoints", fmt.Sprintf(`{"url":"https://shop.example.com/%d"}`, i))
		}
		if r := e.do(e.keyA, "POST", "/v1/webhook_endpoints", `{"url":"https://shop.example.com/17"}`, ""); r.Status != 422 ||
			r.errField("code") != "too_many_webhook_endpoints" {
			t.Errorf("endpoint past the bound: %d %s, want 422 too_many_webhook_endpoints", r.Status, r.Raw)
		}
		e.must(200, e.keyB, "POST", "/v1/webhook_endpoints", `{"url":"https://b.example.com/"}`) // per merchant

		// Delete.
		del := e.must(200, e.keyA, "DELETE", "/v1/webhook_endpoints/"+id, "")
		if del.str("id") != id || del.str("object") != "webhook_endpoint" || del.JSON["deleted"] != true {
			t.Errorf("delete: %s", del.Raw)
		}
		if r := e.do(e.keyA, "GET", "/v1/webhook_endpoints/"+id, "", ""); r.Status != 404 {
			t.Errorf("GET after delete: %d", r.Status)
		}
		if r := e.do(e.keyA, "DELETE", "/v1/webhook_endpoints/"+id, "", ""); r.Status != 404 {
			t.Errorf("second DELETE: %d", r.Status)
		}
		if strings.Contains(e.logs.String(), secret) || strings.Contains(e.logs.String(), first.str("secret")) {
			t.Errorf("the logs hold a secret:\n%s", e.logs.String())
		}
	})
}

func TestWebhookEndpointBadInput(t *testing.T) {
	e := newWebhookEnv(t, openSQLite(t), false)
	long := "https://shop.example.com/" + strings.Repeat("a", surgepay.WebhookURLBytesMax)
	tests := []struct {
		name, body, param, code string
	}{
		{"ErrURLMissing", `{}`, "url", "missing"},
		{"ErrURLEmpty", `{"url":""}`, "url", "missing"},
		{"ErrURLType", `{"url":42}`, "url", "invalid_type"},
		{"ErrURLScheme", `{"url":"ftp://shop.example.com/"}`, "url", "invalid_url"},
		{"ErrURLRelative", `{"url":"/hooks"}`, "url", "invalid_url"},
		{"ErrURLNoHost", `{"url":"https:///hooks"}`, "url", "invalid_url"},
		{"ErrURLCredentials", `{"url":"https://user:pass@shop.example.com/"}`, "url", "invalid_url"},
		{"ErrURLFragment", `{"url":"https://shop.example.com/#x"}`, "url", "invalid_url"},
		{"ErrURLSpace", `{"url":"https://shop.example.com/a b"}`, "url", "invalid_url"},
		{"ErrURLTooLong", `{"url":"` + long + `"}`, "url", "too_long"},
		{"ErrDescriptionTooLong", `{"url":"https://shop.example.com/","description":"` + strings.Repeat("d", 1001) + `"}`, "description", ""},
		{"ErrDescriptionType", `{"url":"https://shop.example.com/","description":true}`, "description", "invalid_type"},
		{"ErrUnknownField", `{"url":"https://shop.example.com/","events":["*"]}`, "events", "unknown_field"},
		{"ErrMalformed", `{"url":`, "body", "invalid_json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do(e.keyA, "POST", "/v1/webhook_endpoints", tt.body, "")
			if r.Status != 400 || r.errField("param") != tt.param || (tt.code != "" && r.errField("code") != tt.code) {
				t.Errorf("got %d %s, want 400 param %q code %q", r.Status, r.Raw, tt.param, tt.code)
			}
		})
	}
	if l := e.must(200, e.keyA, "GET", "/v1/webhook_endpoints", ""); len(l.JSON["data"].([]any)) != 0 {
		t.Errorf("bad requests stored endpoints: %s", l.Raw)
	}
}

// TestWebhookDelivery follows a payment through its life: every change is
// delivered once, signed with the endpoint's secret, typed, with the
// payment as the API renders it and an ID from its audit trail.
func TestWebhookDelivery(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ee *env) {
		e := newWebhookEnv(t, ee.store, false)
		_, secret := e.endpoint(e.keyA)
		cus, pm := e.customerWithCard(e.keyA, "4242424242424242")
		id := e.must(200, e.keyA, "POST", "/v1/payments", paymentBody(cus, pm, 2500, "manual")).str("id")
		e.must(200, e.keyA, "POST", "/v1/payments/"+id+"/capture", "")
		e.must(200, e.keyA, "POST", "/v1/payments/"+id+"/refunds", `{"amount":500}`)
		last := e.must(200, e.keyA, "POST", "/v1/payments/"+id+"/refunds", "")
		_, pmBad := e.customerWithCard(e.keyA, "4000000000000002")
		declined := e.do(e.keyA, "POST", "/v1/payments", paymentBody("", pmBad, 100, "automatic"), "").errField("payment")
		// Merchant B has no endpoint: nothing of its is sent.
		cusB, pmB := e.customerWithCard(e.keyB, "4242424242424242")
		e.must(200, e.keyB, "POST", "/v1/payments", paymentBody(cusB, pmB, 100, "automatic"))

		got := e.deliver()
		want := []string{"payment.authorized", "payment.succeeded", "payment.refunded", "payment.refunded", "payment.failed"}
		gotTypes := types(got)
		slices.Sort(gotTypes)
		slices.Sort(want)
		if !slices.Equal(gotTypes, want) {
			t.Fatalf("delivered %v, want %v", types(got), want)
		}
		events := e.must(200, e.keyA, "GET", "/v1/payments/"+id+"/events", "")
		auditIDs := map[string]bool{}
		for _, ev := range events.JSON["data"].([]any) {
			auditIDs[ev.(map[string]any)["id"].(string)] = true
		}
		seen := map[string]bool{}
		for _, d := range got {
			if err := webhook.Verify([]byte(secret), d.header.Get(webhook.HeaderSignature), d.body, 5*time.Minute, time.Now()); err != nil {
				t.Errorf("%s: signature does not verify: %v", d.event.Type, err)
			}
			if d.header.Get(webhook.HeaderEventID) != d.event.ID || seen[d.event.ID] {
				t.Errorf("%s: event ID %q (header %q) repeated or mismatched", d.event.Type, d.event.ID, d.header.Get(webhook.HeaderEventID))
			}
			seen[d.event.ID] = true
			obj, _ := d.event.Data.Object.(map[string]any)
			if obj["id"] == id && !auditIDs[d.event.ID] {
				t.Errorf("%s: event ID %s is not in the payment's audit trail", d.event.Type, d.event.ID)
			}
			if obj["id"] == declined && (d.event.Type != "payment.failed" || d.event.Data.PreviousStatus != "") {
				t.Errorf("declined payment: %s from %q", d.event.Type, d.event.Data.PreviousStatus)
			}
		}
		// The last refund's data.object is the payment as GET renders it.
		for _, d := range got {
			if d.event.Type != "payment.refunded" || d.event.Data.PreviousStatus != "partially_refunded" {
				continue
			}
			var want map[string]any
			if err := json.Unmarshal(last.Raw, &want); err != nil {
				t.Fatal(err)
			}
			if b, _ := json.Marshal(d.event.Data.Object); string(b) != mustJSON(want) {
				t.Errorf("data.object:\n got %s\nwant %s", b, last.Raw)
			}
		}
		if again := e.deliver(); len(again) != 0 {
			t.Errorf("delivered again: %v", types(again))
		}
	})
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestWebhookSQLBudgetAndSwitch: with the outbox in the engine, a merchant
// without endpoints pays nothing (a purchase costs what it costs with the
// switch off, which bypasses the outbox); an endpoint adds ONE statement,
// an INSERT; the switch off removes it again, at once, and queues nothing,
// while the audit rows stay.
func TestWebhookSQLBudgetAndSwitch(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ee *env) {
		e := newWebhookEnv(t, ee.store, false)
		cus, pm := e.customerWithCard(e.keyA, "4242424242424242")
		i := 0
		purchase := func(idem bool) *response {
			i++
			key := ""
			if idem {
				key = fmt.Sprintf("b-%d", i)
			}
			r := e.do(e.keyA, "POST", "/v1/payments", paymentBody(cus, pm, int64(1000+i), "automatic"), key)
			if r.Status != 200 {
				t.Fatalf("purchase: %d %s", r.Status, r.Raw)
			}
			return r
		}
		setWebhooks := func(v string) {
			s := surgepay.DefaultMerchantSettings()
			s.Webhooks = v
			e.eng.SetSettings(&engine.Settings{Default: surgepay.DefaultMerchantSettings(),
				Merchants: map[string]surgepay.MerchantSettings{e.merchants[0]: s}})
		}
		setWebhooks("off")
		offKey, off := sqlCounts(t, purchase(true)), sqlCounts(t, purchase(false))
		setWebhooks("on")
		if got := sqlCounts(t, purchase(true)); got != offKey {
			t.Errorf("no endpoint: purchase with a key %+v, want %+v as with the switch off", got, offKey)
		}
		if got := sqlCounts(t, purchase(false)); got != off {
			t.Errorf("no endpoint: purchase %+v, want %+v as with the switch off", got, off)
		}
		if got := e.deliver(); len(got) != 0 {
			t.Fatalf("delivered %v with no endpoint", types(got))
		}
		e.endpoint(e.keyA)
		if got, want := sqlCounts(t, purchase(true)), offKey.plusInsert(); got != want {
			t.Errorf("with an endpoint: purchase with a key %+v, want %+v", got, want)
		}
		if got, want := sqlCounts(t, purchase(false)), off.plusInsert(); got != want {
			t.Errorf("with an endpoint: purchase %+v, want %+v", got, want)
		}
		if got := e.deliver(); len(got) != 2 {
			t.Fatalf("delivered %d, want 2", len(got))
		}

		setWebhooks("off") // takes effect at once, no restart
		r := purchase(true)
		if got := sqlCounts(t, r); got != offKey {
			t.Errorf("switch off with an endpoint: %+v, want %+v", got, offKey)
		}
		id := r.str("id")
		e.must(200, e.keyA, "POST", "/v1/payments/"+id+"/refunds", `{"amount":10}`)
		if got := e.deliver(); len(got) != 0 {
			t.Errorf("switch off: delivered %v", types(got))
		}
		if b, _ := e.store.(surgepay.WebhookStore).WebhookBacklog(context.Background()); b.Pending != 0 {
			t.Errorf("switch off: backlog %+v, want nothing queued", b)
		}
		if ev := e.must(200, e.keyA, "GET", "/v1/payments/"+id+"/events", ""); len(ev.JSON["data"].([]any)) != 3 {
			t.Errorf("switch off: audit rows %s, want 3 (authorization, capture, refund)", ev.Raw)
		}
		setWebhooks("on")
		e.must(200, e.keyA, "POST", "/v1/payments/"+id+"/refunds", `{"amount":10}`)
		if got := e.deliver(); len(got) != 1 || got[0].event.Type != "payment.refunded" {
			t.Errorf("switch on again: delivered %v, want one payment.refunded", types(got))
		}
	})
}

// sqlKinds is a Surgepay-Sql header's counts.
type sqlKinds struct{ total, sel, ins, upd, del int }

func (k sqlKinds) plusInsert() sqlKinds { k.total++; k.ins++; return k }

func sqlCounts(t *testing.T, r *response) sqlKinds {
	t.Helper()
	var k sqlKinds
	h := r.Header.Get("Surgepay-Sql")
	if _, err := fmt.Sscanf(h, "total=%d select=%d insert=%d update=%d delete=%d", &k.total, &k.sel, &k.ins, &k.upd, &k.del); err != nil {
		t.Fatalf("Surgepay-Sql %q: %v", h, err)
	}
	return k
}

// TestWebhookStreamlined: with audit = "minimal" a streamlined sale writes
// no audit row and so queues no webhook (still one statement); settlement
// records its captures with audit rows, through the same Write path, and
// their webhooks go out: payment.captured, or payment.failed for a
// declined capture.
func TestWebhookStreamlined(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ee *env) {
		e := newWebhookEnv(t, ee.store, true)
		cus, pm := e.customerWithCard(e.keyA, "4242424242424242")
		e.setPath(e.merchants[0], surgepay.PathStreamlined, "minimal")
		first := e.must(200, e.keyA, "POST", "/v1/payments", paymentBody(cus, pm, 2400, "automatic"))
		bare := sqlCounts(t, first)
		e.endpoint(e.keyA)
		r := e.must(200, e.keyA, "POST", "/v1/payments", paymentBody(cus, pm, 2500, "automatic"))
		if got := sqlCounts(t, r); got != bare {
			t.Fatalf("minimal streamlined sale with an endpoint: %+v, want %+v as without", got, bare)
		}
		_, pmBad := e.customerWithCard(e.keyA, "4000000000000259")
		bad := e.must(200, e.keyA, "POST", "/v1/payments", paymentBody("", pmBad, 700, "automatic")).str("id")
		if got := e.deliver(); len(got) != 0 {
			t.Fatalf("minimal audit: delivered %v at authorization", types(got))
		}

		consumer, err := stage.NewEmbedded(e.store, 0)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		rep, err := settle.Run(ctx, settle.Config{Store: outboxStore{e.store, e.outbox}, Provider: e.sim,
			Opener: e.opener, Consumer: consumer, UntilEmpty: true, RetryBackoff: time.Millisecond})
		if err != nil || rep.Captured != 2 || rep.Failed != 1 {
			t.Fatalf("settle: %v, report %+v", err, rep)
		}
		got := e.deliver()
		byPayment := map[string]string{}
		for _, d := range got {
			byPayment[d.event.Data.Object.(map[string]any)["id"].(string)] = d.event.Type
		}
		// The first sale was made before the endpoint existed; its capture,
		// after, is sent.
		if len(got) != 3 || byPayment[first.str("id")] != "payment.captured" || byPayment[r.str("id")] != "payment.captured" ||
			byPayment[bad] != "payment.failed" {
			t.Errorf("after settlement delivered %v, want payment.captured for %s and %s, payment.failed for %s",
				byPayment, first.str("id"), r.str("id"), bad)
		}

		e.setPath(e.merchants[0], surgepay.PathStreamlined, "detailed")
		r = e.must(200, e.keyA, "POST", "/v1/payments", paymentBody(cus, pm, 2600, "automatic"))
		if got, want := sqlCounts(t, r), bare.plusInsert().plusInsert(); got != want {
			t.Errorf("detailed streamlined sale with an endpoint: %+v, want %+v (the events, the webhook)", got, want)
		}
		if got := e.deliver(); len(got) != 1 || got[0].event.Type != "payment.succeeded" {
			t.Errorf("detailed audit: delivered %v, want payment.succeeded", types(got))
		}
	})
}

// outboxStore is how `surgepay settle` queues webhooks: its Writes are
// prepared by the outbox before they are applied.
type outboxStore struct {
	surgepay.Store
	outbox *webhook.Outbox
}

func (s outboxStore) Apply(ctx context.Context, w *surgepay.Write) error {
	s.outbox.Prepare(w)
	return s.Store.Apply(ctx, w)
}

// TestDisabledMerchantPendingWorkGoesOn: disabling a merchant refuses its
// keys but not the work already accepted: its staged streamlined sales
// are still captured by settle (each is an authorization the network
// made), and the webhooks already queued and those settlement queues are
// still delivered.
func TestDisabledMerchantPendingWorkGoesOn(t *testing.T) {
	e := newWebhookEnv(t, openSQLite(t), true)
	e.endpoint(e.keyA)
	cus, pm := e.customerWithCard(e.keyA, "4242424242424242")
	e.setPath(e.merchants[0], surgepay.PathStreamlined, "detailed")
	sale := e.must(200, e.keyA, "POST", "/v1/payments", paymentBody(cus, pm, 2500, "automatic")).str("id")

	if _, err := e.eng.SetMerchantDisabled(context.Background(), e.merchants[0], true); err != nil {
		t.Fatal(err)
	}
	if r := e.do(e.keyA, "GET", "/v1/payments/"+sale, "", ""); r.Status != 403 {
		t.Fatalf("GET with the disabled merchant's key: %d %s, want 403", r.Status, r.Raw)
	}
	if got := e.deliver(); len(got) != 1 || got[0].event.Type != "payment.succeeded" {
		t.Fatalf("queued before the disable: delivered %v, want payment.succeeded", types(got))
	}
	consumer, err := stage.NewEmbedded(e.store, 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := settle.Run(ctx, settle.Config{Store: outboxStore{e.store, e.outbox}, Provider: e.sim,
		Opener: e.opener, Consumer: consumer, UntilEmpty: true, RetryBackoff: time.Millisecond})
	if err != nil || rep.Captured != 1 {
		t.Fatalf("settle of a disabled merchant's staged sale: %v, report %+v; want it captured", err, rep)
	}
	if got := e.deliver(); len(got) != 1 || got[0].event.Type != "payment.captured" {
		t.Errorf("after settlement: delivered %v, want payment.captured", types(got))
	}
	p, err := e.store.FindPayment(context.Background(), e.merchants[0], sale)
	if err != nil || p.AmountCaptured != 2500 {
		t.Errorf("the disabled merchant's sale after settle: %+v, %v; want captured 2500", p, err)
	}
}
