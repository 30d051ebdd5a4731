package sqlite_test

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/sqlite"
)

// rawCount returns a count(*) query's answer on a separate read-only
// connection to the file at path.
func rawCount(t testing.TB, path, query string) int {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=query_only(1)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRowContext(t.Context(), query).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// wantRecord fails t unless key is stored for merchantID with body.
func wantRecord(t *testing.T, db *sqlite.DB, merchantID, key string) {
	t.Helper()
	rec, err := db.FindIdempotency(t.Context(), merchantID, key)
	if err != nil {
		t.Fatalf("FindIdempotency(%s): %v", key, err)
	}
	if rec.Key != key || rec.MerchantID != merchantID {
		t.Fatalf("FindIdempotency(%s) = record of %s/%s", key, rec.MerchantID, rec.Key)
	}
}

// wantTaken fails t unless a sale with key is refused as a taken key.
func wantTaken(t *testing.T, db *sqlite.DB, merchantID, key string) {
	t.Helper()
	w, p := purchase(merchantID)
	w.Idempotency.Key = key
	err := db.Apply(t.Context(), w)
	if surgepay.ErrorReason(err) != "idempotency_key_exists" {
		t.Fatalf("Apply(sale reusing %s) = %v, want idempotency_key_exists", key, err)
	}
	if _, err := db.FindPayment(t.Context(), merchantID, p.ID); surgepay.ErrorCode(err) != surgepay.ENOTFOUND {
		t.Fatalf("refused sale %s: FindPayment = %v, want not found", p.ID, err)
	}
}

// TestIdempotencyIndexDeferred writes many more keys than the memory table
// holds, so that tables freeze and merge into idempotency_index while
// sales go on; every key stays found and taken through each stage: in the
// open batch, in memory, merged, and after a reopen that lost the memory.
func TestIdempotencyIndexDeferred(t *testing.T) {
	const tableMax, sales = 16, 600
	path := filepath.Join(t.TempDir(), "surgepay.db")
	db, err := sqlite.Open(t.Context(), sqlite.Config{Path: path, IdempotencyTableMax: tableMax})
	if err != nil {
		t.Fatal(err)
	}
	m := newMerchant(t, db)
	other := newMerchant(t, db)
	var keys []string
	for i := 0; i < sales; i += 20 {
		var ws []*surgepay.Write
		for range 20 {
			w, _ := purchase(m.ID)
			ws = append(ws, w)
			keys = append(keys, w.Idempotency.Key)
		}
		// The same key twice in one batch: one is refused.
		dup, _ := purchase(m.ID)
		dup.Idempotency.Key = ws[0].Idempotency.Key
		ws = append(ws, dup)
		errs := applyAll(t, db, ws)
		refused := 0
		for j, err := range errs {
			switch {
			case err == nil:
			case surgepay.ErrorReason(err) == "idempotency_key_exists" && (j == 0 || j == len(ws)-1):
				refused++
			default:
				t.Fatalf("Apply %d: %v", j, err)
			}
		}
		if refused != 1 {
			t.Fatalf("batch at %d: %d of two sales with one key refused, want 1", i, refused)
		}
		// Every key so far: found, and taken, wherever it is now.
		for _, k := range keys[max(0, len(keys)-40):] {
			wantRecord(t, db, m.ID, k)
		}
		wantTaken(t, db, m.ID, keys[0])
		wantTaken(t, db, m.ID, keys[len(keys)/2])
		wantTaken(t, db, m.ID, keys[len(keys)-1])
	}
	// The same key is free for another merchant.
	w, _ := purchase(other.ID)
	w.Idempotency.Key = keys[0]
	if err := db.Apply(t.Context(), w); err != nil {
		t.Fatalf("Apply(another merchant's sale with a taken key): %v", err)
	}
	indexed := rawCount(t, path, "SELECT count(*) FROM idempotency_index")
	if indexed < sales-2*tableMax-20 {
		t.Fatalf("idempotency_index holds %d entries after %d sales with a memory table of %d: the merge fell behind", indexed, sales, tableMax)
	}
	for _, k := range keys {
		wantRecord(t, db, m.ID, k)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// Reopened: the memory table is gone; Open reads what it held back
	// into memory, writing nothing, and the writes that follow merge it.
	before := rawCount(t, path, "SELECT count(*) FROM idempotency_index")
	db = open(t, sqlite.Config{Path: path, IdempotencyTableMax: tableMax})
	if got := rawCount(t, path, "SELECT count(*) FROM idempotency_index"); got != before {
		t.Fatalf("Open wrote %d entries into idempotency_index; want none (the rows go back into memory)", got-before)
	}
	for _, k := range keys {
		wantRecord(t, db, m.ID, k)
	}
	wantTaken(t, db, m.ID, keys[0])
	wantTaken(t, db, m.ID, keys[len(keys)-1])
	wantTaken(t, db, other.ID, keys[0])
	w, _ = purchase(m.ID)
	if err := db.Apply(t.Context(), w); err != nil {
		t.Fatalf("Apply(a new sale after reopen): %v", err)
	}
	wantRecord(t, db, m.ID, w.Idempotency.Key)
	// Enough writes to fill and merge the table Open rebuilt: every
	// record is indexed again, none lost.
	for range 3 * tableMax {
		w, _ := purchase(m.ID)
		if err := db.Apply(t.Context(), w); err != nil {
			t.Fatal(err)
		}
	}
	rows := rawCount(t, path, "SELECT count(*) FROM idempotency")
	if got := rawCount(t, path, "SELECT count(DISTINCT row) FROM idempotency_index"); got < rows-2*tableMax {
		t.Fatalf("after reopen and %d sales idempotency_index holds %d of %d records: the rebuilt table was not merged", 3*tableMax, got, rows)
	}
	for _, k := range keys {
		wantRecord(t, db, m.ID, k)
	}
}

// rawExec runs a statement on a separate connection to the file at path,
// as a damaged or older file would have it.
func rawExec(t testing.TB, path, query string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(t.Context(), query); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// TestIdempotencySavedEntries (issue 35 item 6): the memory table of keys
// is saved as it fills (idempotency_saved), and Open reads it back from
// there, reading one by one only the records after the newest saved row;
// a gap in the saved rows, or a row it cannot read, makes Open read the
// records from there on one by one, and the writer saves them again; a
// merge that ends deletes the saved rows it indexed. Every key stays
// found and taken throughout.
func TestIdempotencySavedEntries(t *testing.T) {
	const chunk, batch = 16, 8
	path := filepath.Join(t.TempDir(), "surgepay.db")
	var keys []string
	var m *surgepay.Merchant
	reopen := func(cfg sqlite.Config) *sqlite.DB {
		t.Helper()
		cfg.Path = path
		db, err := sqlite.Open(t.Context(), cfg)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		db.SetIdemSaveChunk(chunk)
		return db
	}
	sell := func(db *sqlite.DB, n int) {
		t.Helper()
		for range n / batch {
			var ws []*surgepay.Write
			for range batch {
				w, _ := purchase(m.ID)
				ws = append(ws, w)
				keys = append(keys, w.Idempotency.Key)
			}
			for i, err := range applyAll(t, db, ws) {
				if err != nil {
					t.Fatalf("Apply %d: %v", i, err)
				}
			}
		}
	}
	closeDB := func(db *sqlite.DB) {
		t.Helper()
		if err := db.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
	unindexed := func() int {
		return rawCount(t, path, "SELECT count(*) FROM idempotency WHERE rowid > (SELECT indexed_upto FROM deferred_indexes WHERE name = 'idempotency')")
	}
	// readBack fails t unless Open read back every record after
	// indexed_upto once, and read one by one those it should: at most
	// maxRead, or at least minRead.
	readBack := func(what string, db *sqlite.DB, minRead, maxRead int) {
		t.Helper()
		saved, read := db.IdemReadBack()
		if want := unindexed(); saved+read != want {
			t.Fatalf("%s: Open read back %d saved entries and %d records; want %d in all", what, saved, read, want)
		}
		if read < minRead || read > maxRead {
			t.Fatalf("%s: Open read %d records one by one (and %d saved entries); want %d to %d", what, read, saved, minRead, maxRead)
		}
		for _, k := range keys {
			wantRecord(t, db, m.ID, k)
		}
		wantTaken(t, db, m.ID, keys[0])
		wantTaken(t, db, m.ID, keys[len(keys)/2])
		wantTaken(t, db, m.ID, keys[len(keys)-1])
	}

	// No merge: every record is in the memory table.
	db := reopen(sqlite.Config{})
	m = newMerchant(t, db)
	sell(db, 304)
	closeDB(db)
	if n := rawCount(t, path, "SELECT count(*) FROM idempotency_saved"); n < 304/(chunk+batch) {
		t.Fatalf("idempotency_saved holds %d rows after 304 sales, saving every %d entries", n, chunk)
	}
	db = reopen(sqlite.Config{})
	readBack("saved", db, 0, chunk+batch)
	sell(db, 96)
	closeDB(db)

	// A gap, or a row that does not decode: the records from there on
	// are read one by one, and saved again.
	for _, c := range []struct{ what, damage string }{
		{"a gap", "DELETE FROM idempotency_saved WHERE upto = (SELECT upto FROM idempotency_saved ORDER BY upto LIMIT 1 OFFSET 5)"},
		{"a damaged row", "UPDATE idempotency_saved SET entries = x'00' WHERE upto = (SELECT upto FROM idempotency_saved ORDER BY upto LIMIT 1 OFFSET 3)"},
	} {
		rawExec(t, path, c.damage)
		db = reopen(sqlite.Config{})
		readBack("after "+c.what, db, 200, len(keys))
		sell(db, 96)
		closeDB(db)
		db = reopen(sqlite.Config{})
		readBack("saved again after "+c.what, db, 0, chunk+batch)
		closeDB(db)
	}

	// Merges: a small memory table freezes and merges; each merge that
	// ends deletes the saved rows it indexed, and Open reads back only
	// what is not yet indexed.
	const tableMax = 64
	db = reopen(sqlite.Config{IdempotencyTableMax: tableMax})
	sell(db, 600)
	closeDB(db)
	upto := rawCount(t, path, "SELECT indexed_upto FROM deferred_indexes WHERE name = 'idempotency'")
	if upto == 0 {
		t.Fatal("no merge ended in 600 sales with a memory table of 64")
	}
	if n := rawCount(t, path, fmt.Sprintf("SELECT count(*) FROM idempotency_saved WHERE upto <= %d", upto)); n != 0 {
		t.Fatalf("%d saved rows cover only records indexed up to %d: a merge that ended kept them", n, upto)
	}
	db = reopen(sqlite.Config{IdempotencyTableMax: tableMax})
	readBack("after merges", db, 0, chunk+batch)
	closeDB(db)
}

// TestIdempotencyPurgeDeferredIndex purges expired records wherever their
// key is (merged or in memory): they are gone, the newer ones stay, a
// purged key is free again, and the runs of idempotency_index whose
// records are all purged go, over several purges (a few entries each).
func TestIdempotencyPurgeDeferredIndex(t *testing.T) {
	const tableMax = 8
	path := filepath.Join(t.TempDir(), "surgepay.db")
	db := open(t, sqlite.Config{Path: path, IdempotencyTableMax: tableMax})
	db.SetRunDropMin(1) // a purge of 2 records drops 4 entries of a run of 8
	m := newMerchant(t, db)
	old := time.Now().Add(-48 * time.Hour)
	var oldKeys, newKeys []string
	for i := range 60 {
		w, _ := purchase(m.ID)
		if i < 37 { // not a whole number of tables: a run holds both
			w.Idempotency.Created = old.Add(time.Duration(i) * time.Millisecond)
			oldKeys = append(oldKeys, w.Idempotency.Key)
		} else {
			newKeys = append(newKeys, w.Idempotency.Key)
		}
		if err := db.Apply(t.Context(), w); err != nil {
			t.Fatalf("Apply %d: %v", i, err)
		}
	}
	const deadRuns = "SELECT count(*) FROM idempotency_runs WHERE upto < (SELECT min(rowid) FROM idempotency)"
	purged, partly := 0, false
	for range 25 {
		n, err := db.DeleteIdempotencyBefore(t.Context(), time.Now().Add(-24*time.Hour), 2)
		if err != nil {
			t.Fatal(err)
		}
		if n > 2 {
			t.Fatalf("DeleteIdempotencyBefore(limit 2) deleted %d", n)
		}
		purged += n
		partly = partly || rawCount(t, path, deadRuns) > 0
	}
	if !partly {
		t.Fatal("every run of purged records went in one purge: the test needs one dropped over several")
	}
	if purged != len(oldKeys) {
		t.Fatalf("purged %d records, want the %d expired", purged, len(oldKeys))
	}
	for _, k := range oldKeys {
		if _, err := db.FindIdempotency(t.Context(), m.ID, k); surgepay.ErrorCode(err) != surgepay.ENOTFOUND {
			t.Fatalf("FindIdempotency(purged %s) = %v, want not found", k, err)
		}
	}
	for _, k := range newKeys {
		wantRecord(t, db, m.ID, k)
		wantTaken(t, db, m.ID, k)
	}
	// More sales merge what is in memory; no entry of a purged record is
	// merged. Purges with nothing left to expire drop the runs of purged
	// records, a few entries each.
	for range 40 {
		w, _ := purchase(m.ID)
		if err := db.Apply(t.Context(), w); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; rawCount(t, path, deadRuns) > 0; i++ {
		if i == 40 {
			t.Fatalf("%d runs of purged records after %d purges", rawCount(t, path, deadRuns), i)
		}
		if n, err := db.DeleteIdempotencyBefore(t.Context(), time.Now().Add(-24*time.Hour), 2); err != nil || n != 0 {
			t.Fatalf("DeleteIdempotencyBefore = %d, %v; want nothing left to purge", n, err)
		}
	}
	if n := rawCount(t, path, "SELECT count(*) FROM idempotency_index WHERE run NOT IN (SELECT run FROM idempotency_runs)"); n != 0 {
		t.Fatalf("%d index entries outside every run", n)
	}
	// Entries of purged records are left only in the run that also
	// indexes live ones.
	dangling := rawCount(t, path, "SELECT count(*) FROM idempotency_index x WHERE NOT EXISTS (SELECT 1 FROM idempotency i WHERE i.rowid = x.row)")
	if dangling >= 2*tableMax {
		t.Fatalf("%d index entries point at purged records", dangling)
	}
	w, _ := purchase(m.ID)
	w.Idempotency.Key = oldKeys[0]
	if err := db.Apply(t.Context(), w); err != nil {
		t.Fatalf("Apply(sale reusing a purged key): %v", err)
	}
	wantRecord(t, db, m.ID, oldKeys[0])
}

// TestIdempotencyKeysOfTwoWriters: two DBs on one file (two processes)
// each see the other's keys: the newest, which only the other held in
// memory, and the older ones, merged into idempotency_index after each
// took them in (so each one's filter must hold the other's keys).
func TestIdempotencyKeysOfTwoWriters(t *testing.T) {
	const tableMax, keys = 16, 200
	path := filepath.Join(t.TempDir(), "surgepay.db")
	a := open(t, sqlite.Config{Path: path, IdempotencyTableMax: tableMax})
	b := open(t, sqlite.Config{Path: path, IdempotencyTableMax: tableMax})
	m := newMerchant(t, a)
	for i := range keys {
		w, _ := purchase(m.ID)
		w.Idempotency.Key = fmt.Sprintf("key-%d", i)
		if err := []*sqlite.DB{a, b}[i%2].Apply(t.Context(), w); err != nil {
			t.Fatalf("Apply %d: %v", i, err)
		}
	}
	for i := range keys {
		other := []*sqlite.DB{a, b}[(i+1)%2]
		wantRecord(t, other, m.ID, fmt.Sprintf("key-%d", i))
		wantTaken(t, other, m.ID, fmt.Sprintf("key-%d", i))
	}
}

// TestIdempotencyBodyCompressed: a sale's stored answer is kept compressed
// (S2 with the answer's shape as dictionary) and read back whole; an
// answer stored before, as plain JSON, reads as it was.
func TestIdempotencyBodyCompressed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "surgepay.db")
	db := open(t, sqlite.Config{Path: path})
	m := newMerchant(t, db)
	body := []byte(`{"id":"pay_01m89ygh23phsbtq93t0h6qpbp","object":"payment","status":"succeeded","amount":12403,` +
		`"amount_tax":0,"amount_total":12403,"amount_capturable":0,"amount_captured":12403,"amount_refunded":0,` +
		`"currency":"usd","capture_method":"automatic","customer":"cus_01m89yggvsq92c530x8kpnssp0",` +
		`"payment_method":"pm_01m89yggvw19v77fpn3ejtzdkv","description":"a sale","metadata":{},"tax":null,` +
		`"transactions":[],"created":1795630318}`)
	w, _ := purchase(m.ID)
	w.Idempotency.Body = body
	if err := db.Apply(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	if string(w.Idempotency.Body) != string(body) {
		t.Fatal("Apply changed the caller's record")
	}
	rec, err := db.FindIdempotency(t.Context(), m.ID, w.Idempotency.Key)
	if err != nil || string(rec.Body) != string(body) {
		t.Fatalf("FindIdempotency = %q, %v; want the body back", rec.Body, err)
	}
	if n := rawCount(t, path, "SELECT length(body) FROM idempotency WHERE key = '"+w.Idempotency.Key+"'"); n >= len(body)/2 {
		t.Fatalf("stored body of %d bytes for %d: want it compressed", n, len(body))
	}
	// A plain JSON body, as stored before compression: read as it is.
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.ExecContext(t.Context(), "UPDATE idempotency SET body = ? WHERE key = ?", body, w.Idempotency.Key); err != nil {
		t.Fatal(err)
	}
	if rec, err := db.FindIdempotency(t.Context(), m.ID, w.Idempotency.Key); err != nil || string(rec.Body) != string(body) {
		t.Fatalf("FindIdempotency of a plain body = %q, %v", rec.Body, err)
	}
}

// waitSaved waits until db's filter of idempotency keys is saved for
// the newest run of the database at path as it is, failing t after a
// minute (a hang guard).
func waitSaved(t *testing.T, db *sqlite.DB, path string) {
	t.Helper()
	run := int64(rawCount(t, path, "SELECT coalesce(max(run), 0) FROM idempotency_runs"))
	upto := int64(rawCount(t, path, "SELECT coalesce(max(upto), 0) FROM idempotency_runs WHERE run = (SELECT max(run) FROM idempotency_runs)"))
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		if r, u := db.IdemFilterSaved(); r == run && u == upto {
			return
		}
		if time.Now().After(deadline) {
			r, u := db.IdemFilterSaved()
			t.Fatalf("the filter was not saved for run %d up to %d (saved: run %d up to %d)", run, upto, r, u)
		}
	}
}

// waitFilter waits until db's filter of idempotency keys is built (Open
// starts the build in the background), failing t after a minute (a hang
// guard, not a measurement).
func waitFilter(t *testing.T, db *sqlite.DB) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !db.IdemFilterReady(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the filter of idempotency keys was not built within a minute of Open")
		}
	}
}

// TestIdempotencyFilterSaved (issue 35 item 6): the filter of stored keys
// is saved beside the database as merges end, and Open starts from the
// file, reading only the runs of idempotency_index it does not cover; a
// file that is older (runs merged and extended since), torn, or another
// database's is read only as far as it is right, or not at all; every
// stored key stays held by the filter, found and taken, in each case.
func TestIdempotencyFilterSaved(t *testing.T) {
	const tableMax, runsMax, filterKeys = 24, 6, 1 << 16
	dir := t.TempDir()
	path := filepath.Join(dir, "surgepay.db")
	file := path + "-idemfilter"
	cfg := sqlite.Config{Path: path, IdempotencyTableMax: tableMax, IdempotencyRunsMax: runsMax, IdempotencyFilterKeys: filterKeys}
	var m *surgepay.Merchant
	var keys []string
	sell := func(db *sqlite.DB, n int) {
		t.Helper()
		for range n {
			w, _ := purchase(m.ID)
			if err := db.Apply(t.Context(), w); err != nil {
				t.Fatal(err)
			}
			keys = append(keys, w.Idempotency.Key)
		}
		waitSaved(t, db, path)
	}
	reopen := func(what string, loaded bool) *sqlite.DB {
		t.Helper()
		db := open(t, cfg)
		waitFilter(t, db)
		got, read := db.IdemFilterLoaded()
		if got != loaded {
			t.Fatalf("%s: filter loaded from its file: %v, want %v", what, got, loaded)
		}
		for _, k := range keys {
			if !db.IdemFilterMayHold(m.ID, k) {
				t.Fatalf("%s: the filter does not hold stored key %s", what, k)
			}
			wantRecord(t, db, m.ID, k)
		}
		wantTaken(t, db, m.ID, keys[0])
		wantTaken(t, db, m.ID, keys[len(keys)-1])
		wantNewKeysSkipped(t, db, m.ID, what)
		t.Logf("%s: loaded %v, %d index entries read of %d", what, got, read, rawCount(t, path, "SELECT count(*) FROM idempotency_index"))
		return db
	}
	closeDB := func(db *sqlite.DB) {
		t.Helper()
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}

	db := open(t, cfg)
	m = newMerchant(t, db)
	waitFilter(t, db)
	sell(db, 3*tableMax)
	older, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("no saved filter after %d sales with a memory table of %d: %v", len(keys), tableMax, err)
	}
	// Past runsMax: merges extend the newest run.
	sell(db, (runsMax+1)*tableMax)
	if runs := rawCount(t, path, "SELECT count(*) FROM idempotency_runs"); runs != runsMax {
		t.Fatalf("%d runs, want %d: no merge extended the newest run", runs, runsMax)
	}
	extended, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	sell(db, 2*tableMax)
	closeDB(db)

	// Reopened: from the file, which covers every run.
	db = reopen("saved", true)
	if _, read := db.IdemFilterLoaded(); read != 0 {
		t.Fatalf("Open read %d entries of idempotency_index to complete a saved filter that covers every run", read)
	}
	closeDB(db)

	// A file saved before the newest run was extended again: Open reads
	// that run again.
	if err := os.WriteFile(file, extended, 0o600); err != nil {
		t.Fatal(err)
	}
	closeDB(reopen("file before an extension", true))

	// A file saved before those runs and extensions: Open reads the runs
	// after it.
	if err := os.WriteFile(file, older, 0o600); err != nil {
		t.Fatal(err)
	}
	closeDB(reopen("older file", true))

	// A torn file: built from the index.
	whole, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, whole[:len(whole)-1], 0o600); err != nil {
		t.Fatal(err)
	}
	closeDB(reopen("torn file", false))

	// Another database's file: built from the index.
	otherPath := filepath.Join(dir, "other.db")
	other := open(t, sqlite.Config{Path: otherPath, IdempotencyTableMax: tableMax, IdempotencyFilterKeys: filterKeys})
	om := newMerchant(t, other)
	for range 3 * tableMax {
		w, _ := purchase(om.ID)
		if err := other.Apply(t.Context(), w); err != nil {
			t.Fatal(err)
		}
	}
	waitSaved(t, other, otherPath)
	closeDB(other)
	foreign, err := os.ReadFile(otherPath + "-idemfilter")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, foreign, 0o600); err != nil {
		t.Fatal(err)
	}
	closeDB(reopen("another database's file", false))

	// A filter smaller than the configuration asks for: built again.
	cfg.IdempotencyFilterKeys = 2 * filterKeys
	closeDB(reopen("smaller than configured", false))
}

