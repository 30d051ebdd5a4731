package sqlite

import (
	"context"
	"fmt"

	"github.com/surgepay/surgepay"
)

var _ surgepay.SealedStore = (*DB)(nil)

// ListSealed reads a page of kind's blobs from the read pool, by the
// table's primary key.
func (db *DB) ListSealed(ctx context.Context, kind surgepay.SealedKind, afterMerchant, afterID string, limit int) ([]surgepay.SealedBlob, error) {
	table, column, err := surgepay.SealedColumn(kind)
	if err != nil {
		return nil, err
	}
	limit = min(max(limit, 1), surgepay.SealedPageMax)
	defer counted(ctx)()
	rows, err := db.read.QueryContext(ctx, "SELECT merchant_id, id, "+column+" FROM "+table+ //nolint:gosec // G202: SealedColumn's fixed names and placeholders only
		" WHERE (merchant_id, id) > (?, ?) AND length("+column+") > 0 ORDER BY merchant_id, id LIMIT ?",
		afterMerchant, afterID, limit)
	if err != nil {
		return nil, fmt.Errorf("list sealed %s: %w", kind, err)
	}
	defer rows.Close() //nolint:errcheck // read-only; rows.Err below reports a failed read
	var out []surgepay.SealedBlob
	for rows.Next() {
		b := surgepay.SealedBlob{Kind: kind}
		if err := rows.Scan(&b.MerchantID, &b.ID, &b.Sealed); err != nil {
			return nil, fmt.Errorf("list sealed %s: %w", kind, err)
		}
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list sealed %s: %w", kind, err)
	}
	return out, nil
}

// ReplaceSealed writes the replacements in one writer transaction, each
// guarded by the blob it replaces.
func (db *DB) ReplaceSealed(ctx context.Context, rs []surgepay.SealedReplacement) (int, error) {
	if len(rs) > surgepay.SealedPageMax {
		return 0, fmt.Errorf("replace sealed: %d blobs, at most %d", len(rs), surgepay.SealedPageMax)
	}
	if len(rs) == 0 {
		return 0, nil
	}
	for _, r := range rs {
		if _, _, err := surgepay.SealedColumn(r.Old.Kind); err != nil {
			return 0, err
		}
	}
	n := 0
	err := db.runOnWriter(ctx, func(ctx context.Context, w *writer) error {
		n = 0
		for _, r := range rs {
			table, column, _ := surgepay.SealedColumn(r.Old.Kind) // checked above
			surgepay.CountStatement(ctx, surgepay.StmtUpdate)
			res, err := w.conn.ExecContext(context.Background(), "UPDATE "+table+" SET "+column+ //nolint:gosec // G202: SealedColumn's fixed names and placeholders only
				" = ? WHERE merchant_id = ? AND id = ? AND "+column+" = ?", r.New, r.Old.MerchantID, r.Old.ID, r.Old.Sealed)
			if err != nil {
				return fmt.Errorf("%s of %s: %w", r.Old.Kind, r.Old.ID, err)
			}
			if k, err := res.RowsAffected(); err == nil {
				n += int(k)
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("replace sealed: %w", err)
	}
	return n, nil
}
