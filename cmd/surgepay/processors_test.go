package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/config"
	"github.com/surgepay/surgepay/provider/stripe/stripedouble"
)

// stripeSecret is the test's processor secret: it must appear in no log,
// no answer and no /config.
const stripeSecret = "sk_test_surgepay_walkthrough_secret"

// stripeServe runs serve with the default merchant routed to a Stripe
// double (localstripe behind the fault proxy), its secret key sealed by
// `surgepay processors seal`.
func stripeServe(t *testing.T, extra string) (*server, *stripedouble.Proxy, string, string) {
	t.Helper()
	isolateEnv(t)
	ls := stripedouble.StartLocalstripe(t)
	proxy := stripedouble.NewProxy(t, ls)
	dir := t.TempDir()
	file := filepath.Join(dir, "surgepay.toml")
	base := fmt.Sprintf("data_dir = %q\nlisten = %q\nadmin_listen = %q\nlog_level = \"warn\"\nreconcile_interval = \"100ms\"\n",
		filepath.Join(dir, "data"), freeAddr(t), freeAddr(t))
	if err := os.WriteFile(file, []byte(base), 0o600); err != nil {
		t.Fatal(err)
	}
	stdin = strings.NewReader(stripeSecret + "\n")
	t.Cleanup(func() { stdin = os.Stdin })
	var out, errb bytes.Buffer
	if code := run(t.Context(), []string{"processors", "seal", "--name", "stripe_test", "--config", file}, &out, &errb); code != 0 {
		t.Fatalf("processors seal: exit %d: %s", code, errb.String())
	}
	sealed := strings.TrimSpace(out.String())
	if !strings.HasPrefix(sealed, `secret_key = "sealed:`) || strings.Contains(sealed, stripeSecret) {
		t.Fatalf("processors seal printed %q, want a sealed secret_key line", sealed)
	}
	for _, d := range []string{"timeout = \"2s\"", "search_lag = \"1ms\""} { // defaults extra may replace
		if k, _, _ := strings.Cut(d, " "); !strings.Contains(extra, k+" =") {
			extra = d + "\n" + extra
		}
	}
	conf := base + fmt.Sprintf("\n[processors.stripe_test]\nkind = \"stripe\"\n%s\nbase_url = %q\n%s\n"+
		"[merchants.default]\nprocessors = [\"stripe_test\"]\n", sealed, proxy.URL, extra)
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(file, envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	s := startServe(t, cfg)
	return s, proxy, ls, readDevKey(t, cfg.DataDir)
}

// TestServeStripe takes the walk-through's payments through the Stripe
// connector to localstripe: authorize with tax, partial capture, partial
// and full refunds, a sale, a decline, 3-D Secure declined; localstripe's
// own state matches; the secret key appears nowhere.
func TestServeStripe(t *testing.T) {
	s, _, ls, key := stripeServe(t, "")
	c := newClient(s.url, key)
	var cus, pm object
	c.must(t, "POST", "/v1/customers", "", map[string]any{"name": "Ada Lovelace", "email": "ada@example.com"}, 200, &cus)
	c.must(t, "POST", "/v1/payment_methods", "", map[string]any{"customer": cus.ID,
		"card": map[string]any{"number": "4242424242424242", "exp_month": 12, "exp_year": 2030, "cvc": "123"}}, 200, &pm)
	// localstripe needs a CVC with every card it tokenizes (Stripe does
	// not), so each payment here carries one.
	req := map[string]any{"amount": 2000, "currency": "usd", "customer": cus.ID, "payment_method": pm.ID, "cvc": "123",
		"capture_method": "manual", "tax": map[string]any{"country": "US", "region": "CA", "postal_code": "94105"}}
	var p struct {
		payment
		Transactions []struct {
			Type        string `json:"type"`
			ProviderRef string `json:"provider_reference"`
		} `json:"transactions"`
	}
	first := c.must(t, "POST", "/v1/payments", "order-stripe-1", req, 200, &p)
	if p.Status != "requires_capture" || len(p.Transactions) != 1 || !strings.HasPrefix(p.Transactions[0].ProviderRef, "stripe_test:pi_") {
		t.Fatalf("authorization: %s; want requires_capture at stripe_test:pi_…", first.body)
	}
	pi := strings.TrimPrefix(p.Transactions[0].ProviderRef, "stripe_test:")
	total := p.AmountTotal
	if got := piField(t, ls, pi); got.Amount != total || got.Status != "requires_capture" || got.Metadata["surgepay_merchant"] == "" {
		t.Fatalf("localstripe's payment intent: %+v, want %d requires_capture with surgepay metadata", got, total)
	}
	again := c.must(t, "POST", "/v1/payments", "order-stripe-1", req, 200, nil)
	if !bytes.Equal(again.body, first.body) {
		t.Fatalf("replay differs:\n%s\n%s", again.body, first.body)
	}
	c.must(t, "POST", "/v1/payments/"+p.ID+"/capture", "", map[string]any{"amount": total - 100}, 200, &p)
	if p.Status != "succeeded" || p.AmountCaptured != total-100 || piField(t, ls, pi).Status != "succeeded" {
		t.Fatalf("partial capture: %s captured %d, localstripe %s", p.Status, p.AmountCaptured, piField(t, ls, pi).Status)
	}
	c.must(t, "POST", "/v1/payments/"+p.ID+"/refunds", "", map[string]any{"amount": 500}, 200, &p)
	c.must(t, "POST", "/v1/payments/"+p.ID+"/refunds", "", nil, 200, &p)
	if p.Status != "refunded" || p.AmountRefunded != total-100 {
		t.Fatalf("after refunds: %s refunded %d, want refunded %d", p.Status, p.AmountRefunded, total-100)
	}
	if sum := surgepayRefunds(t, ls, pi); sum != total-100 {
		t.Fatalf("localstripe holds refunds of %d made by surgepay, want %d", sum, total-100)
	}

	t.Run("Sale", func(t *testing.T) {
		var sale payment
		c.must(t, "POST", "/v1/payments", "", map[string]any{"amount": 700, "currency": "usd", "payment_method": pm.ID, "cvc": "123"}, 200, &sale)
		if sale.Status != "succeeded" || sale.AmountCaptured != 700 {
			t.Fatalf("sale: %+v", sale)
		}
	})
	t.Run("ErrDeclined", func(t *testing.T) {
		for _, tt := range []struct{ number, code string }{
			{"4000000000000341", "generic_decline"},         // localstripe's charge decline
			{"4000002500003155", "authentication_required"}, // 3-D Secure: cancelled, nothing charged
		} {
			var pm2 object
			c.must(t, "POST", "/v1/payment_methods", "", map[string]any{"customer": cus.ID,
				"card": map[string]any{"number": tt.number, "exp_month": 12, "exp_year": 2030, "cvc": "123"}}, 200, &pm2)
			var e struct {
				Error struct {
					DeclineCode string `json:"decline_code"`
				} `json:"error"`
			}
			c.must(t, "POST", "/v1/payments", "", map[string]any{"amount": 500, "currency": "usd", "payment_method": pm2.ID, "cvc": "123"}, 402, &e)
			if e.Error.DeclineCode != tt.code {
				t.Errorf("card %s: decline_code %q, want %q", tt.number, e.Error.DeclineCode, tt.code)
			}
		}
	})
	t.Run("SecretNowhere", func(t *testing.T) {
		_, text := getAuth(t, "http://"+s.cfgAdmin(t)+"/config", readAdminToken(t, s.dataDir))
		body := []byte(text)
		if !bytes.Contains(body, []byte("stripe_test")) {
			t.Fatalf("/config does not show the processor: %s", body)
		}
		for what, text := range map[string]string{"/config": string(body), "logs": s.logs.String(), "stdout": s.out.String()} {
			if strings.Contains(text, stripeSecret) || strings.Contains(text, "walkthrough_secret") {
				t.Errorf("%s holds the processor's secret key", what)
			}
			if strings.Contains(text, "4242424242424242") {
				t.Errorf("%s holds a card number", what)
			}
		}
	})
}

// TestServeStripeReconciles: an authorization whose answer is lost (the
// connection drops after localstripe made it, no retry) is stored in
// processing and then resolved by the reconciler through the connector's
// search: the client's retry replays, nothing is charged twice.
func TestServeStripeReconciles(t *testing.T) {
	s, proxy, ls, key := stripeServe(t, "retries_max = -1")
	// The answer to the authorization is lost, and so are the searches
	// the request itself makes (surgepay.ReconcileAttemptsMax): the
	// payment is stored in processing, for the reconciler.
	var drop atomic.Bool
	var searchDrops atomic.Int64
	proxy.Faults = func(r *http.Request) stripedouble.Fault {
		if r.Method == "POST" && r.URL.Path == "/v1/payment_intents" && drop.CompareAndSwap(true, false) {
			searchDrops.Store(surgepay.ReconcileAttemptsMax)
			return stripedouble.DropAfter
		}
		if r.Method == "GET" && strings.HasSuffix(r.URL.Path, "/search") && searchDrops.Add(-1) >= 0 {
			return stripedouble.DropBefore
		}
		return stripedouble.Pass
	}
	c := newClient(s.url, key)
	var cus, pm object
	c.must(t, "POST", "/v1/customers", "", map[string]any{"name": "Ada"}, 200, &cus)
	c.must(t, "POST", "/v1/payment_methods", "", map[string]any{"customer": cus.ID,
		"card": map[string]any{"number": "4242424242424242", "exp_month": 12, "exp_year": 2030, "cvc": "123"}}, 200, &pm)
	drop.Store(true)
	req := map[string]any{"amount": 1500, "currency": "usd", "payment_method": pm.ID, "cvc": "123", "capture_method": "manual"}
	var p payment
	c.must(t, "POST", "/v1/payments", "order-lost", req, 200, &p)
	if p.Status != "processing" {
		t.Fatalf("an authorization whose answer was lost: status %s, want processing", p.Status)
	}
	deadline := time.Now().Add(20 * time.Second)
	for p.Status == "processing" && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		c.must(t, "GET", "/v1/payments/"+p.ID, "", nil, 200, &p)
	}
	if p.Status != "requires_capture" {
		t.Fatalf("after reconciliation: status %s, want requires_capture", p.Status)
	}
	var list struct {
		Data []struct {
			Status   string            `json:"status"`
			Metadata map[string]string `json:"metadata"`
		} `json:"data"`
	}
	stripedouble.GetJSON(t, ls, "/v1/payment_intents?limit=100", &list)
	live := 0
	for _, pi := range list.Data {
		if pi.Status == "requires_capture" && pi.Metadata["surgepay_merchant"] != "" {
			live++
		}
	}
	if live != 1 {
		t.Fatalf("localstripe holds %d authorizations, want 1", live)
	}
	c.must(t, "POST", "/v1/payments/"+p.ID+"/capture", "", nil, 200, &p)
	if p.Status != "succeeded" || p.AmountCaptured != 1500 {
		t.Fatalf("capture after reconciliation: %+v", p)
	}
}

