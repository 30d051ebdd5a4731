package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/surgepay/surgepay"
)

// Bounds on reads that the Store interface leaves open.
const (
	// processingLimitMax bounds one ListProcessing call.
	processingLimitMax = 1000
	// eventsPerPaymentMax bounds ListEvents. A payment changes state a few
	// times plus at most RefundsPerPaymentMax refunds, each a few events.
	eventsPerPaymentMax = 1000
)

// count counts one statement of kind on ctx's counter and returns a
// function that adds the time since to the counter's store time:
// defer count(ctx, surgepay.StmtSelect)().
func count(ctx context.Context, kind int) func() {
	surgepay.CountStatement(ctx, kind)
	start := time.Now()
	return func() { surgepay.CountStoreTime(ctx, time.Since(start)) }
}

// pageLimit clamps a page size to 1..ListLimitMax; 0 means the default.
func pageLimit(n int) int {
	switch {
	case n <= 0:
		return surgepay.ListLimitDefault
	case n > surgepay.ListLimitMax:
		return surgepay.ListLimitMax
	}
	return n
}

// FindMerchant returns ENOTFOUND if no merchant has the ID.
func (db *DB) FindMerchant(ctx context.Context, id string) (*surgepay.Merchant, error) {
	defer count(ctx, surgepay.StmtSelect)()
	m, err := scanMerchant(db.pool.QueryRow(ctx, "SELECT "+merchantCols+" FROM merchants WHERE id = $1", id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, surgepay.NotFound("id", "merchant")
	}
	if err != nil {
		return nil, readErr(fmt.Errorf("find merchant %s: %w", id, err))
	}
	return m, nil
}

// ListMerchants returns every merchant, oldest first.
func (db *DB) ListMerchants(ctx context.Context) ([]*surgepay.Merchant, error) {
	defer count(ctx, surgepay.StmtSelect)()
	rows, _ := db.pool.Query(ctx, "SELECT "+merchantCols+" FROM merchants ORDER BY id")
	ms, err := collect(rows, scanMerchant)
	if err != nil {
		return nil, readErr(fmt.Errorf("list merchants: %w", err))
	}
	return ms, nil
}

// FindAPIKeyByHash returns ENOTFOUND if no key, revoked or not, has the hash.
func (db *DB) FindAPIKeyByHash(ctx context.Context, hash []byte) (*surgepay.APIKey, error) {
	defer count(ctx, surgepay.StmtSelect)()
	k, err := scanAPIKey(db.pool.QueryRow(ctx, "SELECT "+apiKeyReadCols+apiKeyFrom+" WHERE k.hash = $1", hash))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, surgepay.NotFound("api_key", "API key")
	}
	if err != nil {
		return nil, readErr(fmt.Errorf("find API key: %w", err))
	}
	return k, nil
}

// ListAPIKeys returns every key of every merchant, revoked ones included,
// oldest first.
func (db *DB) ListAPIKeys(ctx context.Context) ([]*surgepay.APIKey, error) {
	defer count(ctx, surgepay.StmtSelect)()
	rows, _ := db.pool.Query(ctx, "SELECT "+apiKeyReadCols+apiKeyFrom+" ORDER BY k.id")
	ks, err := collect(rows, scanAPIKey)
	if err != nil {
		return nil, readErr(fmt.Errorf("list API keys: %w", err))
	}
	return ks, nil
}

// CredentialsGeneration returns the count of changes to the standing of
// API keys (surgepay.CredentialsGenerationReader). One statement.
func (db *DB) CredentialsGeneration(ctx context.Context) (int64, error) {
	defer count(ctx, surgepay.StmtSelect)()
	var g int64
	if err := db.pool.QueryRow(ctx, "SELECT generation FROM credentials_generation").Scan(&g); err != nil {
		return 0, readErr(fmt.Errorf("read the credentials generation: %w", err))
	}
	return g, nil
}

