package engine

import (
	"context"

	"github.com/surgepay/surgepay"
)

// CardInput is a request to save a card for a customer.
type CardInput struct {
	CustomerID string
	Card       surgepay.CardInput
}

func methodKey(merchantID, id string) string { return merchantID + "/" + id }

// CreatePaymentMethod validates a card (Luhn, expiry, CVC format), encrypts
// its number under the vault's primary key and stores it with brand, last4,
// expiry and a keyed fingerprint. The CVC is checked and then dropped: it is
// never stored.
func (e *Engine) CreatePaymentMethod(ctx context.Context, call *Call, in *CardInput) (*surgepay.PaymentMethod, error) {
	brand, err := in.Card.Validate(e.now())
	if err != nil {
		return nil, err
	}
	if in.CustomerID == "" {
		return nil, surgepay.Invalid("customer", "missing", "customer is required")
	}
	var out *surgepay.PaymentMethod
	err = e.idempotent(ctx, call, func() error {
		if _, err := e.store.FindCustomer(ctx, call.MerchantID, in.CustomerID); err != nil {
			if surgepay.ErrorCode(err) == surgepay.ENOTFOUND {
				return surgepay.NotFound("customer", "customer")
			}
			return err
		}
		pm := &surgepay.PaymentMethod{ID: surgepay.NewID("pm"), MerchantID: call.MerchantID,
			CustomerID: in.CustomerID, Brand: brand, Last4: in.Card.Number.Last4(),
			ExpMonth: in.Card.ExpMonth, ExpYear: in.Card.ExpYear, HolderName: in.Card.Name, Created: e.now()}
		pan := []byte(in.Card.Number.Digits())
		pm.Fingerprint = e.vault.Fingerprint(call.MerchantID, pan)
		sealed, err := e.vault.Encrypt(pan, []byte(methodKey(call.MerchantID, pm.ID)))
		if err != nil {
			return err
		}
		pm.SealedPAN = sealed
		w := &surgepay.Write{PaymentMethodInsert: pm}
		e.attach(call, w, pm, nil)
		if err := e.apply(ctx, call, w); err != nil {
			return err
		}
		if err := e.methods.Set(ctx, methodKey(call.MerchantID, pm.ID), pm); err != nil {
			e.log.Warn("cache payment method", "payment_method", pm.ID, "err", err.Error())
		}
		out = pm
		return nil
	})
	return out, err
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
func (e *Engine) forget(ctx context.Context, key string) {
	if err := e.methods.Invalidate(ctx, key); err != nil {
		e.log.Warn("invalidate cached payment method", "err", err.Error())
	}
}
