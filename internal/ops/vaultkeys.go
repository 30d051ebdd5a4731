package ops

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/config"
	"github.com/surgepay/surgepay/vault"
)

// Re-encrypting after a vault key rotation, and retiring the old key
// (docs/vault.md#rotation-without-downtime).

// Defaults and bounds of ReencryptOptions.
const (
	ReencryptBatchDefault = 500  // blobs a page and a transaction
	ReencryptRateDefault  = 2000 // blobs a second: a background pace beside live traffic
)

// ReencryptOptions paces a re-encryption pass.
type ReencryptOptions struct {
	// Batch is how many blobs a page reads and a transaction writes,
	// 1..surgepay.SealedPageMax; 0 is ReencryptBatchDefault.
	Batch int
	// RateMax bounds the blobs examined a second; 0 is
	// ReencryptRateDefault, a negative value none.
	RateMax int
}

// sealedStoreOf returns s, or the store it decorates, as a SealedStore.
func sealedStoreOf(s surgepay.Store) (surgepay.SealedStore, error) {
	for s != nil {
		if ss, ok := s.(surgepay.SealedStore); ok {
			return ss, nil
		}
		u, ok := s.(interface{ Unwrap() surgepay.Store })
		if !ok {
			break
		}
		s = u.Unwrap()
	}
	return nil, errors.New("the store cannot walk its sealed blobs")
}

// walkSealed calls fn with each page of stored blobs of every kind,
// batch a page, at most rate blobs a second (rate <= 0: no bound).
func walkSealed(ctx context.Context, ss surgepay.SealedStore, batch, rate int, fn func([]surgepay.SealedBlob) error) error {
	start, seen := time.Now(), 0
	for _, kind := range surgepay.SealedKinds {
		m, id := "", ""
		for {
			page, err := ss.ListSealed(ctx, kind, m, id, batch)
			if err != nil {
				return err
			}
			if err := fn(page); err != nil {
				return err
			}
			if len(page) < batch {
				break
			}
			m, id = page[len(page)-1].MerchantID, page[len(page)-1].ID
			seen += len(page)
			if rate > 0 {
				if wait := time.Until(start.Add(time.Duration(seen) * time.Second / time.Duration(rate))); wait > 0 {
					select {
					case <-ctx.Done():
						return ctx.Err()
					case <-time.After(wait):
					}
				}
			}
		}
	}
	return nil
}

// keyCounts counts blobs by kind and data key.
type keyCounts map[surgepay.SealedKind]map[string]int

func (c keyCounts) add(kind surgepay.SealedKind, key string, n int) {
	if c[kind] == nil {
		c[kind] = map[string]int{}
	}
	c[kind][key] += n
}

