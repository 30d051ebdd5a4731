package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	sqlite3 "modernc.org/sqlite/lib"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/internal/wait"
)

// The embedded stage: staged capture records (surgepay.StagedStore) live
// in the table staged_captures, written in the Write of their sale (one
// statement with the payment, see isSale) and deleted by the Write that
// records their settlement (Write.StagedAck).

// Limits of the stage.
const (
	// StagedFetchMax bounds one FetchStaged: a page of settlement work
	// (about 4 MiB of sealed records). It is settle.BatchSizeMaxLimit, so
	// that a settlement batch is one page.
	StagedFetchMax = 10_000
	// StagedAckMax bounds Write.StagedAck, so that settlement can
	// acknowledge a whole fetch in one Write.
	StagedAckMax = StagedFetchMax
)

var _ surgepay.StagedStore = (*DB)(nil)

const stagedCols = "id, merchant_id, payment_id, sealed, created"

func stagedArgs(r *surgepay.StagedRecord) []any {
	return []any{r.ID, r.MerchantID, r.PaymentID, r.Sealed, timeArg(r.Created)}
}

// PaymentsFindMax bounds the keys of one FindPayments: a settlement batch.
const PaymentsFindMax = StagedFetchMax

var _ surgepay.PaymentsFinder = (*DB)(nil)

// sqlPaymentsFind reads the payments named by a JSON array of [merchant,
// id] pairs: one probe of the primary key per pair.
const sqlPaymentsFind = "SELECT " + paymentCols + " FROM payments WHERE (merchant_id, id) IN " +
	"(SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?))"

// FindPayments returns the payments named by keys (at most
// PaymentsFindMax) that exist, in any order, with one statement.
// Settlement loads a batch with it: one read per record spent a third of
// settle's CPU on SQLite (BenchmarkSettle).
func (db *DB) FindPayments(ctx context.Context, keys []surgepay.PaymentKey) ([]*surgepay.Payment, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	if len(keys) > PaymentsFindMax {
		return nil, fmt.Errorf("find %d payments at once, at most %d", len(keys), PaymentsFindMax)
	}
	pairs := make([][2]string, len(keys))
	for i, k := range keys {
		pairs[i] = [2]string{k.MerchantID, k.ID}
	}
	arg, err := json.Marshal(pairs)
	if err != nil {
		return nil, fmt.Errorf("find %d payments: %w", len(keys), err)
	}
	defer counted(ctx)()
	rows, err := db.read.QueryContext(ctx, sqlPaymentsFind, string(arg))
	ps, err := scanAll(rows, err, scanPayment)
	if err != nil {
		return nil, fmt.Errorf("find %d payments: %w", len(keys), err)
	}
	return ps, nil
}

func scanStaged(r scanner) (*surgepay.StagedRecord, error) {
	var rec surgepay.StagedRecord
	var created sql.NullInt64
	if err := r.Scan(&rec.ID, &rec.MerchantID, &rec.PaymentID, &rec.Sealed, &created); err != nil {
		return nil, err
	}
	rec.Created = timeOf(created)
	return &rec, nil
}

// saleCols are the columns of the view sales (migration 0012): the
// idempotency record (with its rowid and hash), the payment and the staged
// record.
const saleCols = "idem_rowid, idem_hash, idem_merchant_id, idem_key, idem_request_hash, idem_status_code, idem_body, idem_created, " +
	paymentWriteCols + ", staged_id, staged_merchant_id, staged_payment_id, staged_sealed, staged_created"

// saleColsN is the number of columns in saleCols.
const saleColsN = 8 + paymentWriteColsN + 5

// isSale reports whether w is a sale, which one INSERT INTO sales stores: a
// PaymentInsert, perhaps an Idempotency record, a Staged record and Events
// (a statement of their own), nothing else. Any other Write takes the
// general path, one statement per part.
func isSale(w *surgepay.Write) bool {
	return w.PaymentInsert != nil &&
		w.Merchant == nil && w.APIKey == nil && w.APIKeyRevoke == "" &&
		w.CustomerInsert == nil && w.CustomerUpdate == nil && w.CustomerDelete == nil &&
		w.PaymentMethodInsert == nil && w.PaymentMethodDelete == nil &&
		w.PaymentUpdate == nil && len(w.StagedAck) == 0 &&
		w.MerchantStatus == nil && w.APIKeyExpire == nil && len(w.APIKeysUsed) == 0 && len(w.Audit) == 0
}

