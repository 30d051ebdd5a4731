package engine

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/surgepay/surgepay"
)

// Browser checkout (docs/checkout.md). The merchant's server makes a
// payment without a card (requires_payment_method) and gets its client
// secret; the card frame, holding the merchant's publishable key, saves
// the shopper's card and confirms the payment with the secret.

// clientSecretSep separates a client secret's payment ID from its token.
const clientSecretSep = "_secret_"

// clientSecretDomain starts every signed message: a MAC of this kind can
// never be taken for one of another kind under the same key.
const clientSecretDomain = "surgepay client secret v1\x00"

// ConfirmReconcileGrace is how long the reconciler leaves a browser's
// confirm in processing before looking its authorization up: the confirm
// records its attempt before calling the processor, so a lookup during
// the call, which may take the processor's whole timeout and its retries,
// would find nothing and wrongly send the payment back to
// requires_payment_method while the charge goes through.
const ConfirmReconcileGrace = time.Minute

// publishablePrefix is pk_live_ when a processor moves real money (a
// Stripe live key: surgepay.ModeOf), else pk_test_.
func (e *Engine) publishablePrefix() string {
	if surgepay.ModeOf(e.provider) == "live" {
		return surgepay.PublishableKeyPrefixLive
	}
	return surgepay.PublishableKeyPrefixTest
}

func clientSecretMessage(merchantID, paymentID, exp string) []byte {
	return []byte(clientSecretDomain + merchantID + "\x00" + paymentID + "\x00" + exp)
}

// clientSecret returns a new client secret for p, valid for
// surgepay.ClientSecretTTL: paymentID_secret_KEYID.EXPIRY.MAC, where
// EXPIRY is Unix seconds in base 36 and MAC the signing key's HMAC of
// the merchant, the payment and the expiry. "" if the vault signs
// nothing (a vault without signing keys).
func (e *Engine) clientSecret(p *surgepay.Payment) string {
	s, ok := e.vault.(surgepay.Signer)
	if !ok {
		return ""
	}
	exp := strconv.FormatInt(e.now().Add(surgepay.ClientSecretTTL).Unix(), 36)
	kid, mac := s.Sign(clientSecretMessage(p.MerchantID, p.ID, exp))
	return p.ID + clientSecretSep + kid + "." + exp + "." + base64.RawURLEncoding.EncodeToString(mac)
}

