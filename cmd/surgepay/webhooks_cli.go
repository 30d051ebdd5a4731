package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/config"
	"github.com/surgepay/surgepay/engine"
	"github.com/surgepay/surgepay/internal/cli"
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
	op := webhookOps{a: a, merchant: *merchant, out: stdout}
	switch sub {
	case "endpoints":
		err = op.endpoints(ctx)
	case "deliveries":
		f := surgepay.WebhookDeliveryFilter{EndpointID: *endpoint, EventID: *event, Status: *status, Limit: *limit}
		if *after != "" {
			var ok bool
			if f.StartingAfterEvent, f.StartingAfterEndpoint, ok = surgepay.ParseWebhookDeliveryID(*after); !ok {
				return c.Fail(stderr, "--starting-after %q is not a delivery ID (whd_...)", *after)
			}
		}
		err = op.deliveries(ctx, f)
	case "resend":
		err = op.resend(ctx, rest[0])
	case "roll-secret":
		err = op.roll(ctx, rest[0], *expires)
	}
	if err != nil {
		fmt.Fprintf(stderr, "surgepay: %v\n", err)
		return 1
	}
	return 0
}

// webhookOps runs the webhooks commands on an app.
type webhookOps struct {
	a        *app
	merchant string // --merchant, or "" to find it
	out      io.Writer
}

func (o webhookOps) store() (surgepay.WebhookStore, error) {
	ws, ok := o.a.store.(surgepay.WebhookStore)
	if !ok {
		return nil, fmt.Errorf("the store holds no webhooks")
	}
	return ws, nil
}

// merchants returns --merchant, or every merchant with endpoints.
func (o webhookOps) merchants(ctx context.Context) ([]string, error) {
	if o.merchant != "" {
		return []string{o.merchant}, nil
	}
	ws, err := o.store()
	if err != nil {
		return nil, err
	}
	return ws.ListWebhookMerchants(ctx)
}

// ownerOf returns the merchant of endpoint id: --merchant, or the one of
// the merchants with endpoints that has it (at most 16 endpoints each).
func (o webhookOps) ownerOf(ctx context.Context, id string) (string, error) {
	ms, err := o.merchants(ctx)
	if err != nil {
		return "", err
	}
	ws, _ := o.store()
	for _, m := range ms {
		if _, err := ws.FindWebhookEndpoint(ctx, m, id); err == nil {
			return m, nil
		} else if surgepay.ErrorCode(err) != surgepay.ENOTFOUND {
			return "", err
		}
	}
	return "", fmt.Errorf("no webhook endpoint %s", id)
}

func cliTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func (o webhookOps) endpoints(ctx context.Context) error {
	ms, err := o.merchants(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(o.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tMERCHANT\tURL\tHEALTH\tFAILURES\tLAST SUCCESS\tLAST FAILURE\tLAST ERROR\tOLD SECRET UNTIL\tCREATED")
	for _, m := range ms {
		eps, err := o.a.eng.ListWebhookEndpoints(ctx, &engine.Call{MerchantID: m, RequestID: "cli"})
		if err != nil {
			return err
		}
		for _, e := range eps {
			health := "healthy"
			switch {
			case e.FailuresInARow >= surgepay.WebhookFailingStreak:
				health = "failing"
			case e.FailuresInARow > 0:
				health = "degraded"
			}
			until := "-"
			if e.PreviousSecretActive(time.Now()) {
				until = cliTime(e.PreviousSecretExpires)
			}
			lastErr := e.LastError
			if lastErr == "" {
				lastErr = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", e.ID, e.MerchantID, e.URL, health, e.FailuresInARow,
				cliTime(e.LastSuccess), cliTime(e.LastFailure), strconv.Quote(lastErr), until, cliTime(e.Created))
		}
	}
	return tw.Flush()
}

func (o webhookOps) deliveries(ctx context.Context, f surgepay.WebhookDeliveryFilter) error {
	if err := f.Validate(); err != nil {
		return err
	}
	var ms []string
	if f.EndpointID != "" {
		m, err := o.ownerOf(ctx, f.EndpointID)
		if err != nil {
			return err
		}
		ms = []string{m}
	} else {
		var err error
		if ms, err = o.merchants(ctx); err != nil {
			return err
		}
	}
	tw := tabwriter.NewWriter(o.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tEVENT TYPE\tSTATUS\tATTEMPTS\tLAST ATTEMPT\tLAST STATUS\tLAST ERROR\tNEXT ATTEMPT\tRESENDS")
	more := false
	for _, m := range ms {
		ds, hasMore, err := o.a.eng.ListWebhookDeliveries(ctx, &engine.Call{MerchantID: m, RequestID: "cli"}, f)
		if err != nil {
			return err
		}
		more = more || hasMore
		for _, d := range ds {
			status := d.Status
			if d.InFlight {
				status += " (in flight)"
			}
			code, lastErr := "-", "-"
			if d.LastStatus != 0 {
				code = strconv.Itoa(d.LastStatus)
			}
			if d.LastError != "" {
				lastErr = strconv.Quote(d.LastError)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%d\n", surgepay.WebhookDeliveryID(d.EventID, d.EndpointID),
				d.Type, status, d.Attempts, cliTime(d.LastAttempt), code, lastErr, cliTime(d.NextAttempt), d.Resends)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if more {
		fmt.Fprintln(o.out, "(more: pass --starting-after the last ID)")
	}
	return nil
}

func (o webhookOps) resend(ctx context.Context, id string) error {
	_, ep, ok := surgepay.ParseWebhookDeliveryID(id)
	if !ok {
		return fmt.Errorf("%q is not a delivery ID (whd_...)", id)
	}
	m, err := o.ownerOf(ctx, ep)
	if err != nil {
		return err
	}
	d, err := o.a.eng.ResendWebhookDelivery(ctx, &engine.Call{MerchantID: m, RequestID: "cli"}, id)
	if err != nil {
		return err
	}
	fmt.Fprintf(o.out, "delivery %s of %s (%s) to %s is queued again (resend %d of at most %d)\n", id, d.EventID, d.Type,
		d.EndpointID, d.Resends, surgepay.WebhookResendsMax)
	return nil
}

func (o webhookOps) roll(ctx context.Context, id string, overlap time.Duration) error {
	m, err := o.ownerOf(ctx, id)
	if err != nil {
		return err
	}
	ep, secret, err := o.a.eng.RollWebhookSecret(ctx, &engine.Call{MerchantID: m, RequestID: "cli"}, id, overlap)
	if err != nil {
		return err
	}
	fmt.Fprintf(o.out, "webhook endpoint %s of merchant %s has a new signing secret (shown once):\n%s\n", ep.ID, m, secret)
	if overlap > 0 {
		fmt.Fprintf(o.out, "the old secret also signs deliveries until %s\n", cliTime(ep.PreviousSecretExpires))
	}
	return nil
}
