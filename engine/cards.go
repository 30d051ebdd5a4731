package engine

import (
	"bytes"
	"context"
	"fmt"
	"regexp"

	"github.com/surgepay/surgepay"
)

// CardInput is a request to save a card for a customer: a card number for
// the vault, or (Token set) a processor's own token for it.
type CardInput struct {
	CustomerID string
	Card       surgepay.CardInput
	Token      *TokenInput
}

// TokenInput names a processor's payment method token (a Stripe pm_…
// collected by Stripe.js on the merchant's page).
type TokenInput struct {
	Processor string
	Token     string
}

// tokenPattern is what a processor token may look like: a lower-case
// prefix, an underscore and letters, digits or underscores (pm_1N…).
var tokenPattern = regexp.MustCompile(`^[a-z]{2,10}_[A-Za-z0-9_]{1,200}$`)

func methodKey(merchantID, id string) string { return merchantID + "/" + id }

// CreatePaymentMethod validates a card (Luhn, expiry, CVC format), encrypts
// its number under the vault's primary key and stores it with brand, last4,
// expiry and a keyed fingerprint. The CVC is checked and then dropped: it is
// never stored. With in.Token, it saves a processor's token instead.
func (e *Engine) CreatePaymentMethod(ctx context.Context, call *Call, in *CardInput) (*surgepay.PaymentMethod, error) {
	if in.Token != nil {
		return e.createTokenMethod(ctx, call, in)
	}
	brand, err := in.Card.Validate(e.now())
	if err != nil {
		return nil, err
	}
	if in.CustomerID == "" {
		return nil, surgepay.Invalid("customer", "missing", "customer is required")
	}
	return e.saveMethod(ctx, call, in.CustomerID, func() (*surgepay.PaymentMethod, error) {
		return e.sealCard(call, in.CustomerID, &in.Card, brand)
	})
}

// sealCard makes the payment method of a validated card: its number
// sealed under the vault's primary key, bound to the method's ID, and
// its fingerprint.
func (e *Engine) sealCard(call *Call, customerID string, card *surgepay.CardInput, brand string) (*surgepay.PaymentMethod, error) {
	pm := &surgepay.PaymentMethod{ID: surgepay.NewID("pm"), MerchantID: call.MerchantID,
		CustomerID: customerID, Brand: brand, Last4: card.Number.Last4(),
		ExpMonth: card.ExpMonth, ExpYear: card.ExpYear, HolderName: card.Name, Created: e.now()}
	pan := []byte(card.Number.Digits())
	pm.Fingerprint = e.vault.Fingerprint(call.MerchantID, pan)
	sealed, err := e.vault.Encrypt(pan, surgepay.CardNumberAAD(call.MerchantID, pm.ID))
	if err != nil {
		return nil, err
	}
	pm.SealedPAN = sealed
	return pm, nil
}

// saveMethod stores the payment method build makes for the customer ("":
// none), under the call's Idempotency-Key, and caches it. build runs only
// once the customer is found.
func (e *Engine) saveMethod(ctx context.Context, call *Call, customerID string, build func() (*surgepay.PaymentMethod, error)) (*surgepay.PaymentMethod, error) {
	var out *surgepay.PaymentMethod
	err := e.idempotent(ctx, call, func() error {
		if customerID != "" { // "": a guest card, for a browser checkout
			if _, err := e.store.FindCustomer(ctx, call.MerchantID, customerID); err != nil {
				if surgepay.ErrorCode(err) == surgepay.ENOTFOUND {
					return surgepay.NotFound("customer", "customer")
				}
				return err
			}
		}
		pm, err := build()
		if err != nil {
			return err
		}
		w := &surgepay.Write{PaymentMethodInsert: pm}
		e.attach(call, w, pm, nil)
		if err := e.apply(ctx, call, w); err != nil {
			return err
		}
		e.cacheDone(e.methods.Set(ctx, methodKey(call.MerchantID, pm.ID), pm), "cache payment method")
		out = pm
		return nil
	})
	return out, err
}

