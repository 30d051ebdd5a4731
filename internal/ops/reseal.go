package ops

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/surgepay/surgepay/cache"
	"github.com/surgepay/surgepay/config"
	"github.com/surgepay/surgepay/internal/cli"
	"github.com/surgepay/surgepay/provider/processors"
	"github.com/surgepay/surgepay/vault"
)

// ProcessorsResealUsage is `surgepay processors reseal --help`.
const ProcessorsResealUsage = `Usage: surgepay processors reseal --config FILE

Seals again, under the primary card-vault key, each sealed secret of the
configuration file's [processors] (secret_key, webhook_secret) that an
older key sealed, and rewrites those values in the file, its comments
and layout kept; servers reload it. After keys rotate, before keys
retire (docs/vault.md).
`

// ResealFile seals again under keys' primary data key every sealed
// secret of cfg's [processors] that another key sealed, and replaces
// those values in the configuration file cfg was loaded from, each found
// exactly once, the rest of the file untouched; the file is replaced
// whole (a temporary file renamed over it), with its permissions. It
// returns the fields it sealed again, and those sealed under another key
// but given by the environment, which only their owner can change.
func ResealFile(cfg config.Config, keys *vault.Keyring) (resealed, inEnv []string, err error) {
	path := cfg.Path()
	if path == "" {
		return nil, nil, fmt.Errorf("no configuration file: give --config")
	}
	raw, err := os.ReadFile(path) //nolint:gosec // G304: the operator names the configuration file
	if err != nil {
		return nil, nil, err
	}
	text := string(raw)
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range cfg.Processors {
			if !yield(n) {
				return
			}
		}
	})
	for _, name := range names {
		p := cfg.Processors[name]
		for _, f := range []struct{ field, value string }{{"secret_key", string(p.SecretKey)}, {"webhook_secret", string(p.WebhookSecret)}} {
			id, sealed := sealedKeyID(keys, f.value)
			if !sealed || id == keys.PrimaryID() {
				continue
			}
			where := "processors." + name + "." + f.field
			switch strings.Count(text, f.value) {
			case 0:
				inEnv = append(inEnv, where)
				continue
			case 1:
			default:
				return nil, nil, fmt.Errorf("%s: its sealed value stands more than once in %s; seal it again by hand", where, path)
			}
			plain, err := processors.Unseal(keys, name, cache.Secret(f.value))
			if err != nil {
				return nil, nil, err
			}
			again, err := processors.Seal(keys, name, plain)
			if err != nil {
				return nil, nil, err
			}
			text = strings.Replace(text, f.value, again, 1)
			resealed = append(resealed, where)
		}
	}
	if len(resealed) == 0 {
		return nil, inEnv, nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, nil, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".surgepay-reseal-*")
	if err != nil {
		return nil, nil, err
	}
	defer os.Remove(tmp.Name()) //nolint:errcheck // gone once renamed; otherwise a leftover to remove
	if _, err := tmp.WriteString(text); err != nil {
		tmp.Close() //nolint:errcheck,gosec // the write's error is the one reported
		return nil, nil, err
	}
	if err := tmp.Chmod(fi.Mode().Perm()); err != nil {
		tmp.Close() //nolint:errcheck,gosec // the chmod's error is the one reported
		return nil, nil, err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close() //nolint:errcheck,gosec // the sync's error is the one reported
		return nil, nil, err
	}
	if err := tmp.Close(); err != nil {
		return nil, nil, err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return nil, nil, err
	}
	return resealed, inEnv, nil
}

// ProcessorsResealMain is `surgepay processors reseal`.
func ProcessorsResealMain(args []string, stdout, stderr io.Writer) int {
	c := cli.New("processors reseal", ProcessorsResealUsage)
	path := c.Flags.String("config", "", "TOML config `FILE` (default: $SURGEPAY_CONFIG)")
	if code, ok := c.Parse(args, stdout, stderr); !ok {
		return code
	}
	cfg, err := config.Load(*path, os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "surgepay: %v\n", err)
		return cli.ExitUsage
	}
	keys, err := loadKeyring(cfg)
	var resealed, inEnv []string
	if err == nil {
		resealed, inEnv, err = ResealFile(cfg, keys)
	}
	if err != nil {
		fmt.Fprintf(stderr, "surgepay processors reseal: %v\n", err)
		return 1
	}
	for _, f := range resealed {
		fmt.Fprintf(stdout, "%s sealed again under %s\n", f, keys.PrimaryID())
	}
	for _, f := range inEnv {
		fmt.Fprintf(stdout, "%s is sealed under an older key but given by the environment: seal it again there (processors seal)\n", f)
	}
	if len(resealed)+len(inEnv) == 0 {
		fmt.Fprintf(stdout, "every sealed processor secret is under the primary key %s\n", keys.PrimaryID())
	} else if len(resealed) > 0 {
		fmt.Fprintf(stdout, "%s: servers reading it reload it within a second\n", cfg.Path())
	}
	return cli.ExitOK
}

// loadKeyring reads the keyring serve reads with cfg and this
// environment: SURGEPAY_KEYRING, else keyring_file. It never makes one.
func loadKeyring(cfg config.Config) (*vault.Keyring, error) {
	if v := os.Getenv(vault.EnvVar); v != "" {
		return vault.FromEnv(v)
	}
	return vault.Load(cfg.KeyringFile)
}
