package webhook

import (
	"context"
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
