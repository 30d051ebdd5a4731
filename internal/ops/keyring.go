package ops

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/surgepay/surgepay/config"
	"github.com/surgepay/surgepay/vault"
)

// reloadHint is what an operator does after changing the keyring file.
const reloadHint = "Each server reloads the keyring file within a second of its change (or on SIGHUP) and uses it from then on."

// twoPhaseHint is what an operator does after adding a key that is not
// primary yet.
const twoPhaseHint = "Give every server the file (each reloads it within a second of its change, or on SIGHUP); once all " +
	"of them have, make it primary with 'surgepay keys make-primary %s' and give them the file again (docs/vault.md)."

// RotateVaultKey adds a card-vault data key to the keyring file and makes
// it primary (docs/vault.md); cards saved under older keys still decrypt.
// addOnly adds it without making it primary: the first phase of a
// rotation across several servers (MakePrimary is the second).
func RotateVaultKey(keyringFile string, addOnly bool, out io.Writer) error {
	k, err := vault.Load(keyringFile)
	if err != nil {
		return err
	}
	var id string
	if addOnly {
		id, err = k.AddKey()
	} else {
		id, err = k.Rotate()
	}
	if err == nil {
		err = k.Save(keyringFile)
	}
	if err != nil {
		return err
	}
	if addOnly {
		fmt.Fprintf(out, "new vault key %s, not primary; keys: %s\n"+twoPhaseHint+"\n", id, strings.Join(k.KeyIDs(), ", "), id)
	} else {
		fmt.Fprintf(out, "new primary vault key %s; keys: %s\n%s New cards are encrypted under it from then on; old cards still decrypt.\n",
			id, strings.Join(k.KeyIDs(), ", "), reloadHint)
	}
	envHint(keyringFile, out)
	return nil
}

// MakePrimary makes the key id of the keyring file primary: a signing key
// (s_…) signs new client secrets, a data key (k_…) encrypts new cards.
// The second phase of a rotation across several servers.
func MakePrimary(keyringFile, id string, out io.Writer) error {
	k, err := vault.Load(keyringFile)
	if err != nil {
		return err
	}
	signing := strings.HasPrefix(id, "s_")
	if signing {
		err = k.SetSigningPrimary(id)
	} else {
		err = k.SetPrimary(id)
	}
	if err == nil {
		err = k.Save(keyringFile)
	}
	switch {
	case err != nil && signing:
		return fmt.Errorf("%w%s", err, signingErrorHint(err, k))
	case errors.Is(err, vault.ErrKeyUnknown):
		return fmt.Errorf("%w (vault keys: %s; signing keys start s_)", err, strings.Join(k.KeyIDs(), ", "))
	case err != nil:
		return err
	}
	what := "vault key %s is primary: new cards are encrypted under it"
	if signing {
		what = "client-secret signing key %s is primary: new client secrets are signed with it"
	}
	fmt.Fprintf(out, what+".\n%s\n", id, reloadHint)
	envHint(keyringFile, out)
	return nil
}

// ReloadKeyring reads the keyring file again into keys (vault.Reload),
// on SIGHUP or a configuration change (why), and logs what changed by key
// ID, or why the file was refused and the running keyring stays. A
// keyring from SURGEPAY_KEYRING (the process's environment cannot change)
// or a nil one is left alone.
func ReloadKeyring(log *slog.Logger, keys *vault.Keyring, file, why string) {
	if keys == nil || file == "" || os.Getenv(vault.EnvVar) != "" {
		return
	}
	ch, err := keys.Reload(file)
	switch {
	case err != nil:
		log.Error("keyring reload refused; the running keyring stays", "why", why, "err", err.Error())
	case ch.Empty():
		log.Debug("keyring unchanged", "why", why, "file", file)
	default:
		attrs := []any{"why", why, "file", file}
		add := func(name string, ids ...string) {
			if ids = slices.DeleteFunc(ids, func(id string) bool { return id == "" }); len(ids) > 0 {
				attrs = append(attrs, name, strings.Join(ids, ","))
			}
		}
		add("data_keys_added", ch.Added...)
		add("data_keys_retired", ch.Retired...)
		add("primary", ch.Primary)
		add("signing_keys_added", ch.SigningAdded...)
		add("signing_keys_retired", ch.SigningRetired...)
		add("signing_primary", ch.SigningPrimary)
		log.Info("keyring reloaded", attrs...)
	}
}