// TestIdempotencyFilter: once the filter is built, a key never stored is
// answered not found without a statement, and every stored key is found,
// in memory or merged, before and after a reopen (which builds the
// filter from idempotency_index).
func TestIdempotencyFilter(t *testing.T) {
	const tableMax = 16
	path := filepath.Join(t.TempDir(), "surgepay.db")
	db := open(t, sqlite.Config{Path: path, IdempotencyTableMax: tableMax})
	m := newMerchant(t, db)
	var keys []string
	add := func(n int) {
		for range n {
			w, _ := purchase(m.ID)
			if err := db.Apply(t.Context(), w); err != nil {
				t.Fatal(err)
			}
			keys = append(keys, w.Idempotency.Key)
		}
	}
	waitFilter(t, db)
	add(200) // added as they commit; merged into idempotency_index
	check := func(what string) {
		t.Helper()
		for _, k := range keys {
			wantRecord(t, db, m.ID, k)
		}
		wantNewKeysSkipped(t, db, m.ID, what)
		// A stored key of another merchant is not this one's.
		if _, err := db.FindIdempotency(t.Context(), "mer_other", keys[0]); surgepay.ErrorCode(err) != surgepay.ENOTFOUND {
			t.Errorf("%s: another merchant's key: %v, want not found", what, err)
		}
	}
	check("built")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = open(t, sqlite.Config{Path: path, IdempotencyTableMax: tableMax})
	waitFilter(t, db)
	check("reopened")
}

