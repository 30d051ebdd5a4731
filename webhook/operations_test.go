package webhook_test

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/internal/testenv"
	"github.com/surgepay/surgepay/webhook"
)

// Webhooks for operators (issue 13 item 6), against real receivers on
// 127.0.0.1: deliveries listed with their status, endpoints' health,
// resends, and a rolled secret's overlap window.

func (f *fixture) deliveries(t *testing.T, endpointID string) []*surgepay.WebhookDeliveryInfo {
	t.Helper()
	ds, _, err := f.ws.ListWebhookDeliveries(t.Context(), f.merchant,
		surgepay.WebhookDeliveryFilter{EndpointID: endpointID, Limit: surgepay.ListLimitMax})
	if err != nil {
		t.Fatalf("ListWebhookDeliveries: %v", err)
	}
	return ds
}

func (f *fixture) findEndpoint(t *testing.T, id string) *surgepay.WebhookEndpoint {
	t.Helper()
	ep, err := f.ws.FindWebhookEndpoint(t.Context(), f.merchant, id)
	if err != nil {
		t.Fatalf("FindWebhookEndpoint: %v", err)
	}
	return ep
}

// TestDeliveriesListedWithStatus: after a delivery to a receiver that
// answers 200 and one to a receiver that answers 503, the list shows the
// first succeeded and the second pending with its HTTP status, error and
// next attempt, then failed once out of attempts; the endpoints' health
// says the same.
func TestDeliveriesListedWithStatus(t *testing.T) {
	for _, b := range testenv.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			good, bad := newReceiver(t), newReceiver(t, 503, 503, 503)
			f := newFixture(t, b.Open(t), good.srv.URL)
			f.clock.now = f.clock.now.Truncate(time.Microsecond) // what PostgreSQL keeps
			okEP := f.endpoint
			badEP := f.addEndpoint(t, bad.srv.URL+"/hooks?token=sekrit")
			w := f.sale(t, f.outbox(t))
			d := f.dispatcher(t, webhook.Config{AttemptsMax: 2, BackoffBase: time.Minute, BackoffMax: time.Minute})
			if n := deliverDue(t, d); n != 2 {
				t.Fatalf("DeliverDue attempted %d, want 2", n)
			}
			sent := f.clock.Now()
			event := w.Webhook.ID

			ok := f.deliveries(t, okEP.ID)
			failing := f.deliveries(t, badEP.ID)
			if len(ok) != 1 || len(failing) != 1 {
				t.Fatalf("listed %d and %d deliveries of the two endpoints, want 1 each (a delivered one is kept)", len(ok), len(failing))
			}
			if ok[0].EventID != event || ok[0].Status != surgepay.WebhookStatusSucceeded ||
				ok[0].Attempts != 1 || ok[0].LastStatus != 200 || ok[0].LastError != "" || !ok[0].LastAttempt.Equal(sent) ||
				!ok[0].NextAttempt.IsZero() || ok[0].InFlight {
				t.Errorf("delivery to the 200 receiver = %+v; want succeeded, 1 attempt, HTTP 200 at %v", ok[0], sent)
			}
			if failing[0].Status != surgepay.WebhookStatusPending || failing[0].Attempts != 1 ||
				failing[0].LastStatus != 503 || failing[0].LastError != "HTTP 503" || !failing[0].NextAttempt.After(sent) {
				t.Errorf("delivery to the 503 receiver = %+v; want pending, 1 attempt, HTTP 503, a next attempt", failing[0])
			}
			if strings.Contains(failing[0].LastError, "sekrit") || strings.Contains(failing[0].LastError, "127.0.0.1") {
				t.Errorf("the listed error %q holds the URL", failing[0].LastError)
			}
			f.clock.Add(time.Hour)
			deliverDue(t, d)
			failing = f.deliveries(t, badEP.ID)
			if failing[0].Status != surgepay.WebhookStatusFailed || failing[0].Attempts != 2 || !failing[0].NextAttempt.IsZero() {
				t.Errorf("after its last attempt: %+v; want failed, 2 attempts, no next attempt", failing[0])
			}
			if h := f.findEndpoint(t, okEP.ID); h.FailuresInARow != 0 || !h.LastSuccess.Equal(sent) || !h.LastFailure.IsZero() {
				t.Errorf("health of the 200 endpoint: %d failures, success %v, failure %v; want 0, %v, none",
					h.FailuresInARow, h.LastSuccess, h.LastFailure, sent)
			}
			if h := f.findEndpoint(t, badEP.ID); h.FailuresInARow != 2 || !h.LastSuccess.IsZero() || h.LastError != "HTTP 503" {
				t.Errorf("health of the 503 endpoint: %d failures, success %v, error %q; want 2, none, HTTP 503",
					h.FailuresInARow, h.LastSuccess, h.LastError)
			}
		})
	}
}

