package sqlite_test

import (
	"bytes"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/sqlite"
)

// TestIdempotencyModel is a model-based test of the store's rule "never
// accept an idempotency key twice": random interleavings of writes (new
// keys, keys already stored, the same key with another body, several at
// once in one group commit), writes whose later guard fails, purges, filter
// rebuilds (alone and during writes), idle commits that carry the merge
// of the deferred index forward, and close and reopen, against a plain map.
// The memory table holds a few keys and idempotency_index a few runs, so
// that tables freeze, merge into runs, fill the last run and are purged
// while keys come and go. After every step each key of the (small) key
// space is looked up and must answer what the map holds, and the table
// holds as many records as the map.
//
// It runs idemModelChecks random sequences by default (CI); RAPID_CHECKS
// and RAPID_SEED choose more and another seed:
//
//	RAPID_CHECKS=5000 go test ./sqlite -run TestIdempotencyModel
func TestIdempotencyModel(t *testing.T) {
	if f := flag.Lookup("rapid.checks"); f != nil && f.Value.String() == "100" && os.Getenv("RAPID_CHECKS") == "" {
		setFlag(t, f, strconv.Itoa(idemModelChecks))
	}
	// No fail files under testdata: a failure prints its seed.
	if f := flag.Lookup("rapid.nofailfile"); f != nil && os.Getenv("RAPID_NOFAILFILE") == "" {
		setFlag(t, f, "true")
	}
	template := idemModelTemplate(t)
	rapid.Check(t, func(rt *rapid.T) {
		m := newIdemModel(t, rt, template)
		defer m.close(rt)
		rt.Repeat(map[string]func(*rapid.T){
			"write":   m.write,
			"batch":   m.batch,
			"purge":   m.purge,
			"rebuild": m.rebuild,
			"idle":    m.idle,
			"reopen":  m.reopen,
			"":        m.check,
		})
	})
}

// setFlag sets f to v for the rest of t.
func setFlag(t *testing.T, f *flag.Flag, v string) {
	old := f.Value.String()
	if err := f.Value.Set(v); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Value.Set(old) })
}

// idemModelChecks is TestIdempotencyModel's count of sequences without
// RAPID_CHECKS: 20 to 30 s under -race on two cores.
const idemModelChecks = 15

// idemModelKeys are the keys a sequence draws from, for each of
// idemModelMerchants: few, so that keys repeat.
const (
	idemModelKeys      = 10
	idemModelMerchants = 2
)

// modelRecord is what the model expects FindIdempotency to answer.
type modelRecord struct {
	rec *surgepay.IdempotencyRecord
	// tick orders records as the store assigns rowids: a write alone has
	// a tick of its own, the writes of one batch share one.
	tick int
}

type modelKey struct{ merchantID, key string }

// idemModel is the store under test and the map it must agree with.
type idemModel struct {
	t    *testing.T
	path string
	cfg  sqlite.Config
	db   *sqlite.DB
	raw  *sql.DB // read-only, for counts

	merchants []string
	recs      map[modelKey]*modelRecord
	clock     int       // the last tick
	base      time.Time // tick 0's Created (idemModelBase)
	bodies    int       // bodies made, to make each one different
}

func newIdemModel(t *testing.T, rt *rapid.T, template string) *idemModel {
	dir, err := os.MkdirTemp(t.TempDir(), "model")
	if err != nil {
		rt.Fatal(err)
	}
	m := &idemModel{t: t, path: filepath.Join(dir, "surgepay.db"), recs: make(map[modelKey]*modelRecord),
		base: idemModelBase, merchants: idemModelMerchantIDs()}
	// A copy of a migrated file: migrating a new one for every sequence
	// took most of the run under -race.
	b, err := os.ReadFile(template)
	if err != nil {
		rt.Fatal(err)
	}
	if err := os.WriteFile(m.path, b, 0o600); err != nil {
		rt.Fatal(err)
	}
	m.cfg = sqlite.Config{Path: m.path,
		IdempotencyTableMax: rapid.IntRange(1, 8).Draw(rt, "tableMax"),
		IdempotencyRunsMax:  rapid.IntRange(1, 4).Draw(rt, "runsMax"),
		BatchSizeMax:        rapid.IntRange(1, 8).Draw(rt, "batchMax")}
	m.open(rt)
	if m.raw, err = sql.Open("sqlite", m.path+"?_pragma=query_only(1)"); err != nil {
		rt.Fatal(err)
	}
	return m
}

