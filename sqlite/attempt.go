package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/surgepay/surgepay"
)

var _ surgepay.AttemptStore = (*DB)(nil)

const (
	sqlUpsertAttempt = "INSERT INTO provider_attempts (key, processor, created) VALUES (?, ?, ?) " +
		"ON CONFLICT (key) DO UPDATE SET processor = excluded.processor, created = excluded.created"
	sqlFindAttempt   = "SELECT processor, created FROM provider_attempts WHERE key = ?"
	sqlPurgeAttempts = "DELETE FROM provider_attempts WHERE key IN " +
		"(SELECT key FROM provider_attempts WHERE created < ? ORDER BY created LIMIT ?)"
)

// attemptStmts are the writer's statements of provider attempts, prepared
// on the writer connection at its first use: only merchants routed to
// several processors write attempts.
type attemptStmts struct {
	upsert *sql.Stmt
}

// applyAttempt stores a Write's provider attempt, replacing an earlier one
// under the same key.
func (w *writer) applyAttempt(ctx context.Context, wr *surgepay.Write) error {
	a := wr.ProviderAttempt
	if a == nil {
		return nil
	}
	if w.attempts.upsert == nil {
		st, err := w.conn.PrepareContext(context.Background(), sqlUpsertAttempt)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", sqlUpsertAttempt, err)
		}
		w.attempts.upsert = st
	}
	if _, err := exec(ctx, surgepay.StmtInsert, w.attempts.upsert, a.Key, a.Processor, a.Created.UnixNano()); err != nil {
		return fmt.Errorf("record provider attempt: %w", err)
	}
	return nil
}

// FindProviderAttempt returns the latest attempt recorded under key,
// ENOTFOUND if none.
func (db *DB) FindProviderAttempt(ctx context.Context, key string) (*surgepay.ProviderAttempt, error) {
	defer counted(ctx)()
	a := &surgepay.ProviderAttempt{Key: key}
	var created int64
	err := db.read.QueryRowContext(ctx, sqlFindAttempt, key).Scan(&a.Processor, &created)
	if err == sql.ErrNoRows {
		return nil, surgepay.NotFound("key", "provider attempt")
	}
	if err != nil {
		return nil, fmt.Errorf("find provider attempt: %w", err)
	}
	a.Created = time.Unix(0, created).UTC()
	return a, nil
}

// DeleteProviderAttemptsBefore deletes up to limit (at most
// PurgeLimitMax) attempts recorded before t, on the writer.
func (db *DB) DeleteProviderAttemptsBefore(ctx context.Context, t time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	var n int64
	o := &op{run: func(ctx context.Context, w *writer) error {
		res, err := w.conn.ExecContext(ctx, sqlPurgeAttempts, t.UnixNano(), min(limit, PurgeLimitMax))
		if err != nil {
			return fmt.Errorf("purge provider attempts: %w", err)
		}
		n, err = res.RowsAffected()
		return err
	}}
	if err := db.submit(ctx, o); err != nil {
		return 0, err
	}
	return int(n), nil
}