// checkStaged reports a Write whose stage parts the store cannot take.
func checkStaged(w *surgepay.Write) error {
	if len(w.StagedAck) > StagedAckMax {
		return fmt.Errorf("apply: %d staged records acknowledged in one Write, at most %d", len(w.StagedAck), StagedAckMax)
	}
	if r := w.Staged; r != nil && (r.ID == "" || len(r.Sealed) == 0) {
		return errors.New("apply: staged record without an ID or sealed bytes")
	}
	return nil
}

// saleArgs returns the arguments of a sale's statement (w.insSale). Apply
// makes them on the caller's goroutine, before the Write is queued: the
// writer is the bottleneck, and encoding the payment's JSON columns there
// was 15 % of its apply phase (bench/RESULTS.md, session 16). The first
// two, the idempotency record's rowid and the hash to probe, are left nil
// for the writer (claimIdempotency). They are driver values, for the raw
// statement (rawStmt).
func saleArgs(wr *surgepay.Write) ([]driver.NamedValue, error) {
	p := wr.PaymentInsert
	payment, err := paymentArgs(p)
	if err != nil {
		return nil, fmt.Errorf("insert sale %s: %w", p.ID, err)
	}
	args := saleArgBufs.Get().(*saleArgBuf)[:0]
	args, _ = appendDriverArgs(args, nil, nil)
	if r := wr.Idempotency; r != nil {
		args, err = appendDriverArgs(args, idempotencyArgs(r)...)
	} else {
		args, err = appendDriverArgs(args, nil, nil, nil, nil, nil, nil) // idem_key NULL: no record
	}
	if err == nil {
		args, err = appendDriverArgs(args, payment...)
	}
	if err == nil {
		if r := wr.Staged; r != nil {
			args, err = appendDriverArgs(args, stagedArgs(r)...)
		} else {
			args, err = appendDriverArgs(args, nil, nil, nil, nil, nil) // staged_id NULL: no record
		}
	}
	if err != nil {
		releaseSaleArgs(args)
		return nil, fmt.Errorf("insert sale %s: %w", p.ID, err)
	}
	return args, nil
}

// saleArgBuf holds a sale's arguments; Apply takes one from saleArgBufs
// and gives it back once the writer is done with its Write (~1.5 KB a
// sale less to allocate and collect).
type saleArgBuf = [saleColsN]driver.NamedValue

var saleArgBufs = sync.Pool{New: func() any { return new(saleArgBuf) }}

// releaseSaleArgs gives args, from saleArgs, back to saleArgBufs. The
// caller must not use args after it. The values stay until the next sale
// overwrites every one of them (or the pool drops the buffer at a
// collection): clearing them cost more than the pool saved (0.4 % of the
// CPU, write barriers while the collector marks), and they hold no card
// data, only what the sale stored.
func releaseSaleArgs(args []driver.NamedValue) {
	if cap(args) != saleColsN {
		return
	}
	saleArgBufs.Put((*saleArgBuf)(args[:saleColsN]))
}

// insertSale stores a sale (see isSale) with one counted statement, args
// from saleArgs (made here if nil); the Write's events, if any, are a
// second.
func (w *writer) insertSale(ctx context.Context, wr *surgepay.Write, args []driver.NamedValue) error {
	p := wr.PaymentInsert
	if args == nil {
		var err error
		if args, err = saleArgs(wr); err != nil {
			return err
		}
	}
	var probe any
	if r := wr.Idempotency; r != nil {
		var row int64
		var err error
		probe, row, err = w.claimIdempotency(ctx, r)
		if err != nil {
			return err
		}
		args[0].Value, args[1].Value = row, probe
	}
	surgepay.CountStatement(ctx, surgepay.StmtInsert)
	err := w.insSale.exec(args)
	// The one trigger an INSERT into sales can raise is its key guard
	// (sales_insert's RAISE(FAIL, 'surgepay: idempotency_key_exists');
	// the others guard UPDATE and DELETE: sqlite/schema.sql), so its code
	// says which.
	var se interface{ Code() int }
	if errors.As(err, &se) && se.Code() == sqlite3.SQLITE_CONSTRAINT_TRIGGER {
		return errIdempotencyExists()
	}
	if err != nil {
		return fmt.Errorf("insert sale %s: %w", p.ID, err)
	}
	if probe != nil {
		w.idem.filter.falsePositive(idemInsert)
	}
	w.cust.tx++
	return nil
}