// idemModelBase is tick 0's Created.
var idemModelBase = time.Now().UTC().Truncate(time.Second).Add(-24 * time.Hour)

func idemModelMerchantIDs() []string {
	ids := make([]string, idemModelMerchants)
	for i := range ids {
		ids[i] = fmt.Sprintf("mch_model%d", i)
	}
	return ids
}

// idemModelTemplate creates a migrated database file with the model's
// merchants, closed (its WAL checkpointed into it), and returns its path.
func idemModelTemplate(t *testing.T) string {
	path := filepath.Join(t.TempDir(), "template.db")
	db, err := sqlite.Open(t.Context(), sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range idemModelMerchantIDs() {
		if err := db.Apply(t.Context(), &surgepay.Write{Merchant: &surgepay.Merchant{ID: id, Name: "model", Created: idemModelBase}}); err != nil {
			t.Fatalf("Apply(merchant): %v", err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + "-wal"); err == nil {
		t.Fatal("the template's WAL outlived Close: a copy of the file alone would miss it")
	}
	return path
}

func (m *idemModel) open(rt *rapid.T) {
	db, err := sqlite.Open(m.t.Context(), m.cfg)
	if err != nil {
		rt.Fatalf("Open: %v", err)
	}
	if rapid.Bool().Draw(rt, "dropMin1") {
		db.SetRunDropMin(1) // a purge drops runs a few entries at a time
	}
	m.db = db
}

func (m *idemModel) close(rt *rapid.T) {
	if m.raw != nil {
		m.raw.Close()
	}
	if err := m.db.Close(); err != nil {
		rt.Errorf("Close: %v", err)
	}
}

// Write kinds: each takes another path through the writer.
const (
	kindPlain     = iota // Idempotency alone: the general path
	kindSale             // Idempotency and PaymentInsert: the sale's one statement
	kindSaleEvent        // a sale and its events
	kindStaged           // a sale with a staged record
	kindCustomer         // Idempotency and CustomerInsert: the general path
	kindGuardFail        // Idempotency, then a PaymentUpdate of no payment: ENOTFOUND
	kinds
)

var kindNames = [kinds]string{"plain", "sale", "sale+events", "staged", "customer", "guard-fail"}

// drawKey draws a key of the key space.
func (m *idemModel) drawKey(rt *rapid.T) modelKey {
	return modelKey{rapid.SampledFrom(m.merchants).Draw(rt, "merchant"),
		fmt.Sprintf("key-%d", rapid.IntRange(0, idemModelKeys-1).Draw(rt, "key"))}
}

// newWrite returns a Write of kind storing k, created at tick, with a body
// of its own (long bodies are stored compressed).
func (m *idemModel) newWrite(rt *rapid.T, k modelKey, kind, tick int) *surgepay.Write {
	m.bodies++
	body := []byte(fmt.Sprintf(`{"n":%d}`, m.bodies))
	if rapid.Bool().Draw(rt, "longBody") {
		body = fmt.Appendf(nil, `{"id":"pay_%d","object":"payment","status":"succeeded","amount":%d,"currency":"usd",`+
			`"capture_method":"automatic","metadata":{},"transactions":[]}`, m.bodies, 100+m.bodies)
	}
	rec := &surgepay.IdempotencyRecord{MerchantID: k.merchantID, Key: k.key,
		RequestHash: surgepay.RequestHash("POST", "/v1/payments", body),
		StatusCode:  rapid.SampledFrom([]int{200, 201, 402}).Draw(rt, "status"),
		Body:        body, Created: m.base.Add(time.Duration(tick) * time.Second)}
	w := &surgepay.Write{Idempotency: rec}
	switch kind {
	case kindSale, kindSaleEvent, kindStaged:
		wp, p := purchase(k.merchantID)
		if kind == kindSaleEvent {
			w.Events = wp.Events
		}
		if kind == kindStaged {
			w.Staged = &surgepay.StagedRecord{ID: surgepay.NewID("stg"), MerchantID: k.merchantID, PaymentID: p.ID,
				Sealed: []byte("sealed"), Created: rec.Created}
		}
		w.PaymentInsert = p
	case kindCustomer:
		now := time.Now().UTC()
		w.CustomerInsert = &surgepay.Customer{ID: surgepay.NewID("cus"), MerchantID: k.merchantID, Version: 1, Created: now, Updated: now}
	case kindGuardFail:
		_, p := purchase(k.merchantID)
		p.Version = 2
		w.PaymentUpdate = p
	}
	return w
}

// write applies one Write alone.
func (m *idemModel) write(rt *rapid.T) {
	k := m.drawKey(rt)
	kind := rapid.IntRange(0, kinds-1).Draw(rt, "kind")
	m.clock++
	w := m.newWrite(rt, k, kind, m.clock)
	err := m.db.Apply(m.t.Context(), w)
	_, taken := m.recs[k]
	switch {
	case taken:
		wantKeyExists(rt, err, k, kindNames[kind])
	case kind == kindGuardFail:
		if surgepay.ErrorCode(err) != surgepay.ENOTFOUND {
			rt.Fatalf("Apply(%s %v, new key) = %v, want not_found", kindNames[kind], k, err)
		}
	case err != nil:
		rt.Fatalf("Apply(%s %v, new key) = %v, want it stored", kindNames[kind], k, err)
	default:
		m.recs[k] = &modelRecord{rec: w.Idempotency, tick: m.clock}
	}
}

func wantKeyExists(rt *rapid.T, err error, k modelKey, what string) {
	if surgepay.ErrorCode(err) != surgepay.ECONFLICT || surgepay.ErrorReason(err) != "idempotency_key_exists" {
		rt.Fatalf("Apply(%s %v, key stored) = %v, want idempotency_key_exists", what, k, err)
	}
}

// batch applies several Writes at once, so that they share group commits
// (perhaps with a filter rebuild under way). Keys may repeat among them:
// one of the Writes with a new key is stored, the others refused.
func (m *idemModel) batch(rt *rapid.T) {
	n := rapid.IntRange(2, 8).Draw(rt, "writes")
	m.clock++
	ws := make([]*surgepay.Write, n)
	keys := make([]modelKey, n)
	for i := range ws {
		keys[i] = m.drawKey(rt)
		// Not kindGuardFail: which of two Writes with one key goes first
		// decides its error.
		ws[i] = m.newWrite(rt, keys[i], rapid.IntRange(0, kindGuardFail-1).Draw(rt, "kind"), m.clock)
	}
	rebuild := rapid.Bool().Draw(rt, "rebuildDuring")
	errs := make([]error, n)
	var wg sync.WaitGroup
	var rebuildErr error
	if rebuild {
		chunk := rapid.IntRange(1, 4).Draw(rt, "chunk")
		wg.Go(func() { rebuildErr = m.db.RebuildIdemFilter(m.t.Context(), chunk) })
	}
	for i := range ws {
		wg.Go(func() { errs[i] = m.db.Apply(m.t.Context(), ws[i]) })
	}
	wg.Wait()
	if rebuildErr != nil {
		rt.Fatalf("RebuildIdemFilter during writes: %v", rebuildErr)
	}
	stored := make(map[modelKey]int)
	for i, err := range errs {
		k := keys[i]
		if _, taken := m.recs[k]; taken {
			wantKeyExists(rt, err, k, "batched write")
			continue
		}
		switch {
		case err == nil:
			stored[k]++
			m.recs[k] = &modelRecord{rec: ws[i].Idempotency, tick: m.clock}
		case surgepay.ErrorReason(err) != "idempotency_key_exists":
			rt.Fatalf("Apply(batched write %v) = %v", k, err)
		}
	}
	for i, k := range keys {
		if _, ok := m.recs[k]; !ok {
			rt.Fatalf("no batched write of new key %v was stored (%v)", k, errs[i])
		}
		if stored[k] > 1 {
			rt.Fatalf("key %v stored %d times by one batch", k, stored[k])
		}
	}
}

// purge deletes expired records: the oldest first (by rowid), up to a
// limit, those created before a tick.
func (m *idemModel) purge(rt *rapid.T) {
	cutoff := rapid.IntRange(0, m.clock+1).Draw(rt, "cutoff")
	limit := rapid.IntRange(1, 12).Draw(rt, "limit")
	n, err := m.db.DeleteIdempotencyBefore(m.t.Context(), m.base.Add(time.Duration(cutoff)*time.Second), limit)
	if err != nil {
		rt.Fatalf("DeleteIdempotencyBefore: %v", err)
	}
	// The records by tick; one tick's order among them is the store's.
	byTick := make(map[int][]modelKey)
	expired := 0
	for k, r := range m.recs {
		if r.tick < cutoff {
			byTick[r.tick] = append(byTick[r.tick], k)
			expired++
		}
	}
	if want := min(limit, expired); n != want {
		rt.Fatalf("DeleteIdempotencyBefore(tick %d, limit %d) = %d, want %d of %d expired", cutoff, limit, n, want, expired)
	}
	left := n
	for tick := range cutoff {
		ks := byTick[tick]
		if left >= len(ks) {
			for _, k := range ks {
				delete(m.recs, k)
			}
			left -= len(ks)
			continue
		}
		// The limit ends inside a batch: left of its records are gone,
		// whichever the store had put first.
		gone := 0
		for _, k := range ks {
			_, err := m.db.FindIdempotency(m.t.Context(), k.merchantID, k.key)
			switch {
			case surgepay.ErrorCode(err) == surgepay.ENOTFOUND:
				delete(m.recs, k)
				gone++
			case err != nil:
				rt.Fatalf("FindIdempotency(%v): %v", k, err)
			}
		}
		if gone != left {
			rt.Fatalf("purge ended inside a batch of %d at tick %d: %d of them gone, want %d", len(ks), tick, gone, left)
		}
		break
	}
}

// rebuild builds the filter of stored keys again, in small chunks.
func (m *idemModel) rebuild(rt *rapid.T) {
	if err := m.db.RebuildIdemFilter(m.t.Context(), rapid.IntRange(1, 16).Draw(rt, "chunk")); err != nil {
		rt.Fatalf("RebuildIdemFilter: %v", err)
	}
}

// idle commits a Write without an idempotency record: a commit that
// carries a merge of the deferred index forward.
func (m *idemModel) idle(rt *rapid.T) {
	w := &surgepay.Write{MerchantStatus: &surgepay.MerchantStatus{MerchantID: m.merchants[0]}}
	if err := m.db.Apply(m.t.Context(), w); err != nil {
		rt.Fatalf("Apply(idle): %v", err)
	}
}

// reopen closes the store and opens it again, perhaps with another size
// of memory table: the memory table is rebuilt from the rows. One time in
// four: an Open is a tenth of a second under -race, and otherwise took
// most of a run.
func (m *idemModel) reopen(rt *rapid.T) {
	if rapid.IntRange(0, 3).Draw(rt, "reopenSkip") != 0 {
		m.idle(rt)
		return
	}
	if err := m.db.Close(); err != nil {
		rt.Fatalf("Close: %v", err)
	}
	m.cfg.IdempotencyTableMax = rapid.IntRange(1, 8).Draw(rt, "tableMax")
	m.open(rt)
}

// check looks every key of the key space up and counts the records.
func (m *idemModel) check(rt *rapid.T) {
	for _, mch := range m.merchants {
		for i := range idemModelKeys {
			k := modelKey{mch, fmt.Sprintf("key-%d", i)}
			got, err := m.db.FindIdempotency(m.t.Context(), k.merchantID, k.key)
			want, ok := m.recs[k]
			switch {
			case !ok && surgepay.ErrorCode(err) == surgepay.ENOTFOUND:
			case !ok:
				rt.Fatalf("FindIdempotency(%v) = %+v, %v; want not found", k, got, err)
			case err != nil:
				rt.Fatalf("FindIdempotency(%v) = %v; want the record of tick %d", k, err, want.tick)
			default:
				wantSameRecord(rt, got, want.rec)
			}
		}
	}
	var n int
	if err := m.raw.QueryRowContext(m.t.Context(), "SELECT count(*) FROM idempotency").Scan(&n); err != nil {
		rt.Fatal(err)
	}
	if n != len(m.recs) {
		rt.Fatalf("idempotency holds %d records, want %d", n, len(m.recs))
	}
}

func wantSameRecord(rt *rapid.T, got, want *surgepay.IdempotencyRecord) {
	var diffs []error
	if got.MerchantID != want.MerchantID || got.Key != want.Key {
		diffs = append(diffs, fmt.Errorf("key %s/%s", got.MerchantID, got.Key))
	}
	if got.RequestHash != want.RequestHash {
		diffs = append(diffs, errors.New("another request hash"))
	}
	if got.StatusCode != want.StatusCode {
		diffs = append(diffs, fmt.Errorf("status %d, want %d", got.StatusCode, want.StatusCode))
	}
	if !bytes.Equal(got.Body, want.Body) {
		diffs = append(diffs, fmt.Errorf("body %q, want %q", got.Body, want.Body))
	}
	if !got.Created.Equal(want.Created) {
		diffs = append(diffs, fmt.Errorf("created %v, want %v", got.Created, want.Created))
	}
	if len(diffs) > 0 {
		rt.Fatalf("FindIdempotency(%s/%s): %v", want.MerchantID, want.Key, errors.Join(diffs...))
	}
}
