package storetest

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/webhook"
)

// Webhooks: a store with the surgepay.WebhookStore capability keeps
// endpoints (the merchant's count guarded), and queues a Write's Webhook
// for every endpoint its merchant has at commit, in the Write's own
// transaction, with ONE more statement (none without a Webhook). Claims
// lease what they return; results apply only to the attempt they report.
// The webhook tests skip a store without the capability; a store with it
// must also claim with a bound per endpoint (webhook.BoundedClaimer).

var webhookTests = []struct {
	name string
	fn   func(t *testing.T, s surgepay.Store)
}{
	{"WebhookEndpointInsertFindListDelete", testWebhookEndpointInsertFindListDelete},
	{"WebhookEndpointLimit", testWebhookEndpointLimit},
	{"WebhookEndpointChangeErrNotAlone", testWebhookEndpointChangeErrNotAlone},
	{"WebhookEndpointLimitConcurrent", testWebhookEndpointLimitConcurrent},
	{"WebhookFanOutInTheWrite", testWebhookFanOutInTheWrite},
	{"WebhookRefusedWriteQueuesNothing", testWebhookRefusedWriteQueuesNothing},
	{"WebhookClaimLeases", testWebhookClaimLeases},
	{"WebhookClaimBoundedPerEndpoint", testWebhookClaimBoundedPerEndpoint},
	{"WebhookResults", testWebhookResults},
	{"WebhookEndpointDeletedDelivery", testWebhookEndpointDeletedDelivery},
	{"WebhookPurgeFailed", testWebhookPurgeFailed},
	{"WebhookDeliveriesListed", testWebhookDeliveriesListed},
	{"WebhookEndpointHealth", testWebhookEndpointHealth},
	{"WebhookResend", testWebhookResend},
	{"WebhookResendCopy", testWebhookResendCopy},
	{"WebhookEndpointRoll", testWebhookEndpointRoll},
	{"WebhookPurgeSucceeded", testWebhookPurgeSucceeded},
}

func webhookStore(t *testing.T, s surgepay.Store) surgepay.WebhookStore {
	t.Helper()
	ws, ok := s.(surgepay.WebhookStore)
	if !ok {
		t.Skip("the store has no WebhookStore capability")
	}
	return ws
}

func sampleEndpoint(merchantID string, n int) *surgepay.WebhookEndpoint {
	return &surgepay.WebhookEndpoint{ID: surgepay.NewID("we"), MerchantID: merchantID,
		URL: fmt.Sprintf("https://hooks.example.com/%d?a=b&c=%%20", n), Description: "ünïcode ✓ \"quoted\"",
		SealedSecret: []byte{0, 1, 2, 0xff, byte(n)}, Created: now()}
}

func newEndpoint(t *testing.T, s surgepay.Store, merchantID string, n int) *surgepay.WebhookEndpoint {
	t.Helper()
	e := sampleEndpoint(merchantID, n)
	apply(t, s, &surgepay.Write{WebhookEndpointInsert: e})
	return e
}

// webhookEvent returns the webhook of a Write that stores p.
func webhookEvent(p *surgepay.Payment) *surgepay.WebhookEvent {
	return &surgepay.WebhookEvent{ID: surgepay.NewID("evt"), MerchantID: p.MerchantID, PaymentID: p.ID,
		Type: surgepay.WebhookPaymentSucceeded, Payload: []byte(`{"id":"` + p.ID + `","x":"\u00e9"}`), Created: now()}
}

func claim(t *testing.T, ws surgepay.WebhookStore, at, lease time.Time, limit int) []*surgepay.WebhookDelivery {
	t.Helper()
	ds, err := ws.ClaimWebhookDeliveries(t.Context(), at, lease, limit)
	if err != nil {
		t.Fatalf("ClaimWebhookDeliveries: %v", err)
	}
	return ds
}

func record(t *testing.T, ws surgepay.WebhookStore, rs ...*surgepay.WebhookResult) {
	t.Helper()
	if err := ws.RecordWebhookResults(t.Context(), rs); err != nil {
		t.Fatalf("RecordWebhookResults: %v", err)
	}
}

func backlog(t *testing.T, ws surgepay.WebhookStore) surgepay.WebhookBacklog {
	t.Helper()
	b, err := ws.WebhookBacklog(t.Context())
	if err != nil {
		t.Fatalf("WebhookBacklog: %v", err)
	}
	return b
}

