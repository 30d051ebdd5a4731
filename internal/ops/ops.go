// Package ops carries out the operator commands of the surgepay command
// line on an engine and its store, and writes their answers for a
// terminal: API keys, merchants, the audit trail and webhooks.
package ops

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/engine"
	"github.com/surgepay/surgepay/internal/datadir"
)

// Ops runs operator commands. Out receives their answers; Merchant, when
// set, is the merchant the webhooks commands act for (else they find it).
type Ops struct {
	Engine   *engine.Engine
	Store    surgepay.Store
	Merchant string
	Out      io.Writer
}

// CreateKey creates an API key for merchant (the first one when "") with
// the scopes of scopeList (comma-separated; "" full access), or a
// publishable key (no scopes: it has the checkout scope alone), and the
// expiry expires returns, and prints its secret once.
func (o Ops) CreateKey(ctx context.Context, merchant, scopeList string, publishable bool, expires func() (time.Time, error)) error {
	var in []string
	if scopeList != "" {
		in = strings.Split(scopeList, ",")
	}
	var scopes []string
	var err error
	switch {
	case publishable && in != nil:
		return fmt.Errorf("--publishable takes no --scopes: a publishable key has the one scope %s", surgepay.ScopeCheckout)
	case !publishable:
		if scopes, err = surgepay.ParseScopes("--scopes", in); err != nil {
			return err
		}
	}
	exp, err := expires()
	if err != nil {
		return err
	}
	if merchant == "" {
		ms, err := o.Store.ListMerchants(ctx)
		if err != nil || len(ms) == 0 {
			return fmt.Errorf("no merchant yet: run `surgepay serve` once, or `surgepay merchants create`, or pass --merchant")
		}
		merchant = ms[0].ID
	}
	secret, k, err := o.Engine.CreateAPIKeyWith(ctx, merchant, engine.KeyOptions{Scopes: scopes, Expires: exp, Publishable: publishable})
	if err != nil {
		return err
	}
	if publishable {
		fmt.Fprintf(o.Out, "publishable key %s for merchant %s (safe in a web page; docs/checkout.md):\n%s\n", k.ID, merchant, secret)
		return nil
	}
	fmt.Fprintf(o.Out, "API key %s for merchant %s (shown once):\n%s\n", k.ID, merchant, secret)
	return nil
}

// RollKey replaces API key id, the old secret working for graceText (a
// duration), and prints the new secret once.
func (o Ops) RollKey(ctx context.Context, id, graceText string, expires func() (time.Time, error)) error {
	grace, err := time.ParseDuration(graceText)
	if err != nil {
		return fmt.Errorf("--grace %q must be a duration such as 24h", graceText)
	}
	exp, err := expires()
	if err != nil {
		return err
	}
	r, err := o.Engine.RollAPIKey(ctx, id, grace, exp)
	if err != nil {
		return err
	}
	old := "is revoked now"
	if !r.Old.Revoked {
		old = "works until " + r.Old.Expires.UTC().Format(time.RFC3339)
	}
	fmt.Fprintf(o.Out, "API key %s replaces %s (%s…), which %s. New key for merchant %s (shown once):\n%s\n",
		r.New.ID, r.Old.ID, r.Old.Prefix, old, r.New.MerchantID, r.Secret)
	return nil
}

