package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	sqlite3 "modernc.org/sqlite/lib"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/groupcommit"
)

// PurgeLimitMax bounds the rows one DeleteIdempotencyBefore deletes, so
// that a purge is a short transaction that does not stall the writer.
const PurgeLimitMax = 10_000

// op is one unit of work for the writer: a Write, or (w nil) a purge of
// idempotency records.
type op struct {
	w *surgepay.Write
	// sale: the arguments of w's statement if w is a sale (saleArgs),
	// made before the writer sees it.
	sale []driver.NamedValue
	// run, if set (w nil), is work of its own on the writer: a webhook
	// dispatcher's claim or results.
	run func(ctx context.Context, w *writer) error
	// wait: like Write.ProviderActed, the op records what already happened
	// elsewhere (a webhook delivered), so a full queue is waited out.
	wait bool

	purgeBefore time.Time
	purgeLimit  int
	purged      int // set by the writer
}

// writer holds the statements prepared on the one writer connection. Only
// the committer's single goroutine uses it.
type writer struct {
	conn *sql.Conn
	// lockWait bounds beginWrite's wait for the write lock (Config.BusyTimeout);
	// lockRetryMax is Config.WriteLockRetryMax.
	lockWait, lockRetryMax time.Duration
	// applyBudget is Config.ApplyBudget: past it, a transaction takes no
	// more of its batch's Writes (0: no budget).
	applyBudget time.Duration

	begin, commit, rollback, savepoint, release, rollbackTo *sql.Stmt

	insIdempotency, insMerchant, insAPIKey                    *sql.Stmt
	revokeAPIKey, merchantStatus, expireAPIKey, useAPIKey     *sql.Stmt
	bumpCredentials, insAudit                                 *sql.Stmt
	insCustomer, updCustomer, delCustomer, delCustomerMethods *sql.Stmt
	customerVersion                                           *sql.Stmt
	insPaymentMethod, delPaymentMethod                        *sql.Stmt
	insPayment, updPayment, paymentVersion                    *sql.Stmt
	insStaged, delStaged                                      *sql.Stmt
	insSale                                                   *rawStmt
	insEvents                                                 [eventStmtsCached + 1]*sql.Stmt // by rows; [0] unused
	webhook                                                   webhookStmts
	attempts                                                  attemptStmts
	analytics                                                 analyticsStmts

	// idem is the memory part of the index of idempotency keys, and
	// idemSt its statements (idemindex.go).
	idem   *idemIndex
	idemSt idemStmts
	// cust and custSt merge payments into payments_by_customer (custindex.go).
	cust   custMerge
	custSt custStmts

	// times sums the phases of the commits (commitphases.go).
	times commitTimer
}

// setCols returns "a = ?, b = ?" for the columns of cols after the first skip.
func setCols(cols string, skip int) string {
	names := strings.Split(cols, ", ")[skip:]
	for i, n := range names {
		names[i] = n + " = ?"
	}
	return strings.Join(names, ", ")
}

func insertSQL(table, cols string) string {
	return "INSERT INTO " + table + " (" + cols + ") VALUES " + placeholders(strings.Count(cols, ",")+1)
}

