package engine

import (
	"context"

	"github.com/surgepay/surgepay"
)

// CustomerInput is a request to create a customer.
type CustomerInput struct {
	Name, Email, Description string
	Metadata                 map[string]string
}

// CreateCustomer stores a new customer.
func (e *Engine) CreateCustomer(ctx context.Context, call *Call, in *CustomerInput) (*surgepay.Customer, error) {
	now := e.now()
	c := &surgepay.Customer{ID: surgepay.NewID("cus"), MerchantID: call.MerchantID, Name: in.Name,
		Email: in.Email, Description: in.Description, Metadata: in.Metadata, Created: now, Updated: now, Version: 1}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	var out *surgepay.Customer
	err := e.idempotent(ctx, call, func() error {
		w := &surgepay.Write{CustomerInsert: c}
		e.attach(call, w, c, nil)
		if err := e.apply(ctx, call, w); err != nil {
			return err
		}
		out = c
		return nil
	})
	return out, err
}

func customerKey(merchantID, id string) string { return merchantID + "/" + id }

// GetCustomer returns a customer of the call's merchant, from the cache
// when it can (the customers entity). The value may be shared: callers
// must not modify it.
func (e *Engine) GetCustomer(ctx context.Context, call *Call, id string) (*surgepay.Customer, error) {
	loaded := false
	c, err := e.customers.Get(ctx, customerKey(call.MerchantID, id), func(ctx context.Context) (*surgepay.Customer, error) {
		loaded = true
		return e.store.FindCustomer(ctx, call.MerchantID, id)
	})
	countCache(ctx, loaded)
	return c, err
}

// forgetCustomer drops a customer from the cache after its update or
// delete, in a shared scope from every process's memory. It is called
// even when the write returned an error: the write may have happened.
func (e *Engine) forgetCustomer(ctx context.Context, merchantID, id string) {
	e.cacheDone(e.customers.Invalidate(ctx, customerKey(merchantID, id)), "invalidate cached customer")
}

// UpdateCustomer changes a customer. A concurrent update of the same
// customer fails with ECONFLICT concurrent_update rather than losing a write.
// It reads the store, not the cache (a cached version would make the
// update fail as concurrent), and invalidates the cached customer.
func (e *Engine) UpdateCustomer(ctx context.Context, call *Call, id string, u *surgepay.CustomerUpdate) (*surgepay.Customer, error) {
	var out *surgepay.Customer
	err := e.idempotent(ctx, call, func() error {
		c, err := e.store.FindCustomer(ctx, call.MerchantID, id)
		if err != nil {
			return err
		}
		if err := c.Apply(u); err != nil {
			return err
		}
		c.Version++
		c.Updated = e.now()
		w := &surgepay.Write{CustomerUpdate: c}
		e.attach(call, w, c, nil)
		err = e.apply(ctx, call, w)
		e.forgetCustomer(ctx, call.MerchantID, id)
		if err != nil {
			return err
		}
		out = c
		return nil
	})
	return out, err
}

// DeleteCustomer deletes a customer and its saved cards. Payments keep the
// customer's ID.
func (e *Engine) DeleteCustomer(ctx context.Context, call *Call, id string) (*surgepay.Customer, error) {
	var out *surgepay.Customer
	err := e.idempotent(ctx, call, func() error {
		c, err := e.store.FindCustomer(ctx, call.MerchantID, id)
		if err != nil {
			return err
		}
		methods, err := e.customerMethods(ctx, call.MerchantID, id)
		if err != nil {
			return err
		}
		w := &surgepay.Write{CustomerDelete: c}
		e.attach(call, w, &Deleted{ID: c.ID, Object: "customer"}, nil)
		err = e.apply(ctx, call, w)
		e.forgetCustomer(ctx, call.MerchantID, id)
		if err != nil {
			return err
		}
		for _, pmID := range methods { // once the delete is durable
			e.forget(ctx, methodKey(call.MerchantID, pmID))
		}
		out = c
		return nil
	})
	return out, err
}

// Deleted is the result of a delete: the object's ID and kind.
type Deleted struct{ ID, Object string }

// customerMethods returns the IDs of a customer's cards, which its delete
// removes and the cache must forget.
func (e *Engine) customerMethods(ctx context.Context, merchantID, customerID string) ([]string, error) {
	var ids []string
	page := surgepay.Page{Limit: surgepay.ListLimitMax}
	for {
		pms, more, err := e.store.ListPaymentMethods(ctx, merchantID, customerID, page)
		if err != nil {
			return nil, err
		}
		for _, pm := range pms {
			ids = append(ids, pm.ID)
		}
		if !more || len(pms) == 0 {
			return ids, nil
		}
		page.StartingAfter = pms[len(pms)-1].ID
	}
}

// ListCustomers returns a page of customers, newest first.
func (e *Engine) ListCustomers(ctx context.Context, call *Call, page surgepay.Page) ([]*surgepay.Customer, bool, error) {
	return e.store.ListCustomers(ctx, call.MerchantID, page)
}