// TestIdempotencyFilterRebuild: a rebuild under load (paced, in chunks,
// the memory tables read mostly outside their lock) while Writes go on
// holds every key stored before and during it: none is answered "not
// found" by the new filter, and new keys still are, without a statement.
func TestIdempotencyFilterRebuild(t *testing.T) {
	db := open(t, sqlite.Config{IdempotencyTableMax: 16})
	m := newMerchant(t, db)
	waitFilter(t, db)
	var keys []string
	add := func(n int) []string {
		var ks []string
		for range n {
			w, _ := purchase(m.ID)
			if err := db.Apply(t.Context(), w); err != nil {
				t.Error(err)
				return ks
			}
			ks = append(ks, w.Idempotency.Key)
		}
		return ks
	}
	keys = append(keys, add(300)...) // in idempotency_index, frozen and active tables
	during := make(chan []string)
	go func() { during <- add(200) }()
	if err := db.RebuildIdemFilter(t.Context(), 7); err != nil {
		t.Fatal(err)
	}
	keys = append(keys, <-during...)
	for _, k := range keys {
		wantRecord(t, db, m.ID, k)
	}
	wantNewKeysSkipped(t, db, m.ID, "after the rebuild")
}

// wantNewKeysSkipped: 50 new keys are each answered "not found" by the
// filter, without a statement.
func wantNewKeysSkipped(t *testing.T, db *sqlite.DB, merchantID, what string) {
	t.Helper()
	skips := db.IdemFilterSkips()
	var c surgepay.StatementCounter
	ctx := surgepay.WithStatementCounter(t.Context(), &c)
	for i := range 50 {
		if _, err := db.FindIdempotency(ctx, merchantID, fmt.Sprintf("new-%d", i)); surgepay.ErrorCode(err) != surgepay.ENOTFOUND {
			t.Fatalf("%s: FindIdempotency(a new key) = %v, want not found", what, err)
		}
	}
	if got := db.IdemFilterSkips() - skips; got != 50 || c.Total() != 0 {
		t.Errorf("%s: 50 new keys: %d answered by the filter, %d statements; want 50, 0", what, got, c.Total())
	}
}