func testWebhookEndpointInsertFindListDelete(t *testing.T, s surgepay.Store) {
	ws := webhookStore(t, s)
	m, other := newMerchant(t, s), newMerchant(t, s)
	e1 := newEndpoint(t, s, m.ID, 1)
	// The fields an insert stores; a roll and the results set the others
	// (WebhookEndpointRoll, WebhookEndpointHealth).
	wantAllFieldsSet(t, &struct {
		ID, MerchantID, URL, Description string
		SealedSecret                     []byte
		Created                          time.Time
	}{e1.ID, e1.MerchantID, e1.URL, e1.Description, e1.SealedSecret, e1.Created})
	e2 := newEndpoint(t, s, m.ID, 2)
	got, err := ws.FindWebhookEndpoint(t.Context(), m.ID, e1.ID)
	if err != nil {
		t.Fatalf("FindWebhookEndpoint: %v", err)
	}
	if d := diff(e1, got); d != "" {
		t.Errorf("FindWebhookEndpoint (-want +got):\n%s", d)
	}
	_, err = ws.FindWebhookEndpoint(t.Context(), other.ID, e1.ID)
	wantNotFound(t, "FindWebhookEndpoint(another merchant's)", err)
	list, err := ws.ListWebhookEndpoints(t.Context(), m.ID)
	if err != nil {
		t.Fatalf("ListWebhookEndpoints: %v", err)
	}
	want := []*surgepay.WebhookEndpoint{e2, e1}
	if e1.ID > e2.ID { // IDs are random within a millisecond; lists go by ID
		want = []*surgepay.WebhookEndpoint{e1, e2}
	}
	if d := diff(want, list); d != "" {
		t.Errorf("ListWebhookEndpoints, newest first (-want +got):\n%s", d)
	}
	if list, _ := ws.ListWebhookEndpoints(t.Context(), other.ID); len(list) != 0 {
		t.Errorf("ListWebhookEndpoints(another merchant) = %d endpoints, want 0", len(list))
	}
	if ms, _ := ws.ListWebhookMerchants(t.Context()); diff([]string{m.ID}, ms) != "" {
		t.Errorf("ListWebhookMerchants = %v, want [%s]", ms, m.ID)
	}
	ctx, c := ctxCounter(t)
	if err := s.Apply(ctx, &surgepay.Write{WebhookEndpointDelete: e1}); err != nil {
		t.Fatalf("Apply(delete): %v", err)
	}
	wantStatements(t, "Apply(WebhookEndpointDelete)", c, stmtKinds{1, 0, 0, 0, 1})
	_, err = ws.FindWebhookEndpoint(t.Context(), m.ID, e1.ID)
	wantNotFound(t, "FindWebhookEndpoint(deleted)", err)
	apply(t, s, &surgepay.Write{WebhookEndpointDelete: e1}) // gone already: not an error
	apply(t, s, &surgepay.Write{WebhookEndpointDelete: e2})
	if ms, _ := ws.ListWebhookMerchants(t.Context()); len(ms) != 0 {
		t.Errorf("ListWebhookMerchants after every delete = %v, want none", ms)
	}
	err = s.Apply(t.Context(), &surgepay.Write{WebhookEndpointInsert: sampleEndpoint(m.ID, 3), PaymentInsert: minimalPayment(m.ID, surgepay.StatusSucceeded)})
	if err == nil {
		t.Error("Apply(endpoint insert with a payment) succeeded, want an error: an endpoint change goes alone")
	}
}

// testWebhookEndpointLimit: the insert past the bound stores nothing of
// its Write, idempotency record included.
func testWebhookEndpointLimit(t *testing.T, s surgepay.Store) {
	ws := webhookStore(t, s)
	m, other := newMerchant(t, s), newMerchant(t, s)
	for i := range surgepay.WebhookEndpointsPerMerchantMax {
		newEndpoint(t, s, m.ID, i)
	}
	idem := sampleIdempotency(m.ID)
	extra := sampleEndpoint(m.ID, 99)
	ctx, c := ctxCounter(t)
	err := s.Apply(ctx, &surgepay.Write{Idempotency: idem, WebhookEndpointInsert: extra})
	wantErr(t, err, surgepay.EUNPROCESS, "too_many_webhook_endpoints")
	if c.Total() < 2 {
		t.Errorf("refused endpoint insert with a key: %d statements, want the idempotency insert and the guard", c.Total())
	}
	_, err = ws.FindWebhookEndpoint(t.Context(), m.ID, extra.ID)
	wantNotFound(t, "FindWebhookEndpoint(refused)", err)
	_, err = s.FindIdempotency(t.Context(), m.ID, idem.Key)
	wantNotFound(t, "FindIdempotency(refused endpoint insert)", err)
	newEndpoint(t, s, other.ID, 0) // the bound is per merchant
	if list, _ := ws.ListWebhookEndpoints(t.Context(), m.ID); len(list) != surgepay.WebhookEndpointsPerMerchantMax {
		t.Errorf("ListWebhookEndpoints = %d, want %d", len(list), surgepay.WebhookEndpointsPerMerchantMax)
	}
}

