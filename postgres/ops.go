package postgres

import (
	"fmt"
	"strings"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/groupcommit"
)

// The statements of a Write. Each text is constant, so pgx prepares it once
// per connection and caches it.
const (
	sqlIdempotencyInsert = `INSERT INTO idempotency (merchant_id, key, request_hash, status_code, body, created)
		VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING`
	sqlMerchantInsert = `INSERT INTO merchants (id, name, created, disabled) VALUES ($1, $2, $3, $4)`
	sqlAPIKeyInsert   = `INSERT INTO api_keys (` + apiKeyCols + `)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`
	sqlMerchantStatus = `UPDATE merchants SET disabled = $2 WHERE id = $1`
	sqlAPIKeyExpire   = `UPDATE api_keys SET expires = LEAST(coalesce(expires, $2), $2) WHERE id = $1` //nolint:gosec // G101: an SQL statement, not a credential
	// One statement for a whole flush of last-used times. The rows are
	// locked in ID order first: two nodes flushing overlapping keys in
	// other orders would deadlock, and the flush shares its transaction
	// with a batch of payment Writes.
	//nolint:gosec // G101: an SQL statement, not a credential
	sqlAPIKeysUsed = `WITH u AS (SELECT * FROM unnest($1::text[], $2::timestamptz[]) AS u(id, at)),
		l AS (SELECT k.id FROM api_keys k WHERE k.id IN (SELECT id FROM u) ORDER BY k.id FOR UPDATE)
		UPDATE api_keys k SET last_used = GREATEST(k.last_used, u.at) FROM u, l WHERE k.id = u.id AND l.id = u.id`
	sqlAuditInsert = `INSERT INTO audit_events (` + auditCols + `)
		SELECT * FROM unnest($1::text[], $2::timestamptz[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[])`
	sqlCustomerInsert = `INSERT INTO customers (merchant_id, id, name, email, description, metadata, version, created, updated)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`
	sqlCustomerUpdate = `UPDATE customers SET name = $3, email = $4, description = $5, metadata = $6,
		version = $7, updated = $8 WHERE merchant_id = $1 AND id = $2 AND version = $9`
	sqlCustomerDelete      = `DELETE FROM customers WHERE merchant_id = $1 AND id = $2 AND version = $3`
	sqlCustomerExists      = `SELECT EXISTS (SELECT 1 FROM customers WHERE merchant_id = $1 AND id = $2)`
	sqlCustomerCardsDelete = `DELETE FROM payment_methods WHERE merchant_id = $1 AND customer_id = $2`
	sqlPaymentMethodInsert = `INSERT INTO payment_methods (merchant_id, id, customer_id, brand, last4, exp_month, exp_year, fingerprint, holder_name, sealed_pan, created, processor, processor_token, processor_customer) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`
	sqlPaymentMethodDelete = `DELETE FROM payment_methods WHERE merchant_id = $1 AND id = $2`
	sqlPaymentExists       = `SELECT EXISTS (SELECT 1 FROM payments WHERE merchant_id = $1 AND id = $2)`
	sqlPaymentInsert       = `INSERT INTO payments (` + paymentCols + `) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24)`
	sqlPaymentUpdate       = `UPDATE payments SET customer_id = $3, payment_method_id = $4, amount = $5, amount_tax = $6,
		currency = $7, capture_method = $8, status = $9, amount_authorized = $10, amount_captured = $11,
		amount_refunded = $12, description = $13, metadata = $14, tax = $15, decline_code = $16,
		failure_message = $17, authorization_ref = $18, transactions = $19, pending = $20, path = $21,
		version = $22, updated = $23 WHERE merchant_id = $1 AND id = $2 AND version = $22 - 1`
	sqlEventsInsert = `INSERT INTO payment_events (` + eventCols + `)
		SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
			$7::bigint[], $8::text[], $9::text[], $10::timestamptz[])`
)

// Lock-key prefixes order a round's guards by table, then by row.
const (
	lockIdempotency = "1/"
	lockCustomer    = "2/"
	lockPayment     = "3/"
)

