package sqlite_test

import (
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/sqlite"
)

// TestPaymentsByCustomerAcrossMerges lists customers' payments while part
// of them is merged into payments_by_customer, part is in the tail, and a
// chunk is half merged (in both): every page is in order, nothing is
// missed or repeated, filters hold; the same after a reopen in the middle
// of a chunk's merge and at the end, when the table holds exactly the
// payments up to indexed_upto.
func TestPaymentsByCustomerAcrossMerges(t *testing.T) {
	const (
		chunk = 2048
		sales = 5000 // more than two merges of a chunk
		batch = 50
	)
	path := filepath.Join(t.TempDir(), "surgepay.db")
	// A batch of 50 is one to 50 commits: no apply budget cuts it finer
	// (under -race 5 ms holds a few Writes, and a whole chunk merged
	// within one batch, never seen half merged).
	cfg := sqlite.Config{Path: path, ApplyBudget: -1, CustomerMergeRows: chunk}
	db := open(t, cfg)
	m := newMerchant(t, db)
	customers := []string{surgepay.NewID("cus"), surgepay.NewID("cus"), surgepay.NewID("cus")}
	// Each customer's card; the first two end in 1881, and the console's
	// search by last 4 goes through payments_by_customer to them.
	cards := map[string]string{}
	for i, c := range customers {
		pm := &surgepay.PaymentMethod{ID: surgepay.NewID("pm"), MerchantID: m.ID, CustomerID: c, Brand: "visa",
			Last4: []string{"1881", "1881", "7777"}[i], ExpMonth: 12, ExpYear: 2040, Created: time.Now().UTC()}
		if err := db.Apply(t.Context(), &surgepay.Write{PaymentMethodInsert: pm}); err != nil {
			t.Fatal(err)
		}
		cards[c] = pm.ID
	}
	want := map[string][]string{}   // customer -> payment IDs
	failed := map[string][]string{} // customer -> IDs of failed payments
	midChunk := false
	check := func(db *sqlite.DB) {
		t.Helper()
		var found []string
		q := surgepay.PaymentSearch{MerchantID: m.ID, Last4: "1881", Limit: 97}
		for {
			page, err := db.SearchPayments(t.Context(), q)
			if err != nil {
				t.Fatal(err)
			}
			if page.Bounded {
				t.Fatalf("search by last 4 bounded after %d payments", len(found))
			}
			for _, p := range page.Payments {
				found = append(found, p.ID)
			}
			if page.Next == "" {
				break
			}
			q.StartingAfter = page.Next
		}
		w := slices.Concat(want[customers[0]], want[customers[1]])
		slices.Sort(w)
		slices.Reverse(w)
		if !slices.Equal(found, w) {
			t.Fatalf("search by last 4 found %d payments, want %d, newest first", len(found), len(w))
		}
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
	for i := 0; i < sales; i += batch {
		var ws []*surgepay.Write
		for j := range batch {
			w, p := purchase(m.ID)
			p.CustomerID = customers[(i+j)%len(customers)]
			p.PaymentMethodID = cards[p.CustomerID]
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
		if !midChunk {
			// A chunk is half merged: part of it in the table, all of it
			// in the tail. A chunk takes 16 commits or more; a batch of
			// 50 is one to 50.
			upto := rawCount(t, path, "SELECT indexed_upto FROM deferred_indexes WHERE name = 'payments_by_customer'")
			if merged := rawCount(t, path, "SELECT count(*) FROM payments_by_customer"); merged > upto {
				midChunk = true
				check(db)
				// A restart in the middle of a chunk starts it again.
				if err := db.Close(); err != nil {
					t.Fatal(err)
				}
				db = open(t, cfg)
			}
		}
	}
	if !midChunk {
		t.Fatal("no chunk was ever seen half merged")
	}
	upto := rawCount(t, path, "SELECT indexed_upto FROM deferred_indexes WHERE name = 'payments_by_customer'")
	if upto < 2*chunk || upto >= sales {
		t.Fatalf("indexed_upto %d of %d payments: want the merged chunks and a tail", upto, sales)
	}
	// Exactly the payments up to indexed_upto, and (INSERT OR IGNORE) none twice.
	if n := rawCount(t, path, "SELECT count(*) FROM payments p WHERE rowid <= "+strconv.Itoa(upto)+
		" AND NOT EXISTS (SELECT 1 FROM payments_by_customer c WHERE c.merchant_id = p.merchant_id AND c.customer_id = p.customer_id AND c.id = p.id)"); n != 0 {
		t.Fatalf("%d payments up to indexed_upto %d are missing from payments_by_customer", n, upto)
	}
	check(db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	check(open(t, sqlite.Config{Path: path, CustomerMergeRows: chunk}))
}

// BenchmarkListPaymentsOfCustomerFullTail lists a page of one customer's
// payments (of 200) when the tail beyond payments_by_customer is at its
// longest: a chunk's payments less one, all of which the list scans. The
// cost of a larger Config.CustomerMergeRows, which makes a merge write
// fewer pages a sale.
func BenchmarkListPaymentsOfCustomerFullTail(b *testing.B) {
	for _, chunk := range []int{2048, sqlite.CustomerMergeRowsDefault} {
		b.Run(strconv.Itoa(chunk), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "surgepay.db")
			db := open(b, sqlite.Config{Path: path, CustomerMergeRows: chunk})
			m := newMerchant(b, db)
			customers := make([]string, 200)
			for i := range customers {
				customers[i] = surgepay.NewID("cus")
			}
			// Two chunks merged, then a chunk less one in the tail. The
			// first customer buys only in the first chunk: its list finds
			// nothing in the tail, having read all of it.
			for i := 0; i < 3*chunk-1; i += 256 {
				var ws []*surgepay.Write
				for j := i; j < min(i+256, 3*chunk-1); j++ {
					w, p := purchase(m.ID)
					p.CustomerID = customers[j%len(customers)]
					if p.CustomerID == customers[0] && j >= chunk {
						p.CustomerID = customers[1]
					}
					ws = append(ws, w)
				}
				for _, err := range applyAll(b, db, ws) {
					if err != nil {
						b.Fatal(err)
					}
				}
			}
			if tail := 3*chunk - 1 - rawCount(b, path, "SELECT indexed_upto FROM deferred_indexes WHERE name = 'payments_by_customer'"); tail < chunk-1 {
				b.Fatalf("tail of %d payments, want at least %d", tail, chunk-1)
			}
			b.ResetTimer()
			for b.Loop() {
				ps, _, err := db.ListPayments(b.Context(), m.ID, surgepay.PaymentFilter{CustomerID: customers[0], Page: surgepay.Page{Limit: 10}})
				if err != nil || len(ps) != 10 {
					b.Fatalf("list: %d payments, %v", len(ps), err)
				}
			}
		})
	}
}
