package sqlite

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/internal/jsonappend"
)

// Times are INTEGER Unix nanoseconds, NULL for the zero time, and are read
// back in UTC.

func timeArg(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixNano()
}

func timeOf(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return time.Unix(0, n.Int64).UTC()
}

// JSON columns have their own field names, so renaming a Go field does not
// change stored rows. nil is NULL.

// txJSON is a transaction as payments.transactions stores it: short
// names, and what the payment's row already holds left out. A sale's row
// was 660 bytes, 426 of them its two transactions (bench/RESULTS.md,
// issue 14 session 18); now 246. A string field whose value is "=" is its
// derived value (derive): the payment's authorization_ref for
// ProviderRef; the payment's ID, "/" and the transaction's type for
// IdempotencyKey (the engine's key for a capture, a void, a refund
// without an Idempotency-Key). A stored value that begins with "=" gets
// one more. Created is nanoseconds after the payment's created (txBase),
// absent for the same instant; Zero marks the zero time. Rows written by
// earlier versions keep txJSONv1's names and are read as such
// (transactionsOf tells them by their first name).
type txJSON struct {
	ID             string `json:"i"`
	Type           string `json:"t"`
	Status         string `json:"s"`
	Amount         int64  `json:"a"`
	ProviderRef    string `json:"r,omitempty"`
	IdempotencyKey string `json:"k,omitempty"`
	DeclineCode    string `json:"d,omitempty"`
	Message        string `json:"m,omitempty"`
	Created        int64  `json:"c,omitempty"`
	Zero           bool   `json:"z,omitempty"`
	// DueBy is a dispute's deadline in Unix nanoseconds; absent (0) when
	// unknown, and on every other transaction, so a sale's row is not a
	// byte longer.
	DueBy int64 `json:"u,omitempty"`
}

