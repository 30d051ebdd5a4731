package engine

import (
	"container/heap"
	"context"
	"fmt"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/cache"
)

// preheatMethodsPageMin is the smallest page a merchant's cards are read
// in by the preheat: with many merchants the budget shared among them is
// small, and a page smaller than this would cost more queries than rows.
const preheatMethodsPageMin = 16

// In a shared scope, preheated cards reach Redis within
// cache.WriteBackAgeMax of their read or not at all (see
// cache.Table.PreheatRead): a card deleted meanwhile is then still marked
// in Redis and stays out. A merchant's page of cards read longer than
// preheatPageFresh ago is read again before more of it is taken, and the
// cards taken are written before every store read, every preheatFlushMax
// cards (one Redis batch) and once the oldest is preheatFlushAge old. In
// process scope (nothing shared to race with) pages are not read again.
const (
	preheatPageFresh = cache.WriteBackAgeMax / 2
	preheatFlushAge  = cache.WriteBackAgeMax / 4
	preheatFlushMax  = cache.PreheatBatchMax
)

// preheatMethodsMax returns how many payment methods the preheat loads:
// Config.PreheatPaymentMethodsMax, by default the payment_methods cache
// entity's memory bound (entries_max), none when the entity is off.
func (e *Engine) preheatMethodsMax() int {
	n := e.cfg.PreheatPaymentMethodsMax
	if n < 0 || e.methods.Scope() == cache.ScopeOff {
		return 0
	}
	if n == 0 {
		n = e.cache.Config().Entities[cache.PaymentMethods].EntriesMax
	}
	return n
}

// preheatPaymentMethods loads the newest saved cards of all merchants, up
// to preheatMethodsMax, into the cache, so that the first payments after a
// start (or on a new node) read no card from the store. Cards are taken
// newest first by ID (IDs sort by creation time) across merchants: each
// merchant's cards are read in pages of its primary key, newest first,
// and merged. In process scope it reads at most the budget plus a page
// per merchant, in one query per merchant and per further page. In a
// shared scope a page is read again when it has grown stale (see
// preheatPageFresh): with many merchants, whose turns in the merge come
// more than that apart, this can cost up to a query per card.
//
// Customers are not preheated: the payment path never reads them (a
// payment names its card, and the card names its customer).
func (e *Engine) preheatPaymentMethods(ctx context.Context) error {
	budget := e.preheatMethodsMax()
	if budget == 0 {
		return nil
	}
	ms, err := e.store.ListMerchants(ctx)
	if err != nil || len(ms) == 0 {
		return err
	}
	page := min(max(budget/len(ms), preheatMethodsPageMin), surgepay.RecentPaymentMethodsPageMax, budget)
	var h methodCursors
	for _, m := range ms {
		c := &methodCursor{merchantID: m.ID}
		if err := c.next(ctx, e.store, page); err != nil {
			return err
		}
		if len(c.buf) > 0 {
			h = append(h, c)
		}
	}
	heap.Init(&h)
	batch := make(map[string]*surgepay.PaymentMethod, min(budget, preheatFlushMax))
	var oldest time.Time // the read of batch's oldest card
	flush := func() {
		if len(batch) == 0 {
			return
		}
		if err := e.methods.PreheatRead(ctx, batch, oldest); err != nil { // a cache error: colder, not broken
			e.log.Warn("preheat payment methods: not cached; their first payments read the store", "count", len(batch), "err", err.Error())
		}
		clear(batch)
		oldest = time.Time{}
	}
	shared := e.methods.Scope() != cache.ScopeProcess
	taken := 0
	for taken < budget && len(h) > 0 {
		c := h[0]
		if shared && time.Since(c.readAt) > preheatPageFresh && !c.reread {
			// Read what is left of the page again, from the last card
			// taken; once per card taken, so a slow store cannot loop.
			c.before, c.reread = c.taken, true
			flush() // what was taken is not held over the read
			if err := c.next(ctx, e.store, page); err != nil {
				return err
			}
			h.top()
			continue
		}
		pm := c.buf[0]
		c.buf, c.taken, c.reread = c.buf[1:], pm.ID, false
		batch[methodKey(c.merchantID, pm.ID)] = pm
		taken++
		if oldest.IsZero() || c.readAt.Before(oldest) {
			oldest = c.readAt
		}
		if len(batch) >= preheatFlushMax || time.Since(oldest) > preheatFlushAge {
			flush()
		}
		if len(c.buf) == 0 && !c.done {
			flush()
			if err := c.next(ctx, e.store, page); err != nil {
				return err
			}
		}
		h.top()
	}
	flush()
	e.log.Info("preheat payment methods read", "count", taken, "merchants", len(ms))
	return nil
}

// methodCursor pages through one merchant's cards, newest first.
type methodCursor struct {
	merchantID string
	buf        []*surgepay.PaymentMethod // read, not yet taken
	before     string                    // the ID of the last card read
	taken      string                    // the ID of the last card taken ("" none)
	readAt     time.Time                 // before buf was read
	reread     bool                      // buf was read again since the last card taken
	done       bool                      // no older cards
}

func (c *methodCursor) next(ctx context.Context, s surgepay.Store, page int) error {
	c.readAt = time.Now()
	pms, err := s.ListRecentPaymentMethods(ctx, c.merchantID, c.before, page)
	if err != nil {
		return fmt.Errorf("preheat payment methods of %s: %w", c.merchantID, err)
	}
	c.buf = pms
	c.done = len(pms) < page
	if len(pms) > 0 {
		c.before = pms[len(pms)-1].ID
	}
	return nil
}

// methodCursors is a heap of cursors by their next card, newest first.
type methodCursors []*methodCursor

// top restores the heap after its top cursor's buffer changed: out if
// empty, else moved to its place.
func (h *methodCursors) top() {
	if len((*h)[0].buf) == 0 {
		heap.Pop(h)
	} else {
		heap.Fix(h, 0)
	}
}

func (h methodCursors) Len() int           { return len(h) }
func (h methodCursors) Less(i, j int) bool { return h[i].buf[0].ID > h[j].buf[0].ID }
func (h methodCursors) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *methodCursors) Push(x any)        { *h = append(*h, x.(*methodCursor)) }
func (h *methodCursors) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}
