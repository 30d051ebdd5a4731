package engine

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/surgepay/surgepay"
)

// PaymentInput is a request to create a payment.
type PaymentInput struct {
	Amount          int64
	Currency        string
	CustomerID      string
	PaymentMethodID string
	CaptureMethod   string // CaptureAutomatic (default) or CaptureManual
	Description     string
	Metadata        map[string]string
	Tax             *TaxInput
	CVC             surgepay.CVC // optional; sent to the provider, never stored
}

// TaxInput asks for tax from the static table.
type TaxInput struct {
	Country, Region, PostalCode, Category string
}

func (in *PaymentInput) validate() error {
	if err := surgepay.ValidateAmount("amount", in.Amount); err != nil {
		return err
	}
	cur, err := surgepay.ValidateCurrency("currency", in.Currency)
	if err != nil {
		return err
	}
	in.Currency = cur
	switch in.CaptureMethod {
	case "":
		in.CaptureMethod = surgepay.CaptureAutomatic
	case surgepay.CaptureAutomatic, surgepay.CaptureManual:
	default:
		return surgepay.Invalid("capture_method", "invalid_value", "capture_method must be automatic or manual")
	}
	if v := in.CVC.Value(); v != "" && (len(v) < 3 || len(v) > 4 || strings.Trim(v, "0123456789") != "") {
		return surgepay.Invalid("cvc", "invalid_cvc", "cvc must be 3 or 4 digits")
	}
	if err := surgepay.ValidateText("description", in.Description); err != nil {
		return err
	}
	return surgepay.ValidateMetadata("metadata", in.Metadata)
}

// tax computes the tax of a payment from the static table.
func (e *Engine) tax(in *PaymentInput) (*surgepay.Tax, int64, error) {
	if in.Tax == nil {
		return nil, 0, nil
	}
	t := in.Tax
	if t.Country == "" {
		return nil, 0, surgepay.Invalid("tax.country", "missing", "tax.country is required")
	}
	for _, f := range [...]struct{ param, value string }{{"tax.country", t.Country}, {"tax.region", t.Region},
		{"tax.postal_code", t.PostalCode}, {"tax.category", t.Category}} {
		// The location is stored with the payment: bounded, and no card
		// number (a postal code is matched by prefix, so any digits pass).
		if len(f.value) > surgepay.TaxFieldBytesMax {
			return nil, 0, surgepay.Invalid(f.param, "too_long", "%s must be at most %d bytes", f.param, surgepay.TaxFieldBytesMax)
		}
		if surgepay.TextHasCardNumber(f.value) {
			return nil, 0, surgepay.CardNumberInText(f.param)
		}
	}
	table := e.cfg.Tax()
	if table == nil {
		return nil, 0, surgepay.Invalid("tax", "tax_unavailable", "no tax table is loaded")
	}
	bps, ok := table.RateBPS(t.Country, t.Region, t.PostalCode, t.Category)
	if !ok {
		return nil, 0, surgepay.Invalid("tax.country", "tax_rate_not_found", "no tax rate for this location and category")
	}
	amt, err := table.Compute(in.Amount, bps)
	if err != nil {
		return nil, 0, surgepay.Invalid("amount", "invalid_value", "tax cannot be computed for this amount")
	}
	if in.Amount+amt > surgepay.AmountMinorMax {
		return nil, 0, surgepay.Invalid("amount", "amount_too_large", "amount plus tax must be at most %d minor units", surgepay.AmountMinorMax)
	}
	return &surgepay.Tax{Country: t.Country, Region: t.Region, PostalCode: t.PostalCode, Category: t.Category, RateBPS: bps}, amt, nil
}