// write prints one line a kind: "card_number: k_a 12, k_b 3".
func (c keyCounts) write(out io.Writer, what string) {
	for _, kind := range surgepay.SealedKinds {
		byKey := c[kind]
		ids := make([]string, 0, len(byKey))
		for id := range byKey {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		parts := make([]string, 0, len(ids))
		for _, id := range ids {
			parts = append(parts, fmt.Sprintf("%s %d", id, byKey[id]))
		}
		if len(parts) == 0 {
			parts = append(parts, "none")
		}
		fmt.Fprintf(out, "%s %s: %s\n", what, kind, strings.Join(parts, ", "))
	}
}

// Reencrypt seals again under keys' primary data key every stored blob
// (cards' numbers, webhook endpoints' secrets) sealed under another one,
// a page at a time, each page in one transaction guarded by the blob it
// read: a card deleted, or a secret rolled, meanwhile is left as it is
// (a roll seals under the primary already). It prints the blobs found
// under each key and how many it sealed again. It can be stopped and run
// again at any point; a blob that does not open (altered, or under a key
// this keyring lacks) is an error naming its row, and nothing after it is
// done. Servers that cached a card before keep its old blob, which opens
// as long as its key is in their keyring (and they read the card again
// if not).
func Reencrypt(ctx context.Context, s surgepay.Store, keys *vault.Keyring, o ReencryptOptions, out io.Writer) error {
	ss, err := sealedStoreOf(s)
	if err != nil {
		return err
	}
	batch := o.Batch
	if batch == 0 {
		batch = ReencryptBatchDefault
	}
	if batch < 1 || batch > surgepay.SealedPageMax {
		return fmt.Errorf("batch %d: want 1..%d", batch, surgepay.SealedPageMax)
	}
	rate := o.RateMax
	if rate == 0 {
		rate = ReencryptRateDefault
	}
	found, sealed, raced := keyCounts{}, 0, 0
	err = walkSealed(ctx, ss, batch, rate, func(page []surgepay.SealedBlob) error {
		var rs []surgepay.SealedReplacement
		for i := range page {
			b := &page[i]
			id, err := keys.KeyIDOf(b.Sealed)
			if err != nil {
				return fmt.Errorf("%s of %s %s: %w", b.Kind, b.MerchantID, b.ID, err)
			}
			found.add(b.Kind, id, 1)
			next, changed, err := vault.Reencrypt(keys, b.Sealed, b.AAD())
			if err != nil {
				return fmt.Errorf("%s of %s %s (key %s): %w", b.Kind, b.MerchantID, b.ID, id, err)
			}
			if changed {
				rs = append(rs, surgepay.SealedReplacement{Old: *b, New: next})
			}
		}
		n, err := ss.ReplaceSealed(ctx, rs)
		sealed, raced = sealed+n, raced+len(rs)-n
		return err
	})
	found.write(out, "found")
	fmt.Fprintf(out, "sealed again under %s: %d", keys.PrimaryID(), sealed)
	if raced > 0 {
		fmt.Fprintf(out, " (%d changed or deleted meanwhile, left as they are)", raced)
	}
	fmt.Fprintln(out)
	return err
}

// RetireVaultKey removes data key id from the keyring file once nothing
// names it: no stored blob (it reads them all, at opts' pace) and no
// sealed secret of cfg's [processors]. Otherwise it refuses, and says
// what still does: `surgepay keys reencrypt`, and `surgepay processors
// seal` for the configuration, move them. The primary key is refused.
// Servers reload the keyring file within a second; where SURGEPAY_KEYRING
// holds it, they need its new value.
func RetireVaultKey(ctx context.Context, s surgepay.Store, cfg config.Config, id string, o ReencryptOptions, out io.Writer) error {
	keys, err := vault.Load(cfg.KeyringFile)
	if err != nil {
		return err
	}
	if !slices.Contains(keys.KeyIDs(), id) {
		return fmt.Errorf("retire %s: %w (keys: %s)", id, vault.ErrKeyUnknown, strings.Join(keys.KeyIDs(), ", "))
	}
	if id == keys.PrimaryID() {
		return fmt.Errorf("retire %s: %w; rotate first", id, vault.ErrKeyPrimary)
	}
	var sealedConfig []string
	for name, p := range cfg.Processors {
		for field, v := range map[string]string{"secret_key": string(p.SecretKey), "webhook_secret": string(p.WebhookSecret)} {
			if k, ok := sealedKeyID(keys, v); ok && k == id {
				sealedConfig = append(sealedConfig, "processors."+name+"."+field)
			}
		}
	}
	ss, err := sealedStoreOf(s)
	if err != nil {
		return err
	}
	batch, rate := o.Batch, o.RateMax
	if batch == 0 {
		batch = ReencryptBatchDefault
	}
	if rate == 0 {
		rate = ReencryptRateDefault
	}
	left := keyCounts{}
	err = walkSealed(ctx, ss, min(max(batch, 1), surgepay.SealedPageMax), rate, func(page []surgepay.SealedBlob) error {
		for i := range page {
			if k, err := keys.KeyIDOf(page[i].Sealed); err == nil && k == id {
				left.add(page[i].Kind, id, 1)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(left) > 0 || len(sealedConfig) > 0 {
		left.write(out, "still under "+id+":")
		slices.Sort(sealedConfig)
		for _, f := range sealedConfig {
			fmt.Fprintf(out, "still under %s: %s (seal it again: surgepay processors reseal, or processors seal where the environment gives it)\n", id, f)
		}
		return fmt.Errorf("retire %s: still in use; run `surgepay keys reencrypt` (and `surgepay processors reseal`), then retire", id)
	}
	if err := keys.Retire(id); err != nil {
		return err
	}
	if err := keys.Save(cfg.KeyringFile); err != nil {
		return err
	}
	fmt.Fprintf(out, "vault key %s retired: nothing stored names it; keys: %s\n%s\n", id, strings.Join(keys.KeyIDs(), ", "), reloadHint)
	envHint(cfg.KeyringFile, out)
	return nil
}

// sealedKeyID returns the data key a "sealed:…" configuration value was
// sealed under.
func sealedKeyID(keys *vault.Keyring, v string) (string, bool) {
	b64, ok := strings.CutPrefix(v, config.SealedPrefix)
	if !ok {
		return "", false
	}
	b, err := base64.RawURLEncoding.DecodeString(b64)
	if err != nil {
		return "", false
	}
	id, err := keys.KeyIDOf(b)
	return id, err == nil
}
