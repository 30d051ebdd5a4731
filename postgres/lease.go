package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/surgepay/surgepay"
)

var _ surgepay.Leaser = (*DB)(nil)

// sqlLease takes or renews a lease: the row is written if there was none,
// holder held it, or it had expired; RETURNING says whether it was.
const sqlLease = `INSERT INTO leases (name, holder, expires)
	VALUES ($1, $2, clock_timestamp() + $3 * interval '1 millisecond')
	ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, expires = EXCLUDED.expires
		WHERE leases.holder = EXCLUDED.holder OR leases.expires < clock_timestamp()
	RETURNING holder`

// Lease implements surgepay.Leaser: one statement.
func (db *DB) Lease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	if ttl < time.Millisecond {
		return false, fmt.Errorf("postgres: lease %s: ttl %v under a millisecond", name, ttl)
	}
	var got string
	err := db.pool.QueryRow(ctx, sqlLease, name, holder, ttl.Milliseconds()).Scan(&got)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return false, nil // another holder's, still running
	case err != nil:
		return false, readErr(fmt.Errorf("lease %s: %w", name, err))
	}
	return got == holder, nil
}

// ReleaseLease implements surgepay.Leaser: one statement.
func (db *DB) ReleaseLease(ctx context.Context, name, holder string) error {
	if _, err := db.pool.Exec(ctx, "DELETE FROM leases WHERE name = $1 AND holder = $2", name, holder); err != nil {
		return readErr(fmt.Errorf("release lease %s: %w", name, err))
	}
	return nil
}