type piState struct {
	Amount   int64             `json:"amount"`
	Status   string            `json:"status"`
	Metadata map[string]string `json:"metadata"`
}

func piField(t *testing.T, base, id string) piState {
	t.Helper()
	var pi piState
	stripedouble.GetJSON(t, base, "/v1/payment_intents/"+id, &pi)
	return pi
}

// cfgAdmin is the admin listener's address, from the config serve runs.
func (s *server) cfgAdmin(t *testing.T) string {
	t.Helper()
	if s.admin == "" {
		t.Fatal("the server has no admin listener")
	}
	return s.admin
}

// TestServeStripeToken saves a Stripe token (a pm_… made at localstripe,
// as Stripe.js would on the merchant's page) as a payment method and pays
// with it: surgepay never sees the card number, the card's brand and last
// four come from the processor, and the payment goes to that processor.
func TestServeStripeToken(t *testing.T) {
	s, _, ls, key := stripeServe(t, "")
	c := newClient(s.url, key)
	form := url.Values{"type": {"card"}, "card[number]": {"4000056655665556"}, "card[exp_month]": {"11"},
		"card[exp_year]": {"2031"}, "card[cvc]": {"321"}}
	req, _ := http.NewRequest("POST", ls+"/v1/payment_methods", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth("sk_test_merchant_page", "") // Stripe.js would use the publishable key
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var tok struct{ ID string }
	err = json.NewDecoder(resp.Body).Decode(&tok)
	resp.Body.Close()
	if err != nil || !strings.HasPrefix(tok.ID, "pm_") {
		t.Fatalf("localstripe made no payment method: %v %+v", err, tok)
	}
	var cus object
	c.must(t, "POST", "/v1/customers", "", map[string]any{"name": "Grace"}, 200, &cus)
	var pm struct {
		ID        string `json:"id"`
		Processor string `json:"processor"`
		Card      struct {
			Brand    string `json:"brand"`
			Last4    string `json:"last4"`
			ExpMonth int    `json:"exp_month"`
		} `json:"card"`
	}
	saved := c.must(t, "POST", "/v1/payment_methods", "", map[string]any{"customer": cus.ID,
		"processor_token": map[string]any{"processor": "stripe_test", "token": tok.ID}}, 200, &pm)
	if pm.Processor != "stripe_test" || pm.Card.Brand != "visa" || pm.Card.Last4 != "5556" || pm.Card.ExpMonth != 11 {
		t.Fatalf("saved token: %s", saved.body)
	}
	if bytes.Contains(saved.body, []byte(tok.ID)) {
		t.Fatalf("the answer returns the token: %s", saved.body)
	}
	var p struct {
		payment
		Transactions []struct {
			ProviderRef string `json:"provider_reference"`
		} `json:"transactions"`
	}
	c.must(t, "POST", "/v1/payments", "tok-sale-1", map[string]any{"amount": 990, "currency": "usd", "payment_method": pm.ID}, 200, &p)
	if p.Status != "succeeded" || len(p.Transactions) == 0 || !strings.HasPrefix(p.Transactions[0].ProviderRef, "stripe_test:pi_") {
		t.Fatalf("sale with the token: %+v", p)
	}
	var pi struct {
		PaymentMethod string `json:"payment_method"`
		Status        string `json:"status"`
		Customer      string `json:"customer"`
	}
	stripedouble.GetJSON(t, ls, "/v1/payment_intents/"+strings.TrimPrefix(p.Transactions[0].ProviderRef, "stripe_test:"), &pi)
	if pi.PaymentMethod != tok.ID || pi.Status != "succeeded" || !strings.HasPrefix(pi.Customer, "cus_") {
		t.Fatalf("localstripe's payment intent: %+v, want on %s with its customer, succeeded", pi, tok.ID)
	}
	// Saved, the token was attached to a Stripe Customer (issue 39 item 5),
	// so it is charged again, with that customer.
	var spm struct {
		Customer string `json:"customer"`
	}
	stripedouble.GetJSON(t, ls, "/v1/payment_methods/"+tok.ID, &spm)
	if spm.Customer != pi.Customer {
		t.Fatalf("the token's customer at localstripe: %q, the payment intent's %q", spm.Customer, pi.Customer)
	}
	c.must(t, "POST", "/v1/payments", "tok-sale-2", map[string]any{"amount": 995, "currency": "usd", "payment_method": pm.ID}, 200, &p)
	if p.Status != "succeeded" {
		t.Fatalf("second sale with the token: %+v", p)
	}

	for _, tt := range []struct {
		name, processor, token, param string
	}{
		{"ErrUnknownToken", "stripe_test", "pm_doesnotexist", "processor_token.token"},
		{"ErrMalformedToken", "stripe_test", "4242424242424242", "processor_token.token"},
		{"ErrUnknownProcessor", "nope", tok.ID, "processor_token.processor"},
		{"ErrDefaultProcessor", "default", tok.ID, "processor_token.processor"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var e struct {
				Error struct {
					Param string `json:"param"`
				} `json:"error"`
			}
			c.must(t, "POST", "/v1/payment_methods", "", map[string]any{"customer": cus.ID,
				"processor_token": map[string]any{"processor": tt.processor, "token": tt.token}}, 400, &e)
			if e.Error.Param != tt.param {
				t.Fatalf("param %q, want %q", e.Error.Param, tt.param)
			}
		})
	}
}