// TestIdempotencyFilterInsert: the writer probes idempotency_index only
// for keys the filter may hold (migration 0011). A stored key, merged out
// of the memory tables, is still refused on the sale path and the general
// one, running and after a reopen; a new key is inserted without the
// probe. An emptied filter lets a merged key be stored twice: that is the
// filter's invariant (TestIdempotencyFilter) doing the work.
func TestIdempotencyFilterInsert(t *testing.T) {
	const tableMax, stored = 16, 200
	path := filepath.Join(t.TempDir(), "surgepay.db")
	db := open(t, sqlite.Config{Path: path, IdempotencyTableMax: tableMax})
	m := newMerchant(t, db)
	waitFilter(t, db)
	var keys []string
	for range stored {
		w, _ := purchase(m.ID)
		if err := db.Apply(t.Context(), w); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, w.Idempotency.Key)
	}
	if st := db.IdempotencyFilterStats(); st.InsertAbsent < stored-5 || st.Bytes == 0 || st.Keys < stored {
		t.Fatalf("after %d new keys: %+v; want nearly all inserted without the probe", stored, st)
	}
	// Generally taken: a Write that is not a sale (a merchant with a key).
	generalTaken := func(key string) {
		t.Helper()
		w := &surgepay.Write{Merchant: &surgepay.Merchant{ID: surgepay.NewID("mch"), Name: "dup", Created: time.Now().UTC()},
			Idempotency: &surgepay.IdempotencyRecord{MerchantID: m.ID, Key: key, StatusCode: 201, Created: time.Now().UTC()}}
		if err := db.Apply(t.Context(), w); surgepay.ErrorReason(err) != "idempotency_key_exists" {
			t.Fatalf("Apply(merchant reusing %s) = %v, want idempotency_key_exists", key, err)
		}
	}
	merged := keys[:stored/2] // the memory tables hold at most 2·tableMax
	check := func(what string) {
		t.Helper()
		before := db.IdempotencyFilterStats()
		n := 0
		for i := 0; i < len(merged); i += 10 {
			wantTaken(t, db, m.ID, merged[i])
			generalTaken(merged[i])
			n += 2
		}
		after := db.IdempotencyFilterStats()
		if got := after.InsertMaybe - before.InsertMaybe; got != uint64(n) {
			t.Errorf("%s: %d taken keys, %d probed; want every one probed", what, n, got)
		}
		if after.InsertFalse != before.InsertFalse {
			t.Errorf("%s: taken keys counted as false positives: %+v", what, after)
		}
	}
	check("running")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = open(t, sqlite.Config{Path: path, IdempotencyTableMax: tableMax})
	waitFilter(t, db)
	check("reopened")
	w, _ := purchase(m.ID)
	if err := db.Apply(t.Context(), w); err != nil {
		t.Fatalf("Apply(a new sale after reopen): %v", err)
	}
	if st := db.IdempotencyFilterStats(); st.InsertAbsent != 1 {
		t.Errorf("a new key after reopen: %+v, want InsertAbsent 1", st)
	}

	db.BreakIdemFilter()
	w, _ = purchase(m.ID)
	w.Idempotency.Key = merged[0]
	if err := db.Apply(t.Context(), w); err != nil {
		t.Fatalf("with an emptied filter, a merged key was still refused (%v): the probe no longer depends on the filter; "+
			"update this test and idemfilter.go's comment", err)
	}
}