// testWebhookEndpointLimitConcurrent: creates for one merchant applied at
// once (by concurrent committers, on a store that has several) end with
// exactly WebhookEndpointsPerMerchantMax endpoints; every other create is
// refused with too_many_webhook_endpoints and stores nothing, its
// idempotency record included. A count checked without serialising the
// creates lets each concurrent transaction see room and pass the bound.
// testWebhookEndpointChangeErrNotAlone: an endpoint change goes alone in
// its Write but for an idempotency record (Write.Validate); with anything
// else every store refuses it (ErrWriteInvalid) and stores none of it.
// (PostgreSQL took one with an API key's revoke, which SQLite refused.)
func testWebhookEndpointChangeErrNotAlone(t *testing.T, s surgepay.Store) {
	ws := webhookStore(t, s)
	m := newMerchant(t, s)
	k := newKey(t, s, m.ID, 0xc3)
	e := sampleEndpoint(m.ID, 1)
	for _, tc := range []struct {
		name string
		w    *surgepay.Write
	}{
		{"APIKeyRevoke", &surgepay.Write{WebhookEndpointInsert: e, APIKeyRevoke: k.ID}},
		{"MerchantStatus", &surgepay.Write{WebhookEndpointInsert: e, MerchantStatus: &surgepay.MerchantStatus{MerchantID: m.ID, Disabled: true}}},
		{"Audit", &surgepay.Write{WebhookEndpointInsert: e, Audit: []*surgepay.AuditEvent{{ID: surgepay.NewID("aud"),
			MerchantID: m.ID, Action: "webhook_endpoint.create", Created: now()}}}},
		{"TwoChanges", &surgepay.Write{WebhookEndpointInsert: e, WebhookEndpointDelete: sampleEndpoint(m.ID, 2)}},
	} {
		err := s.Apply(t.Context(), tc.w)
		if !errors.Is(err, surgepay.ErrWriteInvalid) {
			t.Errorf("%s: Apply(endpoint insert with %s) = %v, want ErrWriteInvalid", tc.name, tc.name, err)
		}
	}
	if _, err := ws.FindWebhookEndpoint(t.Context(), m.ID, e.ID); surgepay.ErrorCode(err) != surgepay.ENOTFOUND {
		t.Errorf("FindWebhookEndpoint after refused Writes = %v, want not found", err)
	}
	if got := findKey(t, s, k.Hash); got.Revoked {
		t.Error("the API key of a refused Write was revoked")
	}
	if got, err := s.FindMerchant(t.Context(), m.ID); err != nil || got.Disabled {
		t.Errorf("FindMerchant after refused Writes = %+v, %v; want it enabled", got, err)
	}
	// With an idempotency record it is stored.
	w := &surgepay.Write{WebhookEndpointInsert: e, Idempotency: &surgepay.IdempotencyRecord{MerchantID: m.ID,
		Key: surgepay.NewID("idem"), StatusCode: 200, Body: []byte(`{}`), Created: now()}}
	apply(t, s, w)
	if _, err := ws.FindWebhookEndpoint(t.Context(), m.ID, e.ID); err != nil {
		t.Errorf("FindWebhookEndpoint after the Write with an idempotency record: %v", err)
	}
}