// createTokenMethod saves a processor's token as a payment method: the
// processor describes the card (brand, last4, expiry: one call to it), the
// token is stored as it is, and its payments go to that processor only.
func (e *Engine) createTokenMethod(ctx context.Context, call *Call, in *CardInput) (*surgepay.PaymentMethod, error) {
	switch {
	case in.CustomerID == "":
		return nil, surgepay.Invalid("customer", "missing", "customer is required")
	case in.Token.Processor == "":
		return nil, surgepay.Invalid("processor_token.processor", "missing", "processor_token.processor is required")
	case !tokenPattern.MatchString(in.Token.Token):
		return nil, surgepay.Invalid("processor_token.token", "invalid_value",
			"processor_token.token must be a processor's payment method id, like pm_1Nx…")
	case surgepay.TextHasCardNumber(in.Token.Token):
		return nil, surgepay.CardNumberInText("processor_token.token")
	}
	if err := surgepay.ValidateText("billing_details.name", in.Card.Name); err != nil {
		return nil, err
	}
	d, ok := e.provider.(surgepay.TokenDescriber)
	if !ok {
		return nil, surgepay.Invalid("processor_token.processor", "invalid_value",
			"no configured processor takes tokens; see docs/processors.md")
	}
	return e.saveMethod(ctx, call, in.CustomerID, func() (*surgepay.PaymentMethod, error) {
		card, err := d.DescribeToken(ctx, in.Token.Processor, in.Token.Token)
		if err != nil {
			return nil, err
		}
		pm := &surgepay.PaymentMethod{ID: surgepay.NewID("pm"), MerchantID: call.MerchantID,
			CustomerID: in.CustomerID, Brand: card.Brand, Last4: card.Last4, ExpMonth: card.ExpMonth, ExpYear: card.ExpYear,
			HolderName: in.Card.Name, Created: e.now(), Processor: in.Token.Processor, ProcessorToken: in.Token.Token,
			ProcessorCustomer: card.Customer}
		if a, ok := e.provider.(surgepay.TokenAttacher); ok && pm.ProcessorCustomer == "" {
			// Attached, the token can be charged again (a Stripe pm_… is
			// single-use until then).
			if pm.ProcessorCustomer, err = a.AttachToken(ctx, in.Token.Processor, in.Token.Token, call.MerchantID, in.CustomerID); err != nil {
				return nil, err
			}
		}
		fp := card.Fingerprint
		if fp == "" {
			fp = in.Token.Token
		}
		pm.Fingerprint = e.vault.Fingerprint(call.MerchantID, []byte(in.Token.Processor+":"+fp))
		return pm, nil
	})
}

// GetPaymentMethod returns a saved card, from the cache when it can.
func (e *Engine) GetPaymentMethod(ctx context.Context, call *Call, id string) (*surgepay.PaymentMethod, error) {
	loaded := false
	pm, err := e.methods.Get(ctx, methodKey(call.MerchantID, id), func(ctx context.Context) (*surgepay.PaymentMethod, error) {
		loaded = true
		return e.store.FindPaymentMethod(ctx, call.MerchantID, id)
	})
	countCache(ctx, loaded)
	return pm, err
}

// ListPaymentMethods returns a page of a customer's cards, newest first.
func (e *Engine) ListPaymentMethods(ctx context.Context, call *Call, customerID string, page surgepay.Page) ([]*surgepay.PaymentMethod, bool, error) {
	if customerID == "" {
		return nil, false, surgepay.Invalid("customer", "missing", "customer is required")
	}
	return e.store.ListPaymentMethods(ctx, call.MerchantID, customerID, page)
}

// DeletePaymentMethod deletes a saved card.
func (e *Engine) DeletePaymentMethod(ctx context.Context, call *Call, id string) (*surgepay.PaymentMethod, error) {
	var out *surgepay.PaymentMethod
	err := e.idempotent(ctx, call, func() error {
		pm, err := e.store.FindPaymentMethod(ctx, call.MerchantID, id)
		if err != nil {
			return err
		}
		w := &surgepay.Write{PaymentMethodDelete: pm}
		e.attach(call, w, &Deleted{ID: pm.ID, Object: "payment_method"}, nil)
		err = e.apply(ctx, call, w)
		// Forgotten even when apply failed: a commit whose outcome is
		// unknown may have deleted the card.
		e.forget(ctx, methodKey(call.MerchantID, id))
		if err != nil {
			return err
		}
		out = pm
		return nil
	})
	return out, err
}

// forget drops a payment method from the cache after its delete (which
// may have failed: dropping a card still stored costs one store read).
// openCardNumber decrypts pm's card number. A blob that does not open may
// be a cached copy sealed again since under the primary key (`surgepay
// keys reencrypt`) whose old key was then retired: the stored method is
// read once more, and its blob opened, before it is an error.
func (e *Engine) openCardNumber(ctx context.Context, call *Call, pm *surgepay.PaymentMethod) ([]byte, error) {
	aad := surgepay.CardNumberAAD(call.MerchantID, pm.ID)
	pan, err := e.vault.Decrypt(pm.SealedPAN, aad)
	if err == nil {
		return pan, nil
	}
	stored, ferr := e.store.FindPaymentMethod(ctx, call.MerchantID, pm.ID)
	if ferr != nil || bytes.Equal(stored.SealedPAN, pm.SealedPAN) {
		return nil, fmt.Errorf("decrypt payment method %s: %w", pm.ID, err)
	}
	e.forget(ctx, methodKey(call.MerchantID, pm.ID))
	pan, err = e.vault.Decrypt(stored.SealedPAN, aad)
	if err != nil {
		return nil, fmt.Errorf("decrypt payment method %s: %w", pm.ID, err)
	}
	return pan, nil
}

func (e *Engine) forget(ctx context.Context, key string) {
	e.cacheDone(e.methods.Invalidate(ctx, key), "invalidate cached payment method")
}