// newOp turns a Write into its guards, in the order Store.Write checks
// them, and its inserts.
func newOp(it *groupcommit.Item[*surgepay.Write]) (*op, error) {
	w := it.Value
	if err := w.Validate(); err != nil {
		return nil, err
	}
	if err := checkStaged(w); err != nil {
		return nil, err
	}
	if isSale(w) {
		o, err := newSaleOp(it)
		if err == nil && w.Webhook != nil {
			o.addWebhook(w) // after the events; the sale's guard no longer runs last
			o.last = false
		}
		if err == nil && len(w.Analytics) > 0 {
			o.last = false // its guard must be known before the batch's analytics upsert is sent
		}
		return o, err
	}
	o := &op{item: it}
	if r := w.Idempotency; r != nil {
		o.idem = true
		o.guards = append(o.guards, idempotencyGuard(r))
	}
	if m := w.Merchant; m != nil {
		o.insert(surgepay.StmtInsert, sqlMerchantInsert, m.ID, m.Name, dbTime(m.Created), m.Disabled)
	}
	if k := w.APIKey; k != nil {
		o.insert(surgepay.StmtInsert, sqlAPIKeyInsert, k.ID, k.MerchantID, k.Hash, k.Prefix, k.Revoked, dbTime(k.Created),
			strings.Join(k.Scopes, ","), nullTime(k.Expires), nullTime(k.LastUsed))
	}
	if id := w.APIKeyRevoke; id != "" {
		o.insert(surgepay.StmtUpdate, "UPDATE api_keys SET revoked = true WHERE id = $1", id)
	}
	o.addLifecycle(w)
	if c := w.CustomerInsert; c != nil {
		o.insert(surgepay.StmtInsert, sqlCustomerInsert, c.MerchantID, c.ID, c.Name, c.Email, c.Description,
			encodeMetadata(c.Metadata), c.Version, dbTime(c.Created), dbTime(c.Updated))
	}
	if c := w.CustomerUpdate; c != nil {
		o.guards = append(o.guards, rowGuard(surgepay.StmtUpdate, "customer", lockCustomer, sqlCustomerExists,
			c.MerchantID, c.ID, sqlCustomerUpdate, c.MerchantID, c.ID, c.Name, c.Email, c.Description,
			encodeMetadata(c.Metadata), c.Version, dbTime(c.Updated), c.Version-1))
	}
	if c := w.CustomerDelete; c != nil {
		o.guards = append(o.guards, rowGuard(surgepay.StmtDelete, "customer", lockCustomer, sqlCustomerExists,
			c.MerchantID, c.ID, sqlCustomerDelete, c.MerchantID, c.ID, c.Version))
		o.insert(surgepay.StmtDelete, sqlCustomerCardsDelete, c.MerchantID, c.ID)
	}
	if pm := w.PaymentMethodInsert; pm != nil {
		o.insert(surgepay.StmtInsert, sqlPaymentMethodInsert, pm.MerchantID, pm.ID, pm.CustomerID, pm.Brand,
			pm.Last4, pm.ExpMonth, pm.ExpYear, pm.Fingerprint, pm.HolderName, pm.SealedPAN, dbTime(pm.Created),
			pm.Processor, pm.ProcessorToken, pm.ProcessorCustomer)
	}
	if pm := w.PaymentMethodDelete; pm != nil {
		// Not a guard: deleting a card that is gone is not an error.
		o.insert(surgepay.StmtDelete, sqlPaymentMethodDelete, pm.MerchantID, pm.ID)
	}
	if p := w.PaymentInsert; p != nil {
		args, err := paymentArgs(p)
		if err != nil {
			return nil, err
		}
		o.insert(surgepay.StmtInsert, sqlPaymentInsert, args...)
	}
	if p := w.PaymentUpdate; p != nil {
		args, err := paymentArgs(p)
		if err != nil {
			return nil, err
		}
		args = append(args[:22], args[23]) // all but created, which never changes
		o.guards = append(o.guards, rowGuard(surgepay.StmtUpdate, "payment", lockPayment, sqlPaymentExists,
			p.MerchantID, p.ID, sqlPaymentUpdate, args...))
	}
	if len(w.Events) > 0 {
		o.insert(surgepay.StmtInsert, sqlEventsInsert, eventArgs(w.Events)...)
	}
	if r := w.Staged; r != nil {
		o.insert(surgepay.StmtInsert, sqlStagedInsert, stagedArgs(r)...)
	}
	if len(w.StagedAck) > 0 {
		// Not a guard: settlement may acknowledge a record again.
		o.insert(surgepay.StmtDelete, sqlStagedAckDelete, w.StagedAck)
	}
	o.addWebhook(w)
	o.addAttempt(w)
	o.addDisputes(w) // disputes.go
	return o, nil
}