func testWebhookEndpointLimitConcurrent(t *testing.T, s surgepay.Store) {
	ws := webhookStore(t, s)
	m := newMerchant(t, s)
	const creates = 4 * surgepay.WebhookEndpointsPerMerchantMax
	writes := make([]*surgepay.Write, creates)
	for i := range writes {
		writes[i] = &surgepay.Write{WebhookEndpointInsert: sampleEndpoint(m.ID, i)}
		if i%2 == 0 { // both paths: with and without an idempotency record
			writes[i].Idempotency = sampleIdempotency(m.ID)
		}
	}
	errs := make([]error, creates)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range writes {
		wg.Go(func() {
			<-start
			errs[i] = s.Apply(t.Context(), writes[i])
		})
	}
	close(start)
	wg.Wait()
	stored := 0
	for i, err := range errs {
		if err == nil {
			stored++
			continue
		}
		wantErr(t, err, surgepay.EUNPROCESS, "too_many_webhook_endpoints")
		_, ferr := ws.FindWebhookEndpoint(t.Context(), m.ID, writes[i].WebhookEndpointInsert.ID)
		wantNotFound(t, fmt.Sprintf("FindWebhookEndpoint(refused create %d)", i), ferr)
		if r := writes[i].Idempotency; r != nil {
			_, ferr := s.FindIdempotency(t.Context(), m.ID, r.Key)
			wantNotFound(t, fmt.Sprintf("FindIdempotency(refused create %d)", i), ferr)
		}
	}
	// ListWebhookEndpoints stops at the bound: count the successes.
	if stored != surgepay.WebhookEndpointsPerMerchantMax {
		t.Fatalf("%d concurrent creates: %d succeeded, want %d", creates, stored, surgepay.WebhookEndpointsPerMerchantMax)
	}
	if list, _ := ws.ListWebhookEndpoints(t.Context(), m.ID); len(list) != surgepay.WebhookEndpointsPerMerchantMax {
		t.Errorf("ListWebhookEndpoints = %d endpoints, want %d", len(list), surgepay.WebhookEndpointsPerMerchantMax)
	}
}

// testWebhookFanOutInTheWrite: one more statement queues the event for
// every endpoint of the merchant, on the sale path and the general path;
// a merchant without endpoints gets no row.
func testWebhookFanOutInTheWrite(t *testing.T, s surgepay.Store) {
	ws := webhookStore(t, s)
	m, bare := newMerchant(t, s), newMerchant(t, s)
	e1, e2 := newEndpoint(t, s, m.ID, 1), newEndpoint(t, s, m.ID, 2)

	w, p := purchase(m.ID)
	w.Webhook = webhookEvent(p)
	ctx, c := ctxCounter(t)
	if err := s.Apply(ctx, w); err != nil {
		t.Fatalf("Apply(purchase with webhook): %v", err)
	}
	wantStatements(t, "Apply(purchase with webhook)", c, stmtKinds{3, 0, 3, 0, 0})

	noHook, _ := purchase(m.ID)
	ctx, c = ctxCounter(t)
	if err := s.Apply(ctx, noHook); err != nil {
		t.Fatalf("Apply(purchase without webhook): %v", err)
	}
	wantStatements(t, "Apply(purchase without webhook)", c, stmtKinds{2, 0, 2, 0, 0})

	bareW, bareP := purchase(bare.ID)
	bareW.Webhook = webhookEvent(bareP)
	apply(t, s, bareW)

	upd := p.Clone()
	upd.Version++
	upd.Status = surgepay.StatusRefunded
	updW := &surgepay.Write{PaymentUpdate: upd,
		Events: []*surgepay.Event{sampleEvent(upd, surgepay.TxRefund, surgepay.StatusSucceeded, surgepay.StatusRefunded)}}
	updW.Webhook = webhookEvent(upd)
	ctx, c = ctxCounter(t)
	if err := s.Apply(ctx, updW); err != nil {
		t.Fatalf("Apply(update with webhook): %v", err)
	}
	wantStatements(t, "Apply(update with webhook)", c, stmtKinds{3, 0, 2, 1, 0})

	at := now().Add(time.Second)
	ds := claim(t, ws, at, at.Add(time.Minute), 100)
	got := map[string]*surgepay.WebhookDelivery{}
	for _, d := range ds {
		got[d.EventID+"/"+d.EndpointID] = d
	}
	if len(ds) != 4 || len(got) != 4 {
		t.Fatalf("claimed %d deliveries (%d distinct), want 4: 2 events x 2 endpoints, none for the merchant without endpoints", len(ds), len(got))
	}
	for _, ev := range []*surgepay.WebhookEvent{w.Webhook, updW.Webhook} {
		for _, e := range []*surgepay.WebhookEndpoint{e1, e2} {
			want := &surgepay.WebhookDelivery{EventID: ev.ID, EndpointID: e.ID, MerchantID: m.ID, PaymentID: ev.PaymentID,
				Type: ev.Type, Payload: ev.Payload, Attempt: 1, Created: ev.Created, URL: e.URL, SealedSecret: e.SealedSecret}
			if d := diff(want, got[ev.ID+"/"+e.ID]); d != "" {
				t.Errorf("delivery of %s to %s (-want +got):\n%s", ev.ID, e.ID, d)
			}
		}
	}
	if b := backlog(t, ws); b.Pending != 4 || b.Failed != 0 || !b.OldestPending.Equal(w.Webhook.Created) {
		t.Errorf("WebhookBacklog = %+v, want 4 pending, oldest %v", b, w.Webhook.Created)
	}
}

