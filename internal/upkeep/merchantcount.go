package upkeep

import (
	"context"
	"log/slog"
	"time"

	"github.com/surgepay/surgepay/engine"
)

// MerchantCountInterval is how often serve counts the enabled merchants
// (api.Server.SetMerchantsEnabled): a merchant made or disabled on
// another node, or by the CLI, changes this node's default share of
// in-flight requests within it. One list of merchants a minute.
const MerchantCountInterval = time.Minute

// MerchantCounter counts the enabled merchants at start, whenever wake
// is signalled (the admin API changed one) and every interval, and hands
// the count to set.
type MerchantCounter struct {
	eng  *engine.Engine
	set  func(n int)
	wake chan struct{} // capacity 1: a change while a count runs is counted again
	log  *slog.Logger
}

func NewMerchantCounter(eng *engine.Engine, set func(int), log *slog.Logger) *MerchantCounter {
	return &MerchantCounter{eng: eng, set: set, wake: make(chan struct{}, 1), log: log}
}

// Changed asks for a count soon; it never blocks.
func (c *MerchantCounter) Changed() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Count counts once. On a store error the last count stays.
func (c *MerchantCounter) Count(ctx context.Context) {
	ms, err := c.eng.ListMerchants(ctx)
	if err != nil {
		if ctx.Err() == nil {
			c.log.Warn("count the enabled merchants", "err", err.Error())
		}
		return
	}
	n := 0
	for _, m := range ms {
		if !m.Disabled {
			n++
		}
	}
	c.set(n)
}

// Run counts every interval and on each wake until ctx ends.
func (c *MerchantCounter) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-c.wake:
		}
		c.Count(ctx)
	}
}
