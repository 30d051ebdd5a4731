package ops

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/cache"
	"github.com/surgepay/surgepay/config"
	"github.com/surgepay/surgepay/engine"
	"github.com/surgepay/surgepay/internal/testenv"
	"github.com/surgepay/surgepay/provider/processors"
	"github.com/surgepay/surgepay/provider/sim"
	"github.com/surgepay/surgepay/vault"
)

// TestReencryptThenRetire: cards and a webhook secret saved under a data
// key, a rotation, then `keys reencrypt` seals each again under the new
// primary key (the card saved after the rotation is left as it is), and
// `keys retire` removes the old key, which it refused while anything
// stored, or a sealed [processors] secret, still named it. A server that
// cached a card before the re-encryption, its keyring reloaded without
// the old key, still charges it: it reads the card again.
func TestReencryptThenRetire(t *testing.T) {
	for _, b := range testenv.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			store := b.Open(t)
			keys, keyring := newKeyringFile(t)
			old := keys.PrimaryID()
			// The server's keyring: a copy of the file, reloaded as serve does.
			served, err := vault.Load(keyring)
			if err != nil {
				t.Fatal(err)
			}
			eng, err := engine.New(engine.Config{Store: store, Provider: sim.New(sim.DefaultConfig()), Vault: served})
			if err != nil {
				t.Fatal(err)
			}
			m, err := eng.CreateMerchant(ctx, "Vault")
			if err != nil {
				t.Fatal(err)
			}
			call := &engine.Call{MerchantID: m.ID}
			cus, err := eng.CreateCustomer(ctx, call, &engine.CustomerInput{Name: "Ada"})
			if err != nil {
				t.Fatal(err)
			}
			card := func() *surgepay.PaymentMethod {
				t.Helper()
				pm, err := eng.CreatePaymentMethod(ctx, call, &engine.CardInput{CustomerID: cus.ID,
					Card: surgepay.CardInput{Number: "4242424242424242", ExpMonth: 12, ExpYear: time.Now().Year() + 2, CVC: "123"}})
				if err != nil {
					t.Fatal(err)
				}
				return pm
			}
			cards := []*surgepay.PaymentMethod{card(), card(), card()}
			if _, _, err := eng.CreateWebhookEndpoint(ctx, call, &engine.WebhookEndpointInput{URL: "https://hooks.example.com/a"}); err != nil {
				t.Fatal(err)
			}
			cfg := config.Default()
			cfg.KeyringFile = keyring
			sealed, err := processors.Seal(keys, "eu", "sk_test_old")
			if err != nil {
				t.Fatal(err)
			}
			cfg.Processors = map[string]config.ProcessorConfig{"eu": {Kind: "stripe", SecretKey: cache.Secret(sealed)}}

			if _, err := keys.Rotate(); err != nil {
				t.Fatal(err)
			}
			if err := keys.Save(keyring); err != nil {
				t.Fatal(err)
			}
			if _, err := served.Reload(keyring); err != nil {
				t.Fatal(err)
			}
			cards = append(cards, card()) // under the new primary already

			var out bytes.Buffer
			if err := RetireVaultKey(ctx, store, cfg, old, ReencryptOptions{RateMax: -1}, &out); err == nil ||
				!strings.Contains(out.String(), "card_number: "+old+" 3") || !strings.Contains(out.String(), "processors.eu.secret_key") {
				t.Fatalf("retire before re-encrypting: %v\n%s\nwant refused, naming 3 cards and the processor's secret", err, out.String())
			}
			out.Reset()
			if err := Reencrypt(ctx, store, keys, ReencryptOptions{Batch: 2, RateMax: -1}, &out); err != nil {
				t.Fatalf("reencrypt: %v\n%s", err, out.String())
			}
			cardKeys := []string{old + " 3", keys.PrimaryID() + " 1"}
			slices.Sort(cardKeys)
			want := fmt.Sprintf("found card_number: %s\nfound webhook_secret: %s 1\nfound webhook_previous_secret: none\nsealed again under %s: 4\n",
				strings.Join(cardKeys, ", "), old, keys.PrimaryID())
			if got := out.String(); got != want {
				t.Errorf("reencrypt printed:\n%s\nwant:\n%s", got, want)
			}
			ss, _ := sealedStoreOf(store)
			for _, kind := range surgepay.SealedKinds {
				page, err := ss.ListSealed(ctx, kind, "", "", surgepay.SealedPageMax)
				if err != nil {
					t.Fatal(err)
				}
				for _, b := range page {
					if id, _ := keys.KeyIDOf(b.Sealed); id != keys.PrimaryID() {
						t.Errorf("%s of %s after reencrypt: under %s, want %s", kind, b.ID, id, keys.PrimaryID())
					}
				}
			}
			out.Reset()
			if err := Reencrypt(ctx, store, keys, ReencryptOptions{RateMax: -1}, &out); err != nil ||
				!strings.Contains(out.String(), "sealed again under "+keys.PrimaryID()+": 0") {
				t.Errorf("a second pass: %v\n%s\nwant nothing to do", err, out.String())
			}

			// The processor's secret is still under the old key: refused.
			out.Reset()
			if err := RetireVaultKey(ctx, store, cfg, old, ReencryptOptions{RateMax: -1}, &out); err == nil {
				t.Fatalf("retire with a processor's secret under it: accepted\n%s", out.String())
			}
			if sealed, err = processors.Seal(keys, "eu", "sk_test_old"); err != nil {
				t.Fatal(err)
			}
			cfg.Processors = map[string]config.ProcessorConfig{"eu": {Kind: "stripe", SecretKey: cache.Secret(sealed)}}
			out.Reset()
			if err := RetireVaultKey(ctx, store, cfg, old, ReencryptOptions{RateMax: -1}, &out); err != nil {
				t.Fatalf("retire after re-encrypting: %v\n%s", err, out.String())
			}
			if err := RetireVaultKey(ctx, store, cfg, keys.PrimaryID(), ReencryptOptions{RateMax: -1}, &out); err == nil {
				t.Error("retire of the primary key: accepted")
			}
			if _, err := served.Reload(keyring); err != nil {
				t.Fatal(err)
			}
			if got := served.KeyIDs(); len(got) != 1 || got[0] == old {
				t.Fatalf("the server's keys after the retire: %v, want the primary alone", got)
			}
			// The first card is in the server's cache under the old key.
			p, err := eng.CreatePayment(ctx, call, &engine.PaymentInput{Amount: 1200, Currency: "usd", CustomerID: cus.ID,
				PaymentMethodID: cards[0].ID})
			if err != nil || p.Status != surgepay.StatusSucceeded {
				t.Fatalf("a sale on a card cached before the re-encryption: %v, %v; want succeeded", p, err)
			}
		})
	}
}