// ListAuditEvents returns a page of the audit trail that passes f,
// newest first, and whether more follow. One statement.
func (db *DB) ListAuditEvents(ctx context.Context, f surgepay.AuditFilter) ([]*surgepay.AuditEvent, bool, error) {
	defer count(ctx, surgepay.StmtSelect)()
	q := &listQuery{}
	q.sql.WriteString("SELECT " + auditCols + " FROM audit_events WHERE true")
	if f.MerchantID != "" {
		q.where("merchant_id = $%d", f.MerchantID)
	}
	if f.ObjectID != "" {
		q.where("object_id = $%d", f.ObjectID)
	}
	q.page(f.Page)
	rows, _ := db.pool.Query(ctx, q.sql.String(), q.args...)
	es, err := collect(rows, scanAudit)
	if err != nil {
		return nil, false, readErr(fmt.Errorf("list audit events: %w", err))
	}
	es, more := trim(es, q.limit)
	return es, more, nil
}

// FindCustomer returns ENOTFOUND if the merchant has no such customer.
func (db *DB) FindCustomer(ctx context.Context, merchantID, id string) (*surgepay.Customer, error) {
	defer count(ctx, surgepay.StmtSelect)()
	c, err := scanCustomer(db.pool.QueryRow(ctx,
		"SELECT "+customerCols+" FROM customers WHERE merchant_id = $1 AND id = $2", merchantID, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, surgepay.NotFound("id", "customer")
	}
	if err != nil {
		return nil, readErr(fmt.Errorf("find customer %s: %w", id, err))
	}
	return c, nil
}

// ListCustomers returns a page of the merchant's customers, newest first,
// and whether more follow.
func (db *DB) ListCustomers(ctx context.Context, merchantID string, page surgepay.Page) ([]*surgepay.Customer, bool, error) {
	defer count(ctx, surgepay.StmtSelect)()
	q := newListQuery("SELECT "+customerCols+" FROM customers WHERE merchant_id = $1", merchantID)
	q.page(page)
	rows, _ := db.pool.Query(ctx, q.sql.String(), q.args...)
	cs, err := collect(rows, scanCustomer)
	if err != nil {
		return nil, false, readErr(fmt.Errorf("list customers: %w", err))
	}
	cs, more := trim(cs, q.limit)
	return cs, more, nil
}

// FindPaymentMethod returns ENOTFOUND if the merchant has no such card.
func (db *DB) FindPaymentMethod(ctx context.Context, merchantID, id string) (*surgepay.PaymentMethod, error) {
	defer count(ctx, surgepay.StmtSelect)()
	pm, err := scanPaymentMethod(db.pool.QueryRow(ctx,
		"SELECT "+paymentMethodCols+" FROM payment_methods WHERE merchant_id = $1 AND id = $2", merchantID, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, surgepay.NotFound("id", "payment method")
	}
	if err != nil {
		return nil, readErr(fmt.Errorf("find payment method %s: %w", id, err))
	}
	return pm, nil
}

// ListPaymentMethods lists a customer's cards, newest first, and whether
// more follow.
func (db *DB) ListPaymentMethods(ctx context.Context, merchantID, customerID string, page surgepay.Page) ([]*surgepay.PaymentMethod, bool, error) {
	defer count(ctx, surgepay.StmtSelect)()
	q := newListQuery("SELECT "+paymentMethodCols+" FROM payment_methods WHERE merchant_id = $1", merchantID)
	q.where("customer_id = $%d", customerID)
	q.page(page)
	rows, _ := db.pool.Query(ctx, q.sql.String(), q.args...)
	pms, err := collect(rows, scanPaymentMethod)
	if err != nil {
		return nil, false, readErr(fmt.Errorf("list payment methods: %w", err))
	}
	pms, more := trim(pms, q.limit)
	return pms, more, nil
}

// FindPayment returns ENOTFOUND if the merchant has no such payment.
func (db *DB) FindPayment(ctx context.Context, merchantID, id string) (*surgepay.Payment, error) {
	defer count(ctx, surgepay.StmtSelect)()
	p, err := scanPayment(db.pool.QueryRow(ctx,
		"SELECT "+paymentCols+" FROM payments WHERE merchant_id = $1 AND id = $2", merchantID, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, surgepay.NotFound("id", "payment")
	}
	if err != nil {
		return nil, readErr(fmt.Errorf("find payment %s: %w", id, err))
	}
	return p, nil
}

// FindPaymentByRef returns the payment authorized as ref at a configured
// processor ("stripe_eu:pi_…"), of any merchant; ENOTFOUND if none. One
// probe of a partial index that holds routed payments only.
func (db *DB) FindPaymentByRef(ctx context.Context, ref string) (*surgepay.Payment, error) {
	defer count(ctx, surgepay.StmtSelect)()
	p, err := scanPayment(db.pool.QueryRow(ctx,
		"SELECT "+paymentCols+" FROM payments WHERE authorization_ref = $1 AND authorization_ref LIKE '%:%' LIMIT 1", ref))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, surgepay.NotFound("reference", "payment")
	}
	if err != nil {
		return nil, readErr(fmt.Errorf("find payment by reference: %w", err))
	}
	return p, nil
}

// ListPayments returns a page of the merchant's payments that match f,
// newest first, and whether more follow. Each combination of filters is
// its own SQL text, so that each gets its own cached plan and index.
func (db *DB) ListPayments(ctx context.Context, merchantID string, f surgepay.PaymentFilter) ([]*surgepay.Payment, bool, error) {
	defer count(ctx, surgepay.StmtSelect)()
	q := newListQuery("SELECT "+paymentCols+" FROM payments WHERE merchant_id = $1", merchantID)
	if f.Status != "" {
		q.where("status = $%d", string(f.Status))
	}
	if f.CustomerID != "" {
		q.where("customer_id = $%d", f.CustomerID)
	}
	if !f.CreatedGTE.IsZero() {
		q.where("created >= $%d", dbTime(f.CreatedGTE))
	}
	if !f.CreatedBefore.IsZero() {
		q.where("created < $%d", dbTime(f.CreatedBefore))
	}
	q.page(f.Page)
	rows, _ := db.pool.Query(ctx, q.sql.String(), q.args...)
	ps, err := collect(rows, scanPayment)
	if err != nil {
		return nil, false, readErr(fmt.Errorf("list payments: %w", err))
	}
	ps, more := trim(ps, q.limit)
	return ps, more, nil
}

// ListProcessing returns up to limit (at most 1000) payments of any
// merchant in StatusProcessing, oldest first, then those in
// requires_action after actionsAfter (surgepay.Store).
func (db *DB) ListProcessing(ctx context.Context, limit int, actionsAfter string) ([]*surgepay.Payment, error) {
	if limit <= 0 {
		return nil, nil
	}
	defer count(ctx, surgepay.StmtSelect)()
	limit = min(limit, processingLimitMax)
	// Each side through its partial index: payments_processing (0001),
	// payments_requires_action (0015).
	rows, _ := db.pool.Query(ctx, "(SELECT "+paymentCols+" FROM payments WHERE status = 'processing' ORDER BY id LIMIT $1)"+
		" UNION ALL (SELECT "+paymentCols+" FROM payments WHERE status = 'requires_action' AND id > $3 ORDER BY id LIMIT $2)",
		limit, surgepay.RequiresActionListed(limit), actionsAfter)
	ps, err := collect(rows, scanPayment)
	if err != nil {
		return nil, readErr(fmt.Errorf("list processing payments: %w", err))
	}
	return ps, nil
}

// ListEvents returns a payment's audit trail in the order it was written.
// A payment without events, or another merchant's, has an empty trail.
func (db *DB) ListEvents(ctx context.Context, merchantID, paymentID string) ([]*surgepay.Event, error) {
	defer count(ctx, surgepay.StmtSelect)()
	rows, _ := db.pool.Query(ctx, "SELECT "+eventCols+
		" FROM payment_events WHERE merchant_id = $1 AND payment_id = $2 ORDER BY seq LIMIT $3",
		merchantID, paymentID, eventsPerPaymentMax)
	es, err := collect(rows, scanEvent)
	if err != nil {
		return nil, readErr(fmt.Errorf("list events of payment %s: %w", paymentID, err))
	}
	return es, nil
}

// FindIdempotency returns ENOTFOUND if the merchant has no record for key.
func (db *DB) FindIdempotency(ctx context.Context, merchantID, key string) (*surgepay.IdempotencyRecord, error) {
	defer count(ctx, surgepay.StmtSelect)()
	r := &surgepay.IdempotencyRecord{MerchantID: merchantID, Key: key}
	var hash []byte
	err := db.pool.QueryRow(ctx,
		"SELECT request_hash, status_code, body, created FROM idempotency WHERE merchant_id = $1 AND key = $2",
		merchantID, key).Scan(&hash, &r.StatusCode, &r.Body, &r.Created)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, surgepay.NotFound("idempotency_key", "idempotency record")
	}
	if err == nil && len(hash) != len(r.RequestHash) {
		err = fmt.Errorf("request hash has %d bytes, want %d", len(hash), len(r.RequestHash))
	}
	if err != nil {
		return nil, readErr(fmt.Errorf("find idempotency record: %w", err))
	}
	copy(r.RequestHash[:], hash)
	r.Created = r.Created.UTC()
	return r, nil
}

// DeleteIdempotencyBefore deletes up to limit records created before t,
// oldest first, and returns how many it deleted. Rows locked by a concurrent
// call are skipped, so several nodes may sweep at once.
func (db *DB) DeleteIdempotencyBefore(ctx context.Context, t time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	defer count(ctx, surgepay.StmtDelete)()
	tag, err := db.pool.Exec(ctx, `DELETE FROM idempotency WHERE (merchant_id, key) IN (
		SELECT merchant_id, key FROM idempotency WHERE created < $1
		ORDER BY created LIMIT $2 FOR UPDATE SKIP LOCKED)`, dbTime(t), limit)
	if err != nil {
		return 0, readErr(fmt.Errorf("delete idempotency records: %w", err))
	}
	return int(tag.RowsAffected()), nil
}

// listQuery builds "... WHERE merchant_id = $1 AND ... ORDER BY id DESC
// LIMIT n+1": IDs sort by creation time, and the extra row tells has_more.
type listQuery struct {
	sql   strings.Builder
	args  []any
	limit int
}

func newListQuery(prefix string, merchantID string) *listQuery {
	q := &listQuery{args: []any{merchantID}}
	q.sql.WriteString(prefix)
	return q
}

// where adds " AND cond", cond holding one %d for the argument's number.
func (q *listQuery) where(cond string, arg any) {
	q.args = append(q.args, arg)
	q.sql.WriteString(" AND ")
	fmt.Fprintf(&q.sql, cond, len(q.args))
}

func (q *listQuery) page(p surgepay.Page) {
	if p.StartingAfter != "" {
		q.where("id < $%d", p.StartingAfter)
	}
	q.limit = pageLimit(p.Limit)
	q.args = append(q.args, q.limit+1)
	fmt.Fprintf(&q.sql, " ORDER BY id DESC LIMIT $%d", len(q.args))
}

// trim cuts the extra row fetched to learn whether more follow.
func trim[T any](xs []T, limit int) ([]T, bool) {
	if len(xs) > limit {
		return xs[:limit], true
	}
	return xs, false
}

// collect scans every row with scan. A query error surfaces here: pgx
// returns it from rows.Err, so callers may ignore Query's error.
func collect[T any](rows pgx.Rows, scan func(pgx.Row) (T, error)) ([]T, error) {
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// readOnly reports whether err is PostgreSQL's refusal to write on a
// server that is not the primary (25006 read_only_sql_transaction).
func readOnly(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "25006"
}

// readErr returns err as EUNAVAILABLE "store_unavailable" (503 with
// Retry-After) when the database could not be reached or went away
// during a read, and as it is otherwise. A restarting PostgreSQL must
// answer the API's reads (an API key lookup among them) with the same
// fast 503 as its writes, not a 500.
func readErr(err error) error {
	if !unreachable(err) {
		return err
	}
	return fmt.Errorf("%w: %w", &surgepay.Error{Code: surgepay.EUNAVAILABLE, Reason: "store_unavailable",
		RetryAfter: 1, Message: "the database is unavailable; retry shortly"}, err)
}

// unreachable reports whether err says the database was not there to
// answer: no connection, a connection broken or timed out, or the server
// refusing work because it is shutting down, starting up or out of
// connections. A statement the database answered with an error is not.
func unreachable(err error) bool {
	if errors.Is(err, errDatabaseDown) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		// 08: connection exception; 57P01-57P03: admin shutdown, crash
		// shutdown, cannot connect now; 53300: too many connections;
		// 25006: read-only transaction (a standby, or a demoted primary).
		return strings.HasPrefix(pe.Code, "08") || pe.Code == "57P01" || pe.Code == "57P02" ||
			pe.Code == "57P03" || pe.Code == "53300" || pe.Code == "25006"
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) || pgconn.Timeout(err) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, context.DeadlineExceeded)
}
