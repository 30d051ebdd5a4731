package storetest

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
)

// Webhooks for operators (issue 13 item 6): deliveries listed with their
// status, endpoints' health, resends, secret rolls, and the retention of
// succeeded deliveries.

func listDeliveries(t *testing.T, ws surgepay.WebhookStore, merchantID string, f surgepay.WebhookDeliveryFilter) ([]*surgepay.WebhookDeliveryInfo, bool) {
	t.Helper()
	if f.Limit == 0 {
		f.Limit = surgepay.ListLimitMax
	}
	ds, more, err := ws.ListWebhookDeliveries(t.Context(), merchantID, f)
	if err != nil {
		t.Fatalf("ListWebhookDeliveries(%+v): %v", f, err)
	}
	return ds, more
}

func deliveryKeys(ds []*surgepay.WebhookDeliveryInfo) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.EventID+"/"+d.EndpointID)
	}
	return out
}

// testWebhookDeliveriesListed: after a success, a retry, a failure and a
// claim, the list of an endpoint (or of an event) shows each delivery with
// its status, attempts, last attempt, last status and error, and next
// attempt; newest event first, in pages; never another merchant's; one
// statement.
func testWebhookDeliveriesListed(t *testing.T, s surgepay.Store) {
	ws := webhookStore(t, s)
	m, other := newMerchant(t, s), newMerchant(t, s)
	e1, e2 := newEndpoint(t, s, m.ID, 1), newEndpoint(t, s, m.ID, 2)
	var evs []*surgepay.WebhookEvent
	for range 4 {
		evs = append(evs, queued(t, s, m.ID))
		time.Sleep(2 * time.Millisecond) // event IDs sort by their millisecond
	}
	t0 := now().Add(time.Second)
	ds := claim(t, ws, t0, t0.Add(time.Minute), 100)
	if len(ds) != 8 {
		t.Fatalf("claimed %d, want 8", len(ds))
	}
	next := t0.Add(30 * time.Second)
	at := t0.Add(time.Millisecond)
	res := func(ev *surgepay.WebhookEvent, outcome string, code int, msg string) *surgepay.WebhookResult {
		return &surgepay.WebhookResult{EventID: ev.ID, EndpointID: e1.ID, MerchantID: m.ID, Attempt: 1, Outcome: outcome,
			NextAttempt: next, StatusCode: code, Error: msg, At: at, Sent: true}
	}
	// evs[3] to e1 stays claimed (in flight); every delivery to e2 too.
	record(t, ws, res(evs[0], surgepay.WebhookDelivered, 204, ""), res(evs[1], surgepay.WebhookRetry, 503, "HTTP 503"),
		res(evs[2], surgepay.WebhookFailed, 0, "timeout after 10s"))

	ctx, c := ctxCounter(t)
	got, more, err := ws.ListWebhookDeliveries(ctx, m.ID, surgepay.WebhookDeliveryFilter{EndpointID: e1.ID, Limit: 10})
	if err != nil {
		t.Fatalf("ListWebhookDeliveries: %v", err)
	}
	wantStatements(t, "ListWebhookDeliveries", c, stmtKinds{1, 1, 0, 0, 0})
	want := []*surgepay.WebhookDeliveryInfo{
		{EventID: evs[3].ID, EndpointID: e1.ID, MerchantID: m.ID, PaymentID: evs[3].PaymentID, Type: evs[3].Type,
			Status: surgepay.WebhookStatusPending, Attempts: 1, InFlight: true, NextAttempt: t0.Add(time.Minute), Created: evs[3].Created},
		{EventID: evs[2].ID, EndpointID: e1.ID, MerchantID: m.ID, PaymentID: evs[2].PaymentID, Type: evs[2].Type,
			Status: surgepay.WebhookStatusFailed, Attempts: 1, LastAttempt: at, LastError: "timeout after 10s", Created: evs[2].Created},
		{EventID: evs[1].ID, EndpointID: e1.ID, MerchantID: m.ID, PaymentID: evs[1].PaymentID, Type: evs[1].Type,
			Status: surgepay.WebhookStatusPending, Attempts: 1, NextAttempt: next, LastAttempt: at, LastStatus: 503,
			LastError: "HTTP 503", Created: evs[1].Created},
		{EventID: evs[0].ID, EndpointID: e1.ID, MerchantID: m.ID, PaymentID: evs[0].PaymentID, Type: evs[0].Type,
			Status: surgepay.WebhookStatusSucceeded, Attempts: 1, LastAttempt: at, LastStatus: 204, Created: evs[0].Created},
	}
	if d := diff(want, got); d != "" || more {
		t.Errorf("deliveries of endpoint 1 (more %v) (-want +got):\n%s", more, d)
	}

	// Pages of 3 over both endpoints' deliveries of the merchant's events:
	// by event, then endpoint, descending.
	var all []string
	f := surgepay.WebhookDeliveryFilter{EndpointID: e2.ID, Limit: 3}
	for page := 0; ; page++ {
		ds, more := listDeliveries(t, ws, m.ID, f)
		all = append(all, deliveryKeys(ds)...)
		if !more {
			break
		}
		if page > 3 {
			t.Fatal("pages do not end")
		}
		last := ds[len(ds)-1]
		f.StartingAfterEvent, f.StartingAfterEndpoint = last.EventID, last.EndpointID
	}
	var wantAll []string
	for i := len(evs) - 1; i >= 0; i-- {
		wantAll = append(wantAll, evs[i].ID+"/"+e2.ID)
	}
	if d := diff(wantAll, all); d != "" {
		t.Errorf("pages of endpoint 2 (-want +got):\n%s", d)
	}

	byEvent, _ := listDeliveries(t, ws, m.ID, surgepay.WebhookDeliveryFilter{EventID: evs[1].ID})
	wantEv := []string{evs[1].ID + "/" + e2.ID, evs[1].ID + "/" + e1.ID}
	if e1.ID > e2.ID {
		wantEv = []string{wantEv[1], wantEv[0]}
	}
	if d := diff(wantEv, deliveryKeys(byEvent)); d != "" {
		t.Errorf("deliveries of one event (-want +got):\n%s", d)
	}
	// Pages of 1 over one event's deliveries: the cursor moves by endpoint.
	var byEventPages []string
	f = surgepay.WebhookDeliveryFilter{EventID: evs[1].ID, Limit: 1}
	for page := 0; ; page++ {
		ds, more := listDeliveries(t, ws, m.ID, f)
		byEventPages = append(byEventPages, deliveryKeys(ds)...)
		if !more || page > 3 {
			break
		}
		f.StartingAfterEvent, f.StartingAfterEndpoint = ds[0].EventID, ds[0].EndpointID
	}
	if d := diff(wantEv, byEventPages); d != "" {
		t.Errorf("pages of 1 over one event's deliveries (-want +got):\n%s", d)
	}
	// A cursor of another list (an event's) on an endpoint's list: the
	// deliveries after it in (event, endpoint) order.
	afterDs, _ := listDeliveries(t, ws, m.ID, surgepay.WebhookDeliveryFilter{EndpointID: e1.ID,
		StartingAfterEvent: evs[2].ID, StartingAfterEndpoint: e2.ID})
	wantAfter := []string{evs[1].ID + "/" + e1.ID, evs[0].ID + "/" + e1.ID}
	if e1.ID < e2.ID {
		wantAfter = append([]string{evs[2].ID + "/" + e1.ID}, wantAfter...)
	}
	if d := diff(wantAfter, deliveryKeys(afterDs)); d != "" {
		t.Errorf("endpoint 1's deliveries after %s/%s (-want +got):\n%s", evs[2].ID, e2.ID, d)
	}
	for _, st := range []string{surgepay.WebhookStatusSucceeded, surgepay.WebhookStatusFailed} {
		ds, _ := listDeliveries(t, ws, m.ID, surgepay.WebhookDeliveryFilter{EndpointID: e1.ID, Status: st})
		if len(ds) != 1 || ds[0].Status != st {
			t.Errorf("deliveries of endpoint 1 with status %s: %v", st, deliveryKeys(ds))
		}
	}
	if ds, _ := listDeliveries(t, ws, other.ID, surgepay.WebhookDeliveryFilter{EndpointID: e1.ID}); len(ds) != 0 {
		t.Errorf("another merchant lists %d of this merchant's deliveries", len(ds))
	}
	if ds, _ := listDeliveries(t, ws, other.ID, surgepay.WebhookDeliveryFilter{EventID: evs[0].ID}); len(ds) != 0 {
		t.Errorf("another merchant lists %d deliveries of this merchant's event", len(ds))
	}
	one, err := ws.FindWebhookDelivery(t.Context(), m.ID, evs[1].ID, e1.ID)
	if err != nil {
		t.Fatalf("FindWebhookDelivery: %v", err)
	}
	if d := diff(want[2], one); d != "" {
		t.Errorf("FindWebhookDelivery (-want +got):\n%s", d)
	}
	_, err = ws.FindWebhookDelivery(t.Context(), other.ID, evs[1].ID, e1.ID)
	wantNotFound(t, "FindWebhookDelivery(another merchant's)", err)
	_, _, err = ws.ListWebhookDeliveries(t.Context(), m.ID, surgepay.WebhookDeliveryFilter{Limit: 10})
	wantErr(t, err, surgepay.EINVALID, "invalid_value")
}