// TestServeSwitchProcessorsUnderLoad switches the default merchant between
// Stripe (localstripe) and the simulator by editing the configuration file
// while sales run: no answer is a 5xx, every answered sale is stored, and
// each refunds afterwards at the processor that authorized it, named by
// its reference, whatever the routing says by then.
func TestServeSwitchProcessorsUnderLoad(t *testing.T) {
	s, _, _, key := stripeServe(t, "")
	file := s.cfgPath
	orig, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(s.url, key)
	var cus, pm object
	c.must(t, "POST", "/v1/customers", "", map[string]any{"name": "Load"}, 200, &cus)
	c.must(t, "POST", "/v1/payment_methods", "", map[string]any{"customer": cus.ID,
		"card": map[string]any{"number": "4242424242424242", "exp_month": 12, "exp_year": 2030, "cvc": "123"}}, 200, &pm)

	const workers, seconds = 4, 7
	var mu sync.Mutex
	var ids []string
	statuses := map[int]int{}
	var wg sync.WaitGroup
	stop := time.Now().Add(seconds * time.Second)
	for w := range workers {
		wg.Go(func() {
			for i := 0; time.Now().Before(stop); i++ {
				r, err := c.do(t.Context(), "POST", "/v1/payments", fmt.Sprintf("switch-%d-%d", w, i),
					map[string]any{"amount": 1000 + i, "currency": "usd", "payment_method": pm.ID, "cvc": "123"})
				if err != nil {
					t.Errorf("sale: %v", err)
					return
				}
				var p payment
				if err := json.Unmarshal(r.body, &p); err != nil {
					t.Errorf("sale answered %d: %v: %s", r.status, err, r.body)
				}
				mu.Lock()
				statuses[r.status]++
				if r.status == 200 {
					ids = append(ids, p.ID)
				}
				mu.Unlock()
			}
		})
	}
	// default, then stripe_test, then default again; the file is polled
	// every config.PollInterval, each edit gets a new modification time.
	for i, to := range []string{`["default"]`, `["stripe_test"]`, `["default"]`} {
		time.Sleep(config.PollInterval + 200*time.Millisecond)
		text := strings.Replace(string(orig), `processors = ["stripe_test"]`, "processors = "+to, 1)
		if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		mt := time.Now().Add(time.Duration(i+1) * time.Second)
		if err := os.Chtimes(file, mt, mt); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	for st, n := range statuses {
		if st != 200 {
			t.Errorf("%d answers %d, want every sale 200", n, st)
		}
	}
	at := map[string]int{}
	for _, id := range ids {
		var p struct {
			payment
			Transactions []struct {
				ProviderRef string `json:"provider_reference"`
			} `json:"transactions"`
		}
		c.must(t, "GET", "/v1/payments/"+id, "", nil, 200, &p)
		if p.Status != "succeeded" || len(p.Transactions) == 0 {
			t.Fatalf("payment %s: %+v, want succeeded", id, p)
		}
		proc := "default"
		if strings.HasPrefix(p.Transactions[0].ProviderRef, "stripe_test:") {
			proc = "stripe_test"
		}
		at[proc]++
		c.must(t, "POST", "/v1/payments/"+id+"/refunds", "", nil, 200, &p)
		if p.Status != "refunded" {
			t.Fatalf("refund of %s (at %s): %s", id, proc, p.Status)
		}
	}
	if at["default"] == 0 || at["stripe_test"] == 0 {
		t.Fatalf("sales by processor %v: the switch did not take effect both ways", at)
	}
	t.Logf("%d sales, by processor %v, all refunded", len(ids), at)
}

// signedEvent is a Stripe event of type typ about object, signed with
// secret as Stripe signs its webhooks (the SDK's test signer).
func signedEvent(t *testing.T, secret, id, typ string, object map[string]any) ([]byte, string) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"id": id, "object": "event", "api_version": "2025-08-27.basil",
		"type": typ, "created": time.Now().Unix(), "data": map[string]any{"object": object}})
	if err != nil {
		t.Fatal(err)
	}
	sp := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: secret})
	return body, sp.Header
}