// TestResendDeliversAgain: a succeeded delivery resent is sent again, the
// same event and body, attempt 1, through the dispatcher; a failed one
// resent reaches its receiver once that answers again.
func TestResendDeliversAgain(t *testing.T) {
	for _, b := range testenv.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			rcv := newReceiver(t, 500, 500)
			f := newFixture(t, b.Open(t), rcv.srv.URL)
			w := f.sale(t, f.outbox(t))
			d := f.dispatcher(t, webhook.Config{AttemptsMax: 2, BackoffBase: time.Minute, BackoffMax: time.Minute})
			deliverDue(t, d)
			f.clock.Add(time.Hour)
			deliverDue(t, d)
			if got := f.deliveries(t, f.endpoint.ID); len(got) != 1 || got[0].Status != surgepay.WebhookStatusFailed {
				t.Fatalf("after 2 failed attempts: %v, want one, failed", got)
			}
			resend := func() {
				t.Helper()
				apply(t, f.store, &surgepay.Write{WebhookResend: &surgepay.WebhookResend{MerchantID: f.merchant,
					EventID: w.Webhook.ID, EndpointID: f.endpoint.ID, At: f.clock.Now()}})
			}
			resend()
			if n := deliverDue(t, d); n != 1 {
				t.Fatalf("after a resend of the failed delivery, DeliverDue attempted %d, want 1", n)
			}
			resend() // of the succeeded one
			if n := deliverDue(t, d); n != 1 {
				t.Fatalf("after a resend of the succeeded delivery, DeliverDue attempted %d, want 1", n)
			}
			got := rcv.requests()
			if len(got) != 4 || rcv.answered != 2 {
				t.Fatalf("receiver got %d requests with %d successes, want 4 and 2", len(got), rcv.answered)
			}
			for i, r := range got[2:] {
				if r.header.Get(webhook.HeaderEventID) != w.Webhook.ID || !bytes.Equal(r.body, got[0].body) ||
					r.header.Get(webhook.HeaderAttempt) != "1" {
					t.Errorf("resent request %d: event %q attempt %q; want %s, attempt 1, the first body", i,
						r.header.Get(webhook.HeaderEventID), r.header.Get(webhook.HeaderAttempt), w.Webhook.ID)
				}
				if err := webhook.Verify(f.secret, r.header.Get(webhook.HeaderSignature), r.body, 5*time.Minute, f.clock.Now()); err != nil {
					t.Errorf("resent request %d: signature does not verify: %v", i, err)
				}
			}
			if l := f.deliveries(t, f.endpoint.ID); len(l) != 1 {
				t.Errorf("after the resends, %d deliveries listed, want 1", len(l))
			} else if l[0].Status != surgepay.WebhookStatusSucceeded || l[0].Resends != 2 ||
				l[0].Attempts != 1 {
				t.Errorf("after the resends: %+v, want succeeded, 2 resends, 1 attempt", l[0])
			}
			if deliverDue(t, d) != 0 || len(rcv.requests()) != 4 {
				t.Error("a resend was sent more than once")
			}
		})
	}
}

