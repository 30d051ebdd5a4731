package main

import (
	"context"
	"fmt"
	"io"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/engine"
	"github.com/surgepay/surgepay/internal/cli"
	"github.com/surgepay/surgepay/internal/ops"
)

const merchantsUsage = `Usage:
  surgepay merchants create NAME          make a merchant (then: surgepay keys create --merchant ID)
  surgepay merchants list                 list merchants: ID, name, created, disabled
  surgepay merchants show ID              a merchant and its API keys
  surgepay merchants disable ID           refuse every API key of the merchant (403 merchant_disabled)
  surgepay merchants enable ID            accept its keys again

Run 'surgepay help merchants COMMAND' for a command's flags.
`

var merchantsUsages = map[string]string{
	"create": "Usage: surgepay merchants create NAME [--config FILE]\n\nMakes a merchant and prints its ID. Its settings are\n[merchants.\"ID\"] in the config file; make it a key with\n`surgepay keys create --merchant ID`.\n",
	"list":   "Usage: surgepay merchants list [--config FILE]\n\nLists the merchants: ID, name, when made, and whether disabled.\n",
	"show":   "Usage: surgepay merchants show ID [--config FILE]\n\nShows a merchant and its API keys (never their secrets).\n",
	"disable": `Usage: surgepay merchants disable ID [--config FILE]

Disables a merchant: every request with one of its API keys is refused
403 merchant_disabled. Its payments, staged captures and webhooks are
untouched: settle still captures its staged sales and webhooks are still
delivered. Every server sharing the database refuses its keys within a
second (each one polls for such changes); those sharing a Redis API-key
cache, and the server whose admin API made the change, at once.
`,
	"enable": "Usage: surgepay merchants enable ID [--config FILE]\n\nEnables a disabled merchant: its keys work again (same bound as disable).\n",
}

// cmdMerchants is `surgepay merchants create|list|show|disable|enable`.
func cmdMerchants(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	sub, code, ok := cli.Subcommand(args, "merchants", merchantsUsage,
		[]string{"create", "list", "show", "disable", "enable"}, stdout, stderr)
	if !ok {
		return code
	}
	c, path := configFlags("merchants "+sub, merchantsUsages[sub])
	rest, code, ok := c.ParseInterleaved(args[1:], stdout, stderr)
	if !ok {
		return code
	}
	want := 1
	if sub == "list" {
		want = 0
	}
	if len(rest) != want {
		return c.Fail(stderr, "want %d argument(s), got %d", want, len(rest))
	}
	a, code := openCLIApp(ctx, *path, stderr)
	if code >= 0 {
		return code
	}
	defer a.Close()
	ctx = engine.WithActor(ctx, cliActor())
	var err error
	switch sub {
	case "create":
		var m *surgepay.Merchant
		if m, err = a.eng.CreateMerchant(ctx, rest[0]); err == nil {
			fmt.Fprintf(stdout, "merchant %s created; make it an API key with: surgepay keys create --merchant %s\n", m.ID, m.ID)
		}
	case "list":
		err = ops.Ops{Engine: a.eng, Store: a.store, Out: stdout}.ListMerchants(ctx)
	case "show":
		err = ops.Ops{Engine: a.eng, Store: a.store, Out: stdout}.ShowMerchant(ctx, rest[0])
	case "disable", "enable":
		var m *surgepay.Merchant
		if m, err = a.eng.SetMerchantDisabled(ctx, rest[0], sub == "disable"); err == nil {
			fmt.Fprintf(stdout, "merchant %s is %sd\n", m.ID, sub)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "surgepay: %v\n", err)
		return 1
	}
	return 0
}

const auditUsage = `Usage:
  surgepay audit list [--merchant ID] [--object ID] [--limit N]   the merchant and API-key audit trail, newest first

Run 'surgepay help audit list' for its flags.
`

const auditListUsage = `Usage: surgepay audit list [--merchant ID] [--object ID] [--limit N] [--starting-after ID] [--config FILE]

Lists the audit trail of merchant and API-key changes, newest first:
time, actor, action, merchant, object and detail. It never holds a secret.
`

// cmdAudit is `surgepay audit list`.
func cmdAudit(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if _, code, ok := cli.Subcommand(args, "audit", auditUsage, []string{"list"}, stdout, stderr); !ok {
		return code
	}
	c, path := configFlags("audit list", auditListUsage)
	merchant := c.Flags.String("merchant", "", "only this merchant's events (`ID`)")
	object := c.Flags.String("object", "", "only the events of this merchant or key (`ID`)")
	limit := c.Flags.Int("limit", surgepay.ListLimitMax, fmt.Sprintf("at most `N` events (1 to %d)", surgepay.ListLimitMax))
	after := c.Flags.String("starting-after", "", "events older than this event `ID` (the next page)")
	if code, ok := c.Parse(args[1:], stdout, stderr); !ok {
		return code
	}
	if *limit < 1 || *limit > surgepay.ListLimitMax {
		return c.Fail(stderr, "--limit must be 1 to %d", surgepay.ListLimitMax)
	}
	a, code := openCLIApp(ctx, *path, stderr)
	if code >= 0 {
		return code
	}
	defer a.Close()
	es, more, err := a.eng.ListAuditEvents(ctx, surgepay.AuditFilter{MerchantID: *merchant, ObjectID: *object,
		Page: surgepay.Page{Limit: *limit, StartingAfter: *after}})
	if err != nil {
		fmt.Fprintf(stderr, "surgepay: %v\n", err)
		return 1
	}
	ops.WriteAudit(stdout, es, more)
	return 0
}
