package storetest

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
)

func testMerchantInsertFindList(t *testing.T, s surgepay.Store) {
	m1 := &surgepay.Merchant{ID: surgepay.NewID("mch"), Name: "Ünïcode GmbH", Created: now(), Disabled: true}
	m2 := &surgepay.Merchant{ID: surgepay.NewID("mch"), Name: "Second", Created: now()}
	wantAllFieldsSet(t, m1)
	apply(t, s, &surgepay.Write{Merchant: m1})
	apply(t, s, &surgepay.Write{Merchant: m2})

	for _, want := range []*surgepay.Merchant{m1, m2} {
		got, err := s.FindMerchant(t.Context(), want.ID)
		if err != nil {
			t.Fatalf("FindMerchant(%s): %v", want.ID, err)
		}
		if d := diff(want, got); d != "" {
			t.Errorf("FindMerchant(%s) mismatch (-want +got):\n%s", want.ID, d)
		}
	}
	got, err := s.ListMerchants(t.Context())
	if err != nil {
		t.Fatalf("ListMerchants: %v", err)
	}
	byID := func(a, b *surgepay.Merchant) int { return strings.Compare(a.ID, b.ID) }
	want := []*surgepay.Merchant{m1, m2}
	slices.SortFunc(want, byID)
	slices.SortFunc(got, byID)
	if d := diff(want, got); d != "" {
		t.Errorf("ListMerchants mismatch (-want +got):\n%s", d)
	}
}

func testMerchantFindErrNotFound(t *testing.T, s surgepay.Store) {
	newMerchant(t, s)
	_, err := s.FindMerchant(t.Context(), surgepay.NewID("mch"))
	wantNotFound(t, "FindMerchant", err)
}

func testAPIKeyFindByHash(t *testing.T, s surgepay.Store) {
	// A disabled merchant: its keys are read with MerchantDisabled set.
	m := &surgepay.Merchant{ID: surgepay.NewID("mch"), Name: "With keys", Created: now(), Disabled: true}
	k1 := &surgepay.APIKey{ID: surgepay.NewID("key"), MerchantID: m.ID, Hash: bytes.Repeat([]byte{0xa1, 0x00}, 16),
		Prefix: "sk_test_ab", Created: now(), Revoked: true, Scopes: []string{surgepay.ScopePaymentsRead, surgepay.ScopeRefundsWrite},
		Expires: now().Add(time.Hour), LastUsed: now().Add(-time.Minute), MerchantDisabled: true}
	k2 := &surgepay.APIKey{ID: surgepay.NewID("key"), MerchantID: m.ID, Hash: bytes.Repeat([]byte{0xb2}, 32),
		Prefix: "sk_test_cd", Created: now(), MerchantDisabled: true}
	wantAllFieldsSet(t, k1)
	// A merchant and its first key are one Write.
	apply(t, s, &surgepay.Write{Merchant: m, APIKey: k1})
	apply(t, s, &surgepay.Write{APIKey: k2})

	for _, want := range []*surgepay.APIKey{k1, k2} {
		got, err := s.FindAPIKeyByHash(t.Context(), want.Hash)
		if err != nil {
			t.Fatalf("FindAPIKeyByHash(%s): %v", want.ID, err)
		}
		if d := diff(want, got); d != "" {
			t.Errorf("FindAPIKeyByHash(%s) mismatch (-want +got):\n%s", want.ID, d)
		}
	}
	if _, err := s.FindMerchant(t.Context(), m.ID); err != nil {
		t.Fatalf("FindMerchant: %v", err)
	}
	got, err := s.ListAPIKeys(t.Context())
	if err != nil {
		t.Fatalf("ListAPIKeys: %v", err)
	}
	byID := func(a, b *surgepay.APIKey) int { return strings.Compare(a.ID, b.ID) }
	want := []*surgepay.APIKey{k1, k2}
	slices.SortFunc(want, byID)
	slices.SortFunc(got, byID)
	if d := diff(want, got); d != "" {
		t.Errorf("ListAPIKeys mismatch (-want +got):\n%s", d)
	}
}

