package surgepay

import (
	"context"
	"fmt"
)

// Blobs sealed under the card vault's data keys (vault.Keyring.Encrypt),
// as the store keeps them: what `surgepay keys reencrypt` seals again
// under the primary key after a rotation, and what must no longer name a
// data key before `surgepay keys retire` removes it (docs/vault.md).

// SealedKind names a stored column of sealed blobs.
type SealedKind string

const (
	// SealedCardNumber is a payment method's card number (AAD
	// CardNumberAAD).
	SealedCardNumber SealedKind = "card_number"
	// SealedWebhookSecret is a webhook endpoint's signing secret (AAD
	// WebhookSecretAAD).
	SealedWebhookSecret SealedKind = "webhook_secret"
	// SealedWebhookPreviousSecret is the secret a roll replaced, kept
	// while it still signs (AAD WebhookSecretAAD).
	SealedWebhookPreviousSecret SealedKind = "webhook_previous_secret"
)

// SealedKinds lists every SealedKind.
var SealedKinds = []SealedKind{SealedCardNumber, SealedWebhookSecret, SealedWebhookPreviousSecret}

// SealedColumn returns the table and the column that hold kind in both
// stores' schemas (tables keyed by merchant_id and id), or an error for
// an unknown kind.
func SealedColumn(kind SealedKind) (table, column string, err error) {
	switch kind {
	case SealedCardNumber:
		return "payment_methods", "sealed_pan", nil
	case SealedWebhookSecret:
		return "webhook_endpoints", "sealed_secret", nil
	case SealedWebhookPreviousSecret:
		return "webhook_endpoints", "previous_sealed_secret", nil
	}
	return "", "", fmt.Errorf("sealed blobs: unknown kind %q", kind)
}

// SealedPageMax bounds a page of SealedStore.ListSealed and a batch of
// SealedStore.ReplaceSealed.
const SealedPageMax = 1000

// CardNumberAAD is the associated data a payment method's card number is
// sealed with: the blob opens only as that merchant's method.
func CardNumberAAD(merchantID, methodID string) []byte {
	return []byte(merchantID + "/" + methodID)
}

// SealedBlob is one stored sealed blob and the row that holds it.
type SealedBlob struct {
	Kind       SealedKind
	MerchantID string
	ID         string // the payment method's, or the webhook endpoint's
	Sealed     []byte
}

// AAD returns the associated data b was sealed with.
func (b *SealedBlob) AAD() []byte {
	if b.Kind == SealedCardNumber {
		return CardNumberAAD(b.MerchantID, b.ID)
	}
	return WebhookSecretAAD(b.MerchantID, b.ID)
}

// SealedReplacement replaces a stored blob (Old, as it was read) with New.
type SealedReplacement struct {
	Old SealedBlob
	New []byte
}

// SealedStore is a Store whose sealed blobs can be walked and sealed
// again in place. Both stores have it.
type SealedStore interface {
	// ListSealed returns up to limit (at most SealedPageMax) non-empty
	// blobs of kind in rows after (afterMerchant, afterID), in
	// (merchant, ID) order: "", "" starts at the first.
	ListSealed(ctx context.Context, kind SealedKind, afterMerchant, afterID string, limit int) ([]SealedBlob, error)
	// ReplaceSealed writes each replacement's New in one transaction,
	// where its row still holds Old.Sealed (a row changed or deleted
	// since is left alone), and returns how many it replaced. At most
	// SealedPageMax.
	ReplaceSealed(ctx context.Context, rs []SealedReplacement) (int, error)
}
