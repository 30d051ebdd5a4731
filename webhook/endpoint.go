package webhook

import (
	"context"
	"log/slog"
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
	// fewer than limit while more are due: a caller that got some claims
	// again.
	ClaimWebhookDeliveriesBounded(ctx context.Context, now, leaseUntil time.Time, limit, endpointMax int,
		room map[string]int) ([]*surgepay.WebhookDelivery, error)
}

// Bounds per endpoint.
const (
	// EndpointInflightDefault is the default of Config.EndpointInflightMax.
	EndpointInflightDefault = 4
	// FailingEndpointStreak is the failed attempts in a row, on one node,
	// after which an endpoint is failing: it then has one delivery in
	// flight at a time on that node (the others wait, due, their attempts
	// uncounted) until an attempt succeeds. A dead endpoint whose requests
	// time out then holds one worker, not EndpointInflightMax.
	FailingEndpointStreak = surgepay.WebhookFailingStreak
	// failingEndpointsMax bounds the failing endpoints a Dispatcher
	// tracks; one failing beyond it keeps the usual bound.
	failingEndpointsMax = 1024
)

// endpoints tracks, per endpoint, the deliveries in flight on this node
// and the failed attempts in a row, to bound what a claim may take of
// each. Safe for concurrent use.
type endpoints struct {
	inflightMax int
	log         *slog.Logger

	mu       sync.Mutex
	inflight map[string]int // endpoint → deliveries in flight; no entry for none
	failures map[string]int // endpoint → failed attempts in a row; no entry for none
}

func newEndpoints(inflightMax int, log *slog.Logger) *endpoints {
	return &endpoints{inflightMax: inflightMax, log: log, inflight: map[string]int{}, failures: map[string]int{}}
}

// limit returns the deliveries endpoint id may have in flight. Called
// with e.mu held.
func (e *endpoints) limit(id string) int {
	if e.failures[id] >= FailingEndpointStreak {
		return 1
	}
	return e.inflightMax
}

// room returns, for each endpoint that may not take inflightMax more
// deliveries, how many it may take: the argument of a bounded claim.
func (e *endpoints) room() map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	room := make(map[string]int, len(e.inflight)+len(e.failures))
	for id, n := range e.inflight {
		room[id] = max(e.limit(id)-n, 0)
	}
	for id, n := range e.failures {
		if _, ok := room[id]; !ok && n >= FailingEndpointStreak {
			room[id] = 1
		}
	}
	return room
}

// started counts a delivery in flight.
func (e *endpoints) started(dl *surgepay.WebhookDelivery) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.inflight[dl.EndpointID]++
}

// ended counts a delivery's attempt done and, if its request was sent,
// its endpoint's failures in a row.
func (e *endpoints) ended(r *surgepay.WebhookResult, sent bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	id := r.EndpointID
	switch n := e.inflight[id]; {
	case n < 1:
		// A bookkeeping bug, not a reason to stop the payments server the
		// dispatcher runs in: say so and leave the count at zero.
		e.log.Error("webhooks: an attempt ended that was not counted in flight", "endpoint", id)
	case n == 1:
		delete(e.inflight, id)
	default:
		e.inflight[id] = n - 1
	}
	n, tracked := e.failures[id]
	switch {
	case r.Outcome == surgepay.WebhookDelivered:
		if n >= FailingEndpointStreak {
			e.log.Info("webhooks: endpoint answers again; its deliveries resume", "endpoint", id, "failures", n)
		}
		delete(e.failures, id)
	case r.Outcome == surgepay.WebhookDropped:
		delete(e.failures, id) // deleted
	case !sent || !tracked && len(e.failures) >= failingEndpointsMax:
		// Not a request to the endpoint; or too many tracked.
	default:
		if e.failures[id] = n + 1; n+1 == FailingEndpointStreak {
			e.log.Warn("webhooks: endpoint keeps failing; one delivery in flight at a time until one succeeds",
				"endpoint", id, "failures", n+1, "error", r.Error)
		}
	}
}