// applyStaged runs the stage parts of a Write on the general path: the
// staged record's INSERT, and one DELETE of the acknowledged records. A
// record acknowledged twice, or unknown, is not an error: settlement may
// run again after a crash.
func (w *writer) applyStaged(ctx context.Context, wr *surgepay.Write) error {
	if r := wr.Staged; r != nil {
		if _, err := exec(ctx, surgepay.StmtInsert, w.insStaged, stagedArgs(r)...); err != nil {
			return fmt.Errorf("insert staged record %s: %w", r.ID, err)
		}
	}
	if len(wr.StagedAck) > 0 {
		ids, err := json.Marshal(wr.StagedAck)
		if err == nil {
			_, err = exec(ctx, surgepay.StmtDelete, w.delStaged, string(ids))
		}
		if err != nil {
			return fmt.Errorf("delete %d acknowledged staged records: %w", len(wr.StagedAck), err)
		}
	}
	return nil
}

// FetchStaged returns up to limit (at most StagedFetchMax) staged records
// with IDs greater than afterID, oldest first; none for limit <= 0. It sees
// the last committed batch. A record committed after a fetch may sort
// before the fetch's last ID (IDs are random within a millisecond), so
// settlement should start each pass from "" and page with afterID within
// it: acknowledged records are gone, so a pass from "" repeats nothing
// acknowledged.
func (db *DB) FetchStaged(ctx context.Context, afterID string, limit int) ([]*surgepay.StagedRecord, error) {
	if limit <= 0 {
		return nil, nil
	}
	defer counted(ctx)()
	recs, err := queryAll(ctx, db.readSt.staged, scanStaged, afterID, min(limit, StagedFetchMax))
	if err != nil {
		return nil, fmt.Errorf("fetch staged records: %w", err)
	}
	return recs, nil
}

// stagedCountChunk bounds the records one statement of StagedBacklog
// counts. Each statement is a read transaction, and while one lasts no
// checkpoint copies the WAL past its snapshot and none restarts it: one
// count(*) of a backlog of 4 M records held the WAL for 1-1.5 s, and the
// WAL then grew by thousands of pages under the event's writes. Counting
// takes ~0.4 µs a record (3 M in 1.1-1.2 s, whatever the chunk): a chunk
// of 16,384 is a read of ~6 ms.
const stagedCountChunk = 16_384

// restAfter waits readRest times the time since start, or until ctx ends:
// what a long background read (the staged count, the idempotency filter's
// rebuild) does between two of its chunks, so that it takes at most a
// quarter of a core while it runs. Back to back, the chunks of a count of
// 4 M staged records took most of a core for ~1.7 s every minute, and at
// 3,000 sales/s on 2 cores that left the writer waiting for a CPU (the
// episode at minute 24 of bench/RESULTS.md "Issue 14, session 13"); the
// filter's first rebuild began the minute-18 episodes (session 14).
func restAfter(ctx context.Context, start time.Time) error {
	return wait.Sleep(ctx, readRest*time.Since(start))
}

// readRest is how many times a chunk's duration restAfter rests.
const readRest = 3

// stagedCountQuery counts up to stagedCountChunk records after an ID, in
// ID order on the UNIQUE index's keys, and returns the last one counted
// and the creation time of the oldest record (the first in ID order: two
// probes of the key, for min() alone is one).
const stagedCountQuery = "SELECT count(*), max(id), " +
	"(SELECT created FROM staged_captures WHERE id = (SELECT min(id) FROM staged_captures)) " +
	"FROM (SELECT id FROM staged_captures WHERE id > ? ORDER BY id LIMIT ?)"

// StagedBacklog returns the number of staged records and the creation time
// of the oldest (the record FetchStaged returns first); the zero time if
// there is none. It counts the backlog in chunks of stagedCountChunk
// records, each one statement and its own short read transaction, so the
// count is not one snapshot: a record staged or removed while it runs may
// be counted or not. Between two chunks it rests (restAfter) three times
// the last one's duration, so a count of millions of records takes seconds
// of wall time; ctx ends it. It reads every record's key: call it for
// metrics, not per request.
func (db *DB) StagedBacklog(ctx context.Context) (int, time.Time, error) {
	var total int
	var oldest sql.NullInt64
	for after := ""; ; {
		var n int
		var last sql.NullString
		var first sql.NullInt64
		start := time.Now()
		done := counted(ctx)
		err := db.readSt.stagedCount.QueryRowContext(ctx, after, db.stagedChunk).Scan(&n, &last, &first)
		done()
		if err != nil {
			return 0, time.Time{}, fmt.Errorf("count staged records: %w", err)
		}
		if after == "" {
			oldest = first
		}
		total += n
		if n < db.stagedChunk || !last.Valid {
			return total, timeOf(oldest), nil
		}
		after = last.String
		if err := restAfter(ctx, start); err != nil {
			return 0, time.Time{}, fmt.Errorf("count staged records: %w", err)
		}
	}
}
