package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/surgepay/surgepay"
)

// ProcessingListMax bounds ListProcessing.
const ProcessingListMax = 1000

// readStmts are the fixed reads, prepared on the read pool (database/sql
// prepares each on a connection at its first use there, then reuses it).
type readStmts struct {
	merchant, merchants, apiKey, apiKeys         *sql.Stmt
	customer, paymentMethod, payment, processing *sql.Stmt
	paymentByRef                                 *sql.Stmt
	events, idempotency, idempotencyRow          *sql.Stmt
	staged, stagedCount                          *sql.Stmt
	credentials                                  *sql.Stmt
}

func (r *readStmts) prepare(ctx context.Context, db *sql.DB) error {
	for _, s := range []struct {
		dst   **sql.Stmt
		query string
	}{
		{&r.merchant, "SELECT " + merchantCols + " FROM merchants WHERE id = ?"},
		{&r.merchants, "SELECT " + merchantCols + " FROM merchants ORDER BY id"},
		{&r.apiKey, "SELECT " + apiKeyReadCols + apiKeyFrom + " WHERE k.hash = ?"},
		{&r.apiKeys, "SELECT " + apiKeyReadCols + apiKeyFrom + " ORDER BY k.id"},
		{&r.customer, "SELECT " + customerCols + " FROM customers WHERE merchant_id = ? AND id = ?"},
		{&r.paymentMethod, "SELECT " + paymentMethodCols + " FROM payment_methods WHERE merchant_id = ? AND id = ?"},
		{&r.payment, "SELECT " + paymentCols + " FROM payments WHERE merchant_id = ? AND id = ?"},
		{&r.processing, processingQuery},
		// processor_ref: the partial index of routed payments (0012).
		{&r.paymentByRef, "SELECT " + paymentCols + " FROM payments WHERE processor_ref = ? LIMIT 1"},
		{&r.events, "SELECT " + eventCols + " FROM payment_events WHERE merchant_id = ? AND payment_id = ? ORDER BY seq"},
		{&r.idempotency, idempotencyLookupQuery},
		{&r.idempotencyRow, "SELECT " + idempotencyCols + " FROM idempotency WHERE rowid = ?"},
		{&r.staged, "SELECT " + stagedCols + " FROM staged_captures WHERE id > ? ORDER BY id LIMIT ?"},
		{&r.stagedCount, stagedCountQuery},
		{&r.credentials, "SELECT generation FROM credentials_generation"},
	} {
		st, err := db.PrepareContext(ctx, s.query)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", s.query, err)
		}
		*s.dst = st
	}
	return nil
}

func (r *readStmts) close() error {
	var errs []error
	for _, st := range []*sql.Stmt{r.merchant, r.merchants, r.apiKey, r.apiKeys, r.customer,
		r.paymentMethod, r.payment, r.processing, r.events, r.idempotency, r.idempotencyRow, r.staged, r.stagedCount, r.credentials} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	return errors.Join(errs...)
}

// counted counts one SELECT on ctx's counter and returns a func that adds
// the time since to the store time: defer db.counted(ctx)().
func counted(ctx context.Context) func() {
	surgepay.CountStatement(ctx, surgepay.StmtSelect)
	start := time.Now()
	return func() { surgepay.CountStoreTime(ctx, time.Since(start)) }
}

// findOne scans the single row of st(args) with scan; no row is
// surgepay.NotFound(param, object).
func findOne[T any](ctx context.Context, st *sql.Stmt, scan func(scanner) (*T, error),
	param, object string, args ...any) (*T, error) {
	defer counted(ctx)()
	v, err := scan(st.QueryRowContext(ctx, args...))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, surgepay.NotFound(param, object)
	}
	if err != nil {
		return nil, fmt.Errorf("find %s: %w", object, err)
	}
	return v, nil
}

// queryAll runs st(args) and scans every row with scan.
func queryAll[T any](ctx context.Context, st *sql.Stmt, scan func(scanner) (*T, error), args ...any) ([]*T, error) {
	rows, err := st.QueryContext(ctx, args...)
	return scanAll(rows, err, scan)
}