// addLifecycle adds a Write's merchant status, API-key expiry and
// last-used times, and its audit rows (one statement for all of them).
func (o *op) addLifecycle(w *surgepay.Write) {
	if ms := w.MerchantStatus; ms != nil {
		o.insert(surgepay.StmtUpdate, sqlMerchantStatus, ms.MerchantID, ms.Disabled)
	}
	if x := w.APIKeyExpire; x != nil {
		o.insert(surgepay.StmtUpdate, sqlAPIKeyExpire, x.ID, dbTime(x.Expires))
	}
	if n := len(w.APIKeysUsed); n > 0 {
		ids, ats := make([]string, n), make([]time.Time, n)
		for i, u := range w.APIKeysUsed {
			ids[i], ats[i] = u.ID, dbTime(u.At)
		}
		o.insert(surgepay.StmtUpdate, sqlAPIKeysUsed, ids, ats)
	}
	if n := len(w.Audit); n > 0 {
		ids, actors, actions, merchants, objects, details := make([]string, n), make([]string, n),
			make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		created := make([]time.Time, n)
		for i, e := range w.Audit {
			ids[i], created[i], actors[i], actions[i] = e.ID, dbTime(e.Created), e.Actor, e.Action
			merchants[i], objects[i], details[i] = e.MerchantID, e.ObjectID, e.Detail
		}
		o.insert(surgepay.StmtInsert, sqlAuditInsert, ids, created, actors, actions, merchants, objects, details)
	}
}

// nullTime is NULL for the zero time.
func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return dbTime(t)
}

// idempotencyGuard is the INSERT of r, which affects no row if the key is
// taken.
func idempotencyGuard(r *surgepay.IdempotencyRecord) guard {
	return guard{
		stmt: stmt{sql: sqlIdempotencyInsert, kind: surgepay.StmtInsert, args: []any{
			r.MerchantID, r.Key, r.RequestHash[:], r.StatusCode, r.Body, dbTime(r.Created)}},
		lockKey: lockIdempotency + r.MerchantID + "/" + r.Key,
		fail: surgepay.Conflict(surgepay.ReasonIdempotencyKeyExists,
			"a request with this idempotency key has already been stored"),
		object: "idempotency record",
	}
}

func (o *op) insert(kind int, sql string, args ...any) {
	o.inserts = append(o.inserts, stmt{sql: sql, args: args, kind: kind})
}

// rowGuard is a version-guarded UPDATE or DELETE of one row.
func rowGuard(kind int, object, lock, existsSQL, merchantID, id string, sql string, args ...any) guard {
	return guard{
		stmt:    stmt{sql: sql, kind: kind, args: args},
		lockKey: lock + merchantID + "/" + id,
		fail: surgepay.Conflict(surgepay.ReasonConcurrentUpdate,
			"the %s was changed by another request; fetch it and retry", object),
		exists: stmt{sql: existsSQL, kind: surgepay.StmtSelect, args: []any{merchantID, id}},
		object: object,
	}
}

// paymentArgs returns the 24 parameters of sqlPaymentInsert and
// sqlPaymentUpdate, in paymentCols order.
func paymentArgs(p *surgepay.Payment) ([]any, error) {
	txs, err := encodeTransactions(p.Transactions)
	if err != nil {
		return nil, fmt.Errorf("postgres: payment %s: %w", p.ID, err)
	}
	return []any{p.MerchantID, p.ID, p.CustomerID, p.PaymentMethodID, p.Amount, p.AmountTax,
		p.Currency, p.CaptureMethod, string(p.Status), p.AmountAuthorized, p.AmountCaptured, p.AmountRefunded,
		p.Description, encodeMetadata(p.Metadata), encodeTax(p.Tax), p.DeclineCode, p.FailureMessage,
		p.AuthorizationRef, txs, encodePending(p.Pending), p.Path, p.Version, dbTime(p.Created),
		dbTime(p.Updated)}, nil
}

// eventArgs returns the column arrays of sqlEventsInsert: one statement
// inserts every event of a Write.
func eventArgs(es []*surgepay.Event) []any {
	n := len(es)
	ids, payments, merchants, types := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	froms, tos, actors, requests := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	amounts, created := make([]int64, n), make([]time.Time, n)
	for i, e := range es {
		ids[i], payments[i], merchants[i], types[i] = e.ID, e.PaymentID, e.MerchantID, e.Type
		froms[i], tos[i], actors[i], requests[i] = string(e.FromStatus), string(e.ToStatus), e.ActorKeyID, e.RequestID
		amounts[i], created[i] = e.Amount, dbTime(e.Created)
	}
	return []any{ids, payments, merchants, types, froms, tos, amounts, actors, requests, created}
}
