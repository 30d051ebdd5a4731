package sqlite_test

import (
	"bytes"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/sqlite"
)

// TestWALProbe is a measuring tool, not a test: it prints the WAL frames
// (whole pages) a group commit of streamlined sales writes, for a few
// shapes of sale, after a warm-up. With WALPROBE_KEEP=DIR it leaves the
// base case's database and WAL there, for a look at which B-trees the
// frames belong to (SQLite's dbstat; bench/RESULTS.md, issue 14).
//
//	WALPROBE=1 go test -count=1 -v -run TestWALProbe ./sqlite/
func TestWALProbe(t *testing.T) {
	if os.Getenv("WALPROBE") == "" {
		t.Skip("a measuring tool: set WALPROBE=1")
	}
	for _, c := range []struct {
		name      string
		customers int
		idem      bool
		staged    bool
		body      int
	}{{"base", 200, true, true, 1000}, {"1cust", 1, true, true, 1000}, {"noidem", 200, false, true, 1000}, {"nostaged", 200, true, false, 1000}, {"1cust-noidem-nostaged", 1, false, false, 1000}, {"smallbody", 200, true, true, 100}} {
		path := filepath.Join(t.TempDir(), "s.db")
		db := open(t, sqlite.Config{Path: path, CheckpointInterval: time.Hour})
		m := newMerchant(t, db)
		custs := make([]string, c.customers)
		for i := range custs {
			custs[i] = surgepay.NewID("cus")
		}
		n := 0
		batch := func() {
			var ws []*surgepay.Write
			for range 8 {
				w, _ := stagedSale(m.ID)
				w.PaymentInsert.CustomerID = custs[n%len(custs)]
				n++
				if !c.idem {
					w.Idempotency = nil
				} else {
					w.Idempotency.Body = bytes.Repeat([]byte("x"), c.body)
				}
				if !c.staged {
					w.Staged = nil
				}
				ws = append(ws, w)
			}
			for _, err := range applyAll(t, db, ws) {
				if err != nil {
					t.Fatal(err)
				}
			}
		}
		for range 3000 { // warm: 24,000 sales
			batch()
		}
		raw, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := raw.Exec("PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
			t.Fatal(err)
		}
		raw.Close()
		fi, _ := os.Stat(path + "-wal")
		before := fi.Size()
		b0 := db.CommitStats().Batches
		const commits = 30
		for range commits {
			batch()
		}
		fi, _ = os.Stat(path + "-wal")
		nb := db.CommitStats().Batches - b0
		if keep := os.Getenv("WALPROBE_KEEP"); keep != "" && c.name == "base" {
			for _, suffix := range []string{"", "-wal"} {
				b, err := os.ReadFile(path + suffix)
				if err == nil {
					err = os.WriteFile(filepath.Join(keep, "probe.db"+suffix), b, 0o600)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
		}
		frames := float64(fi.Size()-before) / 4120
		fmt.Printf("%-24s %.1f frames/commit, %.2f frames/sale, %d commits for %d sales\n", c.name, frames/float64(nb), frames/(8*commits), nb, 8*commits)
	}
}
