//go:build unix

package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/sqlite"
)

// crashChildEnv names the database a child process of
// TestStagedDurableAfterCrash writes to before it kills itself.
const crashChildEnv = "SURGEPAY_SQLITE_CRASH_DB"

// TestStagedDurableAfterCrash runs staged sales in a child process that
// prints each acknowledged one and then dies by SIGKILL, without Close:
// reopened, the database holds every acknowledged payment and staged
// record. (A process crash: the page cache survives it, a power loss would
// not; synchronous=FULL covers that case and is not tested here.)
func TestStagedDurableAfterCrash(t *testing.T) {
	if path := os.Getenv(crashChildEnv); path != "" {
		crashChild(t, path)
		return
	}
	path := filepath.Join(t.TempDir(), "surgepay.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestStagedDurableAfterCrash$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+path)
	out, err := cmd.Output()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child: %v, want death by SIGKILL; output:\n%s", err, out)
	}
	var acked [][]string // merchant, payment, staged record
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if f := strings.Fields(line); len(f) == 4 && f[0] == "acked" {
			acked = append(acked, f[1:])
		}
	}
	if len(acked) == 0 {
		t.Fatalf("the child acknowledged no sale before it died; output:\n%s", out)
	}

	db := open(t, sqlite.Config{Path: path})
	recs, err := db.FetchStaged(t.Context(), "", sqlite.StagedFetchMax)
	if err != nil {
		t.Fatal(err)
	}
	staged := make(map[string]*surgepay.StagedRecord)
	for _, r := range recs {
		staged[r.ID] = r
	}
	for _, a := range acked {
		if _, err := db.FindPayment(t.Context(), a[0], a[1]); err != nil {
			t.Errorf("acknowledged sale's payment %s after the crash: %v", a[1], err)
		}
		if r := staged[a[2]]; r == nil || r.PaymentID != a[1] || len(r.Sealed) != stagedSealedBytes {
			t.Errorf("acknowledged staged record %s after the crash: %+v, want it, of payment %s", a[2], r, a[1])
		}
	}
	t.Logf("%d sales acknowledged before SIGKILL, %d staged records found", len(acked), len(recs))
}

// crashChild applies concurrent staged sales, prints each one once Apply
// has returned, and kills its own process while more are in flight.
func crashChild(t *testing.T, path string) {
	db, err := sqlite.Open(t.Context(), sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	m := newMerchant(t, db)
	var mu sync.Mutex
	acked := 0
	for range 32 {
		go func() {
			for {
				w, rec := stagedSale(m.ID)
				if err := db.Apply(context.Background(), w); err != nil {
					fmt.Println("error", err)
					continue
				}
				mu.Lock()
				fmt.Println("acked", m.ID, rec.PaymentID, rec.ID)
				acked++
				if acked == 200 {
					syscall.Kill(os.Getpid(), syscall.SIGKILL)
				}
				mu.Unlock()
			}
		}()
	}
	select {}
}