func testAPIKeyFindByHashErrNotFound(t *testing.T, s surgepay.Store) {
	m := newMerchant(t, s)
	k := &surgepay.APIKey{ID: surgepay.NewID("key"), MerchantID: m.ID, Hash: bytes.Repeat([]byte{1}, 32),
		Prefix: "sk_", Created: now()}
	apply(t, s, &surgepay.Write{APIKey: k})
	_, err := s.FindAPIKeyByHash(t.Context(), bytes.Repeat([]byte{2}, 32))
	wantNotFound(t, "FindAPIKeyByHash", err)
	// A prefix of a stored hash is not that hash.
	_, err = s.FindAPIKeyByHash(t.Context(), k.Hash[:31])
	wantNotFound(t, "FindAPIKeyByHash(prefix)", err)
}

func findCustomer(t *testing.T, s surgepay.Store, merchantID, id string) *surgepay.Customer {
	t.Helper()
	c, err := s.FindCustomer(t.Context(), merchantID, id)
	if err != nil {
		t.Fatalf("FindCustomer(%s): %v", id, err)
	}
	return c
}

func testCustomerInsertFind(t *testing.T, s surgepay.Store) {
	m := newMerchant(t, s)
	want := sampleCustomer(m.ID)
	wantAllFieldsSet(t, want)
	apply(t, s, &surgepay.Write{CustomerInsert: want})
	if d := diff(want, findCustomer(t, s, m.ID, want.ID)); d != "" {
		t.Errorf("FindCustomer mismatch (-want +got):\n%s", d)
	}

	bare := &surgepay.Customer{ID: surgepay.NewID("cus"), MerchantID: m.ID, Created: now(), Updated: now(), Version: 1}
	apply(t, s, &surgepay.Write{CustomerInsert: bare})
	if d := diff(bare, findCustomer(t, s, m.ID, bare.ID)); d != "" {
		t.Errorf("FindCustomer(bare) mismatch (-want +got):\n%s", d)
	}
	_, err := s.FindCustomer(t.Context(), m.ID, surgepay.NewID("cus"))
	wantNotFound(t, "FindCustomer", err)
}

// updated returns a copy of c changed as an update would change it.
func updatedCustomer(c *surgepay.Customer) *surgepay.Customer {
	u := *c
	u.Name = "New Name"
	u.Email = ""
	u.Metadata = map[string]string{"tier": "platinum"}
	u.Updated = c.Updated.Add(time.Minute)
	u.Version = c.Version + 1
	return &u
}

func testCustomerUpdate(t *testing.T, s surgepay.Store) {
	m := newMerchant(t, s)
	c := newCustomer(t, s, m.ID)
	u1 := updatedCustomer(c)
	apply(t, s, &surgepay.Write{CustomerUpdate: u1})
	u2 := updatedCustomer(u1)
	u2.Description = ""
	u2.Metadata = nil
	apply(t, s, &surgepay.Write{CustomerUpdate: u2})
	if d := diff(u2, findCustomer(t, s, m.ID, c.ID)); d != "" {
		t.Errorf("FindCustomer after two updates mismatch (-want +got):\n%s", d)
	}
}

func testCustomerUpdateErrStale(t *testing.T, s surgepay.Store) {
	m := newMerchant(t, s)
	c := newCustomer(t, s, m.ID)
	u1 := updatedCustomer(c)
	apply(t, s, &surgepay.Write{CustomerUpdate: u1})

	// A second writer that read version 1 also tries to store version 2.
	stale := updatedCustomer(c)
	stale.Name = "Lost Update"
	err := s.Apply(t.Context(), &surgepay.Write{CustomerUpdate: stale})
	wantErr(t, err, surgepay.ECONFLICT, "concurrent_update")
	// Skipping a version is stale too.
	skip := updatedCustomer(updatedCustomer(u1))
	err = s.Apply(t.Context(), &surgepay.Write{CustomerUpdate: skip})
	wantErr(t, err, surgepay.ECONFLICT, "concurrent_update")

	if d := diff(u1, findCustomer(t, s, m.ID, c.ID)); d != "" {
		t.Errorf("FindCustomer after stale updates mismatch (-want +got):\n%s", d)
	}
}

