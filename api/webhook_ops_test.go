package api_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/engine"
	"github.com/surgepay/surgepay/webhook"
)

// Webhooks for operators through the merchant API (issue 13 item 6): the
// deliveries listed with their status, one resent, the secret rolled with
// an overlap window, the endpoints' health; bad input refused with 400s
// that name the field; another merchant's objects are 404s.

func dataOf(r *response) []map[string]any {
	var out []map[string]any
	for _, d := range r.JSON["data"].([]any) {
		out = append(out, d.(map[string]any))
	}
	return out
}

// TestWebhookDeliveriesAPI: a delivered event is listed succeeded with its
// HTTP status, by endpoint and by event, and shown by ID; the endpoint is
// healthy with its last success; another merchant sees none of it.
func TestWebhookDeliveriesAPI(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ee *env) {
		e := newWebhookEnv(t, ee.store, false)
		ep, _ := e.endpoint(e.keyA)
		cus, pm := e.customerWithCard(e.keyA, "4242424242424242")
		e.must(200, e.keyA, "POST", "/v1/payments", paymentBody(cus, pm, 2500, "automatic"))
		e.must(200, e.keyA, "POST", "/v1/payments", paymentBody(cus, pm, 2600, "automatic"))
		got := e.deliver()
		if len(got) != 2 {
			t.Fatalf("delivered %d, want 2", len(got))
		}
		list := e.must(200, e.keyA, "GET", "/v1/webhook_deliveries?endpoint="+ep, "")
		ds := dataOf(list)
		if len(ds) != 2 || list.JSON["has_more"] != false {
			t.Fatalf("list: %s", list.Raw)
		}
		for _, d := range ds {
			if d["object"] != "webhook_delivery" || d["status"] != "succeeded" || d["attempts"] != 1.0 ||
				d["last_http_status"] != 200.0 || d["last_error"] != nil || d["next_attempt"] != nil || d["endpoint"] != ep ||
				d["event_type"] != "payment.succeeded" || d["last_attempt"] == nil || d["in_flight"] != false {
				t.Errorf("delivery %v: want succeeded, 1 attempt, HTTP 200", d)
			}
		}
		if ds[0]["event"].(string) < ds[1]["event"].(string) {
			t.Errorf("not newest first: %v then %v", ds[0]["event"], ds[1]["event"])
		}
		page := e.must(200, e.keyA, "GET", "/v1/webhook_deliveries?limit=1&endpoint="+ep, "")
		next := e.must(200, e.keyA, "GET", "/v1/webhook_deliveries?limit=1&endpoint="+ep+"&starting_after="+dataOf(page)[0]["id"].(string), "")
		if page.JSON["has_more"] != true || dataOf(next)[0]["id"] != ds[1]["id"] || next.JSON["has_more"] != false {
			t.Errorf("pages of 1: %s then %s", page.Raw, next.Raw)
		}
		id := ds[0]["id"].(string)
		one := e.must(200, e.keyA, "GET", "/v1/webhook_deliveries/"+id, "")
		if one.str("id") != id || one.str("status") != "succeeded" {
			t.Errorf("GET one: %s", one.Raw)
		}
		byEvent := e.must(200, e.keyA, "GET", "/v1/webhook_deliveries?event="+ds[0]["event"].(string)+"&status=succeeded", "")
		if d := dataOf(byEvent); len(d) != 1 || d[0]["id"] != id {
			t.Errorf("by event: %s", byEvent.Raw)
		}
		if none := e.must(200, e.keyA, "GET", "/v1/webhook_deliveries?endpoint="+ep+"&status=failed", ""); len(dataOf(none)) != 0 {
			t.Errorf("status=failed lists %s", none.Raw)
		}
		// Another merchant.
		if r := e.do(e.keyB, "GET", "/v1/webhook_deliveries/"+id, "", ""); r.Status != 404 || r.errField("param") != "id" {
			t.Errorf("merchant B's GET of A's delivery: %d %s", r.Status, r.Raw)
		}
		if r := e.must(200, e.keyB, "GET", "/v1/webhook_deliveries?endpoint="+ep, ""); len(dataOf(r)) != 0 {
			t.Errorf("merchant B lists A's deliveries: %s", r.Raw)
		}
		epJSON := e.must(200, e.keyA, "GET", "/v1/webhook_endpoints/"+ep, "")
		if epJSON.str("health") != "healthy" || epJSON.num("failures_in_a_row") != 0 || epJSON.JSON["last_success"] == nil ||
			epJSON.JSON["last_error"] != nil || epJSON.JSON["previous_secret_expires"] != nil {
			t.Errorf("endpoint after two successes: %s", epJSON.Raw)
		}
		for _, c := range []struct{ query, param string }{
			{"", "endpoint"}, {"?status=succeeded", "endpoint"}, {"?endpoint=" + ep + "&status=done", "status"},
			{"?endpoint=pay_1", "endpoint"}, {"?event=we_1", "event"}, {"?endpoint=" + ep + "&limit=0", "limit"},
			{"?endpoint=" + ep + "&starting_after=evt_1", "starting_after"},
		} {
			r := e.do(e.keyA, "GET", "/v1/webhook_deliveries"+c.query, "", "")
			if r.Status != 400 || r.errField("param") != c.param {
				t.Errorf("GET /v1/webhook_deliveries%s: %d %s, want 400 naming %s", c.query, r.Status, r.Raw, c.param)
			}
		}
		for _, bad := range []string{"whd_x", "evt_1", id + "0"} {
			if r := e.do(e.keyA, "GET", "/v1/webhook_deliveries/"+bad, "", ""); r.Status != 404 || r.errField("param") != "id" {
				t.Errorf("GET /v1/webhook_deliveries/%s: %d %s, want 404 naming id", bad, r.Status, r.Raw)
			}
		}
	})
}

