package ops

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/surgepay/surgepay/vault"
)

// RotateSigningKey adds a client-secret signing key to the keyring file
// and makes it primary (docs/vault.md); RetireSigningKey removes one at
// once. Both leave the card vault's data keys alone and say what the
// operator must do next: serve reads the keyring only at start.
func RotateSigningKey(keyringFile string, out io.Writer) error {
	return changeSigningKeys(keyringFile, "", out)
}

// RetireSigningKey retires the signing key id (RotateSigningKey).
func RetireSigningKey(keyringFile, id string, out io.Writer) error {
	return changeSigningKeys(keyringFile, id, out)
}

// changeSigningKeys rotates (retire "") or retires a signing key and
// saves the keyring.
func changeSigningKeys(keyringFile, retire string, out io.Writer) error {
	k, err := vault.Load(keyringFile)
	if err != nil {
		return err
	}
	id := retire
	if retire == "" {
		id, err = k.RotateSigning()
	} else {
		err = k.RetireSigning(retire)
	}
	if err == nil {
		err = k.Save(keyringFile)
	}
	if err != nil {
		return fmt.Errorf("%w%s", err, signingErrorHint(err, k))
	}
	ids := strings.Join(k.SigningKeyIDs(), ", ")
	if retire == "" {
		fmt.Fprintf(out, "new primary client-secret signing key %s; signing keys: %s\n"+
			"Restart the servers to sign new client secrets with it (serve reads the keyring only at start); those signed before still verify.\n", id, ids)
	} else {
		fmt.Fprintf(out, "client-secret signing key %s is retired; signing keys: %s\n"+
			"Client secrets it signed stop working on each server when it restarts (serve reads the keyring only at start, not on SIGHUP).\n", id, ids)
	}
	if os.Getenv(vault.EnvVar) != "" {
		fmt.Fprintf(out, "%s is set here: servers that read it need its new value (base64 -w0 %s).\n", vault.EnvVar, keyringFile)
	}
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
