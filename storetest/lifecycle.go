package storetest

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
)

// newKey stores an API key of merchantID with a hash made of b.
func newKey(t *testing.T, s surgepay.Store, merchantID string, b byte) *surgepay.APIKey {
	t.Helper()
	k := &surgepay.APIKey{ID: surgepay.NewID("key"), MerchantID: merchantID, Hash: bytes.Repeat([]byte{b}, 32),
		Prefix: "sk_x", Created: now()}
	apply(t, s, &surgepay.Write{APIKey: k})
	return k
}

func findKey(t *testing.T, s surgepay.Store, hash []byte) *surgepay.APIKey {
	t.Helper()
	k, err := s.FindAPIKeyByHash(t.Context(), hash)
	if err != nil {
		t.Fatalf("FindAPIKeyByHash: %v", err)
	}
	return k
}

// testMerchantDisableEnable: MerchantStatus flips the flag, which the
// merchant's keys carry when read (one lookup answers "may this key
// act?"); another merchant's keys are untouched, and so are the
// merchant's payments.
func testMerchantDisableEnable(t *testing.T, s surgepay.Store) {
	m, other := newMerchant(t, s), newMerchant(t, s)
	k, ko := newKey(t, s, m.ID, 0xe1), newKey(t, s, other.ID, 0xe2)
	w, p := purchase(m.ID)
	apply(t, s, w)
	before, err := s.FindPayment(t.Context(), m.ID, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	apply(t, s, &surgepay.Write{MerchantStatus: &surgepay.MerchantStatus{MerchantID: m.ID, Disabled: true}})
	if got, err := s.FindMerchant(t.Context(), m.ID); err != nil || !got.Disabled {
		t.Fatalf("FindMerchant after disable: %+v, %v; want Disabled", got, err)
	}
	if got := findKey(t, s, k.Hash); !got.MerchantDisabled {
		t.Errorf("key of the disabled merchant: MerchantDisabled false, want true")
	}
	if got := findKey(t, s, ko.Hash); got.MerchantDisabled {
		t.Errorf("key of another merchant: MerchantDisabled true, want false")
	}
	keys, err := s.ListAPIKeys(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, lk := range keys {
		if want := lk.MerchantID == m.ID; lk.MerchantDisabled != want {
			t.Errorf("ListAPIKeys: %s MerchantDisabled %v, want %v", lk.ID, lk.MerchantDisabled, want)
		}
	}
	after, err := s.FindPayment(t.Context(), m.ID, p.ID)
	if err != nil {
		t.Fatalf("FindPayment of a disabled merchant: %v", err)
	}
	if d := diff(before, after); d != "" {
		t.Errorf("disabling changed a payment (-before +after):\n%s", d)
	}
	apply(t, s, &surgepay.Write{MerchantStatus: &surgepay.MerchantStatus{MerchantID: m.ID, Disabled: false}})
	if got := findKey(t, s, k.Hash); got.MerchantDisabled {
		t.Errorf("key after enable: MerchantDisabled true, want false")
	}
	// A merchant that does not exist is no error.
	apply(t, s, &surgepay.Write{MerchantStatus: &surgepay.MerchantStatus{MerchantID: surgepay.NewID("mch"), Disabled: true}})
}

// testAPIKeyExpireEarlierWins: APIKeyExpire sets an expiry, or brings one
// forward, never later (a roll's grace cannot extend a key's life).
func testAPIKeyExpireEarlierWins(t *testing.T, s surgepay.Store) {
	m := newMerchant(t, s)
	k := newKey(t, s, m.ID, 0xe3)
	t1 := now().Add(time.Hour)
	apply(t, s, &surgepay.Write{APIKeyExpire: &surgepay.APIKeyExpiry{ID: k.ID, Expires: t1}})
	if got := findKey(t, s, k.Hash).Expires; !got.Equal(t1) {
		t.Fatalf("Expires = %v, want %v", got, t1)
	}
	apply(t, s, &surgepay.Write{APIKeyExpire: &surgepay.APIKeyExpiry{ID: k.ID, Expires: t1.Add(time.Hour)}})
	if got := findKey(t, s, k.Hash).Expires; !got.Equal(t1) {
		t.Errorf("Expires after a later expiry = %v, want %v kept", got, t1)
	}
	t0 := t1.Add(-30 * time.Minute)
	apply(t, s, &surgepay.Write{APIKeyExpire: &surgepay.APIKeyExpiry{ID: k.ID, Expires: t0}})
	if got := findKey(t, s, k.Hash).Expires; !got.Equal(t0) {
		t.Errorf("Expires after an earlier expiry = %v, want %v", got, t0)
	}
}

// testAPIKeysUsedLaterWins: APIKeysUsed raises last-used times, never
// lowers them (nodes flush in any order), and skips keys that are gone.
func testAPIKeysUsedLaterWins(t *testing.T, s surgepay.Store) {
	m := newMerchant(t, s)
	k1, k2 := newKey(t, s, m.ID, 0xe4), newKey(t, s, m.ID, 0xe5)
	t1 := now()
	apply(t, s, &surgepay.Write{APIKeysUsed: []surgepay.APIKeyUse{{ID: k1.ID, At: t1}, {ID: k2.ID, At: t1.Add(-time.Hour)},
		{ID: surgepay.NewID("key"), At: t1}}})
	apply(t, s, &surgepay.Write{APIKeysUsed: []surgepay.APIKeyUse{{ID: k1.ID, At: t1.Add(-time.Minute)}, {ID: k2.ID, At: t1}}})
	for _, k := range []*surgepay.APIKey{k1, k2} {
		if got := findKey(t, s, k.Hash).LastUsed; !got.Equal(t1) {
			t.Errorf("%s LastUsed = %v, want %v", k.ID, got, t1)
		}
	}
	tooMany := make([]surgepay.APIKeyUse, surgepay.APIKeysUsedPerWriteMax+1)
	if err := s.Apply(t.Context(), &surgepay.Write{APIKeysUsed: tooMany}); err == nil {
		t.Errorf("Apply of %d key uses: nil error, want the bound refused", len(tooMany))
	}
}

func auditEvent(merchantID, objectID, action string) *surgepay.AuditEvent {
	return &surgepay.AuditEvent{ID: surgepay.NewID("aud"), Created: now(), Actor: "cli:tester", Action: action,
		MerchantID: merchantID, ObjectID: objectID, Detail: "détail"}
}

// testAuditListFilterPage: audit events list newest first, by merchant
// or object, in pages; every field round-trips.
func testAuditListFilterPage(t *testing.T, s surgepay.Store) {
	m1, m2 := newMerchant(t, s), newMerchant(t, s)
	var ids1 []string
	for i := range 5 {
		e := auditEvent(m1.ID, m1.ID, surgepay.AuditMerchantCreated)
		if i%2 == 1 {
			e.ObjectID = "key_x"
		}
		if i == 0 {
			wantAllFieldsSet(t, e)
			apply(t, s, &surgepay.Write{Audit: []*surgepay.AuditEvent{e}})
			got, _, err := s.ListAuditEvents(t.Context(), surgepay.AuditFilter{MerchantID: m1.ID})
			if err != nil || len(got) != 1 {
				t.Fatalf("ListAuditEvents: %d, %v; want 1", len(got), err)
			}
			if d := diff(e, got[0]); d != "" {
				t.Errorf("audit event round trip (-want +got):\n%s", d)
			}
		} else {
			apply(t, s, &surgepay.Write{Audit: []*surgepay.AuditEvent{e}})
		}
		ids1 = append(ids1, e.ID)
		time.Sleep(2 * time.Millisecond) // IDs sort by millisecond
	}
	apply(t, s, &surgepay.Write{Audit: []*surgepay.AuditEvent{auditEvent(m2.ID, m2.ID, surgepay.AuditMerchantDisabled)}})

	list := func(f surgepay.AuditFilter) ([]string, bool) {
		t.Helper()
		es, more, err := s.ListAuditEvents(t.Context(), f)
		if err != nil {
			t.Fatalf("ListAuditEvents(%+v): %v", f, err)
		}
		var ids []string
		for _, e := range es {
			ids = append(ids, e.ID)
		}
		return ids, more
	}
	want := idsDesc(ids1)
	got, more := list(surgepay.AuditFilter{MerchantID: m1.ID, Page: surgepay.Page{Limit: 3}})
	if d := diff(want[:3], got); d != "" || !more {
		t.Errorf("first page: more %v (-want +got):\n%s", more, d)
	}
	got, more = list(surgepay.AuditFilter{MerchantID: m1.ID, Page: surgepay.Page{Limit: 3, StartingAfter: got[2]}})
	if d := diff(want[3:], got); d != "" || more {
		t.Errorf("second page: more %v (-want +got):\n%s", more, d)
	}
	got, _ = list(surgepay.AuditFilter{ObjectID: "key_x"})
	if d := diff([]string{ids1[3], ids1[1]}, got); d != "" {
		t.Errorf("by object (-want +got):\n%s", d)
	}
	if got, _ = list(surgepay.AuditFilter{}); len(got) != 6 {
		t.Errorf("unfiltered: %d events, want 6", len(got))
	}
}

// testAuditAtomicWithChange: an audit row lands with its change or not at
// all: a Write whose guard fails stores neither.
func testAuditAtomicWithChange(t *testing.T, s surgepay.Store) {
	m := newMerchant(t, s)
	r := sampleIdempotency(m.ID)
	apply(t, s, &surgepay.Write{Idempotency: r})
	k := &surgepay.APIKey{ID: surgepay.NewID("key"), MerchantID: m.ID, Hash: bytes.Repeat([]byte{0xe6}, 32), Prefix: "sk_y", Created: now()}
	err := s.Apply(t.Context(), &surgepay.Write{Idempotency: r, APIKey: k,
		Audit: []*surgepay.AuditEvent{auditEvent(m.ID, k.ID, surgepay.AuditAPIKeyCreated)}})
	wantErr(t, err, surgepay.ECONFLICT, "idempotency_key_exists")
	if es, _, err := s.ListAuditEvents(t.Context(), surgepay.AuditFilter{ObjectID: k.ID}); err != nil || len(es) != 0 {
		t.Errorf("audit rows of a refused Write: %d, %v; want none", len(es), err)
	}
	if _, err := s.FindAPIKeyByHash(t.Context(), k.Hash); surgepay.ErrorCode(err) != surgepay.ENOTFOUND {
		t.Errorf("key of a refused Write: %v, want not found", err)
	}
}

// testLifecycleStatementCounts: the key lookup of a request stays one
// statement with the merchant's flag joined in; an audit page is one.
func testLifecycleStatementCounts(t *testing.T, s surgepay.Store) {
	m := newMerchant(t, s)
	k := newKey(t, s, m.ID, 0xe7)
	for name, fn := range map[string]func(ctx context.Context) error{
		"FindAPIKeyByHash": func(ctx context.Context) error { _, err := s.FindAPIKeyByHash(ctx, k.Hash); return err },
		"ListAuditEvents": func(ctx context.Context) error {
			_, _, err := s.ListAuditEvents(ctx, surgepay.AuditFilter{MerchantID: m.ID, ObjectID: k.ID})
			return err
		},
	} {
		ctx, c := ctxCounter(t)
		if err := fn(ctx); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		wantStatements(t, name, c, stmtKinds{1, 1, 0, 0, 0})
	}
}

// testCredentialsGeneration: a store that counts credentials changes
// raises the generation with every Write that revokes or expires a key or
// sets a merchant's status, in the Write's own transaction (one statement
// more), and not with the other Writes: a sale, a new key, last-used times
// (every server flushes them each minute, and each raise makes every
// server read its keys again).
func testCredentialsGeneration(t *testing.T, s surgepay.Store) {
	r, ok := s.(surgepay.CredentialsGenerationReader)
	if !ok {
		t.Skip("the store does not count credentials changes")
	}
	gen := func() int64 {
		t.Helper()
		ctx, c := ctxCounter(t)
		g, err := r.CredentialsGeneration(ctx)
		if err != nil {
			t.Fatalf("CredentialsGeneration: %v", err)
		}
		wantStatements(t, "CredentialsGeneration", c, stmtKinds{1, 1, 0, 0, 0})
		return g
	}
	g := gen()
	m := newMerchant(t, s)
	k := newKey(t, s, m.ID, 0xe8)
	w, _ := purchase(m.ID)
	apply(t, s, w)
	apply(t, s, &surgepay.Write{APIKeysUsed: []surgepay.APIKeyUse{{ID: k.ID, At: now()}}})
	if got := gen(); got != g {
		t.Fatalf("generation after a merchant, a key, a sale and a flush of uses: %d, want %d (unchanged)", got, g)
	}
	for name, w := range map[string]*surgepay.Write{
		"APIKeyExpire":   {APIKeyExpire: &surgepay.APIKeyExpiry{ID: k.ID, Expires: now().Add(time.Hour)}},
		"MerchantStatus": {MerchantStatus: &surgepay.MerchantStatus{MerchantID: m.ID, Disabled: true}},
		"APIKeyRevoke":   {APIKeyRevoke: k.ID},
	} {
		ctx, c := ctxCounter(t)
		if err := s.Apply(ctx, w); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		wantStatements(t, name, c, stmtKinds{2, 0, 0, 2, 0})
		next := gen()
		if next <= g {
			t.Errorf("generation after %s: %d, want above %d", name, next, g)
		}
		g = next
	}
}
