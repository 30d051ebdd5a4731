package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/user"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/config"
	"github.com/surgepay/surgepay/engine"
	"github.com/surgepay/surgepay/internal/cli"
	"github.com/surgepay/surgepay/internal/ops"
)

const keysCreateUsage = `Usage: surgepay keys create [--merchant ID] [--scopes LIST | --publishable] [--expires-in D | --expires-at T] [--config FILE]

Makes a new API key for a merchant (default: the first one, made by the
first serve) and prints it once. --scopes restricts it (comma-separated:
resource:read or resource:write, or the presets read_only,
payments_no_refunds, full; default full access); see docs/api-keys.md.
--publishable makes a key for web pages instead (pk_test_…, pk_live_…;
docs/checkout.md).
`

const keysListUsage = `Usage: surgepay keys list [--merchant ID] [--config FILE]

Lists the API keys (of one merchant, or of all): ID, merchant, the secret's
first characters, scopes, when it was made, last used (flushed by servers
every minute), when it expires, and whether it is revoked. Secrets are not
stored, so they cannot be shown.
`

const keysRevokeUsage = `Usage: surgepay keys revoke KEY_ID [--config FILE]

Revokes an API key for good: its requests are refused 401 by every
server sharing the database within a second (each one polls for such
changes), and at once by those sharing a Redis API-key cache. See
docs/api-keys.md.
`

const keysRollUsage = `Usage: surgepay keys roll KEY_ID --grace D [--expires-in D | --expires-at T] [--config FILE]

Makes a new secret for the key's merchant, with the same scopes, and
prints it once. The old secret keeps working for --grace (e.g. 24h; at
most 168h; 0 stops it at once), then is refused 401 api_key_expired.
`

const keysExpireUsage = `Usage: surgepay keys expire KEY_ID (--expires-in D | --expires-at T) [--config FILE]

Sets the key's expiry, or brings it forward (an expiry is never pushed
later). From then on the key is refused 401 api_key_expired; the cache
bound is revoke's.
`

// cliActor names the operator in the audit trail: "cli:" and the OS user.
func cliActor() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return "cli:" + u.Username
	}
	if n := os.Getenv("USER"); n != "" {
		return "cli:" + n
	}
	return "cli"
}

// expiryFlags are --expires-in and --expires-at.
type expiryFlags struct{ in, at *string }

func addExpiryFlags(c *cli.Command) expiryFlags {
	return expiryFlags{
		in: c.Flags.String("expires-in", "", "the key stops working after `DURATION` (e.g. 720h)"),
		at: c.Flags.String("expires-at", "", "the key stops working at `TIME` (RFC 3339, e.g. 2027-01-31T00:00:00Z)"),
	}
}

func (f expiryFlags) time(now time.Time) (time.Time, error) {
	switch {
	case *f.in != "" && *f.at != "":
		return time.Time{}, fmt.Errorf("give --expires-in or --expires-at, not both")
	case *f.in != "":
		d, err := time.ParseDuration(*f.in)
		if err != nil || d <= 0 {
			return time.Time{}, fmt.Errorf("--expires-in %q must be a positive duration such as 720h", *f.in)
		}
		return now.Add(d), nil
	case *f.at != "":
		t, err := time.Parse(time.RFC3339, *f.at)
		if err != nil {
			return time.Time{}, fmt.Errorf("--expires-at %q must be an RFC 3339 time such as 2027-01-31T00:00:00Z", *f.at)
		}
		return t, nil
	}
	return time.Time{}, nil
}

// openCLIApp loads the configuration and opens the app for a command that
// changes or reads merchants and keys. code >= 0 is the exit code of a
// failure, already reported.
func openCLIApp(ctx context.Context, path string, stderr io.Writer) (*app, int) {
	cfg, err := config.Load(path, os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "surgepay: %v\n", err)
		return nil, 2
	}
	a, err := openApp(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		fmt.Fprintf(stderr, "surgepay: %v\n", err)
		return nil, 1
	}
	return a, -1
}

