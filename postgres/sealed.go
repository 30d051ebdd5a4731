package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/surgepay/surgepay"
)

var _ surgepay.SealedStore = (*DB)(nil)

// ListSealed reads a page of kind's blobs by the table's primary key.
func (db *DB) ListSealed(ctx context.Context, kind surgepay.SealedKind, afterMerchant, afterID string, limit int) ([]surgepay.SealedBlob, error) {
	table, column, err := surgepay.SealedColumn(kind)
	if err != nil {
		return nil, err
	}
	limit = min(max(limit, 1), surgepay.SealedPageMax)
	defer count(ctx, surgepay.StmtSelect)()
	rows, err := db.pool.Query(ctx, "SELECT merchant_id, id, "+column+" FROM "+table+
		" WHERE (merchant_id, id) > ($1, $2) AND length("+column+") > 0 ORDER BY merchant_id, id LIMIT $3",
		afterMerchant, afterID, limit)
	if err != nil {
		return nil, readErr(fmt.Errorf("list sealed %s: %w", kind, err))
	}
	defer rows.Close()
	var out []surgepay.SealedBlob
	for rows.Next() {
		b := surgepay.SealedBlob{Kind: kind}
		if err := rows.Scan(&b.MerchantID, &b.ID, &b.Sealed); err != nil {
			return nil, fmt.Errorf("list sealed %s: %w", kind, err)
		}
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, readErr(fmt.Errorf("list sealed %s: %w", kind, err))
	}
	return out, nil
}

// ReplaceSealed writes the replacements in one transaction, each guarded
// by the blob it replaces.
func (db *DB) ReplaceSealed(ctx context.Context, rs []surgepay.SealedReplacement) (int, error) {
	if len(rs) > surgepay.SealedPageMax {
		return 0, fmt.Errorf("replace sealed: %d blobs, at most %d", len(rs), surgepay.SealedPageMax)
	}
	for _, r := range rs {
		if _, _, err := surgepay.SealedColumn(r.Old.Kind); err != nil {
			return 0, err
		}
	}
	if len(rs) == 0 {
		return 0, nil
	}
	conn, err := db.pool.Acquire(ctx)
	if err != nil {
		return 0, readErr(fmt.Errorf("replace sealed: %w", err))
	}
	defer conn.Release()
	n := 0
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		n = 0
		for _, r := range rs {
			table, column, _ := surgepay.SealedColumn(r.Old.Kind) // checked above
			surgepay.CountStatement(ctx, surgepay.StmtUpdate)
			tag, err := tx.Exec(ctx, "UPDATE "+table+" SET "+column+" = $1 WHERE merchant_id = $2 AND id = $3 AND "+
				column+" = $4", r.New, r.Old.MerchantID, r.Old.ID, r.Old.Sealed)
			if err != nil {
				return fmt.Errorf("%s of %s: %w", r.Old.Kind, r.Old.ID, err)
			}
			n += int(tag.RowsAffected())
		}
		return nil
	})
	if err != nil {
		return 0, readErr(fmt.Errorf("replace sealed: %w", err))
	}
	return n, nil
}