// WatchKeyring reloads the keyring file into keys (ReloadKeyring)
// whenever it changes, checked every config.PollInterval, until ctx ends:
// a rotation written by the CLI, or a Kubernetes Secret's update, takes
// effect without a signal.
func WatchKeyring(ctx context.Context, log *slog.Logger, keys *vault.Keyring, file string) {
	config.Watch(ctx, file, nil, func(why string) { ReloadKeyring(log, keys, file, "keyring "+why) })
}

// envHint tells an operator who keeps the keyring in SURGEPAY_KEYRING
// that its servers need the file's new value.
func envHint(keyringFile string, out io.Writer) {
	if os.Getenv(vault.EnvVar) != "" {
		fmt.Fprintf(out, "%s is set here: servers that read it need its new value (base64 -w0 %s) and a restart.\n", vault.EnvVar, keyringFile)
	}
}

// RotateSigningKey adds a client-secret signing key to the keyring file
// and makes it primary (docs/vault.md); RetireSigningKey removes one at
// once. Both leave the card vault's data keys alone and say what the
// operator must do next: reload the servers.
func RotateSigningKey(keyringFile string, addOnly bool, out io.Writer) error {
	return changeSigningKeys(keyringFile, "", addOnly, out)
}

// RetireSigningKey retires the signing key id (RotateSigningKey).
func RetireSigningKey(keyringFile, id string, out io.Writer) error {
	return changeSigningKeys(keyringFile, id, false, out)
}

// changeSigningKeys rotates (retire "") or retires a signing key and
// saves the keyring; addOnly adds the new key without making it primary.
func changeSigningKeys(keyringFile, retire string, addOnly bool, out io.Writer) error {
	k, err := vault.Load(keyringFile)
	if err != nil {
		return err
	}
	id := retire
	switch {
	case retire != "":
		err = k.RetireSigning(retire)
	case addOnly:
		id, err = k.AddSigningKey()
	default:
		id, err = k.RotateSigning()
	}
	if err == nil {
		err = k.Save(keyringFile)
	}
	if err != nil {
		return fmt.Errorf("%w%s", err, signingErrorHint(err, k))
	}
	ids := strings.Join(k.SigningKeyIDs(), ", ")
	switch {
	case addOnly:
		fmt.Fprintf(out, "new client-secret signing key %s, not primary; signing keys: %s\n"+twoPhaseHint+"\n", id, ids, id)
	case retire == "":
		fmt.Fprintf(out, "new primary client-secret signing key %s; signing keys: %s\n%s "+
			"Client secrets signed before still verify.\n", id, ids, reloadHint)
	default:
		fmt.Fprintf(out, "client-secret signing key %s is retired; signing keys: %s\n%s "+
			"Client secrets it signed stop working on each server as it reloads.\n", id, ids, reloadHint)
	}
	envHint(keyringFile, out)
	return nil
}

// signingErrorHint returns what to do about a refused signing-key change.
func signingErrorHint(err error, k *vault.Keyring) string {
	switch {
	case errors.Is(err, vault.ErrKeyPrimary):
		return " (run 'surgepay keys rotate-signing' first)"
	case errors.Is(err, vault.ErrKeyUnknown):
		return " (signing keys: " + strings.Join(k.SigningKeyIDs(), ", ") + ")"
	case errors.Is(err, vault.ErrKeysFull):
		return " (retire old signing keys with 'surgepay keys retire-signing KEY_ID')"
	}
	return ""
}