// testWebhookRefusedWriteQueuesNothing: a Write whose guard fails stores
// none of its webhook rows.
func testWebhookRefusedWriteQueuesNothing(t *testing.T, s surgepay.Store) {
	ws := webhookStore(t, s)
	m := newMerchant(t, s)
	newEndpoint(t, s, m.ID, 1)
	first, _ := purchase(m.ID)
	apply(t, s, first)
	again, p := purchase(m.ID)
	again.Idempotency.Key = first.Idempotency.Key
	again.Webhook = webhookEvent(p)
	wantErr(t, s.Apply(t.Context(), again), surgepay.ECONFLICT, "idempotency_key_exists")
	stale := p.Clone()
	stale.ID = first.PaymentInsert.ID
	stale.Version = 5
	staleW := &surgepay.Write{PaymentUpdate: stale, Events: []*surgepay.Event{sampleEvent(stale, surgepay.TxRefund, surgepay.StatusSucceeded, surgepay.StatusRefunded)}}
	staleW.Webhook = webhookEvent(stale)
	wantErr(t, s.Apply(t.Context(), staleW), surgepay.ECONFLICT, "concurrent_update")
	at := now().Add(time.Second)
	if ds := claim(t, ws, at, at.Add(time.Minute), 100); len(ds) != 0 {
		t.Errorf("claimed %d deliveries of refused Writes, want 0", len(ds))
	}
}

// queued applies a purchase with a webhook for m and returns its event.
func queued(t *testing.T, s surgepay.Store, merchantID string) *surgepay.WebhookEvent {
	t.Helper()
	w, p := purchase(merchantID)
	w.Webhook = webhookEvent(p)
	apply(t, s, w)
	return w.Webhook
}

// testWebhookClaimLeases: a claimed delivery is not claimed again before
// its lease ends, then is, with the attempt counted; max bounds a claim.
func testWebhookClaimLeases(t *testing.T, s surgepay.Store) {
	ws := webhookStore(t, s)
	m := newMerchant(t, s)
	newEndpoint(t, s, m.ID, 1)
	for range 3 {
		queued(t, s, m.ID)
	}
	t0 := now().Add(time.Second)
	if ds := claim(t, ws, t0.Add(-time.Hour), t0, 10); len(ds) != 0 {
		t.Fatalf("claimed %d deliveries before they were due, want 0", len(ds))
	}
	lease := t0.Add(time.Minute)
	if ds := claim(t, ws, t0, lease, 2); len(ds) != 2 {
		t.Fatalf("claim of at most 2 returned %d", len(ds))
	}
	if ds := claim(t, ws, t0, lease, 10); len(ds) != 1 {
		t.Fatalf("second claim returned %d, want the 1 left", len(ds))
	}
	if ds := claim(t, ws, lease.Add(-time.Microsecond), lease, 10); len(ds) != 0 {
		t.Fatalf("claim during the lease returned %d, want 0", len(ds))
	}
	ds := claim(t, ws, lease, lease.Add(time.Minute), 10)
	if len(ds) != 3 {
		t.Fatalf("claim after the lease returned %d, want 3", len(ds))
	}
	for _, d := range ds {
		if d.Attempt != 2 {
			t.Errorf("delivery %s: Attempt = %d after two claims, want 2", d.EventID, d.Attempt)
		}
	}
}