// CreatePayment authorizes a payment on a saved card and, with
// capture_method automatic, captures it at once (a sale). A decline is
// stored as a failed payment and returned as an EDECLINED error with the
// payment's ID. An unknown provider outcome that lookups cannot resolve
// leaves the payment in processing for the reconciler.
func (e *Engine) CreatePayment(ctx context.Context, call *Call, in *PaymentInput) (*surgepay.Payment, error) {
	if err := in.validate(); err != nil {
		return nil, err
	}
	set := e.SettingsFor(call.MerchantID)
	if in.Tax != nil && set.Tax == "off" {
		return nil, surgepay.Invalid("tax", "tax_disabled", "tax is turned off for this merchant")
	}
	taxInfo, taxAmt, err := e.tax(in)
	if err != nil {
		return nil, err
	}
	if in.PaymentMethodID == "" { // for a browser to pay (docs/checkout.md)
		return e.createAwaiting(ctx, call, in, taxInfo, taxAmt)
	}
	streamlined := e.streamlined(set, in)
	var out *surgepay.Payment
	err = e.idempotent(ctx, call, func() error {
		pm, err := e.GetPaymentMethod(ctx, call, in.PaymentMethodID)
		if surgepay.ErrorCode(err) == surgepay.ENOTFOUND {
			return surgepay.NotFound("payment_method", "payment method")
		} else if err != nil {
			return err
		}
		if in.CustomerID != "" && pm.CustomerID != in.CustomerID {
			return surgepay.Invalid("payment_method", "payment_method_customer_mismatch",
				"payment_method does not belong to customer")
		}
		p := e.newPayment(call, in, pm, taxInfo, taxAmt)
		res, perr := e.authorize(ctx, call, p, pm, in.CVC, authorizeKey(call, p), !streamlined, "")
		if perr == nil {
			e.adoptPaymentID(call, p, res)
		}
		var rerr error
		if streamlined && perr == nil && res.Approved {
			out, rerr = e.recordStreamlined(ctx, call, p, res, set)
			return rerr
		}
		out, rerr = e.recordAuthorization(ctx, call, p, res, perr, streamlined)
		return rerr
	})
	return out, err
}

func (e *Engine) newPayment(call *Call, in *PaymentInput, pm *surgepay.PaymentMethod, t *surgepay.Tax, taxAmt int64) *surgepay.Payment {
	now := e.now()
	return &surgepay.Payment{ID: surgepay.NewID("pay"), MerchantID: call.MerchantID, CustomerID: pm.CustomerID,
		PaymentMethodID: pm.ID, Amount: in.Amount, AmountTax: taxAmt, Currency: in.Currency,
		CaptureMethod: in.CaptureMethod, Description: in.Description, Metadata: in.Metadata, Tax: t,
		Path: "standard", Created: now, Updated: now}
}

// authorizeKey is the provider key of a payment's authorization. With an
// Idempotency-Key it derives from that key, so a retry after a crash (which
// makes a new payment ID) still reaches the same provider operation.
func authorizeKey(call *Call, p *surgepay.Payment) string {
	if call.IdempotencyKey != "" {
		return "auth/" + call.MerchantID + "/" + call.keyDigest()
	}
	return p.ID + "/authorization"
}

// adoptPaymentID gives p the payment ID the provider recorded with the
// first authorization under this Idempotency-Key. They differ only when an
// earlier attempt reached the network and then died before its payment was
// stored (a crash, a failed commit): the retry made a new ID, the network
// replayed the first authorization. Taking the network's ID keeps the two
// records matching by ID; the payment was never stored under either.
func (e *Engine) adoptPaymentID(call *Call, p *surgepay.Payment, res *surgepay.ProviderResult) {
	id := res.PaymentID
	if call.IdempotencyKey == "" || id == "" || id == p.ID {
		return
	}
	if len(id) != len(p.ID) || !strings.HasPrefix(id, "pay_") {
		e.log.Warn("provider answered with a malformed payment ID; keeping ours", "payment", p.ID)
		return
	}
	e.log.Info("retried payment takes the ID of its first authorization", "payment", id, "attempt", p.ID)
	p.ID = id
}