// When writes a time for a table: RFC 3339 in UTC, "-" for none.
func When(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// ListKeys lists the API keys of merchant, or of all when "".
func (o Ops) ListKeys(ctx context.Context, merchant string) error {
	keys, err := o.Engine.ListAPIKeys(ctx, merchant)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(o.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tMERCHANT\tPREFIX\tSCOPES\tCREATED\tLAST USED\tEXPIRES\tREVOKED")
	for _, k := range keys {
		scopes := "full"
		if len(k.Scopes) > 0 {
			scopes = strings.Join(k.Scopes, ",")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s…\t%s\t%s\t%s\t%s\t%v\n", k.ID, k.MerchantID, k.Prefix, scopes,
			When(k.Created), When(k.LastUsed), When(k.Expires), k.Revoked)
	}
	return tw.Flush()
}

// ListMerchants lists every merchant.
func (o Ops) ListMerchants(ctx context.Context) error {
	ms, err := o.Engine.ListMerchants(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(o.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tCREATED\tDISABLED")
	for _, m := range ms {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%v\n", m.ID, strings.ReplaceAll(m.Name, "\t", " "), When(m.Created), m.Disabled)
	}
	return tw.Flush()
}

// ShowMerchant prints merchant id and its API keys.
func (o Ops) ShowMerchant(ctx context.Context, id string) error {
	m, err := o.Engine.GetMerchant(ctx, id)
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "ID:        %s\nName:      %s\nCreated:   %s\nDisabled:  %v\n\n", m.ID, m.Name, When(m.Created), m.Disabled)
	return o.ListKeys(ctx, id)
}

// WriteAudit writes audit events as a table, and how to ask for the next
// page when there is more.
func WriteAudit(w io.Writer, es []*surgepay.AuditEvent, more bool) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTIME\tACTOR\tACTION\tMERCHANT\tOBJECT\tDETAIL")
	for _, e := range es {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.ID, When(e.Created), e.Actor, e.Action, e.MerchantID,
			e.ObjectID, e.Detail)
	}
	tw.Flush()
	if more && len(es) > 0 {
		fmt.Fprintf(w, "more: --starting-after %s\n", es[len(es)-1].ID)
	}
}

func (o Ops) webhookStore() (surgepay.WebhookStore, error) {
	ws, ok := o.Store.(surgepay.WebhookStore)
	if !ok {
		return nil, fmt.Errorf("the store holds no webhooks")
	}
	return ws, nil
}

// merchants returns --merchant, or every merchant with endpoints.
func (o Ops) merchants(ctx context.Context) ([]string, error) {
	if o.Merchant != "" {
		return []string{o.Merchant}, nil
	}
	ws, err := o.webhookStore()
	if err != nil {
		return nil, err
	}
	return ws.ListWebhookMerchants(ctx)
}

// ownerOf returns the merchant of endpoint id: --merchant, or the one of
// the merchants with endpoints that has it (at most 16 endpoints each).
func (o Ops) ownerOf(ctx context.Context, id string) (string, error) {
	ms, err := o.merchants(ctx)
	if err != nil {
		return "", err
	}
	ws, _ := o.webhookStore()
	for _, m := range ms {
		if _, err := ws.FindWebhookEndpoint(ctx, m, id); err == nil {
			return m, nil
		} else if surgepay.ErrorCode(err) != surgepay.ENOTFOUND {
			return "", err
		}
	}
	return "", fmt.Errorf("no webhook endpoint %s", id)
}

// WebhookEndpoints lists the webhook endpoints of --merchant, or of every
// merchant, with their health.
func (o Ops) WebhookEndpoints(ctx context.Context) error {
	ms, err := o.merchants(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(o.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tMERCHANT\tURL\tHEALTH\tFAILURES\tLAST SUCCESS\tLAST FAILURE\tLAST ERROR\tOLD SECRET UNTIL\tCREATED")
	for _, m := range ms {
		eps, err := o.Engine.ListWebhookEndpoints(ctx, &engine.Call{MerchantID: m, RequestID: "cli"})
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
				until = When(e.PreviousSecretExpires)
			}
			lastErr := e.LastError
			if lastErr == "" {
				lastErr = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", e.ID, e.MerchantID, e.URL, health, e.FailuresInARow,
				When(e.LastSuccess), When(e.LastFailure), strconv.Quote(lastErr), until, When(e.Created))
		}
	}
	return tw.Flush()
}

// WebhookDeliveries lists the deliveries f selects, a page.
func (o Ops) WebhookDeliveries(ctx context.Context, f surgepay.WebhookDeliveryFilter) error {
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
	tw := tabwriter.NewWriter(o.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tEVENT TYPE\tSTATUS\tATTEMPTS\tLAST ATTEMPT\tLAST STATUS\tLAST ERROR\tNEXT ATTEMPT\tRESENDS")
	more := false
	for _, m := range ms {
		ds, hasMore, err := o.Engine.ListWebhookDeliveries(ctx, &engine.Call{MerchantID: m, RequestID: "cli"}, f)
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
				d.Type, status, d.Attempts, When(d.LastAttempt), code, lastErr, When(d.NextAttempt), d.Resends)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if more {
		fmt.Fprintln(o.Out, "(more: pass --starting-after the last ID)")
	}
	return nil
}

// WebhookResend queues delivery id again.
func (o Ops) WebhookResend(ctx context.Context, id string) error {
	_, ep, ok := surgepay.ParseWebhookDeliveryID(id)
	if !ok {
		return fmt.Errorf("%q is not a delivery ID (whd_...)", id)
	}
	m, err := o.ownerOf(ctx, ep)
	if err != nil {
		return err
	}
	d, err := o.Engine.ResendWebhookDelivery(ctx, &engine.Call{MerchantID: m, RequestID: "cli"}, id)
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "delivery %s of %s (%s) to %s is queued again (resend %d of at most %d)\n", id, d.EventID, d.Type,
		d.EndpointID, d.Resends, surgepay.WebhookResendsMax)
	return nil
}

// WebhookRoll gives endpoint id a new signing secret and prints it once;
// the old one keeps signing for overlap.
func (o Ops) WebhookRoll(ctx context.Context, id string, overlap time.Duration) error {
	m, err := o.ownerOf(ctx, id)
	if err != nil {
		return err
	}
	ep, secret, err := o.Engine.RollWebhookSecret(ctx, &engine.Call{MerchantID: m, RequestID: "cli"}, id, overlap)
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "webhook endpoint %s of merchant %s has a new signing secret (shown once):\n%s\n", ep.ID, m, secret)
	if overlap > 0 {
		fmt.Fprintf(o.Out, "the old secret also signs deliveries until %s\n", When(ep.PreviousSecretExpires))
	}
	return nil
}

