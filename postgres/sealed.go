package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/surgepay/surgepay"
)

var _ surgepay.SealedStore = (*DB)(nil)

// sealedColumn is where a kind of sealed blob is stored: a column of a
// table keyed by (merchant_id, id).
type sealedColumn struct{ table, column string }

var sealedColumns = map[surgepay.SealedKind]sealedColumn{
	surgepay.SealedCardNumber:            {"payment_methods", "sealed_pan"},
	surgepay.SealedWebhookSecret:         {"webhook_endpoints", "sealed_secret"},
	surgepay.SealedWebhookPreviousSecret: {"webhook_endpoints", "previous_sealed_secret"},
}

func sealedColumnOf(kind surgepay.SealedKind) (sealedColumn, error) {
	c, ok := sealedColumns[kind]
	if !ok {
		return c, fmt.Errorf("sealed blobs: unknown kind %q", kind)
	}
	return c, nil
}

// ListSealed reads a page of kind's blobs by the table's primary key.
func (db *DB) ListSealed(ctx context.Context, kind surgepay.SealedKind, afterMerchant, afterID string, limit int) ([]surgepay.SealedBlob, error) {
	c, err := sealedColumnOf(kind)
	if err != nil {
		return nil, err
	}
	limit = min(max(limit, 1), surgepay.SealedPageMax)
	defer count(ctx, surgepay.StmtSelect)()
	rows, err := db.pool.Query(ctx, "SELECT merchant_id, id, "+c.column+" FROM "+c.table+
		" WHERE (merchant_id, id) > ($1, $2) AND length("+c.column+") > 0 ORDER BY merchant_id, id LIMIT $3",
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
		if _, err := sealedColumnOf(r.Old.Kind); err != nil {
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
			c := sealedColumns[r.Old.Kind]
			surgepay.CountStatement(ctx, surgepay.StmtUpdate)
			tag, err := tx.Exec(ctx, "UPDATE "+c.table+" SET "+c.column+" = $1 WHERE merchant_id = $2 AND id = $3 AND "+
				c.column+" = $4", r.New, r.Old.MerchantID, r.Old.ID, r.Old.Sealed)
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