// authorize asks the provider to authorize p under key; with capture (a
// standard sale) to capture at once. The streamlined path authorizes only.
// returnURL, for a browser's confirm, lets the issuer ask for 3-D Secure
// (a RequiresAction answer); without one, such an answer is a decline.
func (e *Engine) authorize(ctx context.Context, call *Call, p *surgepay.Payment, pm *surgepay.PaymentMethod, cvc surgepay.CVC, key string, capture bool, returnURL string) (*surgepay.ProviderResult, error) {
	req := &surgepay.AuthorizeRequest{IdempotencyKey: key, MerchantID: call.MerchantID,
		PaymentID: p.ID, Amount: p.AmountTotal(), Currency: p.Currency,
		Capture: capture && p.CaptureMethod == surgepay.CaptureAutomatic, ReturnURL: returnURL}
	if pm.ProcessorToken != "" { // the processor's own token: no card data, its processor only
		req.Token, req.Processor, req.TokenCustomer = pm.ProcessorToken, pm.Processor, pm.ProcessorCustomer
	} else {
		pan, err := e.openCardNumber(ctx, call, pm)
		if err != nil {
			// Nothing was sent: not performed, never an unknown outcome.
			e.log.Error("a saved card's number cannot be opened (is this server's vault keyring complete?)",
				"payment_method", pm.ID, "err", err)
			return nil, &surgepay.ProviderError{Outcome: surgepay.NotPerformed, Op: "authorize", Err: errCardUnreadable}
		}
		req.Card = surgepay.ProviderCard{Number: surgepay.PAN(pan), ExpMonth: pm.ExpMonth, ExpYear: pm.ExpYear, CVC: cvc}
	}
	res, perr := e.provider.Authorize(ctx, req)
	if surgepay.IsUnknown(perr) {
		sent := e.now() // the call's last attempt ended now (see callProvider)
		res, perr = e.lookup(ctx, &surgepay.LookupQuery{Key: req.IdempotencyKey, Operation: surgepay.TxAuthorization,
			Processor: surgepay.ProcessorOf(perr), MerchantID: req.MerchantID, Amount: req.Amount,
			Currency: req.Currency, Attempted: sent})
	}
	if perr == nil && res.RequiresAction && returnURL == "" {
		// A processor that asks a server's payment to authenticate: it
		// cannot; nothing was authorized.
		res = &surgepay.ProviderResult{DeclineCode: surgepay.DeclineAuthenticationRequired,
			Message: "the card's issuer requires authentication (3-D Secure), which a server's payment cannot do"}
	}
	return res, perr
}

// recordAuthorization applies the provider's answer to a new payment and
// stores it.
// A streamlined authorization whose outcome stays unknown is recorded like
// a standard one, marked CaptureLater so that reconciliation completes the
// sale.
func (e *Engine) recordAuthorization(ctx context.Context, call *Call, p *surgepay.Payment, res *surgepay.ProviderResult, perr error, authOnly bool) (*surgepay.Payment, error) {
	if err := providerFailure(perr); err != nil {
		return nil, err
	}
	key := authorizeKey(call, p)
	now := e.now()
	tx := surgepay.Transaction{ID: surgepay.NewID("txn"), Type: surgepay.TxAuthorization, Amount: p.AmountTotal(),
		IdempotencyKey: key, Created: now}
	var result error
	switch {
	case perr != nil: // still unknown
		tx.Status = surgepay.TxPending
		p.SetStatus(surgepay.StatusProcessing)
		sale := p.CaptureMethod == surgepay.CaptureAutomatic
		p.Pending = &surgepay.Pending{Type: surgepay.TxAuthorization, Amount: p.AmountTotal(), IdempotencyKey: key,
			Capture: sale && !authOnly, CaptureLater: sale && authOnly, TxID: tx.ID, Processor: surgepay.ProcessorOf(perr)}
		p.Transactions = append(p.Transactions, tx)
	case res.Approved:
		tx.Status, tx.ProviderRef = surgepay.TxSucceeded, res.Reference
		p.AuthorizationRef = res.Reference
		p.AmountAuthorized = p.AmountTotal()
		p.Transactions = append(p.Transactions, tx)
		if p.CaptureMethod == surgepay.CaptureAutomatic {
			p.AmountCaptured = p.AmountTotal()
			p.Transactions = append(p.Transactions, surgepay.Transaction{ID: surgepay.NewID("txn"),
				Type: surgepay.TxCapture, Status: surgepay.TxSucceeded, Amount: p.AmountTotal(),
				ProviderRef: res.Reference, IdempotencyKey: key, Created: now})
			p.SetStatus(surgepay.StatusSucceeded)
		} else {
			p.SetStatus(surgepay.StatusRequiresCapture)
		}
	default:
		tx.Status, tx.ProviderRef, tx.DeclineCode, tx.Message = surgepay.TxFailed, res.Reference, res.DeclineCode, res.Message
		p.DeclineCode, p.FailureMessage = res.DeclineCode, declineMessage(res)
		p.Transactions = append(p.Transactions, tx)
		p.SetStatus(surgepay.StatusFailed)
		result = declined(p, res)
	}
	p.Version = 1
	w := &surgepay.Write{ProviderActed: true, PaymentInsert: p, Events: e.events(call, p, "", p.Transactions)}
	e.attach(call, w, p, result)
	if err := e.apply(ctx, call, w); err != nil {
		return nil, err
	}
	e.cfg.OnPayment("authorize", p)
	return p, result
}

func declineMessage(res *surgepay.ProviderResult) string {
	if res.Message != "" {
		return res.Message
	}
	return "the card was declined"
}