// testWebhookClaimBoundedPerEndpoint: a bounded claim takes at most
// endpointMax deliveries of one endpoint, or its room, oldest due first;
// an endpoint without room is skipped however many of its deliveries are
// oldest; what a claim leaves stays due, its attempt uncounted.
func testWebhookClaimBoundedPerEndpoint(t *testing.T, s surgepay.Store) {
	ws := webhookStore(t, s)
	bc, ok := ws.(webhook.BoundedClaimer)
	if !ok {
		t.Fatal("the store has the WebhookStore capability but no bounded claim (webhook.BoundedClaimer)")
	}
	claimBounded := func(at time.Time, limit, endpointMax int, room map[string]int) map[string][]*surgepay.WebhookDelivery {
		t.Helper()
		ds, err := bc.ClaimWebhookDeliveriesBounded(t.Context(), at, at.Add(time.Minute), limit, endpointMax, room)
		if err != nil {
			t.Fatalf("ClaimWebhookDeliveriesBounded: %v", err)
		}
		by := map[string][]*surgepay.WebhookDelivery{}
		for _, d := range ds {
			by[d.EndpointID] = append(by[d.EndpointID], d)
		}
		for _, l := range by { // RETURNING may come in any order
			sort.Slice(l, func(i, j int) bool { return l[i].Created.Before(l[j].Created) })
		}
		return by
	}
	// slow's deliveries are all older than fast's, as a stuck endpoint's
	// backlog would be.
	slowM, fastM := newMerchant(t, s), newMerchant(t, s)
	slow, fast := newEndpoint(t, s, slowM.ID, 1), newEndpoint(t, s, fastM.ID, 2)
	t0 := now()
	var evs []*surgepay.WebhookEvent
	for i := range 10 {
		m := slowM.ID
		if i >= 6 {
			m = fastM.ID
		}
		w, p := purchase(m)
		w.Webhook = webhookEvent(p)
		w.Webhook.Created = t0.Add(time.Duration(i) * time.Millisecond)
		apply(t, s, w)
		evs = append(evs, w.Webhook)
	}
	want := func(what string, got []*surgepay.WebhookDelivery, events ...*surgepay.WebhookEvent) {
		t.Helper()
		var g, w []string
		for _, d := range got {
			g = append(g, fmt.Sprintf("%s attempt %d", d.EventID, d.Attempt))
		}
		for _, ev := range events {
			w = append(w, fmt.Sprintf("%s attempt 1", ev.ID))
		}
		if d := diff(w, g); d != "" {
			t.Errorf("%s (-want +got):\n%s", what, d)
		}
	}
	at := t0.Add(time.Second)

	by := claimBounded(at, 100, 2, nil)
	want("claim of 2 per endpoint: slow's", by[slow.ID], evs[0], evs[1])
	want("claim of 2 per endpoint: fast's", by[fast.ID], evs[6], evs[7])

	// A claim of at most 1 may consider only a few due deliveries: slow's,
	// the oldest, must be skipped in its scan, not after it.
	by = claimBounded(at, 1, 2, map[string]int{slow.ID: 0, fast.ID: 1})
	want("claim with slow at its bound: slow's", by[slow.ID])
	want("claim with slow at its bound, room 1 for fast: fast's", by[fast.ID], evs[8])

	by = claimBounded(at, 1, 2, map[string]int{fast.ID: 0})
	want("claim of at most 1: slow's", by[slow.ID], evs[2])

	// What the bounded claims left is due, never attempted: attempt 1.
	ds := claim(t, ws, at, at.Add(time.Minute), 100)
	sort.Slice(ds, func(i, j int) bool { return ds[i].Created.Before(ds[j].Created) })
	want("unbounded claim of the rest", ds, evs[3], evs[4], evs[5], evs[9])
}