// TestWebhookResendAPI: a resend goes through the dispatcher to the
// receiver once, however often it is repeated with its Idempotency-Key;
// one in flight is refused 409 with Retry-After; after
// WebhookResendsMax resends, 422; another merchant's is a 404.
func TestWebhookResendAPI(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ee *env) {
		e := newWebhookEnv(t, ee.store, false)
		ep, secret := e.endpoint(e.keyA)
		cus, pm := e.customerWithCard(e.keyA, "4242424242424242")
		e.must(200, e.keyA, "POST", "/v1/payments", paymentBody(cus, pm, 2500, "automatic"))
		first := e.deliver()
		id := surgepay.WebhookDeliveryID(first[0].event.ID, ep)
		path := "/v1/webhook_deliveries/" + id + "/resend"
		r1 := e.do(e.keyA, "POST", path, "", "resend-1")
		r2 := e.do(e.keyA, "POST", path, "", "resend-1")
		if r1.Status != 200 || r1.str("status") != "pending" || r1.num("attempts") != 0 || r1.num("resends") != 1 {
			t.Fatalf("resend: %d %s", r1.Status, r1.Raw)
		}
		if r2.Status != 200 || r2.Header.Get("Idempotent-Replayed") != "true" || string(r2.Raw) != string(r1.Raw) {
			t.Errorf("resend repeated with its key: %d %v %s, want the replay of %s", r2.Status, r2.Header, r2.Raw, r1.Raw)
		}
		again := e.deliver()
		if len(again) != 1 || again[0].event.ID != first[0].event.ID || string(again[0].body) != string(first[0].body) ||
			again[0].header.Get(webhook.HeaderAttempt) != "1" {
			t.Fatalf("after the resend the receiver got %d requests (%v), want the event once, attempt 1", len(again), types(again))
		}
		if err := webhook.Verify([]byte(secret), again[0].header.Get(webhook.HeaderSignature), again[0].body, 5*time.Minute, time.Now()); err != nil {
			t.Errorf("the resent delivery does not verify: %v", err)
		}
		if d := e.must(200, e.keyA, "GET", "/v1/webhook_deliveries/"+id, ""); d.str("status") != "succeeded" || d.num("resends") != 1 {
			t.Errorf("after the resend: %s", d.Raw)
		}
		// In flight: a dispatcher holds it.
		e.must(200, e.keyA, "POST", path, "")
		ws := e.store.(surgepay.WebhookStore)
		now := time.Now()
		if ds, err := ws.ClaimWebhookDeliveries(context.Background(), now, now.Add(time.Minute), 10); err != nil || len(ds) != 1 {
			t.Fatalf("claim: %v, %v", ds, err)
		}
		if r := e.do(e.keyA, "POST", path, "", ""); r.Status != 409 || r.errField("code") != "webhook_delivery_in_flight" ||
			r.Header.Get("Retry-After") == "" {
			t.Errorf("resend in flight: %d %v %s, want 409 webhook_delivery_in_flight with Retry-After", r.Status, r.Header, r.Raw)
		}
		if r := e.do(e.keyB, "POST", path, "", ""); r.Status != 404 || r.errField("param") != "id" {
			t.Errorf("merchant B's resend of A's delivery: %d %s", r.Status, r.Raw)
		}
		if r := e.do(e.keyA, "POST", path, `{"now":true}`, ""); r.Status != 400 || r.errField("param") != "now" {
			t.Errorf("resend with a field: %d %s, want 400 naming it", r.Status, r.Raw)
		}
		if ds := e.deliver(); len(ds) != 0 { // the claim above holds it: nothing due
			t.Fatalf("the delivery in flight was sent again: %v", types(ds))
		}
		// The bound: the attempt ends; then resends, each due at once (a
		// pending delivery not in flight may be resent), up to the bound.
		if err := ws.RecordWebhookResults(context.Background(), []*surgepay.WebhookResult{{EventID: first[0].event.ID,
			EndpointID: ep, Attempt: 1, Outcome: surgepay.WebhookDelivered, At: time.Now()}}); err != nil {
			t.Fatal(err)
		}
		for i := 2; i < surgepay.WebhookResendsMax; i++ {
			if r := e.do(e.keyA, "POST", path, "", fmt.Sprintf("bound-%d", i)); r.Status != 200 {
				t.Fatalf("resend %d: %d %s", i+1, r.Status, r.Raw)
			}
		}
		if r := e.do(e.keyA, "POST", path, "", ""); r.Status != 422 || r.errField("code") != "too_many_webhook_resends" {
			t.Errorf("resend %d: %d %s, want 422 too_many_webhook_resends", surgepay.WebhookResendsMax+1, r.Status, r.Raw)
		}
	})
}