func declined(p *surgepay.Payment, res *surgepay.ProviderResult) error {
	return &surgepay.Error{Code: surgepay.EDECLINED, Reason: "card_declined", DeclineCode: res.DeclineCode,
		PaymentID: p.ID, Message: declineMessage(res)}
}

// providerFailure maps a provider call that was not performed to an
// EUNAVAILABLE error: nothing happened, nothing is stored, the client may
// retry. Unknown outcomes and results return nil.
func providerFailure(perr error) error {
	if perr == nil || !surgepay.IsNotPerformed(perr) {
		return nil
	}
	if errors.Is(perr, errCardUnreadable) {
		return &surgepay.Error{Code: surgepay.EUNAVAILABLE, Reason: "card_unavailable", RetryAfter: 1,
			Message: "the saved card cannot be read on this server now (its vault key is missing here); nothing was charged; " +
				"it is safe to retry"}
	}
	if errors.Is(perr, surgepay.ErrKeyReused) {
		return &surgepay.Error{Code: surgepay.EUNPROCESS, Reason: "idempotency_key_reused",
			Message: "this Idempotency-Key was used with a different request"}
	}
	retry := 1
	var pe *surgepay.ProviderError
	if errors.As(perr, &pe) && pe.RetryAfter > time.Second {
		retry = int((pe.RetryAfter + time.Second - 1) / time.Second) // a spent call budget, an open breaker
	}
	return &surgepay.Error{Code: surgepay.EUNAVAILABLE, Reason: "provider_unavailable", RetryAfter: retry,
		Message: "the card network did not process the request; it is safe to retry"}
}

// errCardUnreadable is why an authorization was not sent: the saved
// card's number does not open with this server's vault keyring (a key
// not yet here, or retired too soon; or the blob altered).
var errCardUnreadable = errors.New("the saved card's number cannot be opened with this server's vault keyring")

// lookup resolves an unknown outcome by asking the provider for the
// operation q names, a bounded number of times. A result that is still
// unknown keeps q.Processor, so the pending operation records where to
// look later.
func (e *Engine) lookup(ctx context.Context, q *surgepay.LookupQuery) (*surgepay.ProviderResult, error) {
	var err error
	backoff := 10 * time.Millisecond
	defer func() {
		var pe *surgepay.ProviderError
		if err != nil && q.Processor != "" && errors.As(err, &pe) && pe.Processor == "" {
			pe.Processor = q.Processor
		}
	}()
	for i := 0; i < surgepay.ReconcileAttemptsMax; i++ {
		var res *surgepay.ProviderResult
		res, err = surgepay.LookupOperation(ctx, e.provider, q)
		if err == nil || surgepay.IsNotPerformed(err) {
			return res, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(backoff):
		}
		backoff *= 2
	}
	return nil, err
}

// events makes one audit row per transaction of a state change.
func (e *Engine) events(call *Call, p *surgepay.Payment, from surgepay.Status, txs []surgepay.Transaction) []*surgepay.Event {
	out := make([]*surgepay.Event, 0, len(txs))
	for _, tx := range txs {
		out = append(out, &surgepay.Event{ID: surgepay.NewID("evt"), PaymentID: p.ID, MerchantID: p.MerchantID,
			Type: tx.Type, FromStatus: from, ToStatus: p.Status, Amount: tx.Amount, ActorKeyID: call.KeyID,
			RequestID: call.RequestID, Created: e.now()})
	}
	return out
}

// GetPayment returns a payment of the call's merchant; one awaiting a
// card with a fresh client secret.
func (e *Engine) GetPayment(ctx context.Context, call *Call, id string) (*surgepay.Payment, error) {
	p, err := e.store.FindPayment(ctx, call.MerchantID, id)
	return e.withClientSecret(p), err
}

// ListPayments returns a page of payments, newest first.
func (e *Engine) ListPayments(ctx context.Context, call *Call, f surgepay.PaymentFilter) ([]*surgepay.Payment, bool, error) {
	return e.store.ListPayments(ctx, call.MerchantID, f)
}

// ListEvents returns a payment's audit trail.
func (e *Engine) ListEvents(ctx context.Context, call *Call, id string) ([]*surgepay.Event, error) {
	if _, err := e.store.FindPayment(ctx, call.MerchantID, id); err != nil {
		return nil, err
	}
	return e.store.ListEvents(ctx, call.MerchantID, id)
}