// txJSONv1 is a transaction as rows written by earlier versions hold it.
type txJSONv1 struct {
	ID             string `json:"id"`
	Type           string `json:"type"`
	Status         string `json:"status"`
	Amount         int64  `json:"amount"`
	ProviderRef    string `json:"provider_ref,omitempty"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	DeclineCode    string `json:"decline_code,omitempty"`
	Message        string `json:"message,omitempty"`
	Created        *int64 `json:"created,omitempty"` // Unix nanoseconds; nil for the zero time
}

// derive writes v for a txJSON field whose derived value is d.
func derive(v, d string) string {
	switch {
	case v == d && v != "":
		return "="
	case strings.HasPrefix(v, "="):
		return "=" + v
	}
	return v
}

// underive reads what derive wrote.
func underive(s, d string) string {
	switch {
	case s == "=":
		return d
	case strings.HasPrefix(s, "="):
		return s[1:]
	}
	return s
}

// txKey is the idempotency key a transaction of p of type typ derives.
func txKey(p *surgepay.Payment, typ string) string { return p.ID + "/" + typ }

type pendingJSON struct {
	Type           string          `json:"type"`
	Amount         int64           `json:"amount"`
	IdempotencyKey string          `json:"idempotency_key"`
	Capture        bool            `json:"capture,omitempty"`
	CaptureLater   bool            `json:"capture_later,omitempty"`
	From           surgepay.Status `json:"from"`
	TxID           string          `json:"tx_id"`
	Processor      string          `json:"processor,omitempty"`
	ActionURL      string          `json:"action_url,omitempty"`
	ReturnURL      string          `json:"return_url,omitempty"`
	Reference      string          `json:"reference,omitempty"`
}

type taxJSON struct {
	Country    string `json:"country"`
	Region     string `json:"region,omitempty"`
	PostalCode string `json:"postal_code,omitempty"`
	Category   string `json:"category,omitempty"`
	RateBPS    int    `json:"rate_bps"`
}

// jsonArg returns v as JSON text, or nil (NULL) if isNil.
func jsonArg(isNil bool, v any) (any, error) {
	if isNil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

// fromJSON decodes a JSON column into v; NULL leaves v alone.
func fromJSON(col string, s sql.NullString, v any) error {
	if !s.Valid {
		return nil
	}
	if err := json.Unmarshal([]byte(s.String), v); err != nil {
		return fmt.Errorf("decode %s: %w", col, err)
	}
	return nil
}

func metadataArg(m map[string]string) (any, error) { return jsonArg(m == nil, m) }

// transactionsArg is p's transactions as payments.transactions stores them
// (txJSON), written as json.Marshal would write them (appendTxJSON;
// reflection took ~2 % of the server's CPU at 5,000 sales/s).
func transactionsArg(p *surgepay.Payment) (any, error) {
	if p.Transactions == nil {
		return nil, nil
	}
	var buf [txJSONBytes]byte
	b := append(buf[:0], '[')
	for i := range p.Transactions {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendTxJSON(b, txJSONOf(p, &p.Transactions[i]))
	}
	return string(append(b, ']')), nil
}

// txJSONBytes holds a sale's transactions (two, ~150 bytes) on the stack.
const txJSONBytes = 512

// txJSONOf is tx of p as txJSON.
func txJSONOf(p *surgepay.Payment, tx *surgepay.Transaction) *txJSON {
	t := &txJSON{ID: tx.ID, Type: tx.Type, Status: tx.Status, Amount: tx.Amount,
		ProviderRef: derive(tx.ProviderRef, p.AuthorizationRef), IdempotencyKey: derive(tx.IdempotencyKey, txKey(p, tx.Type)),
		DeclineCode: tx.DeclineCode, Message: tx.Message}
	if !tx.DueBy.IsZero() {
		t.DueBy = tx.DueBy.UnixNano()
	}
	if tx.Created.IsZero() {
		t.Zero = true
	} else {
		t.Created = tx.Created.UnixNano() - txBase(p)
	}
	return t
}

// appendTxJSON appends t as json.Marshal writes it (TestTxJSONMatchesMarshal):
// a field added to txJSON must be added here too.
func appendTxJSON(b []byte, t *txJSON) []byte {
	b = jsonappend.String(append(b, `{"i":`...), t.ID)
	b = jsonappend.String(append(b, `,"t":`...), t.Type)
	b = jsonappend.String(append(b, `,"s":`...), t.Status)
	b = jsonappend.Int(b, `,"a":`, t.Amount)
	b = jsonappend.Optional(b, `,"r":`, t.ProviderRef)
	b = jsonappend.Optional(b, `,"k":`, t.IdempotencyKey)
	b = jsonappend.Optional(b, `,"d":`, t.DeclineCode)
	b = jsonappend.Optional(b, `,"m":`, t.Message)
	if t.Created != 0 {
		b = jsonappend.Int(b, `,"c":`, t.Created)
	}
	if t.Zero {
		b = append(b, `,"z":true`...)
	}
	if t.DueBy != 0 {
		b = jsonappend.Int(b, `,"u":`, t.DueBy)
	}
	return append(b, '}')
}

// txBase is what txJSON.Created counts from: the payment's created, or 0.
func txBase(p *surgepay.Payment) int64 {
	if p.Created.IsZero() {
		return 0
	}
	return p.Created.UnixNano()
}

// transactionsOf reads payments.transactions of p, whose other columns are
// read: txJSON, or txJSONv1 in a row written by an earlier version.
func transactionsOf(s sql.NullString, p *surgepay.Payment) ([]surgepay.Transaction, error) {
	if !s.Valid {
		return nil, nil
	}
	if strings.HasPrefix(s.String, `[{"id":`) {
		return transactionsOfV1(s)
	}
	var in []txJSON
	if err := fromJSON("transactions", s, &in); err != nil {
		return nil, err
	}
	out := make([]surgepay.Transaction, len(in))
	for i, tx := range in {
		out[i] = surgepay.Transaction{ID: tx.ID, Type: tx.Type, Status: tx.Status, Amount: tx.Amount,
			ProviderRef: underive(tx.ProviderRef, p.AuthorizationRef), IdempotencyKey: underive(tx.IdempotencyKey, txKey(p, tx.Type)),
			DeclineCode: tx.DeclineCode, Message: tx.Message}
		if !tx.Zero {
			out[i].Created = time.Unix(0, txBase(p)+tx.Created).UTC()
		}
		if tx.DueBy != 0 {
			out[i].DueBy = time.Unix(0, tx.DueBy).UTC()
		}
	}
	return out, nil
}

func transactionsOfV1(s sql.NullString) ([]surgepay.Transaction, error) {
	var in []txJSONv1
	if err := fromJSON("transactions", s, &in); err != nil {
		return nil, err
	}
	out := make([]surgepay.Transaction, len(in))
	for i, tx := range in {
		out[i] = surgepay.Transaction{ID: tx.ID, Type: tx.Type, Status: tx.Status, Amount: tx.Amount,
			ProviderRef: tx.ProviderRef, IdempotencyKey: tx.IdempotencyKey,
			DeclineCode: tx.DeclineCode, Message: tx.Message}
		if tx.Created != nil {
			out[i].Created = time.Unix(0, *tx.Created).UTC()
		}
	}
	return out, nil
}

func pendingArg(p *surgepay.Pending) (any, error) {
	if p == nil {
		return nil, nil
	}
	return jsonArg(false, pendingJSON{Type: p.Type, Amount: p.Amount, IdempotencyKey: p.IdempotencyKey,
		Capture: p.Capture, CaptureLater: p.CaptureLater, From: p.From, TxID: p.TxID, Processor: p.Processor,
		ActionURL: p.ActionURL, ReturnURL: p.ReturnURL, Reference: p.Reference})
}

func pendingOf(s sql.NullString) (*surgepay.Pending, error) {
	if !s.Valid {
		return nil, nil
	}
	var p pendingJSON
	if err := fromJSON("pending", s, &p); err != nil {
		return nil, err
	}
	return &surgepay.Pending{Type: p.Type, Amount: p.Amount, IdempotencyKey: p.IdempotencyKey,
		Capture: p.Capture, CaptureLater: p.CaptureLater, From: p.From, TxID: p.TxID, Processor: p.Processor,
		ActionURL: p.ActionURL, ReturnURL: p.ReturnURL, Reference: p.Reference}, nil
}

func taxArg(t *surgepay.Tax) (any, error) {
	if t == nil {
		return nil, nil
	}
	return jsonArg(false, taxJSON{Country: t.Country, Region: t.Region, PostalCode: t.PostalCode,
		Category: t.Category, RateBPS: t.RateBPS})
}

func taxOf(s sql.NullString) (*surgepay.Tax, error) {
	if !s.Valid {
		return nil, nil
	}
	var t taxJSON
	if err := fromJSON("tax", s, &t); err != nil {
		return nil, err
	}
	return &surgepay.Tax{Country: t.Country, Region: t.Region, PostalCode: t.PostalCode,
		Category: t.Category, RateBPS: t.RateBPS}, nil
}

// scanner is a *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

const merchantCols = "id, name, created, disabled"

func scanMerchant(r scanner) (*surgepay.Merchant, error) {
	var m surgepay.Merchant
	var created sql.NullInt64
	if err := r.Scan(&m.ID, &m.Name, &created, &m.Disabled); err != nil {
		return nil, err
	}
	m.Created = timeOf(created)
	return &m, nil
}

// apiKeyCols are the stored columns of api_keys; apiKeyReadCols add the
// merchant's disabled flag, read with a join (apiKeyFrom).
//
//nolint:gosec // G101: column lists (api_keys' hash), not credentials
const (
	apiKeyCols     = "id, merchant_id, hash, prefix, created, revoked, scopes, expires, last_used"
	apiKeyReadCols = "k.id, k.merchant_id, k.hash, k.prefix, k.created, k.revoked, k.scopes, k.expires, k.last_used, " +
		"coalesce(m.disabled, 0)"
	apiKeyFrom = " FROM api_keys k LEFT JOIN merchants m ON m.id = k.merchant_id"
)

func apiKeyArgs(k *surgepay.APIKey) []any {
	return []any{k.ID, k.MerchantID, k.Hash, k.Prefix, timeArg(k.Created), k.Revoked,
		strings.Join(k.Scopes, ","), timeArg(k.Expires), timeArg(k.LastUsed)}
}

func scanAPIKey(r scanner) (*surgepay.APIKey, error) {
	var k surgepay.APIKey
	var created, expires, lastUsed sql.NullInt64
	var scopes string
	if err := r.Scan(&k.ID, &k.MerchantID, &k.Hash, &k.Prefix, &created, &k.Revoked, &scopes, &expires, &lastUsed,
		&k.MerchantDisabled); err != nil {
		return nil, err
	}
	k.Created, k.Expires, k.LastUsed = timeOf(created), timeOf(expires), timeOf(lastUsed)
	if scopes != "" {
		k.Scopes = strings.Split(scopes, ",")
	}
	return &k, nil
}

const auditCols = "id, created, actor, action, merchant_id, object_id, detail"

func auditArgs(e *surgepay.AuditEvent) []any {
	return []any{e.ID, timeArg(e.Created), e.Actor, e.Action, e.MerchantID, e.ObjectID, e.Detail}
}

func scanAudit(r scanner) (*surgepay.AuditEvent, error) {
	var e surgepay.AuditEvent
	var created sql.NullInt64
	if err := r.Scan(&e.ID, &created, &e.Actor, &e.Action, &e.MerchantID, &e.ObjectID, &e.Detail); err != nil {
		return nil, err
	}
	e.Created = timeOf(created)
	return &e, nil
}

const customerCols = "merchant_id, id, name, email, description, metadata, created, updated, version"

func customerArgs(c *surgepay.Customer) ([]any, error) {
	md, err := metadataArg(c.Metadata)
	if err != nil {
		return nil, fmt.Errorf("customer %s metadata: %w", c.ID, err)
	}
	return []any{c.MerchantID, c.ID, c.Name, c.Email, c.Description, md,
		timeArg(c.Created), timeArg(c.Updated), c.Version}, nil
}

func scanCustomer(r scanner) (*surgepay.Customer, error) {
	var c surgepay.Customer
	var md sql.NullString
	var created, updated sql.NullInt64
	if err := r.Scan(&c.MerchantID, &c.ID, &c.Name, &c.Email, &c.Description, &md,
		&created, &updated, &c.Version); err != nil {
		return nil, err
	}
	c.Created, c.Updated = timeOf(created), timeOf(updated)
	if err := fromJSON("metadata", md, &c.Metadata); err != nil {
		return nil, fmt.Errorf("customer %s: %w", c.ID, err)
	}
	return &c, nil
}

const paymentMethodCols = "merchant_id, id, customer_id, brand, last4, exp_month, exp_year, fingerprint, holder_name, sealed_pan, created, processor, processor_token, processor_customer"

func paymentMethodArgs(pm *surgepay.PaymentMethod) []any {
	return []any{pm.MerchantID, pm.ID, pm.CustomerID, pm.Brand, pm.Last4, pm.ExpMonth, pm.ExpYear,
		pm.Fingerprint, pm.HolderName, pm.SealedPAN, timeArg(pm.Created), pm.Processor, pm.ProcessorToken, pm.ProcessorCustomer}
}

func scanPaymentMethod(r scanner) (*surgepay.PaymentMethod, error) {
	var pm surgepay.PaymentMethod
	var created sql.NullInt64
	if err := r.Scan(&pm.MerchantID, &pm.ID, &pm.CustomerID, &pm.Brand, &pm.Last4, &pm.ExpMonth, &pm.ExpYear,
		&pm.Fingerprint, &pm.HolderName, &pm.SealedPAN, &created, &pm.Processor, &pm.ProcessorToken,
		&pm.ProcessorCustomer); err != nil {
		return nil, err
	}
	pm.Created = timeOf(created)
	return &pm, nil
}

// paymentCols lists the columns of payments that scanPayment reads; the
// key (merchant_id, id) comes first.
const paymentCols = "merchant_id, id, customer_id, payment_method_id, amount, amount_tax, currency, " +
	"capture_method, status, amount_authorized, amount_captured, amount_refunded, description, metadata, " +
	"tax, decline_code, failure_message, authorization_ref, transactions, pending, path, version, created, updated"

// paymentWriteCols lists every column of payments, in the order of
// paymentArgs: paymentCols and processor_ref, the authorization_ref of a
// routed payment only (migration 0012), which FindPaymentByRef's index holds.
const paymentWriteCols = paymentCols + ", processor_ref"

// paymentWriteColsN is the number of columns in paymentWriteCols.
const paymentWriteColsN = 25

// processorRef is the value of processor_ref for an authorization
// reference: the reference of a routed payment ("processor:ref", as the
// engine's router writes it), NULL for any other.
func processorRef(ref string) any {
	if strings.Contains(ref, ":") {
		return ref
	}
	return nil
}

func paymentArgs(p *surgepay.Payment) ([]any, error) {
	md, err := metadataArg(p.Metadata)
	if err != nil {
		return nil, fmt.Errorf("payment %s metadata: %w", p.ID, err)
	}
	tax, err := taxArg(p.Tax)
	if err != nil {
		return nil, fmt.Errorf("payment %s tax: %w", p.ID, err)
	}
	txs, err := transactionsArg(p)
	if err != nil {
		return nil, fmt.Errorf("payment %s transactions: %w", p.ID, err)
	}
	pending, err := pendingArg(p.Pending)
	if err != nil {
		return nil, fmt.Errorf("payment %s pending: %w", p.ID, err)
	}
	return []any{p.MerchantID, p.ID, p.CustomerID, p.PaymentMethodID, p.Amount, p.AmountTax, p.Currency,
		p.CaptureMethod, string(p.Status), p.AmountAuthorized, p.AmountCaptured, p.AmountRefunded,
		p.Description, md, tax, p.DeclineCode, p.FailureMessage, p.AuthorizationRef, txs, pending,
		p.Path, p.Version, timeArg(p.Created), timeArg(p.Updated), processorRef(p.AuthorizationRef)}, nil
}

func scanPayment(r scanner) (*surgepay.Payment, error) {
	var p surgepay.Payment
	var md, tax, txs, pending sql.NullString
	var created, updated sql.NullInt64
	if err := r.Scan(&p.MerchantID, &p.ID, &p.CustomerID, &p.PaymentMethodID, &p.Amount, &p.AmountTax,
		&p.Currency, &p.CaptureMethod, &p.Status, &p.AmountAuthorized, &p.AmountCaptured, &p.AmountRefunded,
		&p.Description, &md, &tax, &p.DeclineCode, &p.FailureMessage, &p.AuthorizationRef, &txs, &pending,
		&p.Path, &p.Version, &created, &updated); err != nil {
		return nil, err
	}
	p.Created, p.Updated = timeOf(created), timeOf(updated)
	var err error
	if err = fromJSON("metadata", md, &p.Metadata); err == nil {
		if p.Tax, err = taxOf(tax); err == nil {
			if p.Transactions, err = transactionsOf(txs, &p); err == nil {
				p.Pending, err = pendingOf(pending)
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("payment %s: %w", p.ID, err)
	}
	return &p, nil
}

const eventCols = "id, merchant_id, payment_id, type, from_status, to_status, amount, actor_key_id, request_id, created"

// eventColsN is the number of columns in eventCols.
const eventColsN = 10

func eventArgs(args []any, e *surgepay.Event) []any {
	return append(args, e.ID, e.MerchantID, e.PaymentID, e.Type, string(e.FromStatus), string(e.ToStatus),
		e.Amount, e.ActorKeyID, e.RequestID, timeArg(e.Created))
}

func scanEvent(r scanner) (*surgepay.Event, error) {
	var e surgepay.Event
	var created sql.NullInt64
	if err := r.Scan(&e.ID, &e.MerchantID, &e.PaymentID, &e.Type, &e.FromStatus, &e.ToStatus,
		&e.Amount, &e.ActorKeyID, &e.RequestID, &created); err != nil {
		return nil, err
	}
	e.Created = timeOf(created)
	return &e, nil
}

const idempotencyCols = "merchant_id, key, request_hash, status_code, body, created"

func idempotencyArgs(r *surgepay.IdempotencyRecord) []any {
	return []any{r.MerchantID, r.Key, r.RequestHash[:], r.StatusCode, r.Body, timeArg(r.Created)}
}

func scanIdempotency(r scanner) (*surgepay.IdempotencyRecord, error) {
	var rec surgepay.IdempotencyRecord
	var hash []byte
	var created sql.NullInt64
	if err := r.Scan(&rec.MerchantID, &rec.Key, &hash, &rec.StatusCode, &rec.Body, &created); err != nil {
		return nil, err
	}
	if len(hash) != len(rec.RequestHash) {
		return nil, fmt.Errorf("idempotency %s: request hash has %d bytes, want %d", rec.Key, len(hash), len(rec.RequestHash))
	}
	copy(rec.RequestHash[:], hash)
	rec.Created = timeOf(created)
	body, err := decompressBody(rec.Body)
	if err != nil {
		return nil, fmt.Errorf("idempotency %s: %w", rec.Key, err)
	}
	rec.Body = body
	return &rec, nil
}

// placeholders returns "(?, ?, ...)" with n marks.
func placeholders(n int) string {
	b := make([]byte, 0, 3*n+1)
	b = append(b, '(')
	for i := range n {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, '?')
	}
	return string(append(b, ')'))
}
