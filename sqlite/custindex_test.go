package sqlite_test

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/sqlite"
)

// TestPaymentsByCustomerAcrossMerges lists customers' payments while part
// of them is merged into payments_by_customer and part is in the tail:
// every page is in order, nothing is missed or repeated, filters hold, and
// the same after a reopen.
func TestPaymentsByCustomerAcrossMerges(t *testing.T) {
	const sales = 5000 // more than two merges of customerMergeRows
	path := filepath.Join(t.TempDir(), "surgepay.db")
	db := open(t, sqlite.Config{Path: path})
	m := newMerchant(t, db)
	customers := []string{surgepay.NewID("cus"), surgepay.NewID("cus"), surgepay.NewID("cus")}
	want := map[string][]string{}   // customer -> payment IDs
	failed := map[string][]string{} // customer -> IDs of failed payments
	for i := 0; i < sales; i += 50 {
		var ws []*surgepay.Write
		for j := range 50 {
			w, p := purchase(m.ID)
			p.CustomerID = customers[(i+j)%len(customers)]
			if (i+j)%7 == 0 {
				p.Status = surgepay.StatusFailed
				failed[p.CustomerID] = append(failed[p.CustomerID], p.ID)
			}
			want[p.CustomerID] = append(want[p.CustomerID], p.ID)
			ws = append(ws, w)
		}
		for _, err := range applyAll(t, db, ws) {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	merged := rawCount(t, path, "SELECT count(*) FROM payments_by_customer")
	if merged < 2*2048 || merged >= sales {
		t.Fatalf("payments_by_customer holds %d of %d payments: want the merged chunks and a tail", merged, sales)
	}
	check := func(db *sqlite.DB) {
		t.Helper()
		for _, c := range customers {
			for _, tc := range []struct {
				status surgepay.Status
				want   []string
			}{{"", want[c]}, {surgepay.StatusFailed, failed[c]}} {
				var got []string
				page := surgepay.Page{Limit: 97}
				for {
					ps, more, err := db.ListPayments(t.Context(), m.ID, surgepay.PaymentFilter{CustomerID: c, Status: tc.status, Page: page})
					if err != nil {
						t.Fatal(err)
					}
					for _, p := range ps {
						if p.CustomerID != c {
							t.Fatalf("list of %s has payment %s of %s", c, p.ID, p.CustomerID)
						}
						got = append(got, p.ID)
					}
					if !more {
						break
					}
					page.StartingAfter = ps[len(ps)-1].ID
				}
				w := slices.Clone(tc.want)
				slices.Sort(w)
				slices.Reverse(w)
				if !slices.Equal(got, w) {
					t.Fatalf("customer %s status %q: listed %d payments, want %d, newest first", c, tc.status, len(got), len(w))
				}
			}
		}
	}
	check(db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	check(open(t, sqlite.Config{Path: path}))
}