// TestIdempotencyRuns: each merged memory table is a run of its own, up to
// IdempotencyRunsMax; past it merges go into the newest run; every key is
// found and taken wherever its entry is, before and after a reopen.
func TestIdempotencyRuns(t *testing.T) {
	const tableMax, runsMax = 8, 3
	path := filepath.Join(t.TempDir(), "surgepay.db")
	cfg := sqlite.Config{Path: path, IdempotencyTableMax: tableMax, IdempotencyRunsMax: runsMax}
	db, err := sqlite.Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	m := newMerchant(t, db)
	var keys []string
	for range 150 {
		w, _ := purchase(m.ID)
		if err := db.Apply(t.Context(), w); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, w.Idempotency.Key)
	}
	check := func(when string) {
		t.Helper()
		if n := rawCount(t, path, "SELECT count(*) FROM idempotency_runs"); n != runsMax {
			t.Fatalf("%s: %d runs, want %d (the most)", when, n, runsMax)
		}
		// A run holds records up to its upto only, and the newest took
		// the merges past the bound.
		if n := rawCount(t, path, "SELECT count(*) FROM idempotency_index x JOIN idempotency_runs r USING (run) WHERE x.row > r.upto"); n != 0 {
			t.Fatalf("%s: %d entries above their run's upto", when, n)
		}
		newest := rawCount(t, path, "SELECT count(*) FROM idempotency_index WHERE run = (SELECT max(run) FROM idempotency_runs)")
		if newest <= tableMax {
			t.Fatalf("%s: the newest run holds %d entries; want the merges past the bound", when, newest)
		}
		for _, k := range keys {
			wantRecord(t, db, m.ID, k)
		}
		for _, k := range []string{keys[0], keys[tableMax+1], keys[len(keys)/2], keys[len(keys)-1]} {
			wantTaken(t, db, m.ID, k)
		}
	}
	check("open")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// The reopen reads what the memory table held back into memory and
	// builds the filter from every run and from it.
	db = open(t, cfg)
	waitFilter(t, db)
	check("reopened")
}

