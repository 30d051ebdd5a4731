package webhook

import (
	"context"
	"sync"
	"time"

	"github.com/surgepay/surgepay"
)

// BoundedClaimer is the optional capability of a surgepay.WebhookStore to
// claim with a bound per endpoint, which the Dispatcher uses to keep one
// slow endpoint from holding every worker. Both stores of this repository
// have it; with a store without it, a Dispatcher claims without that
// bound.
type BoundedClaimer interface {
	// ClaimWebhookDeliveriesBounded is ClaimWebhookDeliveries that takes
	// at most endpointMax deliveries of any one endpoint, or room[id] of
	// endpoint id if room has it (none if room[id] <= 0). The deliveries
	// it leaves are not claimed: they stay due, their attempts uncounted.
	// It considers a bounded number of due deliveries, so it may return
	// fewer than max while more are due: a caller that got some claims
	// again.
	ClaimWebhookDeliveriesBounded(ctx context.Context, now, leaseUntil time.Time, max, endpointMax int,
		room map[string]int) ([]*surgepay.WebhookDelivery, error)
}

// EndpointInflightDefault is the default of Config.EndpointInflightMax.
const EndpointInflightDefault = 4

// endpoints tracks the deliveries in flight on this node per endpoint,
// to bound what a claim may take of each. Safe for concurrent use.
type endpoints struct {
	inflightMax int

	mu       sync.Mutex
	inflight map[string]int // endpoint → deliveries in flight; no entry for none
}

func newEndpoints(inflightMax int) *endpoints {
	return &endpoints{inflightMax: inflightMax, inflight: map[string]int{}}
}

// room returns, for each endpoint that may not take inflightMax more
// deliveries, how many it may take: the argument of a bounded claim.
func (e *endpoints) room() map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	room := make(map[string]int, len(e.inflight))
	for id, n := range e.inflight {
		room[id] = max(e.inflightMax-n, 0)
	}
	return room
}

// started counts a delivery in flight.
func (e *endpoints) started(dl *surgepay.WebhookDelivery) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.inflight[dl.EndpointID]++
}

// ended counts a delivery's attempt done.
func (e *endpoints) ended(r *surgepay.WebhookResult) {
	e.mu.Lock()
	defer e.mu.Unlock()
	id := r.EndpointID
	switch n := e.inflight[id]; {
	case n < 1:
		panic("webhook: an attempt ended that was not counted in flight")
	case n == 1:
		delete(e.inflight, id)
	default:
		e.inflight[id] = n - 1
	}
}
