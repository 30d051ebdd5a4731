package settle

import (
	"context"
	"fmt"

	"github.com/surgepay/surgepay"
)

// checkPending runs after an UntilEmpty run drained the stage (see
// Config.PendingCheckWindow). Every record still at the stage is one this
// run left (an UntilEmpty run ends only then), so a streamlined payment old
// enough to have been staged before the run's last fetch, whose capture is
// pending and whose record is not among those left, has lost its record:
// nothing would ever capture it. Settle does not capture it (an operator
// decides: its authorization may have lapsed); it reports it.
func (r *runner) checkPending(ctx context.Context) error {
	now := r.cfg.Now()
	left := map[surgepay.PaymentKey]bool{}
	r.mu.Lock()
	for _, l := range r.left {
		left[l.payment] = true
	}
	r.mu.Unlock()
	ms, err := r.cfg.Store.ListMerchants(ctx)
	if err != nil {
		if ctx.Err() != nil {
			r.interrupted()
			return nil
		}
		return fmt.Errorf("settle: pending check: %w", err)
	}
	found := 0
	for _, m := range ms {
		f := surgepay.PaymentFilter{Page: surgepay.Page{Limit: surgepay.ListLimitMax}, Status: surgepay.StatusSucceeded,
			CreatedGTE: now.Add(-r.cfg.PendingCheckWindow), CreatedBefore: now.Add(-r.cfg.OrphanGrace)}
		for {
			ps, more, err := r.cfg.Store.ListPayments(ctx, m.ID, f)
			if err != nil {
				if ctx.Err() != nil { // interrupted: the run ends; what was found is reported
					r.interrupted()
					break
				}
				return fmt.Errorf("settle: pending check of %s: %w", m.ID, err)
			}
			for _, p := range ps {
				if p.Path == surgepay.PathStreamlined && capturePending(p) && !left[surgepay.PaymentKey{MerchantID: p.MerchantID, ID: p.ID}] {
					found++
					r.cfg.Logger.Error("settle: streamlined payment with its capture pending and no staged record; "+
						"nothing will capture it: an operator must look at it", "payment", p.ID, "merchant", p.MerchantID)
				}
			}
			if !more || len(ps) == 0 {
				break
			}
			f.StartingAfter = ps[len(ps)-1].ID
		}
	}
	r.mu.Lock()
	r.rep.PendingWithoutRecord = found
	if found > 0 {
		r.rep.Failures[ReasonPendingNoRecord] = found
	}
	r.mu.Unlock()
	return nil
}

// interrupted marks the report's pending check as not done to the end.
func (r *runner) interrupted() {
	r.mu.Lock()
	r.rep.PendingCheckInterrupted = true
	r.mu.Unlock()
}

// capturePending reports whether p has a capture transaction still pending.
func capturePending(p *surgepay.Payment) bool {
	for i := range p.Transactions {
		if t := &p.Transactions[i]; t.Type == surgepay.TxCapture && t.Status == surgepay.TxPending {
			return true
		}
	}
	return false
}