func testCustomerUpdateErrNotFound(t *testing.T, s surgepay.Store) {
	m := newMerchant(t, s)
	c := sampleCustomer(m.ID) // never inserted
	err := s.Apply(t.Context(), &surgepay.Write{CustomerUpdate: updatedCustomer(c)})
	wantErr(t, err, surgepay.ENOTFOUND, "")
	_, err = s.FindCustomer(t.Context(), m.ID, c.ID)
	wantNotFound(t, "FindCustomer", err)
}

func testCustomerDeleteDeletesPaymentMethods(t *testing.T, s surgepay.Store) {
	m := newMerchant(t, s)
	c := newCustomer(t, s, m.ID)
	other := newCustomer(t, s, m.ID)
	pm1 := newPaymentMethod(t, s, m.ID, c.ID)
	pm2 := newPaymentMethod(t, s, m.ID, c.ID)
	keep := newPaymentMethod(t, s, m.ID, other.ID)

	apply(t, s, &surgepay.Write{CustomerDelete: c})
	_, err := s.FindCustomer(t.Context(), m.ID, c.ID)
	wantNotFound(t, "FindCustomer(deleted)", err)
	for _, pm := range []*surgepay.PaymentMethod{pm1, pm2} {
		_, err := s.FindPaymentMethod(t.Context(), m.ID, pm.ID)
		wantNotFound(t, "FindPaymentMethod(of deleted customer)", err)
	}
	list, more, err := s.ListPaymentMethods(t.Context(), m.ID, c.ID, surgepay.Page{Limit: 10})
	if err != nil || len(list) != 0 || more {
		t.Errorf("ListPaymentMethods(deleted customer) = %d items, more %v, err %v; want none", len(list), more, err)
	}

	findCustomer(t, s, m.ID, other.ID)
	got, err := s.FindPaymentMethod(t.Context(), m.ID, keep.ID)
	if err != nil {
		t.Fatalf("FindPaymentMethod(other customer's): %v", err)
	}
	if d := diff(keep, got); d != "" {
		t.Errorf("other customer's payment method changed (-want +got):\n%s", d)
	}
}

func testCustomerDeleteErrStale(t *testing.T, s surgepay.Store) {
	m := newMerchant(t, s)
	c := newCustomer(t, s, m.ID)
	pm := newPaymentMethod(t, s, m.ID, c.ID)
	u := updatedCustomer(c)
	apply(t, s, &surgepay.Write{CustomerUpdate: u})

	err := s.Apply(t.Context(), &surgepay.Write{CustomerDelete: c}) // version 1, stored 2
	wantErr(t, err, surgepay.ECONFLICT, "concurrent_update")
	if d := diff(u, findCustomer(t, s, m.ID, c.ID)); d != "" {
		t.Errorf("customer changed by a refused delete (-want +got):\n%s", d)
	}
	if _, err := s.FindPaymentMethod(t.Context(), m.ID, pm.ID); err != nil {
		t.Errorf("FindPaymentMethod after a refused delete: %v", err)
	}
}

func testCustomerDeleteErrNotFound(t *testing.T, s surgepay.Store) {
	m := newMerchant(t, s)
	c := newCustomer(t, s, m.ID)
	apply(t, s, &surgepay.Write{CustomerDelete: c})
	err := s.Apply(t.Context(), &surgepay.Write{CustomerDelete: c})
	wantErr(t, err, surgepay.ENOTFOUND, "")
}