func (w *writer) prepare(ctx context.Context, conn *sql.Conn) error {
	w.conn = conn
	stmts := []struct {
		dst   **sql.Stmt
		query string
	}{
		// IMMEDIATE: take the write lock at BEGIN, not at the first write.
		{&w.begin, "BEGIN IMMEDIATE"},
		{&w.commit, "COMMIT"},
		{&w.rollback, "ROLLBACK"},
		{&w.savepoint, "SAVEPOINT w"},
		{&w.release, "RELEASE w"},
		{&w.rollbackTo, "ROLLBACK TO w"},
		// A record whose key idempotency_index holds is not inserted; the
		// newer keys were checked by claimIdempotency, and a probe (?8)
		// NULL says the filter has never seen the key (as in the trigger
		// of sales, migration 0011).
		{&w.insIdempotency, "INSERT INTO idempotency (rowid, " + idempotencyCols + ") SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7 " +
			"WHERE ?8 IS NULL OR NOT EXISTS (SELECT 1 FROM idempotency_index x JOIN idempotency i ON i.rowid = x.row " +
			"WHERE x.run IN (SELECT run FROM idempotency_runs) AND x.hash = ?8 AND i.merchant_id = ?2 AND i.key = ?3)"},
		{&w.insMerchant, insertSQL("merchants", merchantCols)},
		{&w.insAPIKey, insertSQL("api_keys", apiKeyCols)},
		{&w.revokeAPIKey, "UPDATE api_keys SET revoked = 1 WHERE id = ?"},
		{&w.merchantStatus, "UPDATE merchants SET disabled = ? WHERE id = ?"},
		{&w.expireAPIKey, "UPDATE api_keys SET expires = min(coalesce(expires, ?1), ?1) WHERE id = ?2"},
		{&w.useAPIKey, "UPDATE api_keys SET last_used = max(coalesce(last_used, ?1), ?1) WHERE id = ?2"},
		{&w.bumpCredentials, "UPDATE credentials_generation SET generation = generation + 1"},
		{&w.insAudit, insertSQL("audit_events", auditCols)},
		{&w.insCustomer, insertSQL("customers", customerCols)},
		{&w.updCustomer, "UPDATE customers SET " + setCols(customerCols, 2) + " WHERE merchant_id = ? AND id = ? AND version = ?"},
		{&w.delCustomer, "DELETE FROM customers WHERE merchant_id = ? AND id = ? AND version = ?"},
		{&w.delCustomerMethods, "DELETE FROM payment_methods WHERE merchant_id = ? AND customer_id = ?"},
		{&w.customerVersion, "SELECT version FROM customers WHERE merchant_id = ? AND id = ?"},
		{&w.insPaymentMethod, insertSQL("payment_methods", paymentMethodCols)},
		{&w.delPaymentMethod, "DELETE FROM payment_methods WHERE merchant_id = ? AND id = ?"},
		{&w.insPayment, insertSQL("payments", paymentWriteCols)},
		{&w.updPayment, "UPDATE payments SET " + setCols(paymentWriteCols, 2) + " WHERE merchant_id = ? AND id = ? AND version = ?"},
		{&w.paymentVersion, "SELECT version FROM payments WHERE merchant_id = ? AND id = ?"},
		{&w.insStaged, insertSQL("staged_captures", stagedCols)},
		// One statement for any number of IDs: a JSON array bound as one parameter.
		{&w.delStaged, "DELETE FROM staged_captures WHERE id IN (SELECT value FROM json_each(?))"},
	}
	for n := 1; n <= eventStmtsCached; n++ {
		stmts = append(stmts, struct {
			dst   **sql.Stmt
			query string
		}{&w.insEvents[n], insertEventsSQL(n)})
	}
	for _, s := range stmts {
		st, err := conn.PrepareContext(ctx, s.query)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", s.query, err)
		}
		*s.dst = st
	}
	// OR ROLLBACK (and payment_events' above): any error but the
	// trigger's guard rolls back the whole transaction here anyway
	// (commitTx), and a statement that would roll back only itself keeps
	// a statement journal, a copy of every page it changes (migration
	// 0012).
	var err error
	if w.insSale, err = prepareRaw(ctx, conn, "INSERT OR ROLLBACK INTO sales ("+saleCols+") VALUES "+placeholders(saleColsN)); err != nil {
		return fmt.Errorf("prepare the sale's statement: %w", err)
	}
	if err := w.webhook.prepare(ctx, conn); err != nil {
		return err
	}
	if err := w.idemSt.prepare(ctx, conn); err != nil {
		return err
	}
	if err := w.custSt.prepare(ctx, conn); err != nil {
		return err
	}
	return w.analytics.prepare(ctx, conn)
}

func insertEventsSQL(rows int) string {
	var b strings.Builder
	b.WriteString("INSERT OR ROLLBACK INTO payment_events (" + eventCols + ") VALUES ")
	row := placeholders(eventColsN)
	for i := range rows {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(row)
	}
	return b.String()
}