// devMerchantLeaseInterval sets the lease of the development merchant's
// creation (engine.Lease: three times it, at least LeaseTTLMin).
const devMerchantLeaseInterval = 10 * time.Second

// EnsureDevMerchant creates a development merchant and API key on first
// start (no merchant yet), writes the key to dataDir/dev-api-key and says
// on o.Out how to use it with the API at baseURL; on later starts it says
// where the key is.
func (o Ops) EnsureDevMerchant(ctx context.Context, dataDir, baseURL string) error {
	ms, err := o.Store.ListMerchants(ctx)
	if err != nil {
		return err
	}
	keyFile := filepath.Join(dataDir, "dev-api-key")
	if len(ms) > 0 {
		if _, err := os.Stat(keyFile); err == nil {
			fmt.Fprintf(o.Out, "Development API key: in %s\n", keyFile)
		}
		return nil
	}
	// Nodes started together on one new database: one of them creates it
	// (the holder of the lease; on SQLite, the one node).
	lease := o.Engine.NewLease("dev-merchant", devMerchantLeaseInterval)
	if !lease.Held(ctx) {
		return nil
	}
	defer lease.Release()
	if ms, err = o.Store.ListMerchants(ctx); err != nil || len(ms) > 0 {
		return err // another node made it before this one took the lease
	}
	ctx = engine.WithActor(ctx, "serve")
	m, err := o.Engine.CreateMerchant(ctx, "Development merchant")
	if err != nil {
		return err
	}
	secret, _, err := o.Engine.CreateAPIKey(ctx, m.ID)
	if err != nil {
		return err
	}
	if err := datadir.WriteFileAtomic(keyFile, []byte(secret+"\n")); err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "Created development merchant %s with API key (also in %s):\n\n    %s\n\n"+
		"Try:  curl -s %s/v1/customers -H 'Authorization: Bearer %s' -H 'Content-Type: application/json' -d '{\"name\":\"Ada\"}'\n\n",
		m.ID, keyFile, secret, baseURL, secret)
	return nil
}
