//go:build unix

package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/surgepay/surgepay/sqlite"
)

// idemCrashEnv names the database, the merchant and the count of sales
// after which a child process of TestIdempotencyKeysAfterCrash kills
// itself.
const idemCrashEnv = "SURGEPAY_SQLITE_IDEM_CRASH"

// idemCrashTableMax is the memory table of the crash test: small, so that
// tables freeze and merges run (and are cut) within a few hundred sales,
// and more than a merge's chunk (idemFlushChunk, 128), so that a merge
// takes more than one commit and a crash can cut it.
const idemCrashTableMax = 160

// idemCrashSaveChunk is how often the crash test's writer saves its memory
// table (idempotency_saved): a few times a table, so that each crash
// leaves saved rows, records after them, and merges that delete some.
const idemCrashSaveChunk = 24

// idemCrashFilterKeys sizes the crash test's filter of stored keys small,
// so that saving it after each merge is quick.
const idemCrashFilterKeys = 1 << 16

// idemCrashReadMax is the most records an Open after a crash may read one
// by one: those after the newest saved row, at most a save's worth and
// the batches committed after it (16 sales in flight).
const idemCrashReadMax = idemCrashSaveChunk + 4*16

// TestIdempotencyKeysAfterCrash (issue 35 item 6): a process taking sales
// with idempotency keys dies by SIGKILL at a random point, three times
// over on one database, with a memory table small enough that each dies
// with keys in memory only, a table frozen and a merge half written. Open
// reads the unindexed keys back into memory (it no longer indexes them
// before serving), most from the rows the writer saved as the table
// filled and the rest one by one: after each crash every acknowledged key is found and
// refused a second time, no key is stored twice, and sales go on; once
// enough more sales have merged the tables, the same holds after a clean
// reopen.
func TestIdempotencyKeysAfterCrash(t *testing.T) {
	if env := os.Getenv(idemCrashEnv); env != "" {
		idemCrashChild(t, env)
		return
	}
	path := filepath.Join(t.TempDir(), "surgepay.db")
	db := open(t, sqlite.Config{Path: path})
	merchant := newMerchant(t, db).ID
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	var acked []string
	for i, after := range []int{137, 451, 709} { // not multiples of the table
		cmd := exec.Command(os.Args[0], "-test.run=^TestIdempotencyKeysAfterCrash$", "-test.count=1")
		cmd.Env = append(os.Environ(), idemCrashEnv+"="+path+","+merchant+","+strconv.Itoa(after))
		out, err := cmd.Output()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("child %d: %v, want death by SIGKILL; output:\n%s", i, err, out)
		}
		n := len(acked)
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if f := strings.Fields(line); len(f) == 2 && f[0] == "acked" {
				acked = append(acked, f[1])
			}
		}
		if len(acked)-n < after {
			t.Fatalf("child %d acknowledged %d sales, want at least %d; output:\n%s", i, len(acked)-n, after, out)
		}
		cfg := sqlite.Config{Path: path, IdempotencyTableMax: idemCrashTableMax, IdempotencyFilterKeys: idemCrashFilterKeys}
		checkKeysAfterCrash(t, fmt.Sprintf("after crash %d", i+1), cfg, merchant, acked)
	}
	// Enough sales to freeze and merge what the crashes left, then a
	// clean reopen.
	db = open(t, sqlite.Config{Path: path, IdempotencyTableMax: idemCrashTableMax, IdempotencyFilterKeys: idemCrashFilterKeys})
	db.SetIdemSaveChunk(idemCrashSaveChunk)
	for range 4 * idemCrashTableMax {
		w, _ := purchase(merchant)
		if err := db.Apply(t.Context(), w); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	checkKeysAfterCrash(t, "merged and reopened", sqlite.Config{Path: path, IdempotencyTableMax: idemCrashTableMax, IdempotencyFilterKeys: idemCrashFilterKeys}, merchant, acked)
	t.Logf("%d keys acknowledged over three crashes", len(acked))
}

// checkKeysAfterCrash opens cfg's database and fails t unless every key of acked is
// stored once, found and refused again, and a new sale is taken.
func checkKeysAfterCrash(t *testing.T, what string, cfg sqlite.Config, merchant string, acked []string) {
	t.Helper()
	db, err := sqlite.Open(t.Context(), cfg)
	if err != nil {
		t.Fatalf("%s: Open: %v", what, err)
	}
	defer func() {
		if err := db.Close(); err != nil {
			t.Errorf("%s: Close: %v", what, err)
		}
	}()
	if n := rawCount(t, cfg.Path, "SELECT count(*) - count(DISTINCT merchant_id || ' ' || key) FROM idempotency"); n != 0 {
		t.Fatalf("%s: %d keys stored twice", what, n)
	}
	// Open read back every record not yet indexed, most of them from
	// the saved rows.
	saved, read := db.IdemReadBack()
	unindexed := rawCount(t, cfg.Path, "SELECT count(*) FROM idempotency WHERE rowid > (SELECT indexed_upto FROM deferred_indexes WHERE name = 'idempotency')")
	if saved+read != unindexed || read > idemCrashReadMax {
		t.Fatalf("%s: Open read back %d saved entries and %d records one by one; want %d in all, at most %d one by one",
			what, saved, read, unindexed, idemCrashReadMax)
	}
	// The filter of stored keys, from its saved file if a merge ended
	// before the crash, holds every key.
	waitFilter(t, db)
	loaded, read := db.IdemFilterLoaded()
	t.Logf("%s: filter loaded from its file: %v (%d index entries read)", what, loaded, read)
	for _, key := range acked {
		if !db.IdemFilterMayHold(merchant, key) {
			t.Fatalf("%s: the filter (loaded from its file: %v, %d index entries read) does not hold acknowledged key %s", what, loaded, read, key)
		}
		wantRecord(t, db, merchant, key)
	}
	for i := 0; i < len(acked); i += 7 {
		wantTaken(t, db, merchant, acked[i])
	}
	wantTaken(t, db, merchant, acked[len(acked)-1])
	w, _ := purchase(merchant)
	if err := db.Apply(t.Context(), w); err != nil {
		t.Fatalf("%s: a new sale: %v", what, err)
	}
}

// idemCrashChild applies concurrent sales with new keys, prints each key
// once Apply has returned, and kills its own process after the given
// count while more are in flight.
func idemCrashChild(t *testing.T, env string) {
	f := strings.Split(env, ",")
	path, merchant := f[0], f[1]
	after, err := strconv.Atoi(f[2])
	if err != nil {
		t.Fatal(err)
	}
	db, err := sqlite.Open(t.Context(), sqlite.Config{Path: path, IdempotencyTableMax: idemCrashTableMax, IdempotencyFilterKeys: idemCrashFilterKeys})
	if err != nil {
		t.Fatal(err)
	}
	db.SetIdemSaveChunk(idemCrashSaveChunk)
	var mu sync.Mutex
	acked := 0
	for range 16 {
		go func() {
			for {
				w, _ := purchase(merchant)
				if err := db.Apply(context.Background(), w); err != nil {
					fmt.Println("error", err)
					continue
				}
				mu.Lock()
				fmt.Println("acked", w.Idempotency.Key)
				if acked++; acked == after {
					syscall.Kill(os.Getpid(), syscall.SIGKILL)
				}
				mu.Unlock()
			}
		}()
	}
	select {}
}