// TestWebhookRollSecretAPI: a roll answers the new secret once; during
// the overlap a delivery verifies with the old secret and with the new
// one; a roll with expires_in 0 ends the old one at once; a repeat with
// the Idempotency-Key answers without the secret; bad expires_in is a 400
// naming it.
func TestWebhookRollSecretAPI(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ee *env) {
		e := newWebhookEnv(t, ee.store, false)
		ep, old := e.endpoint(e.keyA)
		path := "/v1/webhook_endpoints/" + ep + "/roll_secret"
		r := e.do(e.keyA, "POST", path, `{"expires_in":3600}`, "roll-1")
		fresh := r.str("secret")
		if r.Status != 200 || !strings.HasPrefix(fresh, "whsec_") || fresh == old || r.JSON["previous_secret_expires"] == nil {
			t.Fatalf("roll: %d %s", r.Status, r.Raw)
		}
		if exp := r.num("previous_secret_expires"); exp < time.Now().Add(59*time.Minute).Unix() || exp > time.Now().Add(61*time.Minute).Unix() {
			t.Errorf("previous_secret_expires = %d, want about an hour from now", exp)
		}
		replay := e.do(e.keyA, "POST", path, `{"expires_in":3600}`, "roll-1")
		if replay.Status != 200 || replay.Header.Get("Idempotent-Replayed") != "true" || strings.Contains(string(replay.Raw), "whsec_") {
			t.Errorf("roll replayed: %d %s, want the endpoint without a secret", replay.Status, replay.Raw)
		}
		got := e.must(200, e.keyA, "GET", "/v1/webhook_endpoints/"+ep, "")
		if strings.Contains(string(got.Raw), "whsec_") || got.JSON["previous_secret_expires"] == nil {
			t.Errorf("GET after the roll: %s", got.Raw)
		}
		cus, pm := e.customerWithCard(e.keyA, "4242424242424242")
		e.must(200, e.keyA, "POST", "/v1/payments", paymentBody(cus, pm, 2500, "automatic"))
		ds := e.deliver()
		if len(ds) != 1 {
			t.Fatalf("delivered %d, want 1", len(ds))
		}
		sig := ds[0].header.Get(webhook.HeaderSignature)
		for name, s := range map[string]string{"old": old, "new": fresh} {
			if err := webhook.Verify([]byte(s), sig, ds[0].body, 5*time.Minute, time.Now()); err != nil {
				t.Errorf("during the overlap the %s secret does not verify: %v", name, err)
			}
		}
		// expires_in 0: the secret it replaces (fresh) stops at once.
		r = e.do(e.keyA, "POST", path, `{"expires_in":0}`, "")
		newest := r.str("secret")
		if r.Status != 200 || newest == "" || r.JSON["previous_secret_expires"] != nil {
			t.Fatalf("roll with expires_in 0: %d %s", r.Status, r.Raw)
		}
		e.must(200, e.keyA, "POST", "/v1/payments", paymentBody(cus, pm, 2600, "automatic"))
		ds = e.deliver()
		sig = ds[0].header.Get(webhook.HeaderSignature)
		if err := webhook.Verify([]byte(newest), sig, ds[0].body, 5*time.Minute, time.Now()); err != nil {
			t.Errorf("after a roll with expires_in 0, the newest secret: %v", err)
		}
		for name, s := range map[string]string{"first": old, "second": fresh} {
			if err := webhook.Verify([]byte(s), sig, ds[0].body, 5*time.Minute, time.Now()); err != webhook.ErrSignatureMismatch {
				t.Errorf("after a roll with expires_in 0, the %s secret: %v, want a mismatch", name, err)
			}
		}
		for _, body := range []string{`{"expires_in":-1}`, `{"expires_in":604801}`, `{"expires_in":"1h"}`, `{"expires_in":1.5}`} {
			if r := e.do(e.keyA, "POST", path, body, ""); r.Status != 400 || r.errField("param") != "expires_in" {
				t.Errorf("roll %s: %d %s, want 400 naming expires_in", body, r.Status, r.Raw)
			}
		}
		if r := e.do(e.keyB, "POST", path, "", ""); r.Status != 404 || r.errField("param") != "id" {
			t.Errorf("merchant B's roll of A's endpoint: %d %s", r.Status, r.Raw)
		}
		if r := e.do(e.keyA, "POST", path, "", ""); r.Status != 200 || r.str("secret") == "" {
			t.Errorf("roll with no body (the default window): %d %s", r.Status, r.Raw)
		} else if exp := r.num("previous_secret_expires"); exp < time.Now().Add(23*time.Hour).Unix() {
			t.Errorf("default window ends at %d, want about 24 hours from now", exp)
		}
		logs := e.logs.String()
		if strings.Count(logs, "webhook endpoint secret rolled") != 3 {
			t.Errorf("want one log line per roll, the replay none (3), got %d", strings.Count(logs, "webhook endpoint secret rolled"))
		}
		for _, secret := range []string{old, fresh, newest} {
			if strings.Contains(logs, secret) {
				t.Errorf("the log holds a secret")
			}
		}
	})
}

