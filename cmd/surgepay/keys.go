package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"text/tabwriter"
	"time"
)

const keysListUsage = `Usage: surgepay keys list [--merchant ID] [--config FILE]

Lists the API keys (of one merchant, or of all): ID, merchant, the secret's
first characters, when it was made, and whether it is revoked. Secrets are
not stored, so they cannot be shown.
`

const keysRevokeUsage = `Usage: surgepay keys revoke KEY_ID [--config FILE]

Revokes an API key for good: its requests are refused 401. The key is
dropped at once from a shared (Redis) cache, so every server that shares
it refuses it at once; a server that caches API keys in its own memory
only refuses it once its entry expires (cache.entities.api_keys.ttl, 5
minutes by default): lower that TTL, or restart, to shorten the window.
See docs/cache.md.
`

// cmdKeysAdmin is `surgepay keys list` and `surgepay keys revoke`.
func cmdKeysAdmin(ctx context.Context, sub string, args []string, stdout, stderr io.Writer) int {
	usage := keysListUsage
	if sub == "revoke" {
		usage = keysRevokeUsage
	}
	c, path := configFlags("keys "+sub, usage)
	var merchant *string
	if sub == "list" {
		merchant = c.Flags.String("merchant", "", "list only this merchant's keys (`ID`)")
	}
	var rest []string
	if sub == "revoke" {
		var code int
		var ok bool
		if rest, code, ok = c.ParseInterleaved(args, stdout, stderr); !ok {
			return code
		}
		if len(rest) != 1 {
			return c.Fail(stderr, "want one KEY_ID, got %d arguments", len(rest))
		}
	} else if code, ok := c.Parse(args, stdout, stderr); !ok {
		return code
	}
	cfg, err := LoadConfig(*path, envOS)
	if err != nil {
		fmt.Fprintf(stderr, "surgepay: %v\n", err)
		return 2
	}
	a, err := openApp(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		fmt.Fprintf(stderr, "surgepay: %v\n", err)
		return 1
	}
	defer a.Close()
	if sub == "revoke" {
		k, err := a.eng.RevokeAPIKey(ctx, rest[0])
		if err != nil {
			fmt.Fprintf(stderr, "surgepay: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "API key %s (%s…) of merchant %s is revoked\n", k.ID, k.Prefix, k.MerchantID)
		return 0
	}
	keys, err := a.eng.ListAPIKeys(ctx, *merchant)
	if err != nil {
		fmt.Fprintf(stderr, "surgepay: %v\n", err)
		return 1
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tMERCHANT\tPREFIX\tCREATED\tREVOKED")
	for _, k := range keys {
		fmt.Fprintf(tw, "%s\t%s\t%s…\t%s\t%v\n", k.ID, k.MerchantID, k.Prefix, k.Created.UTC().Format(time.RFC3339), k.Revoked)
	}
	tw.Flush()
	return 0
}
