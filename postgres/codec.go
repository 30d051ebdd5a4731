package postgres

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/surgepay/surgepay"
)

// Payment sub-objects are stored as jsonb with explicit keys, so that
// renaming a Go field does not orphan stored data. A nil map, slice or
// pointer is stored as JSON null and read back as nil; an empty one stays
// empty.

type txJSON struct {
	ID             string    `json:"id"`
	Type           string    `json:"type"`
	Status         string    `json:"status"`
	Amount         int64     `json:"amount"`
	ProviderRef    string    `json:"provider_ref,omitempty"`
	IdempotencyKey string    `json:"idempotency_key,omitempty"`
	DeclineCode    string    `json:"decline_code,omitempty"`
	Message        string    `json:"message,omitempty"`
	Created        time.Time `json:"created"`
	DueBy          time.Time `json:"due_by,omitzero"` // a dispute's deadline; absent when unknown
}

type pendingJSON struct {
	Type           string `json:"type"`
	Amount         int64  `json:"amount"`
	IdempotencyKey string `json:"idempotency_key"`
	Capture        bool   `json:"capture,omitempty"`
	CaptureLater   bool   `json:"capture_later,omitempty"`
	From           string `json:"from"`
	TxID           string `json:"tx_id"`
	Processor      string `json:"processor,omitempty"`
	ActionURL      string `json:"action_url,omitempty"`
	ReturnURL      string `json:"return_url,omitempty"`
	Reference      string `json:"reference,omitempty"`
}

type taxJSON struct {
	Country    string `json:"country"`
	Region     string `json:"region,omitempty"`
	PostalCode string `json:"postal_code,omitempty"`
	Category   string `json:"category,omitempty"`
	RateBPS    int    `json:"rate_bps"`
}

// dbTime is t as stored: microseconds, UTC. PostgreSQL would truncate
// anyway; doing it here keeps the JSON-free columns and tests in agreement.
func dbTime(t time.Time) time.Time { return t.Truncate(time.Microsecond).UTC() }

// encodeTransactions fails only for a time outside years 0-9999.
func encodeTransactions(txs []surgepay.Transaction) ([]byte, error) {
	if txs == nil {
		return jsonNull, nil
	}
	out := make([]txJSON, len(txs))
	for i, t := range txs {
		out[i] = txJSON{ID: t.ID, Type: t.Type, Status: t.Status, Amount: t.Amount,
			ProviderRef: t.ProviderRef, IdempotencyKey: t.IdempotencyKey,
			DeclineCode: t.DeclineCode, Message: t.Message, Created: t.Created.UTC(), DueBy: t.DueBy.UTC()}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("encode transactions: %w", err)
	}
	return b, nil
}

func decodeTransactions(b []byte) ([]surgepay.Transaction, error) {
	var in []txJSON
	if err := unmarshalJSON(b, &in); err != nil || in == nil {
		return nil, err
	}
	out := make([]surgepay.Transaction, len(in))
	for i, t := range in {
		out[i] = surgepay.Transaction{ID: t.ID, Type: t.Type, Status: t.Status, Amount: t.Amount,
			ProviderRef: t.ProviderRef, IdempotencyKey: t.IdempotencyKey,
			DeclineCode: t.DeclineCode, Message: t.Message, Created: t.Created.UTC()}
		if !t.DueBy.IsZero() {
			out[i].DueBy = t.DueBy.UTC()
		}
	}
	return out, nil
}

func encodePending(p *surgepay.Pending) []byte {
	if p == nil {
		return jsonNull
	}
	return mustJSON(pendingJSON{Type: p.Type, Amount: p.Amount, IdempotencyKey: p.IdempotencyKey,
		Capture: p.Capture, CaptureLater: p.CaptureLater, From: string(p.From), TxID: p.TxID, Processor: p.Processor,
		ActionURL: p.ActionURL, ReturnURL: p.ReturnURL, Reference: p.Reference})
}

func decodePending(b []byte) (*surgepay.Pending, error) {
	var in *pendingJSON
	if err := unmarshalJSON(b, &in); err != nil || in == nil {
		return nil, err
	}
	return &surgepay.Pending{Type: in.Type, Amount: in.Amount, IdempotencyKey: in.IdempotencyKey,
		Capture: in.Capture, CaptureLater: in.CaptureLater, From: surgepay.Status(in.From), TxID: in.TxID, Processor: in.Processor,
		ActionURL: in.ActionURL, ReturnURL: in.ReturnURL, Reference: in.Reference}, nil
}

func encodeTax(t *surgepay.Tax) []byte {
	if t == nil {
		return jsonNull
	}
	return mustJSON(taxJSON(*t))
}

func decodeTax(b []byte) (*surgepay.Tax, error) {
	var in *taxJSON
	if err := unmarshalJSON(b, &in); err != nil || in == nil {
		return nil, err
	}
	t := surgepay.Tax(*in)
	return &t, nil
}

func encodeMetadata(m map[string]string) []byte {
	if m == nil {
		return jsonNull
	}
	return mustJSON(m)
}

func decodeMetadata(b []byte) (map[string]string, error) {
	var m map[string]string
	err := unmarshalJSON(b, &m)
	return m, err
}

var jsonNull = []byte("null")

// mustJSON marshals values that cannot fail to marshal: structs of strings,
// numbers and bools, and string maps. A failure is a programmer error.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("postgres: marshal %T: %v", v, err))
	}
	return b
}

func unmarshalJSON(b []byte, v any) error {
	if len(b) == 0 {
		return nil // SQL NULL: never written by this package, read as nil.
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decode %T: %w", v, err)
	}
	return nil
}
