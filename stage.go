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
	// Fetch returns up to max records, waiting at most wait for the first.
	// A fetched record not acknowledged is delivered again later.
	Fetch(ctx context.Context, max int, wait time.Duration) ([]*StagedRecord, error)
	// Ack removes records for good.
	Ack(ctx context.Context, recs []*StagedRecord) error
	// Backlog returns the records waiting and the creation time of the oldest.
	Backlog(ctx context.Context) (depth int, oldest time.Time, err error)
}

// Merchant processing paths.
const (
	PathStandard    = "standard"
	PathStreamlined = "streamlined"
)