// testWebhookResults: delivered is kept as succeeded (not pending, never
// claimed again), retry is due at NextAttempt,
// failed is kept and never claimed, a stale result changes nothing.
func testWebhookResults(t *testing.T, s surgepay.Store) {
	ws := webhookStore(t, s)
	m := newMerchant(t, s)
	newEndpoint(t, s, m.ID, 1)
	delivered, retried, failed, stale := queued(t, s, m.ID), queued(t, s, m.ID), queued(t, s, m.ID), queued(t, s, m.ID)
	t0 := now().Add(time.Second)
	ds := claim(t, ws, t0, t0.Add(time.Minute), 10)
	if len(ds) != 4 {
		t.Fatalf("claimed %d, want 4", len(ds))
	}
	ep := ds[0].EndpointID
	next := t0.Add(30 * time.Second)
	res := func(ev *surgepay.WebhookEvent, outcome string, attempt int) *surgepay.WebhookResult {
		return &surgepay.WebhookResult{EventID: ev.ID, EndpointID: ep, Attempt: attempt, Outcome: outcome,
			NextAttempt: next, StatusCode: 503, Error: "HTTP 503", At: t0}
	}
	ctx, c := ctxCounter(t)
	err := ws.RecordWebhookResults(ctx, []*surgepay.WebhookResult{res(delivered, surgepay.WebhookDelivered, 1),
		res(retried, surgepay.WebhookRetry, 1), res(failed, surgepay.WebhookFailed, 1), res(stale, surgepay.WebhookDelivered, 7)})
	if err != nil {
		t.Fatalf("RecordWebhookResults: %v", err)
	}
	if c.Total() == 0 {
		t.Error("RecordWebhookResults counted no statement")
	}
	if b := backlog(t, ws); b.Pending != 2 || b.Failed != 1 {
		t.Errorf("WebhookBacklog = %+v, want 2 pending (retried, stale), 1 failed", b)
	}
	if ds := claim(t, ws, next.Add(-time.Microsecond), next.Add(time.Hour), 10); len(ds) != 0 {
		t.Errorf("claimed %d before the retry was due and during the stale one's lease, want 0", len(ds))
	}
	ds = claim(t, ws, next, next.Add(time.Hour), 10)
	if len(ds) != 1 || ds[0].EventID != retried.ID || ds[0].Attempt != 2 {
		t.Fatalf("claim at the retry's time = %v, want only %s at attempt 2", ds, retried.ID)
	}
	far := t0.Add(24 * time.Hour)
	ds = claim(t, ws, far, far.Add(time.Minute), 10)
	if len(ds) != 2 {
		t.Fatalf("claim a day later = %d deliveries, want 2 (the retried one's lease ended, the stale one's too), never the failed one", len(ds))
	}
	for _, d := range ds {
		if d.EventID == failed.ID {
			t.Errorf("the failed delivery was claimed again")
		}
	}
}

// testWebhookEndpointDeletedDelivery: a delivery whose endpoint is gone is
// claimed without a URL, to be dropped.
func testWebhookEndpointDeletedDelivery(t *testing.T, s surgepay.Store) {
	ws := webhookStore(t, s)
	m := newMerchant(t, s)
	e := newEndpoint(t, s, m.ID, 1)
	ev := queued(t, s, m.ID)
	apply(t, s, &surgepay.Write{WebhookEndpointDelete: e})
	t0 := now().Add(time.Second)
	ds := claim(t, ws, t0, t0.Add(time.Minute), 10)
	if len(ds) != 1 || ds[0].URL != "" || len(ds[0].SealedSecret) != 0 {
		t.Fatalf("claimed %+v, want one delivery without URL or secret", ds)
	}
	record(t, ws, &surgepay.WebhookResult{EventID: ev.ID, EndpointID: e.ID, Attempt: 1, Outcome: surgepay.WebhookDropped, At: t0})
	if b := backlog(t, ws); b.Pending != 0 || b.Failed != 0 {
		t.Errorf("WebhookBacklog after the drop = %+v, want empty", b)
	}
}

func testWebhookPurgeFailed(t *testing.T, s surgepay.Store) {
	ws := webhookStore(t, s)
	m := newMerchant(t, s)
	e := newEndpoint(t, s, m.ID, 1)
	t0 := now().Add(time.Second)
	var evs []*surgepay.WebhookEvent
	for range 3 {
		evs = append(evs, queued(t, s, m.ID))
	}
	claim(t, ws, t0, t0.Add(time.Minute), 10)
	for i, ev := range evs {
		record(t, ws, &surgepay.WebhookResult{EventID: ev.ID, EndpointID: e.ID, Attempt: 1,
			Outcome: surgepay.WebhookFailed, StatusCode: 500, Error: "HTTP 500", At: t0.Add(time.Duration(i) * time.Hour)})
	}
	n, err := ws.DeleteFailedWebhooksBefore(t.Context(), t0.Add(90*time.Minute), 10)
	if err != nil || n != 2 {
		t.Fatalf("DeleteFailedWebhooksBefore = %d, %v; want 2 (the two older ones)", n, err)
	}
	if b := backlog(t, ws); b.Failed != 1 {
		t.Errorf("WebhookBacklog after the purge = %+v, want 1 failed", b)
	}
}