// TestServeStripeWebhooks applies Stripe's webhooks to the payments they
// name: a dispute opens and closes on the payment (its status stays), a
// refund made in Stripe's dashboard is added, an authorization Stripe
// cancelled cancels the payment; each event once; a bad signature 400.
func TestServeStripeWebhooks(t *testing.T) {
	const whsec = "whsec_test_surgepay"
	s, _, ls, key := stripeServe(t, `webhook_secret = "`+whsec+`"`)
	c := newClient(s.url, key)
	var cus, pm object
	c.must(t, "POST", "/v1/customers", "", map[string]any{"name": "Ada"}, 200, &cus)
	c.must(t, "POST", "/v1/payment_methods", "", map[string]any{"customer": cus.ID,
		"card": map[string]any{"number": "4242424242424242", "exp_month": 12, "exp_year": 2030, "cvc": "123"}}, 200, &pm)
	type pay struct {
		payment
		Transactions []struct {
			Type        string `json:"type"`
			ProviderRef string `json:"provider_reference"`
		} `json:"transactions"`
		Dispute *struct {
			ID, Status, Reason string
			Amount             int64
		} `json:"dispute"`
	}
	var sale, auth pay
	c.must(t, "POST", "/v1/payments", "", map[string]any{"amount": 1000, "currency": "usd", "payment_method": pm.ID, "cvc": "123"}, 200, &sale)
	c.must(t, "POST", "/v1/payments", "", map[string]any{"amount": 500, "currency": "usd", "payment_method": pm.ID, "cvc": "123",
		"capture_method": "manual"}, 200, &auth)
	pi := func(p pay) string { return strings.TrimPrefix(p.Transactions[0].ProviderRef, "stripe_test:") }

	post := func(body []byte, sig string, processor string) (int, string) {
		req, _ := http.NewRequest("POST", s.url+"/v1/processor_webhooks/"+processor, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Stripe-Signature", sig)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			Result string `json:"result"`
			Error  struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			return resp.StatusCode, "an answer that is not JSON: " + err.Error()
		}
		return resp.StatusCode, out.Result + out.Error.Code
	}
	dispute := map[string]any{"id": "dp_1", "object": "dispute", "amount": 1000, "status": "needs_response",
		"reason": "fraudulent", "payment_intent": pi(sale), "charge": "ch_1"}
	body, sig := signedEvent(t, whsec, "evt_d1", "charge.dispute.created", dispute)
	for i, want := range []string{"applied", "duplicate"} {
		if code, got := post(body, sig, "stripe_test"); code != 200 || got != want {
			t.Fatalf("dispute created, delivery %d: %d %s, want 200 %s", i+1, code, got, want)
		}
	}
	var p pay
	c.must(t, "GET", "/v1/payments/"+sale.ID, "", nil, 200, &p)
	if p.Status != "succeeded" || p.Dispute == nil || p.Dispute.ID != "stripe_test:dp_1" || p.Dispute.Status != "needs_response" ||
		p.Dispute.Amount != 1000 || p.Dispute.Reason != "fraudulent" {
		t.Fatalf("after the dispute: %+v %+v", p.payment, p.Dispute)
	}
	dispute["status"] = "won"
	body, sig = signedEvent(t, whsec, "evt_d2", "charge.dispute.closed", dispute)
	if code, got := post(body, sig, "stripe_test"); code != 200 || got != "applied" {
		t.Fatalf("dispute closed: %d %s", code, got)
	}
	c.must(t, "GET", "/v1/payments/"+sale.ID, "", nil, 200, &p)
	if p.Dispute == nil || p.Dispute.Status != "won" {
		t.Fatalf("after the dispute closed: %+v", p.Dispute)
	}
	var events struct {
		Data []struct{ Type string } `json:"data"`
	}
	c.must(t, "GET", "/v1/payments/"+sale.ID+"/events", "", nil, 200, &events)
	var trail []string
	for _, e := range events.Data {
		trail = append(trail, e.Type)
	}
	if got := strings.Join(trail, ","); got != "authorization,capture,dispute.created,dispute.closed" {
		t.Fatalf("events %s, want the sale then dispute.created, dispute.closed once each", got)
	}

	// A refund of 100 by surgepay, and one of 300 made in Stripe's
	// dashboard (at localstripe, without surgepay's metadata). Stripe's
	// charge.refunded says 400 in all; only the 300 made outside surgepay
	// is added, the event's total is not trusted (surgepay's own refund
	// could be recording on another node at that moment).
	c.must(t, "POST", "/v1/payments/"+sale.ID+"/refunds", "", map[string]any{"amount": 100}, 200, &p)
	form := url.Values{"payment_intent": {pi(sale)}, "amount": {"300"}}
	req, _ := http.NewRequest("POST", ls+"/v1/refunds", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth("sk_test_dashboard", "")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("a refund at localstripe: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("a refund at localstripe: %s", resp.Status)
	}
	body, sig = signedEvent(t, whsec, "evt_r1", "charge.refunded", map[string]any{"id": "ch_1", "object": "charge",
		"amount": 1000, "amount_refunded": 400, "payment_intent": pi(sale)})
	if code, got := post(body, sig, "stripe_test"); code != 200 || got != "applied" {
		t.Fatalf("refunded: %d %s", code, got)
	}
	c.must(t, "GET", "/v1/payments/"+sale.ID, "", nil, 200, &p)
	if p.Status != "partially_refunded" || p.AmountRefunded != 400 {
		t.Fatalf("after surgepay's refund of 100 and a dashboard refund of 300: %s refunded %d, want 400", p.Status, p.AmountRefunded)
	}
	// Delivered again under a new id (Stripe's event for a second
	// refund, say): nothing more was refunded outside, nothing changes.
	body, sig = signedEvent(t, whsec, "evt_r2", "charge.refunded", map[string]any{"id": "ch_1", "object": "charge",
		"amount": 1000, "amount_refunded": 400, "payment_intent": pi(sale)})
	if code, got := post(body, sig, "stripe_test"); code != 200 || got != "unchanged" {
		t.Fatalf("refunded again: %d %s, want unchanged", code, got)
	}
	// A partial capture: the released rest is on the charge as a refund,
	// which is not a refund of captured money.
	var part pay
	c.must(t, "POST", "/v1/payments", "", map[string]any{"amount": 900, "currency": "usd", "payment_method": pm.ID, "cvc": "123",
		"capture_method": "manual"}, 200, &part)
	c.must(t, "POST", "/v1/payments/"+part.ID+"/capture", "", map[string]any{"amount": 600}, 200, &p)
	body, sig = signedEvent(t, whsec, "evt_r3", "charge.refunded", map[string]any{"id": "ch_3", "object": "charge",
		"amount": 900, "amount_refunded": 300, "payment_intent": pi(part)})
	if code, got := post(body, sig, "stripe_test"); code != 200 || got != "unchanged" {
		t.Fatalf("refunded after a partial capture: %d %s, want unchanged", code, got)
	}

	// An authorization Stripe cancelled (expired).
	body, sig = signedEvent(t, whsec, "evt_c1", "payment_intent.canceled", map[string]any{"id": pi(auth), "object": "payment_intent",
		"amount": 500, "status": "canceled", "cancellation_reason": "automatic"})
	if code, got := post(body, sig, "stripe_test"); code != 200 || got != "applied" {
		t.Fatalf("canceled: %d %s", code, got)
	}
	c.must(t, "GET", "/v1/payments/"+auth.ID, "", nil, 200, &p)
	if p.Status != "canceled" {
		t.Fatalf("an authorization cancelled at Stripe: %s, want canceled", p.Status)
	}

	t.Run("ErrSignature", func(t *testing.T) {
		body, _ := signedEvent(t, whsec, "evt_x", "charge.dispute.created", dispute)
		_, badSig := signedEvent(t, "whsec_other", "evt_x", "charge.dispute.created", dispute)
		if code, got := post(body, badSig, "stripe_test"); code != 400 || got != "invalid_signature" {
			t.Fatalf("a wrong signature: %d %s, want 400 invalid_signature", code, got)
		}
		if code, _ := post(body, "", "stripe_test"); code != 400 {
			t.Fatalf("no signature: %d, want 400", code)
		}
	})
	t.Run("ErrUnknownProcessor", func(t *testing.T) {
		if code, got := post(body, sig, "nope"); code != 404 {
			t.Fatalf("an unknown processor: %d %s, want 404", code, got)
		}
	})
	t.Run("UnknownPayment", func(t *testing.T) {
		body, sig := signedEvent(t, whsec, "evt_u", "charge.dispute.created", map[string]any{"id": "dp_9", "object": "dispute",
			"amount": 100, "status": "needs_response", "payment_intent": "pi_not_ours"})
		if code, got := post(body, sig, "stripe_test"); code != 200 || got != "unknown_payment" {
			t.Fatalf("a payment not ours: %d %s, want 200 unknown_payment", code, got)
		}
	})
	t.Run("Ignored", func(t *testing.T) {
		body, sig := signedEvent(t, whsec, "evt_i", "customer.created", map[string]any{"id": "cus_1", "object": "customer"})
		if code, got := post(body, sig, "stripe_test"); code != 200 || got != "ignored" {
			t.Fatalf("an event type surgepay does not act on: %d %s", code, got)
		}
	})
}