func testCustomerListPagination(t *testing.T, s surgepay.Store) {
	m := newMerchant(t, s)
	var ids []string
	for range 7 {
		ids = append(ids, newCustomer(t, s, m.ID).ID)
	}
	want := idsDesc(ids)
	list := func(p surgepay.Page) ([]string, bool) {
		t.Helper()
		cs, more, err := s.ListCustomers(t.Context(), m.ID, p)
		if err != nil {
			t.Fatalf("ListCustomers(%+v): %v", p, err)
		}
		var got []string
		for _, c := range cs {
			if c.MerchantID != m.ID {
				t.Fatalf("ListCustomers returned merchant %s's customer", c.MerchantID)
			}
			got = append(got, c.ID)
		}
		return got, more
	}
	checkPages(t, "ListCustomers", want, list)

	// Full objects come back, not just IDs.
	cs, _, err := s.ListCustomers(t.Context(), m.ID, surgepay.Page{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if d := diff(findCustomer(t, s, m.ID, want[0]), cs[0]); d != "" {
		t.Errorf("ListCustomers item differs from FindCustomer (-want +got):\n%s", d)
	}
}

// checkPages walks a list of 7 objects whose IDs newest first are want, with
// pages of 3, then checks other page sizes; list returns a page's IDs and
// has_more.
func checkPages(t *testing.T, what string, want []string, list func(surgepay.Page) ([]string, bool)) {
	t.Helper()
	if len(want) != 7 {
		t.Fatalf("checkPages needs 7 objects, got %d", len(want))
	}
	steps := []struct {
		page     surgepay.Page
		want     []string
		wantMore bool
	}{
		{surgepay.Page{Limit: 3}, want[0:3], true},
		{surgepay.Page{Limit: 3, StartingAfter: want[2]}, want[3:6], true},
		{surgepay.Page{Limit: 3, StartingAfter: want[5]}, want[6:7], false},
		{surgepay.Page{Limit: 7}, want, false},
		{surgepay.Page{Limit: 6}, want[:6], true},
		{surgepay.Page{Limit: 100}, want, false},
		{surgepay.Page{Limit: 2, StartingAfter: want[4]}, want[5:7], false},
		{surgepay.Page{Limit: 5, StartingAfter: want[6]}, nil, false},
	}
	for _, st := range steps {
		got, more := list(st.page)
		if d := diff(st.want, got); d != "" || more != st.wantMore {
			t.Errorf("%s(limit %d, starting_after #%d): has_more %v, want %v; IDs (-want +got):\n%s",
				what, st.page.Limit, slices.Index(want, st.page.StartingAfter), more, st.wantMore, d)
		}
	}
}

// testAPIKeyRevoke: a revoked key is found revoked, by hash and in the
// list; the merchant's other key is not; revoking again, or an unknown
// key, is no error.
func testAPIKeyRevoke(t *testing.T, s surgepay.Store) {
	m := newMerchant(t, s)
	k1 := &surgepay.APIKey{ID: surgepay.NewID("key"), MerchantID: m.ID, Hash: bytes.Repeat([]byte{0xc3}, 32), Prefix: "sk_1", Created: now()}
	k2 := &surgepay.APIKey{ID: surgepay.NewID("key"), MerchantID: m.ID, Hash: bytes.Repeat([]byte{0xd4}, 32), Prefix: "sk_2", Created: now()}
	apply(t, s, &surgepay.Write{APIKey: k1})
	apply(t, s, &surgepay.Write{APIKey: k2})
	apply(t, s, &surgepay.Write{APIKeyRevoke: k1.ID})
	apply(t, s, &surgepay.Write{APIKeyRevoke: k1.ID})
	apply(t, s, &surgepay.Write{APIKeyRevoke: surgepay.NewID("key")})
	for _, c := range []struct {
		k    *surgepay.APIKey
		want bool
	}{{k1, true}, {k2, false}} {
		got, err := s.FindAPIKeyByHash(t.Context(), c.k.Hash)
		if err != nil || got.Revoked != c.want {
			t.Errorf("FindAPIKeyByHash(%s): revoked %v, %v; want %v", c.k.ID, got != nil && got.Revoked, err, c.want)
		}
	}
	keys, err := s.ListAPIKeys(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if k.ID == k1.ID && !k.Revoked {
			t.Errorf("ListAPIKeys: %s not revoked", k.ID)
		}
	}
}
