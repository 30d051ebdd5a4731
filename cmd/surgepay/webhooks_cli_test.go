package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/config"
	"github.com/surgepay/surgepay/webhook"
)

// TestWebhooksCLI runs `surgepay serve` with a receiver on 127.0.0.1 and
// the operator's `surgepay webhooks` commands beside it: the endpoint is
// listed healthy, its delivery succeeded; a resend reaches the receiver
// again; a rolled secret is printed once, and the next delivery verifies
// with the old secret and with the new one.
func TestWebhooksCLI(t *testing.T) {
	isolateEnv(t)
	type req struct {
		header http.Header
		body   []byte
	}
	var mu sync.Mutex
	var got []req
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, req{r.Header.Clone(), body})
		mu.Unlock()
	}))
	defer rcv.Close()
	wait := func(n int) []req {
		t.Helper()
		deadline := time.Now().Add(requestTimeout)
		for {
			mu.Lock()
			out := append([]req(nil), got...)
			mu.Unlock()
			if len(out) >= n {
				return out
			}
			if time.Now().After(deadline) {
				t.Fatalf("the receiver got %d requests within %s, want %d", len(out), requestTimeout, n)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "surgepay.toml")
	conf := fmt.Sprintf("data_dir = %q\nlisten = %q\nadmin_listen = \"off\"\nlog_level = \"warn\"\n"+
		"[webhooks]\nallow_private_networks = true\n", dir, freeAddr(t))
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(file, envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	s := startServe(t, cfg)
	c := newClient(s.url, readDevKey(t, dir))
	cli := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), append(args, "--config", file), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	var ep struct{ ID, Secret string }
	c.must(t, "POST", "/v1/webhook_endpoints", "", map[string]any{"url": rcv.URL + "/hooks"}, 200, &ep)
	var cus, pm, pay object
	c.must(t, "POST", "/v1/customers", "", map[string]any{"name": "Ada"}, 200, &cus)
	c.must(t, "POST", "/v1/payment_methods", "", map[string]any{"customer": cus.ID,
		"card": map[string]any{"number": "4242424242424242", "exp_month": 12, "exp_year": 2030}}, 200, &pm)
	pay1 := func(key string) {
		c.must(t, "POST", "/v1/payments", key, map[string]any{"amount": 1500, "currency": "usd",
			"payment_method": pm.ID}, 200, &pay)
	}
	pay1("k-1")
	first := wait(1)[0]
	event := first.header.Get(webhook.HeaderEventID)
	delivery := surgepay.WebhookDeliveryID(event, ep.ID)

	// The result is recorded just after the answer: poll the listing.
	deadline := time.Now().Add(requestTimeout)
	for {
		code, out, errs := cli("webhooks", "deliveries", "--endpoint", ep.ID)
		if code != 0 {
			t.Fatalf("webhooks deliveries: exit %d, %s", code, errs)
		}
		if strings.Contains(out, delivery) && strings.Contains(out, "succeeded") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("webhooks deliveries never showed %s succeeded:\n%s", delivery, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	code, out, errs := cli("webhooks", "endpoints")
	if code != 0 || !strings.Contains(out, ep.ID) || !strings.Contains(out, "healthy") || strings.Contains(out, ep.Secret) {
		t.Errorf("webhooks endpoints: exit %d, %q %s; want the endpoint, healthy, no secret", code, out, errs)
	}
	if code, _, errs = cli("webhooks", "deliveries"); code != 2 || !strings.Contains(errs, "--endpoint") {
		t.Errorf("webhooks deliveries without --endpoint or --event: exit %d, %q; want 2 naming the flags", code, errs)
	}
	if code, out, _ = cli("webhooks", "deliveries", "--event", event); code != 0 || !strings.Contains(out, delivery) {
		t.Errorf("webhooks deliveries --event: exit %d, %q", code, out)
	}

	if code, out, errs = cli("webhooks", "resend", delivery); code != 0 || !strings.Contains(out, "queued again") {
		t.Fatalf("webhooks resend: exit %d, %q %s", code, out, errs)
	}
	again := wait(2)[1]
	if again.header.Get(webhook.HeaderEventID) != event || !bytes.Equal(again.body, first.body) {
		t.Errorf("the resend sent event %q, want %s with the first body", again.header.Get(webhook.HeaderEventID), event)
	}

	code, out, errs = cli("webhooks", "roll-secret", ep.ID, "--expires-in", "1h")
	if code != 0 {
		t.Fatalf("webhooks roll-secret: exit %d, %s", code, errs)
	}
	var fresh string
	for _, f := range strings.Fields(out) {
		if strings.HasPrefix(f, "whsec_") {
			fresh = f
		}
	}
	if fresh == "" || fresh == ep.Secret {
		t.Fatalf("webhooks roll-secret printed no new secret: %q", out)
	}
	pay1("k-2")
	third := wait(3)[2]
	sig := third.header.Get(webhook.HeaderSignature)
	for name, secret := range map[string]string{"old": ep.Secret, "new": fresh} {
		if err := webhook.Verify([]byte(secret), sig, third.body, 5*time.Minute, time.Now()); err != nil {
			t.Errorf("after the roll, the %s secret does not verify %q: %v", name, sig, err)
		}
	}
	if code, _, errs = cli("webhooks", "roll-secret", ep.ID, "--expires-in", "200h"); code != 1 || !strings.Contains(errs, "expires_in") {
		t.Errorf("roll-secret --expires-in 200h: exit %d, %q; want 1, refused", code, errs)
	}
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(s.logs.String(), fresh) || strings.Contains(s.logs.String(), ep.Secret) {
		t.Error("serve's logs hold a secret")
	}
}
