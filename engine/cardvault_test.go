package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/engine"
	"github.com/surgepay/surgepay/internal/testenv"
	"github.com/surgepay/surgepay/provider/sim"
	"github.com/surgepay/surgepay/vault"
)

// TestCardUnreadableChargesNothing: a saved card whose number this server
// cannot open (its vault key is not in this server's keyring: a rotation
// across servers done out of order, or a key retired too soon) is 503
// card_unavailable, safe to retry, before any processor call. A sale
// stores nothing; a browser's confirm leaves the payment awaiting a
// card. Nothing reaches the card network. It was a sale stored in
// processing, as if the network's answer had been lost.
func TestCardUnreadableChargesNothing(t *testing.T) {
	ctx := context.Background()
	keys, err := vault.Generate()
	if err != nil {
		t.Fatal(err)
	}
	network := sim.New(sim.DefaultConfig())
	eng, err := engine.New(engine.Config{Store: testenv.OpenSQLite(t), Provider: network, Vault: keys})
	if err != nil {
		t.Fatal(err)
	}
	m, err := eng.CreateMerchant(ctx, "m")
	if err != nil {
		t.Fatal(err)
	}
	call := &engine.Call{MerchantID: m.ID}
	cus, err := eng.CreateCustomer(ctx, call, &engine.CustomerInput{Name: "Ada"})
	if err != nil {
		t.Fatal(err)
	}
	pm, err := eng.CreatePaymentMethod(ctx, call, &engine.CardInput{CustomerID: cus.ID,
		Card: surgepay.CardInput{Number: "4242424242424242", ExpMonth: 12, ExpYear: time.Now().Year() + 2, CVC: "123"}})
	if err != nil {
		t.Fatal(err)
	}
	old := keys.PrimaryID()
	if _, err := keys.Rotate(); err != nil {
		t.Fatal(err)
	}
	if err := keys.Retire(old); err != nil {
		t.Fatal(err)
	}
	wantUnavailable := func(what string, err error) {
		t.Helper()
		var se *surgepay.Error
		if !errors.As(err, &se) || se.Code != surgepay.EUNAVAILABLE || se.Reason != "card_unavailable" || se.RetryAfter < 1 {
			t.Fatalf("%s: %v; want EUNAVAILABLE card_unavailable with Retry-After", what, err)
		}
	}
	_, err = eng.CreatePayment(ctx, call, &engine.PaymentInput{Amount: 1000, Currency: "usd", CustomerID: cus.ID, PaymentMethodID: pm.ID})
	wantUnavailable("a sale", err)
	if ps, _, err := eng.ListPayments(ctx, call, surgepay.PaymentFilter{}); err != nil || len(ps) != 0 {
		t.Fatalf("after the sale: payments %v, %v; want none stored", ps, err)
	}

	p, err := eng.CreatePayment(ctx, call, &engine.PaymentInput{Amount: 1000, Currency: "usd", CustomerID: cus.ID})
	if err != nil {
		t.Fatal(err)
	}
	_, err = eng.ConfirmPayment(ctx, call, p.ID, &engine.ConfirmInput{ClientSecret: p.ClientSecret, PaymentMethodID: pm.ID})
	wantUnavailable("a browser's confirm", err)
	if got, err := eng.GetPayment(ctx, call, p.ID); err != nil || got.Status != surgepay.StatusRequiresPaymentMethod {
		t.Fatalf("after the confirm: %v, %v; want requires_payment_method", got, err)
	}
	if tot := network.TotalEffects(); tot.Authorizations+tot.AuthorizationsDeclined != 0 || tot.Records != 0 {
		t.Fatalf("the card network saw %+v; want nothing", tot)
	}
}
