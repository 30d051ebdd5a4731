package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/surgepay/surgepay"
)

var _ surgepay.AttemptStore = (*DB)(nil)

const sqlAttemptUpsert = `INSERT INTO provider_attempts (key, processor, created) VALUES ($1, $2, $3)
	ON CONFLICT (key) DO UPDATE SET processor = excluded.processor, created = excluded.created`

// addAttempt adds a Write's provider attempt (not a guard).
func (o *op) addAttempt(w *surgepay.Write) {
	if a := w.ProviderAttempt; a != nil {
		o.insert(surgepay.StmtInsert, sqlAttemptUpsert, a.Key, a.Processor, dbTime(a.Created))
	}
}

// FindProviderAttempt returns the latest attempt recorded under key,
// ENOTFOUND if none.
func (db *DB) FindProviderAttempt(ctx context.Context, key string) (*surgepay.ProviderAttempt, error) {
	defer count(ctx, surgepay.StmtSelect)()
	a := &surgepay.ProviderAttempt{Key: key}
	err := db.pool.QueryRow(ctx, "SELECT processor, created FROM provider_attempts WHERE key = $1", key).Scan(&a.Processor, &a.Created)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, surgepay.NotFound("key", "provider attempt")
	}
	if err != nil {
		return nil, readErr(fmt.Errorf("find provider attempt: %w", err))
	}
	a.Created = a.Created.UTC()
	return a, nil
}

// DeleteProviderAttemptsBefore deletes up to limit attempts recorded
// before t.
func (db *DB) DeleteProviderAttemptsBefore(ctx context.Context, t time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	defer count(ctx, surgepay.StmtDelete)()
	tag, err := db.pool.Exec(ctx, `DELETE FROM provider_attempts WHERE key IN (
		SELECT key FROM provider_attempts WHERE created < $1 ORDER BY created LIMIT $2 FOR UPDATE SKIP LOCKED)`, dbTime(t), limit)
	if err != nil {
		return 0, readErr(fmt.Errorf("delete provider attempts: %w", err))
	}
	return int(tag.RowsAffected()), nil
}
