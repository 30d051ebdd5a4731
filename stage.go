package surgepay

import (
	"context"
	"time"
)

// CaptureInstruction is what a streamlined sale stages for settlement: all
// that `surgepay settle` needs to capture the authorization later. It is
// sealed to the settlement public key before it leaves the engine; API
// hosts cannot read it back.
type CaptureInstruction struct {
	PaymentID        string    `json:"payment"`
	MerchantID       string    `json:"merchant"`
	Amount           int64     `json:"amount"`
	Currency         string    `json:"currency"`
	AuthorizationRef string    `json:"authorization_ref"`
	IdempotencyKey   string    `json:"idempotency_key"` // the provider key of the capture
	Authorized       time.Time `json:"authorized"`
}

// StagedRecord is a sealed CaptureInstruction waiting for settlement.
type StagedRecord struct {
	ID         string // unique; the de-duplication ID at the stage
	MerchantID string
	PaymentID  string
	Sealed     []byte // opaque to API hosts
	Created    time.Time
}

// Sealer seals capture instructions to the settlement public key.
type Sealer interface {
	Seal(ins *CaptureInstruction) ([]byte, error)
}

// Opener opens sealed instructions; only the settlement processor has one.
// A modified record fails to open.
type Opener interface {
	Open(sealed []byte) (*CaptureInstruction, error)
}

// Stage is a durable queue of staged records outside the database (the
// production stage: NATS JetStream). The embedded stage needs no Stage: the
// record rides in the payment's Write (Write.Staged) and commits with it.
type Stage interface {
	// Put returns once rec is durable at the stage. A repeated rec.ID is
	// accepted and stored once.
	Put(ctx context.Context, rec *StagedRecord) error
}

// StageConsumer is the settlement side of a stage.
type StageConsumer interface {
	// Fetch returns up to limit records, waiting at most wait for the first.
	// A fetched record not acknowledged is delivered again later.
	Fetch(ctx context.Context, limit int, wait time.Duration) ([]*StagedRecord, error)
	// Ack removes records for good.
	Ack(ctx context.Context, recs []*StagedRecord) error
	// Backlog returns the records waiting and the creation time of the oldest.
	Backlog(ctx context.Context) (depth int, oldest time.Time, err error)
}

// PaymentsFinder is the optional capability of a store that reads many
// payments in one statement: settlement loads each batch's payments with
// it instead of one FindPayment per record.
type PaymentsFinder interface {
	// FindPayments returns the payments named by keys that exist, in any
	// order; a key with no payment (or another merchant's) has none. It
	// takes at most the store's limit of keys (10,000 for both stores).
	FindPayments(ctx context.Context, keys []PaymentKey) ([]*Payment, error)
}

// SettlementWriter is the optional capability of a store that stores a
// batch of settlement results in one statement: settle records a batch's
// captures with it instead of one Write each (one UPDATE and one INSERT
// per payment, pipelined in group commits, cost PostgreSQL about 40 µs of
// CPU per capture; one statement for 2,000, about 26 µs).
type SettlementWriter interface {
	// ApplySettlements stores each Write of ws whose guard holds (the
	// payment's stored Version is PaymentUpdate.Version-1) with its Events,
	// StagedAck and Webhook, and reports which it stored; a Write not
	// stored (its payment changed or is gone) stored nothing. Each Write
	// holds a PaymentUpdate and perhaps those parts, nothing else (a Write
	// with any other part is an error), and no two name one payment. A
	// store wrapper whose Apply adds parts to a Write must add them here
	// too. If it returns an error, any Write of ws may or
	// may not be stored. It takes at most the store's limit of Writes
	// (10,000 for PostgreSQL).
	ApplySettlements(ctx context.Context, ws []*Write) (stored []bool, err error)
}

// PaymentKey names a payment of a merchant.
type PaymentKey struct {
	MerchantID string
	ID         string
}

// Merchant processing paths.
const (
	PathStandard    = "standard"
	PathStreamlined = "streamlined"
)