// TestWebhookResendAfterLeaseEnded: a delivery whose claim's lease ended
// (its node died mid-attempt) is not shown in flight, and may be resent.
func TestWebhookResendAfterLeaseEnded(t *testing.T) {
	e := newWebhookEnv(t, openSQLite(t), false)
	ep, _ := e.endpoint(e.keyA)
	cus, pm := e.customerWithCard(e.keyA, "4242424242424242")
	e.must(200, e.keyA, "POST", "/v1/payments", paymentBody(cus, pm, 2500, "automatic"))
	ws := e.store.(surgepay.WebhookStore)
	past := time.Now().Add(-2 * time.Minute)
	ds, err := ws.ClaimWebhookDeliveries(context.Background(), time.Now(), past.Add(time.Minute), 10)
	if err != nil || len(ds) != 1 {
		t.Fatalf("claim: %v, %v", ds, err)
	}
	id := surgepay.WebhookDeliveryID(ds[0].EventID, ep)
	if d := e.must(200, e.keyA, "GET", "/v1/webhook_deliveries/"+id, ""); d.JSON["in_flight"] != false || d.str("status") != "pending" {
		t.Errorf("a delivery whose lease ended: %s, want pending, not in flight", d.Raw)
	}
	if r := e.do(e.keyA, "POST", "/v1/webhook_deliveries/"+id+"/resend", "", ""); r.Status != 200 {
		t.Errorf("resend of a delivery whose lease ended: %d %s, want 200", r.Status, r.Raw)
	}
	if got := e.deliver(); len(got) != 1 {
		t.Errorf("after the resend the receiver got %d requests, want 1", len(got))
	}
}

