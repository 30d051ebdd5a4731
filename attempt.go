package surgepay

import (
	"context"
	"time"
)

// ProviderAttempt records, durably and before the call, which processor an
// authorization is sent to. A merchant routed to several processors could
// otherwise be charged twice: processor A performs the authorization, the
// node dies before its commit, A then refuses connections, and the
// client's retry (same Idempotency-Key) fails over to B, which charges too
// (issue 34: 20 times in 20). With the attempt recorded, the retry goes
// back to A, and fails over only once A's attempt is known not performed.
type ProviderAttempt struct {
	Key       string // the authorization's provider idempotency key
	Processor string // the processor it is sent to
	Created   time.Time
}

// AttemptStore is a Store that keeps ProviderAttempts: Write.ProviderAttempt
// stores one (replacing an earlier attempt under the same key), and these
// read and purge them. Both stores have it.
type AttemptStore interface {
	// FindProviderAttempt returns the latest attempt recorded under key,
	// ENOTFOUND if none.
	FindProviderAttempt(ctx context.Context, key string) (*ProviderAttempt, error)
	// DeleteProviderAttemptsBefore deletes up to limit attempts recorded
	// before t and returns how many it deleted.
	DeleteProviderAttemptsBefore(ctx context.Context, t time.Time, limit int) (int, error)
}