// CheckClientSecret checks that secret is a client secret this server's
// signing keys made for payment id of merchantID and that it has not
// expired. It reads nothing: the MAC is the proof. Errors are EUNAUTH
// client_secret_invalid (malformed, another payment's, forged, or signed
// by a retired key) or client_secret_expired.
func (e *Engine) CheckClientSecret(merchantID, id, secret string) error {
	invalid := &surgepay.Error{Code: surgepay.EUNAUTH, Reason: "client_secret_invalid", Param: "client_secret",
		Message: "the client secret is not valid for this payment"}
	if secret == "" {
		return surgepay.Invalid("client_secret", "missing", "client_secret is required")
	}
	s, ok := e.vault.(surgepay.Signer)
	if !ok || len(secret) > surgepay.ClientSecretBytesMax {
		return invalid
	}
	rest, ok := strings.CutPrefix(secret, id+clientSecretSep)
	if !ok {
		return invalid
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 3 {
		return invalid
	}
	mac, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || !s.Verify(parts[0], clientSecretMessage(merchantID, id, parts[1]), mac) {
		return invalid
	}
	exp, err := strconv.ParseInt(parts[1], 36, 64)
	if err != nil {
		return invalid
	}
	if !e.now().Before(time.Unix(exp, 0)) {
		return &surgepay.Error{Code: surgepay.EUNAUTH, Reason: "client_secret_expired", Param: "client_secret",
			Message: "the client secret has expired; the merchant's server gets a fresh one by reading the payment"}
	}
	return nil
}

// withClientSecret gives p a fresh client secret while the browser has
// something to do: give a card, or authenticate.
func (e *Engine) withClientSecret(p *surgepay.Payment) *surgepay.Payment {
	if p != nil && (p.Status == surgepay.StatusRequiresPaymentMethod || p.Status == surgepay.StatusRequiresAction) {
		p.ClientSecret = e.clientSecret(p)
	}
	return p
}

// createAwaiting stores a payment without a card, for a browser to
// confirm (requires_payment_method): no processor call, one write.
func (e *Engine) createAwaiting(ctx context.Context, call *Call, in *PaymentInput, t *surgepay.Tax, taxAmt int64) (*surgepay.Payment, error) {
	if in.CVC.Value() != "" {
		return nil, surgepay.Invalid("cvc", "invalid_value", "cvc goes with a payment_method; a browser sends it when it confirms")
	}
	if _, ok := e.vault.(surgepay.Signer); !ok {
		return nil, surgepay.Invalid("payment_method", "missing", "payment_method is required: this server signs no client secrets")
	}
	var out *surgepay.Payment
	err := e.idempotent(ctx, call, func() error {
		if in.CustomerID != "" {
			if _, err := e.store.FindCustomer(ctx, call.MerchantID, in.CustomerID); err != nil {
				if surgepay.ErrorCode(err) == surgepay.ENOTFOUND {
					return surgepay.NotFound("customer", "customer")
				}
				return err
			}
		}
		now := e.now()
		p := &surgepay.Payment{ID: surgepay.NewID("pay"), MerchantID: call.MerchantID, CustomerID: in.CustomerID,
			Amount: in.Amount, AmountTax: taxAmt, Currency: in.Currency, CaptureMethod: in.CaptureMethod,
			Description: in.Description, Metadata: in.Metadata, Tax: t, Path: surgepay.PathStandard,
			Created: now, Updated: now, Version: 1}
		p.SetStatus(surgepay.StatusRequiresPaymentMethod)
		e.withClientSecret(p)
		w := &surgepay.Write{PaymentInsert: p}
		e.attach(call, w, p, nil)
		if err := e.apply(ctx, call, w); err != nil {
			return err
		}
		out = p
		return nil
	})
	return out, err
}

// CreateCheckoutPaymentMethod saves a card the browser's frame sends, for
// no customer (a guest card: the payment it confirms names the customer,
// if any): validated and sealed as CreatePaymentMethod does; the CVC is
// checked and dropped, and comes again with the confirm.
func (e *Engine) CreateCheckoutPaymentMethod(ctx context.Context, call *Call, card surgepay.CardInput) (*surgepay.PaymentMethod, error) {
	brand, err := card.Validate(e.now())
	if err != nil {
		return nil, err
	}
	return e.saveMethod(ctx, call, "", func() (*surgepay.PaymentMethod, error) {
		return e.sealCard(call, "", &card, brand)
	})
}

// ConfirmInput is a browser's confirm of a payment awaiting a card.
type ConfirmInput struct {
	ClientSecret    string
	PaymentMethodID string
	CVC             surgepay.CVC // sent to the processor, never stored
	// ReturnURL is where the shopper returns after authenticating (3-D
	// Secure): the merchant's page.
	ReturnURL string
	// ReturnBase is surgepay's own origin as the browser reaches it
	// (scheme://host[:port]), where the processor's authentication page
	// sends the shopper first (surgepay.CheckoutReturnPath). Empty: the
	// payment cannot authenticate, and a card that requires it is declined.
	ReturnBase string
}

func (in *ConfirmInput) validate() error {
	if in.PaymentMethodID == "" {
		return surgepay.Invalid("payment_method", "missing", "payment_method is required")
	}
	if v := in.CVC.Value(); v != "" && (len(v) < 3 || len(v) > 4 || strings.Trim(v, "0123456789") != "") {
		return surgepay.Invalid("cvc", "invalid_cvc", "cvc must be 3 or 4 digits")
	}
	if in.ReturnURL != "" {
		u, err := url.Parse(in.ReturnURL)
		if err != nil || len(in.ReturnURL) > surgepay.ReturnURLBytesMax || (u.Scheme != "https" && u.Scheme != "http") ||
			u.Host == "" || u.User != nil {
			return surgepay.Invalid("return_url", "invalid_value", "return_url must be an http or https URL of at most %d bytes",
				surgepay.ReturnURLBytesMax)
		}
		if surgepay.TextHasCardNumber(in.ReturnURL) {
			return surgepay.CardNumberInText("return_url")
		}
	}
	return nil
}

// ConfirmPayment authorizes payment id, which awaits a card, with the
// payment method the browser saved, after checking the client secret.
// Approved, the payment is succeeded (a sale) or requires_capture;
// declined, it stays requires_payment_method with the decline recorded,
// and the answer is EDECLINED; asked to authenticate the cardholder (3-D
// Secure, with in.ReturnBase set), requires_action with the processor's
// page; unknown, it stays processing for the reconciler. A payment that
// no longer awaits a card is ECONFLICT payment_unexpected_state: a
// confirm is never sent twice. A payment awaiting authentication may be
// confirmed again (the shopper came back without finishing it): the
// pending authentication is ended first (supersedeAction).
//
// The attempt is stored before the processor is called (the payment in
// processing, its authorization pending), so a crash during the call
// leaves it to the reconciler, never a charge unrecorded; and of two
// confirms racing on several nodes, one stores its attempt and the other
// finds the payment no longer awaiting a card. The authorization's key is
// numbered by the payment's attempts: a retry after a crash finds the
// payment in processing, never a second key.
func (e *Engine) ConfirmPayment(ctx context.Context, call *Call, id string, in *ConfirmInput) (*surgepay.Payment, error) {
	if err := e.CheckClientSecret(call.MerchantID, id, in.ClientSecret); err != nil {
		return nil, err
	}
	if err := in.validate(); err != nil {
		return nil, err
	}
	var out *surgepay.Payment
	err := e.idempotent(ctx, call, func() error {
		unlock := e.payLocks.lock(call.MerchantID + "\x00" + id)
		defer unlock()
		p, err := e.store.FindPayment(ctx, call.MerchantID, id)
		if err != nil {
			return err
		}
		pm, err := e.GetPaymentMethod(ctx, call, in.PaymentMethodID)
		if surgepay.ErrorCode(err) == surgepay.ENOTFOUND {
			return surgepay.NotFound("payment_method", "payment method")
		} else if err != nil {
			return err
		}
		if pm.CustomerID != "" && pm.CustomerID != p.CustomerID {
			return surgepay.Invalid("payment_method", "payment_method_customer_mismatch",
				"payment_method belongs to another customer")
		}
		if p.Status == surgepay.StatusRequiresAction && p.Pending != nil {
			if p, err = e.supersedeAction(ctx, p); err != nil {
				return err
			}
		}
		if p.Status != surgepay.StatusRequiresPaymentMethod {
			return surgepay.Conflict("payment_unexpected_state", "the payment is %s: it no longer awaits a card", p.Status)
		}
		attempt, err := e.confirmAttempt(ctx, p, pm)
		if err != nil {
			return err
		}
		key := attempt.Pending.IdempotencyKey
		returnURL := ""
		if in.ReturnBase != "" {
			returnURL = in.ReturnBase + surgepay.CheckoutReturnPath + e.returnToken(call.MerchantID, id, in.ReturnURL)
		}
		res, perr := e.authorize(ctx, call, attempt, pm, in.CVC, key, attempt.CaptureMethod == surgepay.CaptureAutomatic, returnURL)
		if surgepay.IsUnknown(perr) {
			// Stored as pending already: the reconciler resolves it.
			out = attempt
			return nil
		}
		next, result := e.confirmOutcome(attempt, res, perr, in.ReturnURL)
		if perr != nil {
			result = providerFailure(perr)
		}
		w := &surgepay.Write{ProviderActed: true, PaymentUpdate: next,
			Events: e.events(call, next, p.Status, next.Transactions[len(p.Transactions):])}
		e.countAnalytics(w, p, next)
		e.attach(call, w, e.withClientSecret(next), result)
		if err := e.apply(ctx, call, w); err != nil {
			if perr == nil && res.Approved {
				e.log.Error("confirmed payment authorized but not recorded; the reconciler will record it",
					"payment", p.ID, "provider_key", key, "err", err)
			}
			return err
		}
		e.cfg.OnPayment("authorize", next)
		out = next
		return result
	})
	return out, err
}

// confirmAttempt stores the attempt to authorize p with pm: the payment
// in processing with a pending authorization under a key numbered by its
// attempts. The write is guarded by p's version.
func (e *Engine) confirmAttempt(ctx context.Context, p *surgepay.Payment, pm *surgepay.PaymentMethod) (*surgepay.Payment, error) {
	n := 1
	for i := range p.Transactions {
		if p.Transactions[i].Type == surgepay.TxAuthorization {
			n++
		}
	}
	next := p.Clone()
	next.Version++
	next.Updated = e.now()
	next.PaymentMethodID = pm.ID
	next.DeclineCode, next.FailureMessage = "", ""
	key := p.ID + "/authorization/" + strconv.Itoa(n)
	tx := surgepay.Transaction{ID: surgepay.NewID("txn"), Type: surgepay.TxAuthorization, Status: surgepay.TxPending,
		Amount: p.AmountTotal(), IdempotencyKey: key, Created: next.Updated}
	next.Pending = &surgepay.Pending{Type: surgepay.TxAuthorization, Amount: p.AmountTotal(), IdempotencyKey: key,
		Capture: p.CaptureMethod == surgepay.CaptureAutomatic, From: p.Status, TxID: tx.ID}
	next.Transactions = append(next.Transactions, tx)
	next.SetStatus(surgepay.StatusProcessing)
	if err := e.commit(ctx, &surgepay.Write{PaymentUpdate: next}); err != nil {
		if errors.Is(err, surgepay.ErrConcurrentUpdate) {
			return nil, surgepay.Conflict("payment_unexpected_state", "the payment is being confirmed by another request")
		}
		return nil, err
	}
	return next, nil
}

// confirmOutcome applies the processor's answer (or NotPerformed) to the
// attempt confirmAttempt stored, and returns the error the browser sees
// (a decline) if any. A request to authenticate the cardholder leaves the
// authorization pending, the payment requires_action with the page to
// visit and the merchant's returnURL.
func (e *Engine) confirmOutcome(p *surgepay.Payment, res *surgepay.ProviderResult, perr error, returnURL string) (*surgepay.Payment, error) {
	if perr != nil { // not performed: the card was not charged; try again
		res = nil
	}
	if res != nil && res.RequiresAction {
		next := p.Clone()
		next.Version++
		next.Updated = e.now()
		next.Pending.ActionURL, next.Pending.ReturnURL, next.Pending.Reference = res.ActionURL, returnURL, res.Reference
		next.SetStatus(surgepay.StatusRequiresAction)
		return next, nil
	}
	next := resolvePending(p, res, e.now())
	if res != nil && !res.Approved {
		return next, declined(next, res)
	}
	return next, nil
}

// CheckoutPayment returns payment id to a browser holding its client
// secret (checked, EUNAUTH if not valid): the read of the page's status.
// A payment awaiting its authentication is looked up at the processor
// first (the shopper may have finished it without coming back).
func (e *Engine) CheckoutPayment(ctx context.Context, call *Call, id, secret string) (*surgepay.Payment, error) {
	if err := e.CheckClientSecret(call.MerchantID, id, secret); err != nil {
		return nil, err
	}
	p, err := e.store.FindPayment(ctx, call.MerchantID, id)
	if err != nil || p.Status != surgepay.StatusRequiresAction {
		return p, err
	}
	return e.resolveAction(ctx, call.MerchantID, id)
}

// Returning from 3-D Secure. The processor's authentication page sends
// the shopper to surgepay's return URL, which carries a signed token
// naming the merchant, the payment and the merchant's own return_url;
// surgepay looks the authorization up, records its outcome and sends the
// shopper on to the merchant's page.

// returnDomain starts every signed return token's message.
const returnDomain = "surgepay 3ds return v1\x00"

// ReturnTokenTTL bounds how long after the confirm a return URL works: a
// shopper may take the processor's whole challenge time and come back
// late; after it the payment is still looked up by the reconciler.
const ReturnTokenTTL = 24 * time.Hour

// ActionReconcileAfter is how long the reconciler leaves a payment in
// requires_action before it looks its authentication up: longer than a
// shopper takes, so that it finds the outcome of an authentication the
// shopper abandoned (or finished without coming back), not one under way.
const ActionReconcileAfter = 15 * time.Minute

// ActionAbandonAfter is how long after the confirm an authentication still
// pending at the processor is taken as abandoned: the reconciler cancels
// it there (Stripe: the PaymentIntent, which Stripe itself keeps in
// requires_action for as long as nobody cancels it), and the payment
// awaits a card again, declined authentication_failed. Long past any
// issuer's challenge time; a shopper coming back later finds the payment
// as it is. A processor that ends abandoned challenges itself (the
// simulator, after its challenge_ttl) answers the lookup before this.
const ActionAbandonAfter = time.Hour

type returnClaims struct {
	Merchant  string `json:"m"`
	Payment   string `json:"p"`
	Expires   int64  `json:"e"`
	ReturnURL string `json:"r,omitempty"`
}

// returnToken signs the claims of a return from authentication:
// base64url(JSON).KEYID.MAC, safe in a URL's path.
func (e *Engine) returnToken(merchantID, paymentID, returnURL string) string {
	s, ok := e.vault.(surgepay.Signer)
	if !ok {
		return ""
	}
	b, _ := json.Marshal(returnClaims{Merchant: merchantID, Payment: paymentID,
		Expires: e.now().Add(ReturnTokenTTL).Unix(), ReturnURL: returnURL})
	payload := base64.RawURLEncoding.EncodeToString(b)
	kid, mac := s.Sign([]byte(returnDomain + payload))
	return payload + "." + kid + "." + base64.RawURLEncoding.EncodeToString(mac)
}

// checkReturnToken returns the claims of a valid, unexpired return token;
// EUNAUTH return_token_invalid otherwise.
func (e *Engine) checkReturnToken(token string) (*returnClaims, error) {
	invalid := &surgepay.Error{Code: surgepay.EUNAUTH, Reason: "return_token_invalid",
		Message: "this return address is not valid or has expired"}
	s, ok := e.vault.(surgepay.Signer)
	parts := strings.Split(token, ".")
	if !ok || len(token) > surgepay.ReturnURLBytesMax*2 || len(parts) != 3 {
		return nil, invalid
	}
	mac, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || !s.Verify(parts[1], []byte(returnDomain+parts[0]), mac) {
		return nil, invalid
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[0])
	var c returnClaims
	if err != nil || json.Unmarshal(b, &c) != nil || !e.now().Before(time.Unix(c.Expires, 0)) {
		return nil, invalid
	}
	return &c, nil
}

// ReturnFromAction is the shopper's return from the processor's
// authentication page: it checks the token, looks the payment's
// authorization up and records its outcome if there is one, and returns
// the payment and the merchant's return_url ("" if the merchant gave
// none). A return that comes again, or late, finds the payment as it is.
func (e *Engine) ReturnFromAction(ctx context.Context, token string) (*surgepay.Payment, string, error) {
	c, err := e.checkReturnToken(token)
	if err != nil {
		return nil, "", err
	}
	p, err := e.resolveAction(ctx, c.Merchant, c.Payment)
	return p, c.ReturnURL, err
}

// resolveAction looks up the authorization of payment id, if it awaits
// the shopper's authentication, and records its outcome: approved,
// succeeded or requires_capture; declined (authentication failed or
// abandoned, or the issuer's decline), requires_payment_method, so the
// shopper may try again. Still under way, or unknown, it stays.
func (e *Engine) resolveAction(ctx context.Context, merchantID, id string) (*surgepay.Payment, error) {
	unlock := e.payLocks.lock(merchantID + "\x00" + id)
	defer unlock()
	p, err := e.store.FindPayment(ctx, merchantID, id)
	if err != nil || p.Status != surgepay.StatusRequiresAction || p.Pending == nil {
		return p, err
	}
	next, err := e.applyAction(ctx, p, "")
	if next == nil || err != nil {
		return p, err
	}
	return next, nil
}

// applyAction looks p's pending authorization up and stores its outcome;
// nil, nil while there is none yet. With cancel (the reconciler, once
// ActionAbandonAfter has passed; a new confirm), an authentication still
// pending is cancelled at the processor first (abandonAction), and cancel
// says why in the decline's message. Called with p's lock held.
func (e *Engine) applyAction(ctx context.Context, p *surgepay.Payment, cancel string) (*surgepay.Payment, error) {
	res, lerr := surgepay.LookupOperation(ctx, e.provider, pendingQuery(p))
	if cancel != "" && lerr == nil && res.RequiresAction && res.Reference != "" {
		res, lerr = e.abandonAction(ctx, p, res.Reference, cancel)
	}
	if (lerr != nil && !surgepay.IsNotPerformed(lerr)) || (lerr == nil && res.RequiresAction) {
		return nil, nil
	}
	if lerr != nil {
		res = nil
	}
	next := resolvePending(p, res, e.now())
	call := systemCall(p.MerchantID)
	w := &surgepay.Write{ProviderActed: true, PaymentUpdate: next, Events: []*surgepay.Event{{ID: surgepay.NewID("evt"),
		PaymentID: p.ID, MerchantID: p.MerchantID, Type: surgepay.TxAuthorization, FromStatus: p.Status, ToStatus: next.Status,
		Amount: p.Pending.Amount, ActorKeyID: call.KeyID, RequestID: "authentication", Created: next.Updated}}}
	e.countAnalytics(w, p, next)
	if err := e.commit(ctx, w); err != nil {
		return nil, err
	}
	e.cfg.OnPayment("authorize", next)
	return next, nil
}

// abandonActionKey is the processor's idempotency key of the cancel of
// p's abandoned authentication: one for each authorization attempt (its
// key, numbered by the payment's attempts, and /abandon), since a payment
// may be confirmed and abandoned more than once, each attempt with its own
// PaymentIntent at Stripe, which refuses a key reused for another.
func abandonActionKey(p *surgepay.Payment) string { return p.Pending.IdempotencyKey + "/abandon" }

// Why a pending authentication was cancelled at the processor: the
// decline's message.
var (
	abandonedMessage = "the shopper did not finish 3-D Secure authentication within " +
		strconv.Itoa(int(ActionAbandonAfter/time.Minute)) + " minutes; it was cancelled at the processor and nothing was charged"
	supersededMessage = "the shopper paid again before finishing 3-D Secure authentication; " +
		"it was cancelled at the processor and nothing was charged"
)

// abandonAction cancels at the processor the authentication of p that the
// shopper never finished (ref: the pending authorization's reference) and
// returns the authorization's outcome: declined authentication_failed,
// with message why, once the processor confirms the cancel. A cancel the
// processor refuses (the shopper finished just before it) returns what a
// new lookup finds; an unknown one returns its error, and the next try
// (the reconciler's next pass, the shopper's next confirm) uses the same
// key.
func (e *Engine) abandonAction(ctx context.Context, p *surgepay.Payment, ref, why string) (*surgepay.ProviderResult, error) {
	v, err := e.provider.Void(ctx, &surgepay.VoidRequest{IdempotencyKey: abandonActionKey(p), AuthorizationRef: ref})
	switch {
	case err == nil && v.Approved:
		e.log.Info("pending authentication cancelled at the processor", "payment", p.ID, "why", why)
		return &surgepay.ProviderResult{Operation: surgepay.TxAuthorization, Reference: ref, Amount: p.Pending.Amount,
			DeclineCode: surgepay.DeclineAuthenticationFailed, Message: why}, nil
	case err != nil && !surgepay.IsNotPerformed(err):
		return nil, err
	}
	return surgepay.LookupOperation(ctx, e.provider, pendingQuery(p))
}

// supersedeAction ends the authentication p awaits, because the shopper
// confirms again (they came back without finishing it, perhaps with
// another card): as the reconciler does with an abandoned one, an
// authentication still pending is cancelled at the processor, and its
// outcome is recorded; the payment is returned as it then stands (awaiting
// a card, or paid if the shopper finished at that moment). One the
// processor gave no reference for (it cannot be cancelled), or whose
// lookup or cancel has no answer, is ECONFLICT payment_unexpected_state:
// the shopper finishes it, or tries again. Called with p's lock held.
func (e *Engine) supersedeAction(ctx context.Context, p *surgepay.Payment) (*surgepay.Payment, error) {
	next, err := e.applyAction(ctx, p, supersededMessage)
	if err != nil {
		return nil, err
	}
	if next == nil {
		return nil, surgepay.Conflict("payment_unexpected_state",
			"the payment awaits 3-D Secure authentication, which the processor could not cancel now: finish it, or try again later")
	}
	return next, nil
}

// ProcessorPages returns the pages the processor serves to shoppers from
// surgepay's listener (surgepay.PageServer: the simulator's 3-D Secure
// challenge), or nil (also for a nil engine).
func (e *Engine) ProcessorPages() http.Handler {
	if e == nil { // a Server made without an engine, for its routes alone
		return nil
	}
	if ps := surgepay.PageServerOf(e.provider); ps != nil {
		return ps.Pages()
	}
	return nil
}

// CheckoutOrigins returns the origins allowed to embed the card frame
// for a publishable key: its merchant's checkout_origins. EUNAUTH for a
// key that is not a valid publishable key, EFORBIDDEN
// checkout_not_configured when its merchant lists no origins.
func (e *Engine) CheckoutOrigins(ctx context.Context, publishableKey string) ([]string, error) {
	if !strings.HasPrefix(publishableKey, "pk_") {
		return nil, unauthorized()
	}
	k, err := e.Authenticate(ctx, publishableKey)
	if err != nil {
		return nil, err
	}
	if !k.Publishable() {
		return nil, unauthorized()
	}
	origins := e.SettingsFor(k.MerchantID).CheckoutOrigins
	if len(origins) == 0 {
		return nil, &surgepay.Error{Code: surgepay.EFORBIDDEN, Reason: "checkout_not_configured",
			Message: "the merchant lists no checkout_origins"}
	}
	return origins, nil
}

// OriginAllowed reports whether a request from origin may use the
// checkout API of merchantID: one of its checkout_origins.
func (e *Engine) OriginAllowed(merchantID, origin string) bool {
	return slices.Contains(e.SettingsFor(merchantID).CheckoutOrigins, origin)
}
