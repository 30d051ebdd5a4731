package engine

import (
	"context"

	"github.com/surgepay/surgepay"
)

// ListDisputes returns a page of the disputes q selects, of one merchant
// or all, by deadline (unknown last), through the store's DisputeLister
// capability (the operators' console): q.Validate's errors first;
// EUNAVAILABLE when the store keeps no table of disputes. A read; one
// statement.
func (e *Engine) ListDisputes(ctx context.Context, q surgepay.DisputeQuery) (*surgepay.DisputePage, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	l, ok := storeAs[surgepay.DisputeLister](e.store)
	if !ok {
		return nil, &surgepay.Error{Code: surgepay.EUNAVAILABLE, Reason: "store_unavailable",
			Message: "this server's store keeps no list of disputes"}
	}
	return l.ListDisputes(ctx, q)
}