// testWebhookEndpointHealth: results that tried the endpoint count its
// failures in a row (reset by a success), its last success and failure
// and the last error; a result that did not try it changes nothing.
func testWebhookEndpointHealth(t *testing.T, s surgepay.Store) {
	ws := webhookStore(t, s)
	m := newMerchant(t, s)
	e := newEndpoint(t, s, m.ID, 1)
	evs := []*surgepay.WebhookEvent{queued(t, s, m.ID), queued(t, s, m.ID), queued(t, s, m.ID), queued(t, s, m.ID)}
	t0 := now().Add(time.Second)
	claim(t, ws, t0, t0.Add(time.Minute), 10)
	res := func(i int, outcome, msg string, sent bool) *surgepay.WebhookResult {
		return &surgepay.WebhookResult{EventID: evs[i].ID, EndpointID: e.ID, MerchantID: m.ID, Attempt: 1,
			Outcome: outcome, NextAttempt: t0.Add(time.Hour), Error: msg, At: t0.Add(time.Duration(i) * time.Second), Sent: sent}
	}
	health := func() *surgepay.WebhookEndpoint {
		t.Helper()
		got, err := ws.FindWebhookEndpoint(t.Context(), m.ID, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	// Out of order in the batch: the success (at +1s) comes after the
	// first failure (at +0s), before the two others.
	record(t, ws, res(2, surgepay.WebhookRetry, "HTTP 500", true), res(1, surgepay.WebhookDelivered, "", true),
		res(0, surgepay.WebhookRetry, "HTTP 502", true), res(3, surgepay.WebhookRetry, "HTTP 503", true))
	h := health()
	if h.FailuresInARow != 2 || !h.LastSuccess.Equal(t0.Add(time.Second)) || !h.LastFailure.Equal(t0.Add(3*time.Second)) ||
		h.LastError != "HTTP 503" {
		t.Errorf("health = %d in a row, success %v, failure %v %q; want 2, %v, %v \"HTTP 503\"", h.FailuresInARow,
			h.LastSuccess, h.LastFailure, h.LastError, t0.Add(time.Second), t0.Add(3*time.Second))
	}
	claim(t, ws, t0.Add(2*time.Hour), t0.Add(3*time.Hour), 10)
	not := &surgepay.WebhookResult{EventID: evs[2].ID, EndpointID: e.ID, MerchantID: m.ID, Attempt: 2,
		Outcome: surgepay.WebhookFailed, Error: "attempts exhausted", At: t0.Add(time.Hour)}
	record(t, ws, not)
	if h := health(); h.FailuresInARow != 2 || h.LastError != "HTTP 503" {
		t.Errorf("a result that did not try the endpoint changed its health: %d, %q", h.FailuresInARow, h.LastError)
	}
	r := res(3, surgepay.WebhookDelivered, "", true)
	r.Attempt, r.At = 2, t0.Add(2*time.Hour)
	record(t, ws, r)
	if h := health(); h.FailuresInARow != 0 || !h.LastSuccess.Equal(r.At) || h.LastError != "HTTP 503" {
		t.Errorf("after a success: %d in a row, last success %v, error %q; want 0, %v, the last failure's kept",
			h.FailuresInARow, h.LastSuccess, h.LastError, r.At)
	}
}

// testWebhookResend: a finished delivery is queued again, due at once,
// its attempts afresh; one in flight, or resent WebhookResendsMax times,
// is refused (and stores nothing of its Write); a missing one or another
// merchant's is ENOTFOUND.
func testWebhookResend(t *testing.T, s surgepay.Store) {
	ws := webhookStore(t, s)
	m, other := newMerchant(t, s), newMerchant(t, s)
	e := newEndpoint(t, s, m.ID, 1)
	ev := queued(t, s, m.ID)
	t0 := now().Add(time.Second)
	claim(t, ws, t0, t0.Add(time.Minute), 10)
	resend := func(at time.Time) *surgepay.WebhookResend {
		return &surgepay.WebhookResend{MerchantID: m.ID, EventID: ev.ID, EndpointID: e.ID, At: at}
	}
	// In flight: refused, its idempotency record not stored.
	idem := sampleIdempotency(m.ID)
	wantErr(t, s.Apply(t.Context(), &surgepay.Write{Idempotency: idem, WebhookResend: resend(t0)}),
		surgepay.ECONFLICT, "concurrent_update")
	_, err := s.FindIdempotency(t.Context(), m.ID, idem.Key)
	wantNotFound(t, "FindIdempotency(refused resend)", err)

	record(t, ws, &surgepay.WebhookResult{EventID: ev.ID, EndpointID: e.ID, MerchantID: m.ID, Attempt: 1,
		Outcome: surgepay.WebhookDelivered, StatusCode: 200, At: t0, Sent: true})
	t1 := t0.Add(time.Hour)
	ctx, c := ctxCounter(t)
	if err := s.Apply(ctx, &surgepay.Write{Idempotency: sampleIdempotency(m.ID), WebhookResend: resend(t1)}); err != nil {
		t.Fatalf("Apply(resend of a succeeded delivery): %v", err)
	}
	wantStatements(t, "Apply(resend)", c, stmtKinds{2, 0, 1, 1, 0})
	d, err := ws.FindWebhookDelivery(t.Context(), m.ID, ev.ID, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d.Status != surgepay.WebhookStatusPending || d.Attempts != 0 || !d.NextAttempt.Equal(t1) || d.Resends != 1 || d.InFlight {
		t.Errorf("after the resend: %+v; want pending, 0 attempts, due %v, 1 resend", d, t1)
	}
	if ds := claim(t, ws, t1.Add(-time.Microsecond), t1.Add(time.Minute), 10); len(ds) != 0 {
		t.Errorf("the resent delivery was claimed before its time")
	}
	ds := claim(t, ws, t1, t1.Add(time.Minute), 10)
	if len(ds) != 1 || ds[0].EventID != ev.ID || ds[0].Attempt != 1 || !bytes.Equal(ds[0].Payload, ev.Payload) {
		t.Fatalf("claim after the resend = %+v, want the event at attempt 1 with its payload", ds)
	}
	record(t, ws, &surgepay.WebhookResult{EventID: ev.ID, EndpointID: e.ID, MerchantID: m.ID, Attempt: 1,
		Outcome: surgepay.WebhookFailed, StatusCode: 500, Error: "HTTP 500", At: t1, Sent: true})
	// A pending delivery waiting for its retry may be made due now.
	for i := 1; i < surgepay.WebhookResendsMax; i++ {
		apply(t, s, &surgepay.Write{WebhookResend: resend(t1.Add(time.Duration(i) * time.Second))})
	}
	wantErr(t, s.Apply(t.Context(), &surgepay.Write{WebhookResend: resend(t1.Add(time.Hour))}), surgepay.ECONFLICT,
		"concurrent_update")
	if d, _ := ws.FindWebhookDelivery(t.Context(), m.ID, ev.ID, e.ID); d.Resends != surgepay.WebhookResendsMax {
		t.Errorf("resends = %d, want the bound %d", d.Resends, surgepay.WebhookResendsMax)
	}
	err = s.Apply(t.Context(), &surgepay.Write{WebhookResend: &surgepay.WebhookResend{MerchantID: other.ID,
		EventID: ev.ID, EndpointID: e.ID, At: t1}})
	wantNotFound(t, "resend of another merchant's delivery", err)
	err = s.Apply(t.Context(), &surgepay.Write{WebhookResend: &surgepay.WebhookResend{MerchantID: m.ID,
		EventID: surgepay.NewID("evt"), EndpointID: e.ID, At: t1}})
	wantNotFound(t, "resend of no delivery", err)
	if err := s.Apply(t.Context(), &surgepay.Write{WebhookResend: resend(t1), WebhookEndpointDelete: e}); err == nil {
		t.Error("Apply(resend with an endpoint delete) succeeded, want an error: a resend goes alone")
	}
}

// testWebhookResendCopy: an endpoint created after an event gets it by a
// resend with Copy: a pending delivery with the event's body, claimed
// with the new endpoint's URL; a second copy conflicts; an event the
// merchant keeps no delivery of, or another merchant's, is ENOTFOUND.
func testWebhookResendCopy(t *testing.T, s surgepay.Store) {
	ws := webhookStore(t, s)
	m, other := newMerchant(t, s), newMerchant(t, s)
	newEndpoint(t, s, m.ID, 1)
	ev := queued(t, s, m.ID)
	late := newEndpoint(t, s, m.ID, 2)
	t0 := now().Add(time.Second)
	cp := &surgepay.WebhookResend{MerchantID: m.ID, EventID: ev.ID, EndpointID: late.ID, At: t0, Copy: true}
	ctx, c := ctxCounter(t)
	if err := s.Apply(ctx, &surgepay.Write{Idempotency: sampleIdempotency(m.ID), WebhookResend: cp}); err != nil {
		t.Fatalf("Apply(resend copy): %v", err)
	}
	wantStatements(t, "Apply(resend copy)", c, stmtKinds{2, 0, 2, 0, 0})
	d, err := ws.FindWebhookDelivery(t.Context(), m.ID, ev.ID, late.ID)
	if err != nil {
		t.Fatalf("FindWebhookDelivery(the copy): %v", err)
	}
	want := &surgepay.WebhookDeliveryInfo{EventID: ev.ID, EndpointID: late.ID, MerchantID: m.ID, PaymentID: ev.PaymentID,
		Type: ev.Type, Status: surgepay.WebhookStatusPending, NextAttempt: t0, Resends: 1, Created: ev.Created}
	if df := diff(want, d); df != "" {
		t.Errorf("the copy (-want +got):\n%s", df)
	}
	var got *surgepay.WebhookDelivery
	for _, dl := range claim(t, ws, t0, t0.Add(time.Minute), 10) {
		if dl.EndpointID == late.ID {
			got = dl
		}
	}
	if got == nil || !bytes.Equal(got.Payload, ev.Payload) || got.URL != late.URL || got.Attempt != 1 {
		t.Fatalf("claimed copy = %+v, want the event's body to %s, attempt 1", got, late.URL)
	}
	wantErr(t, s.Apply(t.Context(), &surgepay.Write{WebhookResend: cp}), surgepay.ECONFLICT, "concurrent_update")
	gone := *cp
	gone.EventID = surgepay.NewID("evt")
	wantNotFound(t, "copy of an event without deliveries", s.Apply(t.Context(), &surgepay.Write{WebhookResend: &gone}))
	theirs := *cp
	theirs.MerchantID = other.ID
	wantNotFound(t, "copy of another merchant's event", s.Apply(t.Context(), &surgepay.Write{WebhookResend: &theirs}))
}

// testWebhookEndpointRoll: a roll replaces the secret and keeps the old
// one with its expiry, which claims return; a roll from a secret that is
// no longer current fails and stores nothing of its Write.
func testWebhookEndpointRoll(t *testing.T, s surgepay.Store) {
	ws := webhookStore(t, s)
	m := newMerchant(t, s)
	e := newEndpoint(t, s, m.ID, 1)
	expires := now().Add(24 * time.Hour)
	roll := &surgepay.WebhookEndpointRoll{MerchantID: m.ID, EndpointID: e.ID, SealedSecret: []byte("new\x00\xff"),
		PreviousSealedSecret: e.SealedSecret, PreviousSecretExpires: expires}
	ctx, c := ctxCounter(t)
	if err := s.Apply(ctx, &surgepay.Write{WebhookEndpointRoll: roll}); err != nil {
		t.Fatalf("Apply(roll): %v", err)
	}
	wantStatements(t, "Apply(roll)", c, stmtKinds{1, 0, 0, 1, 0})
	got, err := ws.FindWebhookEndpoint(t.Context(), m.ID, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.SealedSecret, roll.SealedSecret) || !bytes.Equal(got.PreviousSealedSecret, e.SealedSecret) ||
		!got.PreviousSecretExpires.Equal(expires) {
		t.Errorf("after the roll: secret %x previous %x until %v; want %x, %x, %v", got.SealedSecret,
			got.PreviousSealedSecret, got.PreviousSecretExpires, roll.SealedSecret, e.SealedSecret, expires)
	}
	queued(t, s, m.ID)
	at := now().Add(time.Second)
	ds := claim(t, ws, at, at.Add(time.Minute), 10)
	if len(ds) != 1 || !bytes.Equal(ds[0].SealedSecret, roll.SealedSecret) ||
		!bytes.Equal(ds[0].PreviousSealedSecret, e.SealedSecret) || !ds[0].PreviousSecretExpires.Equal(expires) {
		t.Fatalf("claimed %+v, want the delivery with both secrets and the expiry", ds)
	}
	// A roll that read the first secret, after this one: refused.
	stale := *roll
	stale.SealedSecret = []byte("lost")
	idem := sampleIdempotency(m.ID)
	wantErr(t, s.Apply(t.Context(), &surgepay.Write{Idempotency: idem, WebhookEndpointRoll: &stale}),
		surgepay.ECONFLICT, "concurrent_update")
	if _, err := s.FindIdempotency(t.Context(), m.ID, idem.Key); surgepay.ErrorCode(err) != surgepay.ENOTFOUND {
		t.Errorf("the refused roll stored its idempotency record (%v)", err)
	}
	if got, _ := ws.FindWebhookEndpoint(t.Context(), m.ID, e.ID); !bytes.Equal(got.SealedSecret, roll.SealedSecret) {
		t.Errorf("the refused roll changed the secret to %q", got.SealedSecret)
	}
	gone := *roll
	gone.EndpointID = surgepay.NewID("we")
	wantNotFound(t, "roll of no endpoint", s.Apply(t.Context(), &surgepay.Write{WebhookEndpointRoll: &gone}))
}

// testWebhookPurgeSucceeded: succeeded deliveries older than the
// retention go, a bounded batch at a time; pending and failed ones stay.
func testWebhookPurgeSucceeded(t *testing.T, s surgepay.Store) {
	ws := webhookStore(t, s)
	m := newMerchant(t, s)
	e := newEndpoint(t, s, m.ID, 1)
	var evs []*surgepay.WebhookEvent
	for range 5 {
		evs = append(evs, queued(t, s, m.ID))
	}
	t0 := now().Add(time.Second)
	claim(t, ws, t0, t0.Add(time.Minute), 10)
	for i, ev := range evs[:4] {
		outcome := surgepay.WebhookDelivered
		if i == 3 {
			outcome = surgepay.WebhookFailed
		}
		record(t, ws, &surgepay.WebhookResult{EventID: ev.ID, EndpointID: e.ID, MerchantID: m.ID, Attempt: 1,
			Outcome: outcome, StatusCode: 200, At: t0.Add(time.Duration(i) * time.Hour), Sent: true})
	}
	n, err := ws.DeleteSucceededWebhooksBefore(t.Context(), t0.Add(90*time.Minute), 1)
	if err != nil || n != 1 {
		t.Fatalf("DeleteSucceededWebhooksBefore(limit 1) = %d, %v; want 1", n, err)
	}
	n, err = ws.DeleteSucceededWebhooksBefore(t.Context(), t0.Add(90*time.Minute), 10)
	if err != nil || n != 1 {
		t.Fatalf("DeleteSucceededWebhooksBefore = %d, %v; want 1 (the other older one)", n, err)
	}
	ds, _ := listDeliveries(t, ws, m.ID, surgepay.WebhookDeliveryFilter{EndpointID: e.ID})
	var got []string
	for _, d := range ds {
		got = append(got, fmt.Sprintf("%s %s", d.EventID, d.Status))
	}
	want := []string{evs[4].ID + " pending", evs[3].ID + " failed", evs[2].ID + " succeeded"}
	if d := diff(want, got); d != "" {
		t.Errorf("deliveries after the purge (-want +got):\n%s", d)
	}
}
