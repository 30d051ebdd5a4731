package storetest

import (
	"bytes"
	"cmp"
	"slices"
	"testing"

	"github.com/surgepay/surgepay"
)

var sealedTests = []struct {
	name string
	fn   func(t *testing.T, s surgepay.Store)
}{
	{"SealedListPages", testSealedListPages},
	{"SealedReplaceGuarded", testSealedReplaceGuarded},
}

func sealedStore(t *testing.T, s surgepay.Store) surgepay.SealedStore {
	t.Helper()
	ss, ok := s.(surgepay.SealedStore)
	if !ok {
		t.Skip("the store has no SealedStore capability")
	}
	return ss
}

// listSealed reads every blob of kind, limit a page.
func listSealed(t *testing.T, ss surgepay.SealedStore, kind surgepay.SealedKind, limit int) []surgepay.SealedBlob {
	t.Helper()
	var out []surgepay.SealedBlob
	m, id := "", ""
	for range 100 {
		ctx, c := ctxCounter(t)
		page, err := ss.ListSealed(ctx, kind, m, id, limit)
		if err != nil {
			t.Fatalf("ListSealed(%s after %q %q): %v", kind, m, id, err)
		}
		if n := c.Kind(surgepay.StmtSelect); n != 1 || c.Total() != 1 {
			t.Errorf("ListSealed: %d statements (%d SELECT), want one SELECT", c.Total(), n)
		}
		if len(page) > limit {
			t.Fatalf("ListSealed(limit %d) returned %d", limit, len(page))
		}
		out = append(out, page...)
		if len(page) < limit {
			return out
		}
		m, id = page[len(page)-1].MerchantID, page[len(page)-1].ID
	}
	t.Fatal("ListSealed never ended")
	return nil
}

func blobOrder(a, b surgepay.SealedBlob) int {
	return cmp.Or(cmp.Compare(a.MerchantID, b.MerchantID), cmp.Compare(a.ID, b.ID))
}

// testSealedListPages: ListSealed goes through every stored blob of a
// kind, a page at a time, in (merchant, ID) order across merchants; a
// webhook endpoint's previous secret is listed once a roll has kept one.
func testSealedListPages(t *testing.T, s surgepay.Store) {
	ss := sealedStore(t, s)
	var cards, secrets []surgepay.SealedBlob
	var previous []surgepay.SealedBlob
	for i := range 3 {
		m := newMerchant(t, s)
		cus := newCustomer(t, s, m.ID)
		for j := range 3 {
			pm := samplePaymentMethod(m.ID, cus.ID)
			pm.SealedPAN = []byte{0, byte(i), byte(j), 0xff}
			apply(t, s, &surgepay.Write{PaymentMethodInsert: pm})
			cards = append(cards, surgepay.SealedBlob{Kind: surgepay.SealedCardNumber, MerchantID: m.ID, ID: pm.ID, Sealed: pm.SealedPAN})
		}
		e := newEndpoint(t, s, m.ID, i)
		secret := e.SealedSecret
		if i == 1 {
			secret = []byte("rolled\x00")
			apply(t, s, &surgepay.Write{WebhookEndpointRoll: &surgepay.WebhookEndpointRoll{MerchantID: m.ID, EndpointID: e.ID,
				SealedSecret: secret, PreviousSealedSecret: e.SealedSecret, PreviousSecretExpires: now().Add(24 * 3600e9)}})
			previous = append(previous, surgepay.SealedBlob{Kind: surgepay.SealedWebhookPreviousSecret, MerchantID: m.ID, ID: e.ID,
				Sealed: e.SealedSecret})
		}
		secrets = append(secrets, surgepay.SealedBlob{Kind: surgepay.SealedWebhookSecret, MerchantID: m.ID, ID: e.ID, Sealed: secret})
	}
	for _, tc := range []struct {
		kind surgepay.SealedKind
		want []surgepay.SealedBlob
	}{{surgepay.SealedCardNumber, cards}, {surgepay.SealedWebhookSecret, secrets}, {surgepay.SealedWebhookPreviousSecret, previous}} {
		slices.SortFunc(tc.want, blobOrder)
		for _, limit := range []int{2, surgepay.SealedPageMax} {
			if d := diff(tc.want, listSealed(t, ss, tc.kind, limit)); d != "" {
				t.Errorf("ListSealed(%s) by %d (-want +got):\n%s", tc.kind, limit, d)
			}
		}
	}
	if _, err := ss.ListSealed(t.Context(), "processor_token", "", "", 10); err == nil {
		t.Error("ListSealed of an unknown kind: no error")
	}
}