// TestWebhookResendToNewEndpoint: an endpoint registered after an event
// gets it by a resend of the delivery ID of that event and endpoint, once,
// with the event's body; an endpoint of another merchant does not.
func TestWebhookResendToNewEndpoint(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ee *env) {
		e := newWebhookEnv(t, ee.store, false)
		e.endpoint(e.keyA)
		cus, pm := e.customerWithCard(e.keyA, "4242424242424242")
		e.must(200, e.keyA, "POST", "/v1/payments", paymentBody(cus, pm, 2500, "automatic"))
		first := e.deliver()
		if len(first) != 1 {
			t.Fatalf("delivered %d, want 1", len(first))
		}
		late, lateSecret := e.endpoint(e.keyA)
		id := surgepay.WebhookDeliveryID(first[0].event.ID, late)
		if r := e.do(e.keyA, "GET", "/v1/webhook_deliveries/"+id, "", ""); r.Status != 404 {
			t.Fatalf("before the resend, the new endpoint's delivery: %d %s, want 404", r.Status, r.Raw)
		}
		r := e.do(e.keyA, "POST", "/v1/webhook_deliveries/"+id+"/resend", "", "late-1")
		if r.Status != 200 || r.str("endpoint") != late || r.str("status") != "pending" || r.num("resends") != 1 ||
			r.str("event_type") != first[0].event.Type {
			t.Fatalf("resend to the new endpoint: %d %s", r.Status, r.Raw)
		}
		if again := e.do(e.keyA, "POST", "/v1/webhook_deliveries/"+id+"/resend", "", "late-1"); again.Header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("repeat with the key: %d %s, want the replay", again.Status, again.Raw)
		}
		got := e.deliver()
		if len(got) != 1 || got[0].event.ID != first[0].event.ID || string(got[0].body) != string(first[0].body) {
			t.Fatalf("the new endpoint got %d requests (%v), want the event once with its body", len(got), types(got))
		}
		if err := webhook.Verify([]byte(lateSecret), got[0].header.Get(webhook.HeaderSignature), got[0].body, 5*time.Minute, time.Now()); err != nil {
			t.Errorf("signed with the new endpoint's secret: %v", err)
		}
		otherEP, _ := e.endpoint(e.keyB)
		bad := surgepay.WebhookDeliveryID(first[0].event.ID, otherEP)
		for _, key := range []string{e.keyA, e.keyB} {
			if r := e.do(key, "POST", "/v1/webhook_deliveries/"+bad+"/resend", "", ""); r.Status != 404 {
				t.Errorf("resend of A's event to B's endpoint: %d %s, want 404", r.Status, r.Raw)
			}
		}
	})
}

// TestWebhookOperationsScopes: a read-only key lists and shows
// deliveries, and may neither resend nor roll (403).
func TestWebhookOperationsScopes(t *testing.T) {
	e := newWebhookEnv(t, openSQLite(t), false)
	ep, _ := e.endpoint(e.keyA)
	cus, pm := e.customerWithCard(e.keyA, "4242424242424242")
	e.must(200, e.keyA, "POST", "/v1/payments", paymentBody(cus, pm, 2500, "automatic"))
	got := e.deliver()
	ro, err := surgepay.ParseScopes("scopes", []string{"read_only"})
	if err != nil {
		t.Fatal(err)
	}
	readOnly, _, err := e.eng.CreateAPIKeyWith(context.Background(), e.merchants[0], engine.KeyOptions{Scopes: ro})
	if err != nil {
		t.Fatal(err)
	}
	id := surgepay.WebhookDeliveryID(got[0].event.ID, ep)
	e.must(200, readOnly, "GET", "/v1/webhook_deliveries?endpoint="+ep, "")
	e.must(200, readOnly, "GET", "/v1/webhook_deliveries/"+id, "")
	for _, path := range []string{"/v1/webhook_deliveries/" + id + "/resend", "/v1/webhook_endpoints/" + ep + "/roll_secret"} {
		if r := e.do(readOnly, "POST", path, "", ""); r.Status != 403 {
			t.Errorf("POST %s with a read-only key: %d %s, want 403", path, r.Status, r.Raw)
		}
	}
}