// TestSecretRollOverlap: after a roll, during the overlap window each
// delivery verifies with the old secret and with the new one, each alone;
// after the window only with the new one, and the header holds one v1.
func TestSecretRollOverlap(t *testing.T) {
	for _, b := range testenv.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			rcv := newReceiver(t)
			f := newFixture(t, b.Open(t), rcv.srv.URL)
			ob := f.outbox(t)
			old := f.secret
			fresh := []byte("whsec_rolled_" + f.endpoint.ID)
			sealed, err := f.keys.Encrypt(fresh, surgepay.WebhookSecretAAD(f.merchant, f.endpoint.ID))
			if err != nil {
				t.Fatal(err)
			}
			expires := f.clock.Now().Add(24 * time.Hour)
			apply(t, f.store, &surgepay.Write{WebhookEndpointRoll: &surgepay.WebhookEndpointRoll{MerchantID: f.merchant,
				EndpointID: f.endpoint.ID, SealedSecret: sealed, PreviousSealedSecret: f.endpoint.SealedSecret,
				PreviousSecretExpires: expires}})
			d := f.dispatcher(t, webhook.Config{})

			f.sale(t, ob)
			deliverDue(t, d)
			f.clock.Add(24*time.Hour + time.Second) // past the window
			f.sale(t, ob)
			deliverDue(t, d)
			got := rcv.requests()
			if len(got) != 2 {
				t.Fatalf("receiver got %d requests, want 2", len(got))
			}
			during, after := got[0], got[1]
			sig := during.header.Get(webhook.HeaderSignature)
			if strings.Count(sig, "v1=") != 2 {
				t.Errorf("during the overlap, %s = %q, want two v1 values", webhook.HeaderSignature, sig)
			}
			at := expires.Add(-24 * time.Hour)
			for name, secret := range map[string][]byte{"old": old, "new": fresh} {
				if err := webhook.Verify(secret, sig, during.body, 5*time.Minute, at); err != nil {
					t.Errorf("during the overlap, the %s secret alone does not verify: %v", name, err)
				}
			}
			sig = after.header.Get(webhook.HeaderSignature)
			if strings.Count(sig, "v1=") != 1 {
				t.Errorf("after the overlap, %s = %q, want one v1 value", webhook.HeaderSignature, sig)
			}
			if err := webhook.Verify(fresh, sig, after.body, 5*time.Minute, f.clock.Now()); err != nil {
				t.Errorf("after the overlap, the new secret does not verify: %v", err)
			}
			if err := webhook.Verify(old, sig, after.body, 5*time.Minute, f.clock.Now()); err != webhook.ErrSignatureMismatch {
				t.Errorf("after the overlap, the old secret: %v, want %v", err, webhook.ErrSignatureMismatch)
			}
		})
	}
}

// TestDeliveredKeptForRetention: a succeeded delivery stays listed for
// DeliveredRetention, then Purge removes it; a failed one is kept for
// FailedRetention.
func TestDeliveredKeptForRetention(t *testing.T) {
	rcv := newReceiver(t)
	f := newFixture(t, testenv.OpenSQLite(t), rcv.srv.URL)
	f.sale(t, f.outbox(t))
	d := f.dispatcher(t, webhook.Config{DeliveredRetention: time.Hour})
	deliverDue(t, d)
	f.clock.Add(59 * time.Minute)
	d.Purge(t.Context())
	if n := len(f.deliveries(t, f.endpoint.ID)); n != 1 {
		t.Fatalf("within the retention, %d deliveries listed, want 1", n)
	}
	f.clock.Add(2 * time.Minute)
	d.Purge(t.Context())
	if n := len(f.deliveries(t, f.endpoint.ID)); n != 0 {
		t.Errorf("past the retention, %d deliveries listed, want 0", n)
	}
	if _, err := webhook.New(webhook.Config{Store: f.ws, Vault: f.keys, DeliveredRetention: webhook.DeliveredRetentionMax + 1}); err == nil {
		t.Error("a DeliveredRetention above its bound was accepted")
	}
}

// TestLastErrorRedacted: a receiver whose status line carries a card
// number gets a failed attempt whose stored error (listed, shown on the
// endpoint) has the number redacted.
func TestLastErrorRedacted(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = bufio.NewReader(c).ReadString('\n') // the request line is enough
				_, _ = io.WriteString(c, "HTTP/1.1 4242-4242-4242-4242 nope\r\nContent-Length: 0\r\n\r\n")
			}()
		}
	}()
	f := newFixture(t, testenv.OpenSQLite(t), "http://"+ln.Addr().String()+"/hooks")
	f.sale(t, f.outbox(t))
	d := f.dispatcher(t, webhook.Config{})
	deliverDue(t, d)
	ds := f.deliveries(t, f.endpoint.ID)
	ep := f.findEndpoint(t, f.endpoint.ID)
	if len(ds) != 1 || ds[0].LastError == "" || ep.LastError == "" {
		t.Fatalf("deliveries %v, endpoint error %q: want a failed attempt with its error", ds, ep.LastError)
	}
	for _, s := range []string{ds[0].LastError, ep.LastError, f.logs.String()} {
		if strings.Contains(strings.ReplaceAll(s, "-", ""), "4242424242424242") {
			t.Errorf("a card number in the stored error or the log: %q", s)
		}
	}
}