// scanAll scans every row of rows with scan.
func scanAll[T any](rows *sql.Rows, err error, scan func(scanner) (*T, error)) ([]*T, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close() //nolint:errcheck // read-only: closing loses nothing
	var out []*T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// FindMerchant returns ENOTFOUND if no merchant has id.
func (db *DB) FindMerchant(ctx context.Context, id string) (*surgepay.Merchant, error) {
	return findOne(ctx, db.readSt.merchant, scanMerchant, "id", "merchant", id)
}

// probeQuery is Probe's read: one lookup in the merchants' primary key.
const probeQuery = `SELECT count(*) FROM merchants WHERE id = 'mer_readiness_probe'`

// Probe reads the database through a connection of its own, for a
// readiness probe (serve's /readyz): nil while the database can be read.
// Not through the API's read pool: after a restart under load the API's
// reads fill it, and a probe queued behind them waited up to 195 ms
// (issue 35), up to its second's timeout on a busier host.
func (db *DB) Probe(ctx context.Context) error {
	var n int
	if err := db.probeRead.QueryRowContext(ctx, probeQuery).Scan(&n); err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	return nil
}

// ListMerchants returns every merchant, by ID.
func (db *DB) ListMerchants(ctx context.Context) ([]*surgepay.Merchant, error) {
	defer counted(ctx)()
	ms, err := queryAll(ctx, db.readSt.merchants, scanMerchant)
	if err != nil {
		return nil, fmt.Errorf("list merchants: %w", err)
	}
	return ms, nil
}

// FindAPIKeyByHash returns the key with this hash, ENOTFOUND if none.
func (db *DB) FindAPIKeyByHash(ctx context.Context, hash []byte) (*surgepay.APIKey, error) {
	return findOne(ctx, db.readSt.apiKey, scanAPIKey, "api_key", "API key", hash)
}

// ListAPIKeys returns every API key of every merchant, by ID.
func (db *DB) ListAPIKeys(ctx context.Context) ([]*surgepay.APIKey, error) {
	defer counted(ctx)()
	ks, err := queryAll(ctx, db.readSt.apiKeys, scanAPIKey)
	if err != nil {
		return nil, fmt.Errorf("list API keys: %w", err)
	}
	return ks, nil
}

// CredentialsGeneration returns the count of changes to the standing of
// API keys (surgepay.CredentialsGenerationReader). One statement.
func (db *DB) CredentialsGeneration(ctx context.Context) (int64, error) {
	defer counted(ctx)()
	var g int64
	if err := db.readSt.credentials.QueryRowContext(ctx).Scan(&g); err != nil {
		return 0, fmt.Errorf("read the credentials generation: %w", err)
	}
	return g, nil
}

// ListAuditEvents returns a page of the audit trail that passes f,
// newest first, and whether more follow. One statement.
func (db *DB) ListAuditEvents(ctx context.Context, f surgepay.AuditFilter) ([]*surgepay.AuditEvent, bool, error) {
	q := &listQuery{}
	q.sql.WriteString("SELECT " + auditCols + " FROM audit_events WHERE 1 = 1")
	if f.MerchantID != "" {
		q.where("merchant_id = ?", f.MerchantID)
	}
	if f.ObjectID != "" {
		q.where("object_id = ?", f.ObjectID)
	}
	es, more, err := listPage(ctx, db.read, q, f.Page, scanAudit)
	if err != nil {
		return nil, false, fmt.Errorf("list audit events: %w", err)
	}
	return es, more, nil
}

// FindCustomer returns ENOTFOUND if the merchant has no customer id.
func (db *DB) FindCustomer(ctx context.Context, merchantID, id string) (*surgepay.Customer, error) {
	return findOne(ctx, db.readSt.customer, scanCustomer, "id", "customer", merchantID, id)
}

// FindPaymentMethod returns ENOTFOUND if the merchant has no payment method id.
func (db *DB) FindPaymentMethod(ctx context.Context, merchantID, id string) (*surgepay.PaymentMethod, error) {
	return findOne(ctx, db.readSt.paymentMethod, scanPaymentMethod, "id", "payment_method", merchantID, id)
}

// FindPayment returns ENOTFOUND if the merchant has no payment id. It is one
// SELECT: transactions are a column of the payment.
func (db *DB) FindPayment(ctx context.Context, merchantID, id string) (*surgepay.Payment, error) {
	return findOne(ctx, db.readSt.payment, scanPayment, "id", "payment", merchantID, id)
}

// FindPaymentByRef returns the payment authorized as ref at a configured
// processor ("stripe_eu:pi_…"), of any merchant; ENOTFOUND if none. One
// probe of a partial index that holds routed payments only.
func (db *DB) FindPaymentByRef(ctx context.Context, ref string) (*surgepay.Payment, error) {
	return findOne(ctx, db.readSt.paymentByRef, scanPayment, "reference", "payment", ref)
}

// idempotencyLookupQuery finds a merchant's record by its key's hash in
// idempotency_index: one probe of each run (migration 0013).
var idempotencyLookupQuery = "SELECT " + qualified("i", idempotencyCols) +
	" FROM idempotency_index x JOIN idempotency i ON i.rowid = x.row" +
	" WHERE x.run IN (SELECT run FROM idempotency_runs) AND x.hash = ? AND i.merchant_id = ? AND i.key = ?"

// FindIdempotency returns ENOTFOUND if the merchant has no record for key.
// The newest records are found through the writer's memory table, the
// others through idempotency_index (idemindex.go): one SELECT either way.
// A record leaves the memory table only once its entry in
// idempotency_index is committed, and the memory table is read first, so
// a record is always found in one or the other. A key the filter of
// stored keys has never seen is not looked for in idempotency_index.
func (db *DB) FindIdempotency(ctx context.Context, merchantID, key string) (*surgepay.IdempotencyRecord, error) {
	h := idemHash(merchantID, key)
	// The filter first: it holds every stored key, those of the memory
	// table included (the writer adds a commit's keys to the filter
	// before the table), and answers a new key without the memory table's
	// lock, which the writer takes after every commit: readers waiting on
	// it, thousands at a time behind a reader that lost its core, held
	// the writer up to 155 ms in a 10 s trace (bench/RESULTS.md, session 16).
	f := db.writer.idem.filter
	if f.absent(idemLookup, h) { // a new key: no SELECT (idemfilter.go)
		return nil, surgepay.NotFound("idempotency_key", "idempotency key")
	}
	for _, row := range db.writer.idem.candidates(h) {
		rec, err := findOne(ctx, db.readSt.idempotencyRow, scanIdempotency, "idempotency_key", "idempotency key", row)
		var se *surgepay.Error
		switch {
		case errors.As(err, &se) && se.Code == surgepay.ENOTFOUND: // purged
		case err != nil:
			return nil, err
		case rec.MerchantID == merchantID && rec.Key == key:
			return rec, nil
		}
	}
	rec, err := findOne(ctx, db.readSt.idempotency, scanIdempotency, "idempotency_key", "idempotency key", h, merchantID, key)
	if surgepay.ErrorCode(err) == surgepay.ENOTFOUND {
		f.falsePositive(idemLookup)
	}
	return rec, err
}

// qualified returns cols ("a, b") with each column prefixed by table.
func qualified(table, cols string) string {
	names := strings.Split(cols, ", ")
	for i, n := range names {
		names[i] = table + "." + n
	}
	return strings.Join(names, ", ")
}

// ListEvents returns a payment's events in the order they were written;
// none for another merchant's payment.
func (db *DB) ListEvents(ctx context.Context, merchantID, paymentID string) ([]*surgepay.Event, error) {
	defer counted(ctx)()
	evs, err := queryAll(ctx, db.readSt.events, scanEvent, merchantID, paymentID)
	if err != nil {
		return nil, fmt.Errorf("list events of %s: %w", paymentID, err)
	}
	return evs, nil
}

// processingQuery lists the payments to reconcile, each side through its
// partial index: payments_processing (0001), payments_requires_action
// (0020); TestListProcessingUsesIndexes holds it to them.
const processingQuery = "SELECT * FROM (SELECT " + paymentCols + " FROM payments WHERE status = 'processing' ORDER BY id LIMIT ?)" +
	" UNION ALL SELECT * FROM (SELECT " + paymentCols + " FROM payments WHERE status = 'requires_action' AND id > ? ORDER BY id LIMIT ?)"

// ListProcessing returns up to limit (at most ProcessingListMax) payments
// in processing, of every merchant, oldest first, then those in
// requires_action after actionsAfter (surgepay.Store).
func (db *DB) ListProcessing(ctx context.Context, limit int, actionsAfter string) ([]*surgepay.Payment, error) {
	if limit <= 0 {
		return nil, nil
	}
	defer counted(ctx)()
	limit = min(limit, ProcessingListMax)
	ps, err := queryAll(ctx, db.readSt.processing, scanPayment, limit, actionsAfter, surgepay.RequiresActionListed(limit))
	if err != nil {
		return nil, fmt.Errorf("list processing payments: %w", err)
	}
	return ps, nil
}

// pageLimit returns the page size: ListLimitDefault for 0, at most ListLimitMax.
func pageLimit(n int) int {
	if n <= 0 {
		return surgepay.ListLimitDefault
	}
	return min(n, surgepay.ListLimitMax)
}

// listQuery builds "SELECT cols FROM table WHERE merchant_id = ? AND
// conds... [AND id < ?] ORDER BY id DESC LIMIT limit+1": one row more than a
// page tells whether there are more.
type listQuery struct {
	sql  strings.Builder
	args []any
}

func newListQuery(cols, table, merchantID string) *listQuery {
	q := &listQuery{}
	q.sql.WriteString("SELECT " + cols + " FROM " + table + " WHERE merchant_id = ?")
	q.args = append(q.args, merchantID)
	return q
}

func (q *listQuery) where(cond string, arg any) {
	q.sql.WriteString(" AND " + cond)
	q.args = append(q.args, arg)
}

// listPage pages the query and scans the rows; it returns at most the page and
// whether more rows follow.
func listPage[T any](ctx context.Context, db *sql.DB, q *listQuery, page surgepay.Page,
	scan func(scanner) (*T, error)) ([]*T, bool, error) {
	if page.StartingAfter != "" {
		q.where("id < ?", page.StartingAfter)
	}
	limit := pageLimit(page.Limit)
	q.sql.WriteString(" ORDER BY id DESC LIMIT ?")
	q.args = append(q.args, limit+1)
	defer counted(ctx)()
	rows, err := db.QueryContext(ctx, q.sql.String(), q.args...)
	out, err := scanAll(rows, err, scan)
	if err != nil {
		return nil, false, err
	}
	if len(out) > limit {
		return out[:limit], true, nil
	}
	return out, false, nil
}

// ListCustomers lists the merchant's customers, newest first.
func (db *DB) ListCustomers(ctx context.Context, merchantID string, page surgepay.Page) ([]*surgepay.Customer, bool, error) {
	q := newListQuery(customerCols, "customers", merchantID)
	cs, more, err := listPage(ctx, db.read, q, page, scanCustomer)
	if err != nil {
		return nil, false, fmt.Errorf("list customers: %w", err)
	}
	return cs, more, nil
}

// ListPaymentMethods lists a customer's cards, newest first.
func (db *DB) ListPaymentMethods(ctx context.Context, merchantID, customerID string, page surgepay.Page) ([]*surgepay.PaymentMethod, bool, error) {
	q := newListQuery(paymentMethodCols, "payment_methods", merchantID)
	q.where("customer_id = ?", customerID)
	pms, more, err := listPage(ctx, db.read, q, page, scanPaymentMethod)
	if err != nil {
		return nil, false, fmt.Errorf("list payment methods of %s: %w", customerID, err)
	}
	return pms, more, nil
}

// ListPayments lists the merchant's payments that pass f, newest first.
func (db *DB) ListPayments(ctx context.Context, merchantID string, f surgepay.PaymentFilter) ([]*surgepay.Payment, bool, error) {
	if f.CustomerID != "" {
		return db.listPaymentsOfCustomer(ctx, merchantID, f)
	}
	q := newListQuery(paymentCols, "payments", merchantID)
	if f.Status != "" {
		q.where("status = ?", string(f.Status))
	}
	if !f.CreatedGTE.IsZero() {
		q.where("created >= ?", f.CreatedGTE.UnixNano())
	}
	if !f.CreatedBefore.IsZero() {
		q.where("created < ?", f.CreatedBefore.UnixNano())
	}
	ps, more, err := listPage(ctx, db.read, q, f.Page, scanPayment)
	if err != nil {
		return nil, false, fmt.Errorf("list payments: %w", err)
	}
	return ps, more, nil
}