// testSealedReplaceGuarded: ReplaceSealed writes a blob where its row
// still holds the one read, and leaves alone a row whose blob changed
// since (a webhook secret rolled) or that was deleted (a card).
func testSealedReplaceGuarded(t *testing.T, s surgepay.Store) {
	ss := sealedStore(t, s)
	m := newMerchant(t, s)
	cus := newCustomer(t, s, m.ID)
	kept, gone := newPaymentMethod(t, s, m.ID, cus.ID), newPaymentMethod(t, s, m.ID, cus.ID)
	e := newEndpoint(t, s, m.ID, 1)
	blob := func(kind surgepay.SealedKind, id string, sealed []byte) surgepay.SealedBlob {
		return surgepay.SealedBlob{Kind: kind, MerchantID: m.ID, ID: id, Sealed: sealed}
	}
	rs := []surgepay.SealedReplacement{
		{Old: blob(surgepay.SealedCardNumber, kept.ID, kept.SealedPAN), New: []byte("card under the new key")},
		{Old: blob(surgepay.SealedCardNumber, gone.ID, gone.SealedPAN), New: []byte("deleted meanwhile")},
		{Old: blob(surgepay.SealedWebhookSecret, e.ID, e.SealedSecret), New: []byte("rolled meanwhile")},
	}
	apply(t, s, &surgepay.Write{PaymentMethodDelete: gone})
	rolled := []byte("rolled\x00")
	apply(t, s, &surgepay.Write{WebhookEndpointRoll: &surgepay.WebhookEndpointRoll{MerchantID: m.ID, EndpointID: e.ID,
		SealedSecret: rolled, PreviousSealedSecret: e.SealedSecret, PreviousSecretExpires: now().Add(24 * 3600e9)}})
	ctx, c := ctxCounter(t)
	n, err := ss.ReplaceSealed(ctx, rs)
	if err != nil || n != 1 {
		t.Fatalf("ReplaceSealed: %d, %v; want the one row unchanged since", n, err)
	}
	if got := c.Kind(surgepay.StmtUpdate); got != int64(len(rs)) {
		t.Errorf("ReplaceSealed: %d UPDATEs, want %d", got, len(rs))
	}
	pm, err := s.FindPaymentMethod(t.Context(), m.ID, kept.ID)
	if err != nil || !bytes.Equal(pm.SealedPAN, rs[0].New) {
		t.Fatalf("the card after ReplaceSealed: %v, %v; want its new blob", pm, err)
	}
	if _, err := s.FindPaymentMethod(t.Context(), m.ID, gone.ID); surgepay.ErrorCode(err) != surgepay.ENOTFOUND {
		t.Errorf("the deleted card after ReplaceSealed: %v; want it still gone", err)
	}
	if ws, ok := s.(surgepay.WebhookStore); ok {
		got, err := ws.FindWebhookEndpoint(t.Context(), m.ID, e.ID)
		if err != nil || !bytes.Equal(got.SealedSecret, rolled) || !bytes.Equal(got.PreviousSealedSecret, e.SealedSecret) {
			t.Errorf("the rolled endpoint after ReplaceSealed: %+v, %v; want the roll's secrets", got, err)
		}
	}
	// A second pass finds the blob it wrote: nothing left to replace.
	if n, err := ss.ReplaceSealed(t.Context(), rs[:1]); err != nil || n != 0 {
		t.Errorf("ReplaceSealed again from the old blob: %d, %v; want 0", n, err)
	}
	if n, err := ss.ReplaceSealed(t.Context(), make([]surgepay.SealedReplacement, surgepay.SealedPageMax+1)); err == nil || n != 0 {
		t.Errorf("ReplaceSealed of %d: %d, %v; want refused", surgepay.SealedPageMax+1, n, err)
	}
}
