package postgres

import (
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/surgepay/surgepay"
)

// Column lists, in the order the scan functions read them.
//
//nolint:gosec // G101: column lists (api_keys' hash), not credentials
const (
	merchantCols = "id, name, created, disabled"
	apiKeyCols   = "id, merchant_id, hash, prefix, revoked, created, scopes, expires, last_used"
	// apiKeyReadCols add the merchant's disabled flag, read with a join
	// (apiKeyFrom).
	apiKeyReadCols = "k.id, k.merchant_id, k.hash, k.prefix, k.revoked, k.created, k.scopes, k.expires, k.last_used, " +
		"coalesce(m.disabled, false)"
	apiKeyFrom        = " FROM api_keys k LEFT JOIN merchants m ON m.id = k.merchant_id"
	auditCols         = "id, created, actor, action, merchant_id, object_id, detail"
	customerCols      = "merchant_id, id, name, email, description, metadata, version, created, updated"
	paymentMethodCols = "merchant_id, id, customer_id, brand, last4, exp_month, exp_year, fingerprint, holder_name, sealed_pan, created, processor, processor_token, processor_customer"
	paymentCols       = "merchant_id, id, customer_id, payment_method_id, amount, amount_tax, currency, capture_method, " +
		"status, amount_authorized, amount_captured, amount_refunded, description, metadata, tax, decline_code, " +
		"failure_message, authorization_ref, transactions, pending, path, version, created, updated"
	eventCols = "id, payment_id, merchant_id, type, from_status, to_status, amount, actor_key_id, request_id, created"
)

func scanMerchant(row pgx.Row) (*surgepay.Merchant, error) {
	var m surgepay.Merchant
	if err := row.Scan(&m.ID, &m.Name, &m.Created, &m.Disabled); err != nil {
		return nil, err
	}
	m.Created = m.Created.UTC()
	return &m, nil
}

func scanAPIKey(row pgx.Row) (*surgepay.APIKey, error) {
	var k surgepay.APIKey
	var scopes string
	var expires, lastUsed *time.Time
	if err := row.Scan(&k.ID, &k.MerchantID, &k.Hash, &k.Prefix, &k.Revoked, &k.Created, &scopes, &expires, &lastUsed,
		&k.MerchantDisabled); err != nil {
		return nil, err
	}
	k.Created = k.Created.UTC()
	if expires != nil {
		k.Expires = expires.UTC()
	}
	if lastUsed != nil {
		k.LastUsed = lastUsed.UTC()
	}
	if scopes != "" {
		k.Scopes = strings.Split(scopes, ",")
	}
	return &k, nil
}

func scanAudit(row pgx.Row) (*surgepay.AuditEvent, error) {
	var e surgepay.AuditEvent
	if err := row.Scan(&e.ID, &e.Created, &e.Actor, &e.Action, &e.MerchantID, &e.ObjectID, &e.Detail); err != nil {
		return nil, err
	}
	e.Created = e.Created.UTC()
	return &e, nil
}

func scanCustomer(row pgx.Row) (*surgepay.Customer, error) {
	var c surgepay.Customer
	var metadata []byte
	err := row.Scan(&c.MerchantID, &c.ID, &c.Name, &c.Email, &c.Description, &metadata,
		&c.Version, &c.Created, &c.Updated)
	if err != nil {
		return nil, err
	}
	if c.Metadata, err = decodeMetadata(metadata); err != nil {
		return nil, fmt.Errorf("customer %s: %w", c.ID, err)
	}
	c.Created, c.Updated = c.Created.UTC(), c.Updated.UTC()
	return &c, nil
}

func scanPaymentMethod(row pgx.Row) (*surgepay.PaymentMethod, error) {
	var pm surgepay.PaymentMethod
	err := row.Scan(&pm.MerchantID, &pm.ID, &pm.CustomerID, &pm.Brand, &pm.Last4, &pm.ExpMonth,
		&pm.ExpYear, &pm.Fingerprint, &pm.HolderName, &pm.SealedPAN, &pm.Created, &pm.Processor, &pm.ProcessorToken,
		&pm.ProcessorCustomer)
	if err != nil {
		return nil, err
	}
	pm.Created = pm.Created.UTC()
	return &pm, nil
}

func scanPayment(row pgx.Row) (*surgepay.Payment, error) {
	var p surgepay.Payment
	var status string
	var metadata, tax, txs, pending []byte
	err := row.Scan(&p.MerchantID, &p.ID, &p.CustomerID, &p.PaymentMethodID, &p.Amount, &p.AmountTax,
		&p.Currency, &p.CaptureMethod, &status, &p.AmountAuthorized, &p.AmountCaptured, &p.AmountRefunded,
		&p.Description, &metadata, &tax, &p.DeclineCode, &p.FailureMessage, &p.AuthorizationRef,
		&txs, &pending, &p.Path, &p.Version, &p.Created, &p.Updated)
	if err != nil {
		return nil, err
	}
	p.Status = surgepay.Status(status)
	p.Created, p.Updated = p.Created.UTC(), p.Updated.UTC()
	if p.Metadata, err = decodeMetadata(metadata); err != nil {
		return nil, fmt.Errorf("payment %s: %w", p.ID, err)
	}
	if p.Tax, err = decodeTax(tax); err != nil {
		return nil, fmt.Errorf("payment %s: %w", p.ID, err)
	}
	if p.Transactions, err = decodeTransactions(txs); err != nil {
		return nil, fmt.Errorf("payment %s: %w", p.ID, err)
	}
	if p.Pending, err = decodePending(pending); err != nil {
		return nil, fmt.Errorf("payment %s: %w", p.ID, err)
	}
	return &p, nil
}

func scanEvent(row pgx.Row) (*surgepay.Event, error) {
	var e surgepay.Event
	var from, to string
	err := row.Scan(&e.ID, &e.PaymentID, &e.MerchantID, &e.Type, &from, &to, &e.Amount,
		&e.ActorKeyID, &e.RequestID, &e.Created)
	if err != nil {
		return nil, err
	}
	e.FromStatus, e.ToStatus = surgepay.Status(from), surgepay.Status(to)
	e.Created = e.Created.UTC()
	return &e, nil
}
