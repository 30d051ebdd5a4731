package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/sqlite"
)

func backupPayment(merchantID string) *surgepay.Payment {
	now := time.Now().UTC().Truncate(time.Millisecond)
	return &surgepay.Payment{ID: surgepay.NewID("pay"), MerchantID: merchantID, PaymentMethodID: surgepay.NewID("pm"),
		Amount: 500, Currency: "eur", CaptureMethod: surgepay.CaptureAutomatic, Status: surgepay.StatusSucceeded,
		Path: "standard", Version: 1, Created: now, Updated: now}
}

// A backup taken while a writer commits payments refuses none of them, is
// a consistent copy (quick_check, and it opens as a store with every
// payment of its snapshot), is 0600, and never overwrites a file.
func TestBackupDuringWrites(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "surgepay.db")
	db, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	m := &surgepay.Merchant{ID: surgepay.NewID("mer"), Name: "m", Created: time.Now()}
	if err := db.Apply(ctx, &surgepay.Write{Merchant: m}); err != nil {
		t.Fatal(err)
	}
	var first *surgepay.Payment
	for i := range 500 {
		p := backupPayment(m.ID)
		if i == 0 {
			first = p
		}
		if err := db.Apply(ctx, &surgepay.Write{PaymentInsert: p}); err != nil {
			t.Fatal(err)
		}
	}

	var stop atomic.Bool
	var wg sync.WaitGroup
	var written, failed atomic.Int64
	for range 4 {
		wg.Go(func() {
			for !stop.Load() {
				if err := db.Apply(ctx, &surgepay.Write{PaymentInsert: backupPayment(m.ID)}); err != nil {
					failed.Add(1)
					t.Errorf("Apply during the backup: %v", err)
					return
				}
				written.Add(1)
			}
		})
	}
	dst := filepath.Join(dir, "backups", "b.db")
	if err := os.Mkdir(filepath.Dir(dst), 0o700); err != nil {
		t.Fatal(err)
	}
	before := written.Load()
	res, err := sqlite.Backup(ctx, path, dst)
	after := written.Load()
	stop.Store(true)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if failed.Load() > 0 {
		t.Fatalf("%d writes failed during the backup", failed.Load())
	}
	if res.Payments < 500+before || res.Payments > 500+after {
		t.Errorf("backup holds %d payments, want between %d and %d (its snapshot)", res.Payments, 500+before, 500+after)
	}
	fi, err := os.Stat(dst)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 || fi.Size() != res.Bytes {
		t.Errorf("backup file mode %o size %d, want 0600 and %d", fi.Mode().Perm(), fi.Size(), res.Bytes)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(dst), ".*tmp*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}

	restored, err := sqlite.Open(ctx, sqlite.Config{Path: dst})
	if err != nil {
		t.Fatal(err)
	}
	defer restored.Close()
	if p, err := restored.FindPayment(ctx, m.ID, first.ID); err != nil || p.Amount != 500 {
		t.Errorf("restored FindPayment: %v, %v", p, err)
	}

	if _, err := sqlite.Backup(ctx, path, dst); err == nil {
		t.Error("a backup onto an existing file: nil error, want a refusal")
	}
}
