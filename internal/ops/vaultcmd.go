package ops

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/config"
	"github.com/surgepay/surgepay/internal/cli"
)

// KeysReencryptUsage is `surgepay keys reencrypt --help`.
const KeysReencryptUsage = `Usage: surgepay keys reencrypt [--batch N] [--rate N] [--config FILE]

Seals again under the primary card-vault key every stored card number and
webhook secret sealed under an older key (after keys rotate), a page at a
time, beside running servers; prints what it found under each key. Safe
to stop and run again. Then keys retire the old key (docs/vault.md).
`

// KeysRetireUsage is `surgepay keys retire --help`.
const KeysRetireUsage = `Usage: surgepay keys retire KEY_ID [--rate N] [--config FILE]

Removes a card-vault key (k_…) from the keyring file, once no stored card
or webhook secret and no sealed [processors] secret names it (it reads
them all to check); refuses otherwise, saying what still does. Not the
primary. Servers reload the file within a second (docs/vault.md).
`

// VaultKeysMain is `surgepay keys reencrypt` and `surgepay keys retire`:
// the store is opened by open, as the command line opens it beside
// running servers.
func VaultKeysMain(ctx context.Context, sub string, args []string, stdout, stderr io.Writer,
	open func(context.Context, config.Config) (surgepay.Store, error)) int {
	usage := map[string]string{"reencrypt": KeysReencryptUsage, "retire": KeysRetireUsage}[sub]
	c := cli.New("keys "+sub, usage)
	path := c.Flags.String("config", "", "TOML config `FILE` (default: $SURGEPAY_CONFIG)")
	o := ReencryptOptions{Batch: ReencryptBatchDefault}
	if sub == "reencrypt" {
		c.Flags.IntVar(&o.Batch, "batch", ReencryptBatchDefault, fmt.Sprintf("blobs a page and a transaction (1..%d)", surgepay.SealedPageMax))
	}
	c.Flags.IntVar(&o.RateMax, "rate", ReencryptRateDefault, "blobs read a `second` at most (-1: no bound)")
	rest, code, ok := c.ParseInterleaved(args, stdout, stderr)
	if !ok {
		return code
	}
	if want := map[string]int{"retire": 1}[sub]; len(rest) != want {
		return c.Fail(stderr, "want %d KEY_ID argument(s), got %d", want, len(rest))
	}
	if o.Batch < 1 || o.Batch > surgepay.SealedPageMax {
		return c.Fail(stderr, "--batch %d: want 1..%d", o.Batch, surgepay.SealedPageMax)
	}
	cfg, err := config.Load(*path, os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "surgepay: %v\n", err)
		return 2
	}
	s, err := open(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "surgepay: %v\n", err)
		return 1
	}
	defer s.Close() //nolint:errcheck // every change was committed by ReplaceSealed; Close releases connections
	if sub == "retire" {
		err = RetireVaultKey(ctx, s, cfg, rest[0], o, stdout)
	} else {
		keys, kerr := loadKeyring(cfg)
		if err = kerr; err == nil {
			err = Reencrypt(ctx, s, keys, o, stdout)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "surgepay: %v\n", err)
		return 1
	}
	return 0
}