// TestIdempotencyRunsMigration: a file of the schema before runs
// (migration 0012) keeps its merged keys, as run 1: found, taken, and
// counted in the filter.
func TestIdempotencyRunsMigration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "surgepay.db")
	if err := sqlite.MigrateTo(t.Context(), path, 12); err != nil {
		t.Fatal(err)
	}
	const merchantID, records = "mch_before_runs", 20
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for i := range records {
		key := fmt.Sprintf("key-%d", i)
		keys = append(keys, key)
		row := int64(i + 1)
		if _, err := raw.ExecContext(t.Context(), "INSERT INTO idempotency (rowid, merchant_id, key, request_hash, status_code, body, created) "+
			"VALUES (?, ?, ?, zeroblob(32), 201, x'7b7d', ?)", row, merchantID, key, time.Now().UnixNano()); err != nil {
			t.Fatal(err)
		}
		if _, err := raw.ExecContext(t.Context(), "INSERT INTO idempotency_index (hash, row) VALUES (?, ?)",
			sqlite.IdemHash(merchantID, key), row); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := raw.ExecContext(t.Context(), "UPDATE deferred_indexes SET indexed_upto = ? WHERE name = 'idempotency'", records); err != nil {
		t.Fatal(err)
	}
	if err := raw.Close(); err != nil {
		t.Fatal(err)
	}
	db := open(t, sqlite.Config{Path: path, IdempotencyTableMax: 8})
	if n := rawCount(t, path, "SELECT count(*) FROM idempotency_index WHERE run = 1"); n != records {
		t.Fatalf("run 1 holds %d entries, want the %d merged before", n, records)
	}
	if n := rawCount(t, path, "SELECT upto FROM idempotency_runs WHERE run = 1"); n != records {
		t.Fatalf("run 1 upto %d, want %d", n, records)
	}
	m := &surgepay.Merchant{ID: merchantID, Name: "before runs", Created: time.Now().UTC()}
	if err := db.Apply(t.Context(), &surgepay.Write{Merchant: m}); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		wantRecord(t, db, merchantID, k)
	}
	wantTaken(t, db, merchantID, keys[0])
	wantTaken(t, db, merchantID, keys[records-1])
	// New records merge into runs after it.
	for range 30 {
		w, _ := purchase(merchantID)
		if err := db.Apply(t.Context(), w); err != nil {
			t.Fatal(err)
		}
	}
	if n := rawCount(t, path, "SELECT count(*) FROM idempotency_index WHERE run > 1"); n == 0 {
		t.Fatal("no entry merged after run 1")
	}
}