func (w *writer) close() error {
	var errs []error
	for _, st := range []*sql.Stmt{w.begin, w.commit, w.rollback, w.savepoint, w.release, w.rollbackTo,
		w.insIdempotency, w.insMerchant, w.insAPIKey, w.revokeAPIKey, w.merchantStatus, w.expireAPIKey, w.useAPIKey, w.bumpCredentials, w.insAudit, w.insCustomer, w.updCustomer, w.delCustomer,
		w.delCustomerMethods, w.customerVersion, w.insPaymentMethod, w.delPaymentMethod, w.insPayment,
		w.updPayment, w.paymentVersion, w.insStaged, w.delStaged, w.attempts.upsert} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	for _, st := range w.insEvents {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	errs = append(errs, w.insSale.Close(), w.webhook.close(), w.analytics.close(), w.idemSt.close(), w.custSt.close())
	return errors.Join(errs...)
}

// Apply stores w atomically, group-committed with concurrent Applies, and
// returns once it is durable or refused. See surgepay.Store for the guards.
// A full write queue is EUNAVAILABLE "write_queue_full" with RetryAfter;
// Apply after Close is EUNAVAILABLE "store_closed". Once queued, a Write
// goes ahead even if ctx ends, and Apply waits to report its outcome.
func (db *DB) Apply(ctx context.Context, w *surgepay.Write) error {
	if w == nil {
		return errors.New("apply: nil Write")
	}
	if len(w.Events) > eventsPerWriteMax {
		return fmt.Errorf("apply: %d events in one Write, at most %d", len(w.Events), eventsPerWriteMax)
	}
	if err := w.Validate(); err != nil {
		return err
	}
	if err := checkStaged(w); err != nil {
		return err
	}
	if r := w.Idempotency; r != nil {
		// Compressed before the writer, which is the bottleneck, sees it
		// (by a compressor goroutine, not the caller's: storedBody).
		cw, rec := *w, *r
		rec.Body = storedBody(r.Body)
		cw.Idempotency = &rec
		w = &cw
	}
	o := &op{w: w}
	if isSale(w) {
		var err error
		if o.sale, err = saleArgs(w); err != nil {
			return fmt.Errorf("apply: %w", err)
		}
		// submit returns once the writer is done with o: committed, rolled
		// back, or never queued.
		defer releaseSaleArgs(o.sale)
	}
	return db.submit(ctx, o)
}

// DeleteIdempotencyBefore deletes up to limit (at most PurgeLimitMax)
// records created before t, through the writer, and returns how many it
// deleted.
func (db *DB) DeleteIdempotencyBefore(ctx context.Context, t time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	o := &op{purgeBefore: t, purgeLimit: min(limit, PurgeLimitMax)}
	if err := db.submit(ctx, o); err != nil {
		return 0, err
	}
	return o.purged, nil
}

func (db *DB) submit(ctx context.Context, o *op) error {
	start := time.Now()
	var err error
	if o.wait || o.w != nil && o.w.ProviderActed {
		err = db.commit.SubmitWait(ctx, o)
	} else {
		err = db.commit.Submit(ctx, o)
	}
	surgepay.CountStoreTime(ctx, time.Since(start))
	switch {
	case errors.Is(err, groupcommit.ErrQueueFull):
		return &surgepay.Error{Code: surgepay.EUNAVAILABLE, Reason: "write_queue_full", RetryAfter: 1,
			Message: "the store is busy: its write queue is full; retry shortly"}
	case errors.Is(err, groupcommit.ErrClosed):
		return &surgepay.Error{Code: surgepay.EUNAVAILABLE, Reason: "store_closed",
			Message: "the store is closed"}
	case isBusy(err): // after BusyTimeout, or SubmitWaitMax for a Write the provider acted on
		return &surgepay.Error{Code: surgepay.EUNAVAILABLE, Reason: "store_locked", RetryAfter: 1,
			Message: "the database's write lock stayed taken by another process; retry shortly"}
	}
	return err
}

// commitBatch is the committer's CommitFunc: the batch in one transaction,
// each item in a savepoint. If the transaction fails as a whole (a
// statement error that is not a guard, an I/O error at COMMIT), each item
// is committed alone, so that one bad Write cannot fail its neighbours;
// only then are errors reported. A batch that could not take the write
// lock (SQLITE_BUSY after BusyTimeout) fails as a whole.
func (db *DB) commitBatch(items []*groupcommit.Item[*op]) error {
	sortBatch(items)
	err := db.commitTx(items)
	if err == nil || len(items) == 1 || isBusy(err) {
		// Busy: the write lock stayed taken for lockWait; trying each
		// Write alone would wait that long again for each.
		return err
	}
	for i, it := range items {
		if err := db.commitTx(items[i : i+1]); err != nil {
			it.Err = err
		}
	}
	return nil
}

// sortBatch orders a batch's new payments by ID. IDs increase (NewID), so
// the payments, their keys and staged records are then appended at the
// ends of their B-trees, where a full leaf is split by starting a new one;
// in arrival order a split rebalanced three leaves and their parent. The
// Writes of one batch were concurrent: any order is one they could have
// arrived in. Writes without a new payment keep their place, before.
func sortBatch(items []*groupcommit.Item[*op]) {
	slices.SortStableFunc(items, func(a, b *groupcommit.Item[*op]) int {
		return strings.Compare(newPaymentID(a.Value), newPaymentID(b.Value))
	})
}

func newPaymentID(o *op) string {
	if o.w == nil || o.w.PaymentInsert == nil {
		return ""
	}
	return o.w.PaymentInsert.ID
}

// commitTx commits items in one transaction. A guard failure is the item's
// Err and rolls back only its savepoint; any other error rolls back the
// whole transaction and is returned. Once the transaction has run for the
// writer's applyBudget it takes no more items: it commits those it has
// applied and marks the rest Later, for the next batch.
func (db *DB) commitTx(items []*groupcommit.Item[*op]) error {
	w := &db.writer
	wait := w.lockWait
	if providerActed(items) {
		// What the network already did is recorded, not refused: wait for
		// the lock as long as such a Write waits for room in the queue.
		wait = max(wait, groupcommit.SubmitWaitMax)
	}
	var d [commitPhases]time.Duration
	start := time.Now()
	// lap ends phase p and labels the writer with the next one
	// (phaseLabels; commitPhases: outside commitTx).
	lap := func(p, next int) {
		now := time.Now()
		d[p], start = d[p]+now.Sub(start), now
		if next < commitPhases {
			pprof.SetGoroutineLabels(phaseLabels[next])
		} else {
			pprof.SetGoroutineLabels(betweenLabels)
		}
	}
	defer pprof.SetGoroutineLabels(betweenLabels)
	if db.walRestart.Swap(false) {
		pprof.SetGoroutineLabels(phaseLabels[phaseCommit])
		db.restartWAL()
		lap(phaseCommit, phaseLock)
	} else {
		pprof.SetGoroutineLabels(phaseLabels[phaseLock])
	}
	if err := w.beginWrite(wait); err != nil {
		return fmt.Errorf("sqlite: begin: %w", err)
	}
	lap(phaseLock, phaseApply)
	began := start // the budget counts from the lock: waiting for it, the writer sleeps
	rollback := func() {
		_ = w.control(w.rollback) // fails if SQLite has rolled back already
		w.idem.rolledBack()
		w.cust.rolledBack()
	}
	if err := w.absorb(); err != nil {
		rollback()
		return fmt.Errorf("sqlite: commit batch of %d: %w", len(items), err)
	}
	var later []*groupcommit.Item[*op] // left for the next batch, once this one commits
	for i, it := range items {
		if i > 0 && w.applyBudget > 0 && time.Since(began) >= w.applyBudget {
			items, later = items[:i], items[i:]
			break
		}
		if err := w.applyItem(it); err != nil {
			rollback()
			return fmt.Errorf("sqlite: commit batch of %d: %w", len(items), err)
		}
	}
	// The batch's analytics counters: one statement, in its transaction.
	if err := w.applyAnalytics(items); err != nil {
		rollback()
		return fmt.Errorf("sqlite: commit batch of %d: %w", len(items), err)
	}
	lap(phaseApply, phaseMerge)
	// A chunk of the deferred indexes' tails (idemindex.go, custindex.go),
	// and the memory table's entries saved as it fills.
	if err := w.mergeStep(); err != nil {
		rollback()
		return fmt.Errorf("sqlite: commit batch of %d: %w", len(items), err)
	}
	if err := w.mergeCustomers(len(items)); err != nil {
		rollback()
		return fmt.Errorf("sqlite: commit batch of %d: %w", len(items), err)
	}
	if err := w.saveStep(); err != nil {
		rollback()
		return fmt.Errorf("sqlite: commit batch of %d: %w", len(items), err)
	}
	lap(phaseMerge, phaseCommit)
	if err := w.control(w.commit); err != nil {
		rollback()
		return fmt.Errorf("sqlite: commit batch of %d: commit: %w", len(items), err)
	}
	lap(phaseCommit, commitPhases)
	for _, it := range later {
		it.Later = true
	}
	info := commitInfo{items: len(items), later: len(later), idemMerged: w.idem.txMerged, custMerged: w.cust.txStep}
	w.idem.committed()
	w.cust.committed()
	w.times.observe(d, info)
	return nil
}

// providerActed reports whether items hold a Write that records what
// already happened elsewhere (Write.ProviderActed, or an op with wait).
func providerActed(items []*groupcommit.Item[*op]) bool {
	for _, it := range items {
		if o := it.Value; o.wait || o.w != nil && o.w.ProviderActed {
			return true
		}
	}
	return false
}

// beginWrite begins the write transaction (BEGIN IMMEDIATE). While another
// process holds the write lock, BEGIN IMMEDIATE fails at once with
// SQLITE_BUSY (the connection has no busy timeout) and starts no
// transaction; beginWrite tries again after a sleep that doubles from
// writeLockRetryMin up to lockRetryMax, for up to wait.
func (w *writer) beginWrite(wait time.Duration) error {
	deadline := time.Now().Add(wait)
	pause := writeLockRetryMin
	for {
		err := w.control(w.begin)
		if err == nil || !isBusy(err) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(pause)
		pause = min(2*pause, w.lockRetryMax)
	}
}

// isBusy reports whether err is SQLite's SQLITE_BUSY (any extended code).
func isBusy(err error) bool {
	var se interface{ Code() int } // *sqlite.Error of modernc.org/sqlite
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_BUSY
}

// control runs a transaction-control statement: not counted, shared by the
// batch, never cancelled.
func (w *writer) control(st *sql.Stmt) error {
	_, err := st.ExecContext(context.Background())
	return err
}

// needsSavepoint reports whether a failed guard of wr could follow a change
// the Write already made, which only a savepoint can undo. Most Writes have
// one guard, checked by their first statement (an idempotency insert, or a
// versioned update), so a failure has changed nothing; they skip the
// savepoint, whose SAVEPOINT, RELEASE and sub-journal were half the
// writer's time in a profile of 2,000 sales/s.
func needsSavepoint(wr *surgepay.Write) bool {
	versioned := 0
	for _, g := range []bool{wr.CustomerUpdate != nil, wr.CustomerDelete != nil, wr.PaymentUpdate != nil,
		wr.WebhookEndpointInsert != nil, wr.WebhookEndpointRoll != nil, wr.WebhookResend != nil} {
		if g {
			versioned++
		}
	}
	switch {
	case versioned == 0:
		return false // at most the idempotency guard, which runs first
	case versioned > 1 || wr.Idempotency != nil:
		return true
	}
	// One versioned guard: the statements that applyWrite runs before it.
	before := wr.Merchant != nil || wr.APIKey != nil || wr.APIKeyRevoke != "" || wr.CustomerInsert != nil ||
		wr.MerchantStatus != nil || wr.APIKeyExpire != nil || len(wr.APIKeysUsed) > 0 || len(wr.Audit) > 0
	if wr.PaymentUpdate != nil {
		before = before || wr.PaymentMethodInsert != nil || wr.PaymentMethodDelete != nil || wr.PaymentInsert != nil
	}
	return before
}

func (w *writer) applyItem(it *groupcommit.Item[*op]) error {
	it.Err = nil
	o := it.Value
	mark := len(w.idem.pending)
	if o.w != nil && !needsSavepoint(o.w) {
		err := w.applyWrite(it.Ctx, o.w, o.sale)
		var guard *surgepay.Error
		if errors.As(err, &guard) {
			it.Err = guard // the guard's statement changed nothing
			w.idem.itemFailed(mark)
			return nil
		}
		return err
	}
	if err := w.control(w.savepoint); err != nil {
		return fmt.Errorf("savepoint: %w", err)
	}
	var err error
	switch {
	case o.w != nil:
		err = w.applyWrite(it.Ctx, o.w, o.sale)
	case o.run != nil:
		err = o.run(it.Ctx, w)
	default:
		o.purged, err = w.purge(it.Ctx, o)
	}
	var guard *surgepay.Error
	if errors.As(err, &guard) {
		if err := w.control(w.rollbackTo); err != nil {
			return fmt.Errorf("rollback to savepoint: %w", err)
		}
		it.Err = guard
		w.idem.itemFailed(mark)
	} else if err != nil {
		return err
	}
	if err := w.control(w.release); err != nil {
		return fmt.Errorf("release savepoint: %w", err)
	}
	return nil
}

// exec runs a counted statement of kind for the request in ctx and returns
// the rows it changed. The statement runs even if ctx has ended: the Write
// was accepted, and its caller waits for the outcome.
func exec(ctx context.Context, kind int, st *sql.Stmt, args ...any) (int64, error) {
	surgepay.CountStatement(ctx, kind)
	res, err := st.ExecContext(context.Background(), args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// errIdempotencyExists is the guard error of an idempotency key already
// stored.
func errIdempotencyExists() error {
	return &surgepay.Error{Code: surgepay.ECONFLICT, Reason: surgepay.ReasonIdempotencyKeyExists,
		Param: "Idempotency-Key", Message: "a request with this Idempotency-Key has already been stored"}
}

// applyWrite runs the statements of one Write in the order of its fields;
// a sale (idempotency record, payment, staged record) is one statement (see
// isSale; sale: its arguments, or nil), plus its events. A failed guard
// is returned as a *surgepay.Error.
func (w *writer) applyWrite(ctx context.Context, wr *surgepay.Write, sale []driver.NamedValue) error {
	if isSale(wr) {
		if err := w.insertSale(ctx, wr, sale); err != nil {
			return err
		}
		if err := w.insertEvents(ctx, wr.Events); err != nil {
			return err
		}
		return w.insertWebhook(ctx, wr.Webhook)
	}
	if r := wr.Idempotency; r != nil {
		probe, row, err := w.claimIdempotency(ctx, r)
		if err != nil {
			return err
		}
		args := append(append([]any{row}, idempotencyArgs(r)...), probe)
		n, err := exec(ctx, surgepay.StmtInsert, w.insIdempotency, args...)
		if err != nil {
			return fmt.Errorf("insert idempotency record: %w", err)
		}
		if n == 0 {
			return errIdempotencyExists()
		}
		if probe != nil {
			w.idem.filter.falsePositive(idemInsert)
		}
	}
	if m := wr.Merchant; m != nil {
		if _, err := exec(ctx, surgepay.StmtInsert, w.insMerchant, m.ID, m.Name, timeArg(m.Created), m.Disabled); err != nil {
			return fmt.Errorf("insert merchant %s: %w", m.ID, err)
		}
	}
	if k := wr.APIKey; k != nil {
		if _, err := exec(ctx, surgepay.StmtInsert, w.insAPIKey, apiKeyArgs(k)...); err != nil {
			return fmt.Errorf("insert API key %s: %w", k.ID, err)
		}
	}
	if id := wr.APIKeyRevoke; id != "" {
		if _, err := exec(ctx, surgepay.StmtUpdate, w.revokeAPIKey, id); err != nil {
			return fmt.Errorf("revoke API key %s: %w", id, err)
		}
	}
	if err := w.applyLifecycle(ctx, wr); err != nil {
		return err
	}
	if err := w.applyCustomer(ctx, wr); err != nil {
		return err
	}
	if err := w.applyPaymentMethod(ctx, wr); err != nil {
		return err
	}
	if err := w.applyPayment(ctx, wr); err != nil {
		return err
	}
	if err := w.applyDisputes(ctx, wr); err != nil { // disputes.go
		return err
	}
	if err := w.insertEvents(ctx, wr.Events); err != nil {
		return err
	}
	if err := w.applyWebhook(ctx, wr); err != nil {
		return err
	}
	if err := w.applyAttempt(ctx, wr); err != nil {
		return err
	}
	return w.applyStaged(ctx, wr)
}

// applyLifecycle stores a Write's merchant status, API-key expiry and
// last-used times, and its audit rows.
func (w *writer) applyLifecycle(ctx context.Context, wr *surgepay.Write) error {
	if ms := wr.MerchantStatus; ms != nil {
		if _, err := exec(ctx, surgepay.StmtUpdate, w.merchantStatus, ms.Disabled, ms.MerchantID); err != nil {
			return fmt.Errorf("set merchant %s disabled=%v: %w", ms.MerchantID, ms.Disabled, err)
		}
	}
	if x := wr.APIKeyExpire; x != nil {
		if _, err := exec(ctx, surgepay.StmtUpdate, w.expireAPIKey, timeArg(x.Expires), x.ID); err != nil {
			return fmt.Errorf("expire API key %s: %w", x.ID, err)
		}
	}
	// Other processes that cache API keys poll the generation
	// (CredentialsGenerationReader); it moves when this transaction
	// commits, with the change.
	if wr.ChangesCredentials() {
		if _, err := exec(ctx, surgepay.StmtUpdate, w.bumpCredentials); err != nil {
			return fmt.Errorf("raise the credentials generation: %w", err)
		}
	}
	// One statement per key: this is the background flush, at most
	// APIKeysUsedPerWriteMax keys per interval, never a request's path.
	for _, u := range wr.APIKeysUsed {
		if _, err := exec(ctx, surgepay.StmtUpdate, w.useAPIKey, timeArg(u.At), u.ID); err != nil {
			return fmt.Errorf("API key %s last used: %w", u.ID, err)
		}
	}
	for _, e := range wr.Audit {
		if _, err := exec(ctx, surgepay.StmtInsert, w.insAudit, auditArgs(e)...); err != nil {
			return fmt.Errorf("insert audit event %s: %w", e.ID, err)
		}
	}
	return nil
}

func (w *writer) applyCustomer(ctx context.Context, wr *surgepay.Write) error {
	if c := wr.CustomerInsert; c != nil {
		args, err := customerArgs(c)
		if err == nil {
			_, err = exec(ctx, surgepay.StmtInsert, w.insCustomer, args...)
		}
		if err != nil {
			return fmt.Errorf("insert customer %s: %w", c.ID, err)
		}
	}
	if c := wr.CustomerUpdate; c != nil {
		args, err := customerArgs(c)
		if err != nil {
			return fmt.Errorf("update customer %s: %w", c.ID, err)
		}
		n, err := exec(ctx, surgepay.StmtUpdate, w.updCustomer, append(args[2:], c.MerchantID, c.ID, c.Version-1)...)
		if err != nil {
			return fmt.Errorf("update customer %s: %w", c.ID, err)
		}
		if n == 0 {
			return staleOrMissing(ctx, w.customerVersion, "customer", c.MerchantID, c.ID)
		}
	}
	if c := wr.CustomerDelete; c != nil {
		n, err := exec(ctx, surgepay.StmtDelete, w.delCustomer, c.MerchantID, c.ID, c.Version)
		if err != nil {
			return fmt.Errorf("delete customer %s: %w", c.ID, err)
		}
		if n == 0 {
			return staleOrMissing(ctx, w.customerVersion, "customer", c.MerchantID, c.ID)
		}
		if _, err := exec(ctx, surgepay.StmtDelete, w.delCustomerMethods, c.MerchantID, c.ID); err != nil {
			return fmt.Errorf("delete payment methods of customer %s: %w", c.ID, err)
		}
	}
	return nil
}

func (w *writer) applyPaymentMethod(ctx context.Context, wr *surgepay.Write) error {
	if pm := wr.PaymentMethodInsert; pm != nil {
		if _, err := exec(ctx, surgepay.StmtInsert, w.insPaymentMethod, paymentMethodArgs(pm)...); err != nil {
			return fmt.Errorf("insert payment method %s: %w", pm.ID, err)
		}
	}
	if pm := wr.PaymentMethodDelete; pm != nil {
		if _, err := exec(ctx, surgepay.StmtDelete, w.delPaymentMethod, pm.MerchantID, pm.ID); err != nil {
			return fmt.Errorf("delete payment method %s: %w", pm.ID, err)
		}
	}
	return nil
}

func (w *writer) applyPayment(ctx context.Context, wr *surgepay.Write) error {
	if p := wr.PaymentInsert; p != nil {
		args, err := paymentArgs(p)
		if err == nil {
			_, err = exec(ctx, surgepay.StmtInsert, w.insPayment, args...)
		}
		if err != nil {
			return fmt.Errorf("insert payment %s: %w", p.ID, err)
		}
		w.cust.tx++
	}
	if p := wr.PaymentUpdate; p != nil {
		args, err := paymentArgs(p)
		if err != nil {
			return fmt.Errorf("update payment %s: %w", p.ID, err)
		}
		n, err := exec(ctx, surgepay.StmtUpdate, w.updPayment, append(args[2:], p.MerchantID, p.ID, p.Version-1)...)
		if err != nil {
			return fmt.Errorf("update payment %s: %w", p.ID, err)
		}
		if n == 0 {
			return staleOrMissing(ctx, w.paymentVersion, "payment", p.MerchantID, p.ID)
		}
	}
	return nil
}

// staleOrMissing tells, after a versioned UPDATE or DELETE changed no row,
// whether the row is gone (ENOTFOUND) or at another version (ECONFLICT
// "concurrent_update"). It costs a SELECT on the failure path only.
func staleOrMissing(ctx context.Context, version *sql.Stmt, object, merchantID, id string) error {
	surgepay.CountStatement(ctx, surgepay.StmtSelect)
	var v int64
	err := version.QueryRowContext(context.Background(), merchantID, id).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return surgepay.NotFound("id", object)
	}
	if err != nil {
		return fmt.Errorf("read version of %s %s: %w", object, id, err)
	}
	return surgepay.Conflict(surgepay.ReasonConcurrentUpdate,
		"the %s was changed by another request at the same time; retry", object)
}

// insertEvents inserts events with one multi-row INSERT.
func (w *writer) insertEvents(ctx context.Context, events []*surgepay.Event) error {
	if len(events) == 0 {
		return nil
	}
	var st *sql.Stmt
	if len(events) <= eventStmtsCached {
		st = w.insEvents[len(events)]
	} else {
		// Rare: more rows than the cached statements have.
		var err error
		if st, err = w.conn.PrepareContext(context.Background(), insertEventsSQL(len(events))); err != nil {
			return fmt.Errorf("prepare insert of %d events: %w", len(events), err)
		}
		defer st.Close() //nolint:errcheck // prepared for this call only: closing it loses nothing
	}
	args := make([]any, 0, len(events)*eventColsN)
	for _, e := range events {
		args = eventArgs(args, e)
	}
	if _, err := exec(ctx, surgepay.StmtInsert, st, args...); err != nil {
		return fmt.Errorf("insert %d events of payment %s: %w", len(events), events[0].PaymentID, err)
	}
	return nil
}