// cmdKeysAdmin is `surgepay keys create|list|revoke|roll`.
func cmdKeysAdmin(ctx context.Context, sub string, args []string, stdout, stderr io.Writer) int {
	usage := map[string]string{"create": keysCreateUsage, "list": keysListUsage, "revoke": keysRevokeUsage,
		"roll": keysRollUsage, "expire": keysExpireUsage}[sub]
	c, path := configFlags("keys "+sub, usage)
	var merchant, scopes, grace *string
	publishable := new(bool)
	var exp expiryFlags
	switch sub {
	case "create":
		merchant = c.Flags.String("merchant", "", "merchant `ID` (default: the first merchant)")
		scopes = c.Flags.String("scopes", "", "comma-separated `LIST` of scopes or presets (default: full access)")
		publishable = c.Flags.Bool("publishable", false, "make a publishable key for web pages (docs/checkout.md)")
		exp = addExpiryFlags(c)
	case "list":
		merchant = c.Flags.String("merchant", "", "list only this merchant's keys (`ID`)")
	case "roll":
		grace = c.Flags.String("grace", "", "how long the old secret keeps working (`DURATION`, 0 to 168h; required)")
		exp = addExpiryFlags(c)
	case "expire":
		exp = addExpiryFlags(c)
	}
	rest, code, ok := c.ParseInterleaved(args, stdout, stderr)
	if !ok {
		return code
	}
	wantArgs := 0
	if sub == "revoke" || sub == "roll" || sub == "expire" {
		wantArgs = 1
	}
	if len(rest) != wantArgs {
		return c.Fail(stderr, "want %d KEY_ID argument(s), got %d", wantArgs, len(rest))
	}
	if sub == "roll" && *grace == "" {
		return c.Fail(stderr, "--grace is required (0 stops the old secret at once)")
	}
	if sub == "expire" && *exp.in == "" && *exp.at == "" {
		return c.Fail(stderr, "--expires-in or --expires-at is required")
	}
	a, code := openCLIApp(ctx, *path, stderr)
	if code >= 0 {
		return code
	}
	defer a.Close()
	ctx = engine.WithActor(ctx, cliActor())
	op := ops.Ops{Engine: a.eng, Store: a.store, Out: stdout}
	var err error
	switch sub {
	case "create":
		err = op.CreateKey(ctx, *merchant, *scopes, *publishable, func() (time.Time, error) { return exp.time(time.Now()) })
	case "list":
		err = op.ListKeys(ctx, *merchant)
	case "revoke":
		var k *surgepay.APIKey
		if k, err = a.eng.RevokeAPIKey(ctx, rest[0]); err == nil {
			fmt.Fprintf(stdout, "API key %s (%s…) of merchant %s is revoked\n", k.ID, k.Prefix, k.MerchantID)
		}
	case "roll":
		err = op.RollKey(ctx, rest[0], *grace, func() (time.Time, error) { return exp.time(time.Now()) })
	case "expire":
		var t time.Time
		var k *surgepay.APIKey
		if t, err = exp.time(time.Now()); err == nil {
			if k, err = a.eng.ExpireAPIKey(ctx, rest[0], t); err == nil {
				fmt.Fprintf(stdout, "API key %s (%s…) of merchant %s expires at %s\n", k.ID, k.Prefix, k.MerchantID,
					k.Expires.Format(time.RFC3339))
			}
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "surgepay: %v\n", err)
		return 1
	}
	return 0
}

const keysRotateUsage = `Usage: surgepay keys rotate [--add-only] [--config FILE]

Adds a new card-vault key to the keyring file and makes it primary. Cards
saved under older keys still decrypt; servers reading the file reload it
within a second (or on SIGHUP). Several servers: --add-only, give each the
file, then keys make-primary KEY_ID (docs/vault.md).
`

const keysRotateSigningUsage = `Usage: surgepay keys rotate-signing [--add-only] [--config FILE]

Adds a client-secret signing key to the keyring file as primary; older
secrets work until their key is retired. Servers reload the file within a
second. Several servers: --add-only, give each the file, then make-primary.
`

const keysRetireSigningUsage = `Usage: surgepay keys retire-signing KEY_ID [--config FILE]

Retires a client-secret signing key (after a leak): its secrets stop
working on each server as it reloads the file. Not the primary (docs/vault.md).
`

const keysMakePrimaryUsage = `Usage: surgepay keys make-primary KEY_ID [--config FILE]

Makes a key of the keyring file primary: a card-vault key (k_…) encrypts
new cards, a signing key (s_…) signs new client secrets, on each server
as it reloads the file. The second phase of a rotation (docs/vault.md).
`

// cmdKeysKeyring is `surgepay keys rotate|rotate-signing|retire-signing|make-primary`:
// the card-vault and client-secret signing keys in the keyring file
// (internal/ops).
func cmdKeysKeyring(sub string, args []string, stdout, stderr io.Writer) int {
	c, path := configFlags("keys "+sub, map[string]string{"rotate": keysRotateUsage, "rotate-signing": keysRotateSigningUsage,
		"retire-signing": keysRetireSigningUsage, "make-primary": keysMakePrimaryUsage}[sub])
	addOnly := new(bool)
	if sub == "rotate" || sub == "rotate-signing" {
		addOnly = c.Flags.Bool("add-only", false, "add the key without making it primary (then: keys make-primary)")
	}
	rest, code, ok := c.ParseInterleaved(args, stdout, stderr)
	if !ok {
		return code
	}
	if want := map[string]int{"retire-signing": 1, "make-primary": 1}[sub]; len(rest) != want {
		return c.Fail(stderr, "want %d KEY_ID argument(s), got %d", want, len(rest))
	}
	cfg, err := config.Load(*path, os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "surgepay: %v\n", err)
		return 2
	}
	switch sub {
	case "rotate":
		err = ops.RotateVaultKey(cfg.KeyringFile, *addOnly, stdout)
	case "rotate-signing":
		err = ops.RotateSigningKey(cfg.KeyringFile, *addOnly, stdout)
	case "make-primary":
		err = ops.MakePrimary(cfg.KeyringFile, rest[0], stdout)
	default:
		err = ops.RetireSigningKey(cfg.KeyringFile, rest[0], stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "surgepay: %v\n", err)
		return 1
	}
	return 0
}
