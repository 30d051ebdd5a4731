package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/config"
	"github.com/surgepay/surgepay/internal/cli"
	"github.com/surgepay/surgepay/internal/ops"
)

// `surgepay webhooks ...`: the operator's view of webhooks (issue 13 item
// 6), on the store of the configuration, with the engine's rules (the
// same as the merchant API's). A command that names an endpoint or a
// delivery finds its merchant unless --merchant is given.

const webhooksUsage = `Usage: surgepay webhooks COMMAND [flags]

Commands:
  endpoints [--merchant ID]                  list endpoints with their health
  deliveries (--endpoint ID | --event ID)    list deliveries with their status
  resend DELIVERY_ID                         queue a delivery again
  roll-secret ENDPOINT_ID [--expires-in D]   give an endpoint a new signing secret

Run 'surgepay help webhooks COMMAND' for a command's flags. See docs/webhooks.md.
`

const webhooksEndpointsUsage = `Usage: surgepay webhooks endpoints [--merchant ID] [--config FILE]

Lists the webhook endpoints (of one merchant, or of all) with their health:
healthy, degraded (failed attempts in a row) or failing (5 or more in a
row), the failures in a row, the last success and the last error, and until
when a rolled secret still signs. Secrets are never shown.
`

const webhooksDeliveriesUsage = `Usage: surgepay webhooks deliveries (--endpoint ID | --event ID) [--status S] [--limit N] [--starting-after ID] [--config FILE]

Lists deliveries, newest event first: those to an endpoint, of an event, or
both, with their status (pending, succeeded, failed), attempts, last attempt,
last HTTP status or error, and next attempt. Succeeded deliveries are kept
for webhooks.delivered_retention (72h by default), failed ones 30 days.
`

const webhooksResendUsage = `Usage: surgepay webhooks resend DELIVERY_ID [--merchant ID] [--config FILE]

Queues a delivery (whd_...) again: pending, due now, attempts counted afresh;
the dispatcher of 'surgepay serve' sends it within its poll interval (1s).
Refused while an attempt is in flight, and after 10 resends of a delivery.
`

const webhooksRollUsage = `Usage: surgepay webhooks roll-secret ENDPOINT_ID [--expires-in DURATION] [--merchant ID] [--config FILE]

Gives the endpoint a new signing secret and prints it, once: only a sealed
copy is stored. The replaced secret keeps signing deliveries beside the new
one for --expires-in (default 24h, 0 to 168h): each delivery then carries
two v1 signatures, so the receiver switches to the new secret at its pace.
`

// cmdWebhooks is `surgepay webhooks`.
func cmdWebhooks(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	sub, code, ok := cli.Subcommand(args, "webhooks", webhooksUsage,
		[]string{"endpoints", "deliveries", "resend", "roll-secret"}, stdout, stderr)
	if !ok {
		return code
	}
	usage := map[string]string{"endpoints": webhooksEndpointsUsage, "deliveries": webhooksDeliveriesUsage,
		"resend": webhooksResendUsage, "roll-secret": webhooksRollUsage}[sub]
	c, path := configFlags("webhooks "+sub, usage)
	merchant := c.Flags.String("merchant", "", "the merchant `ID` (default: the one that owns the endpoint)")
	var endpoint, event, status, after *string
	var limit *int
	var expires *time.Duration
	switch sub {
	case "deliveries":
		endpoint = c.Flags.String("endpoint", "", "the deliveries to this endpoint (`ID`, we_...)")
		event = c.Flags.String("event", "", "the deliveries of this event (`ID`, evt_...)")
		status = c.Flags.String("status", "", "only this `status`: pending, succeeded or failed")
		limit = c.Flags.Int("limit", surgepay.ListLimitMax, "at most `N` deliveries, 1 to 100")
		after = c.Flags.String("starting-after", "", "the page after this delivery (`ID`, whd_...)")
	case "roll-secret":
		expires = c.Flags.Duration("expires-in", surgepay.WebhookSecretOverlapDefault,
			"how long the replaced secret keeps signing, 0 to 168h")
	}
	rest, code, ok := c.ParseInterleaved(args[1:], stdout, stderr)
	if !ok {
		return code
	}
	wantArgs := 0
	if sub == "resend" || sub == "roll-secret" {
		wantArgs = 1
	}
	if len(rest) != wantArgs {
		return c.Fail(stderr, "want %d argument(s), got %d", wantArgs, len(rest))
	}
	if sub == "deliveries" && *endpoint == "" && *event == "" {
		return c.Fail(stderr, "give --endpoint or --event")
	}
	cfg, err := config.Load(*path, os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "surgepay: %v\n", err)
		return cli.ExitUsage
	}
	a, err := openApp(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		fmt.Fprintf(stderr, "surgepay: %v\n", err)
		return 1
	}
	defer a.Close()
	op := ops.Ops{Engine: a.eng, Store: a.store, Merchant: *merchant, Out: stdout}
	switch sub {
	case "endpoints":
		err = op.WebhookEndpoints(ctx)
	case "deliveries":
		f := surgepay.WebhookDeliveryFilter{EndpointID: *endpoint, EventID: *event, Status: *status, Limit: *limit}
		if *after != "" {
			var ok bool
			if f.StartingAfterEvent, f.StartingAfterEndpoint, ok = surgepay.ParseWebhookDeliveryID(*after); !ok {
				return c.Fail(stderr, "--starting-after %q is not a delivery ID (whd_...)", *after)
			}
		}
		err = op.WebhookDeliveries(ctx, f)
	case "resend":
		err = op.WebhookResend(ctx, rest[0])
	case "roll-secret":
		err = op.WebhookRoll(ctx, rest[0], *expires)
	}
	if err != nil {
		fmt.Fprintf(stderr, "surgepay: %v\n", err)
		return 1
	}
	return 0
}
