// Package stripe is the Stripe connector: a surgepay.Provider on Stripe's
// official Go SDK (stripe-go). An authorization is a PaymentIntent created
// and confirmed in one call (capture_method manual; a sale: automatic),
// a capture is its capture (amount_to_capture for a partial one), a void
// its cancel, a refund a Refund of the PaymentIntent. References are
// PaymentIntent ids (pi_…) and, for refunds, Refund ids (re_…).
//
// Every call carries surgepay's deterministic idempotency key as Stripe's
// Idempotency-Key, so a retry, or a reconcile after a crash, never
// charges twice within Stripe's retention of keys (24 hours; the engine
// reads its own store before calling, for longer). Card data goes to
// Stripe as a PaymentMethod created first under "<key>/pm"; a processor
// token (a pm_… collected by Stripe.js) is used as it is.
//
// Outcomes keep Stripe's three kinds apart (docs/processors.md has the
// table): a card_error is a decline, final; a 429, an authentication
// failure or a connection never made is not performed; a timeout, a reset
// connection or a 5xx may have happened and is looked up, never retried
// under a new key. The SDK's own retries are off: this package retries
// under the same key itself, so that it knows whether any attempt may
// have reached Stripe.
//
// An authorization whose outcome stayed unknown is found again by the
// metadata surgepay sets on its PaymentIntent (surgepay_key), through
// Stripe's Search API, which lags writes by up to a minute or so: not
// found within Config.SearchLag of the attempt is unknown, not found
// after it is not performed. Captures, voids and refunds are found from
// the PaymentIntent they acted on, with the same lag: a request Stripe is
// still executing (its client gave up) leaves no trace yet.
//
// 3-D Secure: a browser's payment (AuthorizeRequest.ReturnURL) is
// confirmed with that return_url, and an issuer that asks for
// authentication is answered RequiresAction with Stripe's page
// (next_action redirect_to_url); after it, a lookup finds the
// PaymentIntent authorized, or declined authentication_failed. A
// server's payment cannot authenticate: its PaymentIntent is cancelled at
// once and the payment declined authentication_required, nothing charged.
package stripe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	stripego "github.com/stripe/stripe-go/v82"

	"github.com/surgepay/surgepay"
)

// Defaults and bounds.
const (
	CallTimeoutDefault     = 30 * time.Second // one HTTP call to Stripe.
	ConnsPerHostMaxDefault = 64               // pooled keep-alive connections.
	RetriesMaxDefault      = 2                // same-key retries of an unanswered call.
	RetriesMaxMax          = 10
	SearchLagDefault       = 15 * time.Minute
	retryBackoff           = 50 * time.Millisecond
	searchPageMax          = 10 // PaymentIntents one lookup reads.
)

// Metadata keys surgepay sets on what it creates at Stripe.
const (
	MetadataKey      = "surgepay_key"
	MetadataMerchant = "surgepay_merchant"
)

// Config configures a connector.
type Config struct {
	// SecretKey is the account's secret key (sk_test_… or sk_live_…) or a
	// restricted key with PaymentIntents, PaymentMethods and Refunds
	// write access. Required. Never logged.
	SecretKey string
	// BaseURL is Stripe's API address; "" is https://api.stripe.com. Tests
	// and staging point it at a local double (stripe-mock, localstripe).
	BaseURL string
	// CallTimeout bounds each HTTP call. Default CallTimeoutDefault.
	CallTimeout time.Duration
	// ConnsPerHostMax bounds the pooled connections to Stripe: at most
	// this many calls are in flight; more wait for a connection. Default
	// ConnsPerHostMaxDefault.
	ConnsPerHostMax int
	// RetriesMax is how many times a call that got no answer (a timeout,
	// a reset, a 5xx, Stripe's 409 for a key still in progress) is sent
	// again under the same Idempotency-Key. Default RetriesMaxDefault; a
	// negative value means none.
	RetriesMax int
	// SearchLag is how long after the last attempt of an operation a
	// lookup that finds no trace of it still leaves its outcome unknown:
	// an authorization not found by search, a capture or void not seen
	// in its PaymentIntent's state, a refund not among its refunds. It
	// covers Stripe's search lag and a request Stripe is still executing
	// after its client gave up; never less than CallTimeout. Default
	// SearchLagDefault; a double that executes at once and whose search
	// is current may set it to a nanosecond.
	SearchLag time.Duration
	// Name is the processor's name in surgepay's configuration, for
	// errors. Default "stripe".
	Name string
	// WebhookSecret is the signing secret (whsec_…) of the account's
	// webhook endpoint that points at surgepay; "" refuses every webhook.
	WebhookSecret string
	// Transport, if set, replaces the pooled transport (tests).
	Transport http.RoundTripper
}

func (c *Config) withDefaults() {
	if c.CallTimeout <= 0 {
		c.CallTimeout = CallTimeoutDefault
	}
	if c.ConnsPerHostMax <= 0 {
		c.ConnsPerHostMax = ConnsPerHostMaxDefault
	}
	if c.RetriesMax == 0 {
		c.RetriesMax = RetriesMaxDefault
	}
	if c.RetriesMax < 0 {
		c.RetriesMax = 0
	}
	if c.RetriesMax > RetriesMaxMax {
		c.RetriesMax = RetriesMaxMax
	}
	if c.SearchLag <= 0 {
		c.SearchLag = SearchLagDefault
	}
	if c.Name == "" {
		c.Name = "stripe"
	}
}

// Provider is a Stripe account as a surgepay.Provider. Safe for concurrent
// use.
type Provider struct {
	cfg Config
	c   *stripego.Client
}

var (
	_ surgepay.Provider          = (*Provider)(nil)
	_ surgepay.OperationLookuper = (*Provider)(nil)
)

// New returns a connector for one Stripe account.
func New(cfg Config) (*Provider, error) {
	cfg.withDefaults()
	if cfg.SecretKey == "" {
		return nil, errors.New("stripe: a secret key is required")
	}
	rt := cfg.Transport
	if rt == nil {
		rt = NewTransport(cfg.ConnsPerHostMax)
	}
	bc := &stripego.BackendConfig{
		HTTPClient:        &http.Client{Transport: onceTransport{rt}, Timeout: cfg.CallTimeout},
		MaxNetworkRetries: stripego.Int64(0), // retried here, knowing the outcome of each attempt
		LeveledLogger:     &stripego.LeveledLogger{Level: stripego.LevelNull},
		EnableTelemetry:   stripego.Bool(false),
	}
	if cfg.BaseURL != "" {
		bc.URL = stripego.String(strings.TrimRight(cfg.BaseURL, "/"))
	}
	b := stripego.GetBackendWithConfig(stripego.APIBackend, bc)
	c := stripego.NewClient(cfg.SecretKey, stripego.WithBackends(&stripego.Backends{API: b, Connect: b, Uploads: b, MeterEvents: b}))
	return &Provider{cfg: cfg, c: c}, nil
}

// NewTransport returns the pooled HTTP transport the connector uses: at
// most connsMax connections (and as many idle, kept alive), bounded dial
// and TLS handshake. Go sets TCP_NODELAY on every TCP connection, so a
// POST is not held back by Nagle's algorithm waiting for a delayed ACK
// (the brief's 200 ms per internal POST); TestTransportNoDelay checks it.
func NewTransport(connsMax int) *http.Transport {
	d := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           d.DialContext,
		ForceAttemptHTTP2:     true,
		MaxConnsPerHost:       connsMax,
		MaxIdleConns:          connsMax,
		MaxIdleConnsPerHost:   connsMax,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}

// onceTransport sends each request at most once. Go's transport resends
// by itself a request that carries an Idempotency-Key when a kept-alive
// connection closes before an answer; the connector would then see only
// the second exchange, and a 429 there would read as "not performed"
// though the first may have charged (TestFailoverFaultsNeverChargeTwice
// in provider/route caught exactly that). Resending is the connector's
// decision, made in call() with the outcome of every attempt known.
type onceTransport struct{ next http.RoundTripper }

func (t onceTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.GetBody == nil {
		return t.next.RoundTrip(r)
	}
	c := r.Clone(r.Context())
	c.GetBody = nil // not replayable: the transport will not resend it
	return t.next.RoundTrip(c)
}

// AuthorizeCalls is how many Stripe API operations Authorize makes for
// req, for a call budget: two with card data (PaymentMethod, then
// PaymentIntent), one with a token.
func AuthorizeCalls(req *surgepay.AuthorizeRequest) int {
	if req.Token != "" {
		return 1
	}
	return 2
}

// Authorize creates and confirms a PaymentIntent: capture_method manual,
// or automatic for a sale (req.Capture).
func (p *Provider) Authorize(ctx context.Context, req *surgepay.AuthorizeRequest) (*surgepay.ProviderResult, error) {
	pm := req.Token
	if pm == "" {
		var res *surgepay.ProviderResult
		var err error
		if pm, res, err = p.tokenize(ctx, req); err != nil || res != nil {
			return res, err
		}
	}
	method := "manual"
	if req.Capture {
		method = "automatic"
	}
	params := &stripego.PaymentIntentCreateParams{
		Amount:             stripego.Int64(req.Amount),
		Currency:           stripego.String(strings.ToLower(req.Currency)),
		PaymentMethod:      stripego.String(pm),
		PaymentMethodTypes: []*string{stripego.String("card")},
		CaptureMethod:      stripego.String(method),
		Confirm:            stripego.Bool(true),
	}
	if req.TokenCustomer != "" {
		// A token attached to a Customer is charged with its Customer.
		params.Customer = stripego.String(req.TokenCustomer)
	}
	if req.ReturnURL != "" {
		// A browser's payment: the issuer may ask for 3-D Secure, which
		// Stripe then answers with a page to redirect the shopper to,
		// returning through surgepay (authorizationOf).
		params.ReturnURL = stripego.String(req.ReturnURL)
	}
	params.AddMetadata(MetadataKey, req.IdempotencyKey)
	params.AddMetadata(MetadataMerchant, req.MerchantID)
	params.SetIdempotencyKey(req.IdempotencyKey)
	var pi *stripego.PaymentIntent
	res, err := p.call(ctx, "authorize", func(ctx context.Context) (err error) {
		params.Context = ctx
		pi, err = p.c.V1PaymentIntents.Create(ctx, params)
		return err
	})
	if err != nil || res != nil {
		return res, err
	}
	return p.authorizationOf(ctx, pi)
}

// tokenize creates the card's PaymentMethod under "<key>/pm" (the same
// card under the same key replays the same pm_…). A card Stripe refuses
// at tokenization (a wrong number) is a declined result.
func (p *Provider) tokenize(ctx context.Context, req *surgepay.AuthorizeRequest) (string, *surgepay.ProviderResult, error) {
	card := &stripego.PaymentMethodCreateCardParams{
		Number:   stripego.String(string(req.Card.Number)),
		ExpMonth: stripego.Int64(int64(req.Card.ExpMonth)),
		ExpYear:  stripego.Int64(int64(req.Card.ExpYear)),
	}
	if req.Card.CVC != "" {
		card.CVC = stripego.String(string(req.Card.CVC))
	}
	params := &stripego.PaymentMethodCreateParams{Type: stripego.String("card"), Card: card}
	params.SetIdempotencyKey(req.IdempotencyKey + "/pm")
	var pm *stripego.PaymentMethod
	res, err := p.call(ctx, "authorize", func(ctx context.Context) (err error) {
		params.Context = ctx
		pm, err = p.c.V1PaymentMethods.Create(ctx, params)
		return err
	})
	if err != nil || res != nil {
		return "", res, err
	}
	return pm.ID, nil, nil
}

// authorizationOf reads a confirmed PaymentIntent as an authorization. A
// PaymentIntent waiting for 3-D Secure with a page to send the shopper to
// (a browser's payment, confirmed with a return_url) is RequiresAction;
// without one (a server's payment cannot authenticate) it is cancelled
// (nothing was charged) and declined authentication_required.
func (p *Provider) authorizationOf(ctx context.Context, pi *stripego.PaymentIntent) (*surgepay.ProviderResult, error) {
	res := &surgepay.ProviderResult{Reference: pi.ID, Amount: pi.Amount, Operation: surgepay.TxAuthorization}
	switch pi.Status {
	case stripego.PaymentIntentStatusRequiresCapture:
		res.Approved = true
	case stripego.PaymentIntentStatusSucceeded:
		res.Approved, res.Captured = true, true
	case stripego.PaymentIntentStatusRequiresAction:
		if na := pi.NextAction; na != nil && na.RedirectToURL != nil && na.RedirectToURL.URL != "" {
			res.RequiresAction, res.ActionURL = true, na.RedirectToURL.URL
			return res, nil
		}
		if _, err := p.cancel(ctx, pi.ID, idempotencyKeyOf(pi)+"/3ds-cancel"); err != nil {
			return nil, err // the attempt stays, cancellable: unknown until cancelled
		}
		res.DeclineCode = surgepay.DeclineAuthenticationRequired
		res.Message = "the card issuer requires 3-D Secure authentication, which a server's payment cannot do; nothing was charged"
	case stripego.PaymentIntentStatusRequiresPaymentMethod, stripego.PaymentIntentStatusCanceled:
		res.DeclineCode, res.Message = surgepay.DeclineGeneric, "the card was declined"
		if e := pi.LastPaymentError; e != nil {
			res.DeclineCode, res.Message = declineCode(string(e.Code), string(e.DeclineCode)), e.Msg
		}
	default: // processing, requires_confirmation: not final
		return nil, &surgepay.ProviderError{Outcome: surgepay.Unknown, Op: "authorize", Processor: p.cfg.Name,
			Err: fmt.Errorf("payment intent %s is %s", pi.ID, pi.Status)}
	}
	return res, nil
}

func idempotencyKeyOf(pi *stripego.PaymentIntent) string {
	if k := pi.Metadata[MetadataKey]; k != "" {
		return k
	}
	return pi.ID
}

// Capture captures req.Amount of the PaymentIntent req.AuthorizationRef
// (amount_to_capture; Stripe releases the rest).
func (p *Provider) Capture(ctx context.Context, req *surgepay.CaptureRequest) (*surgepay.ProviderResult, error) {
	params := &stripego.PaymentIntentCaptureParams{AmountToCapture: stripego.Int64(req.Amount)}
	params.SetIdempotencyKey(req.IdempotencyKey)
	var pi *stripego.PaymentIntent
	res, err := p.call(ctx, "capture", func(ctx context.Context) (err error) {
		params.Context = ctx
		pi, err = p.c.V1PaymentIntents.Capture(ctx, req.AuthorizationRef, params)
		return err
	})
	if err != nil || res != nil {
		return withOperation(res, surgepay.TxCapture), err
	}
	if pi.Status != stripego.PaymentIntentStatusSucceeded {
		return nil, &surgepay.ProviderError{Outcome: surgepay.Unknown, Op: "capture", Processor: p.cfg.Name,
			Err: fmt.Errorf("payment intent %s is %s after capture", pi.ID, pi.Status)}
	}
	amount := pi.AmountReceived
	if amount == 0 { // a double that omits amount_received (localstripe)
		amount = req.Amount
	}
	return &surgepay.ProviderResult{Approved: true, Reference: pi.ID, Amount: amount, Operation: surgepay.TxCapture}, nil
}

// Void cancels the PaymentIntent req.AuthorizationRef.
func (p *Provider) Void(ctx context.Context, req *surgepay.VoidRequest) (*surgepay.ProviderResult, error) {
	res, err := p.cancel(ctx, req.AuthorizationRef, req.IdempotencyKey)
	return withOperation(res, surgepay.TxVoid), err
}

func (p *Provider) cancel(ctx context.Context, id, key string) (*surgepay.ProviderResult, error) {
	params := &stripego.PaymentIntentCancelParams{}
	params.SetIdempotencyKey(key)
	var pi *stripego.PaymentIntent
	res, err := p.call(ctx, "void", func(ctx context.Context) (err error) {
		params.Context = ctx
		pi, err = p.c.V1PaymentIntents.Cancel(ctx, id, params)
		return err
	})
	if err != nil || res != nil {
		return res, err
	}
	return &surgepay.ProviderResult{Approved: true, Reference: pi.ID, Amount: pi.Amount, Operation: surgepay.TxVoid}, nil
}

// Refund refunds req.Amount of the PaymentIntent req.AuthorizationRef; a
// payment may be refunded several times up to what was captured.
func (p *Provider) Refund(ctx context.Context, req *surgepay.RefundRequest) (*surgepay.ProviderResult, error) {
	params := &stripego.RefundCreateParams{PaymentIntent: stripego.String(req.AuthorizationRef), Amount: stripego.Int64(req.Amount)}
	params.AddMetadata(MetadataKey, req.IdempotencyKey)
	params.SetIdempotencyKey(req.IdempotencyKey)
	var r *stripego.Refund
	res, err := p.call(ctx, "refund", func(ctx context.Context) (err error) {
		params.Context = ctx
		r, err = p.c.V1Refunds.Create(ctx, params)
		return err
	})
	if err != nil || res != nil {
		return withOperation(res, surgepay.TxRefund), err
	}
	return refundResult(r), nil
}

func refundResult(r *stripego.Refund) *surgepay.ProviderResult {
	res := &surgepay.ProviderResult{Approved: true, Reference: r.ID, Amount: r.Amount, Operation: surgepay.TxRefund}
	if r.Status == stripego.RefundStatusFailed || r.Status == stripego.RefundStatusCanceled {
		res.Approved, res.DeclineCode = false, surgepay.DeclineGeneric
		res.Message = "the refund " + string(r.Status) + ": " + string(r.FailureReason)
	}
	return res
}

func withOperation(res *surgepay.ProviderResult, op string) *surgepay.ProviderResult {
	if res != nil {
		res.Operation = op
	}
	return res
}

// Lookup finds an authorization by its key alone, through search (see
// the package doc). With no time of attempt, a search that finds nothing
// is unknown unless Config.SearchLag is under a second.
func (p *Provider) Lookup(ctx context.Context, key string) (*surgepay.ProviderResult, error) {
	return p.LookupOperation(ctx, &surgepay.LookupQuery{Key: key, Operation: surgepay.TxAuthorization})
}

// LookupOperation finds the operation q describes: an authorization by
// search on its key; a capture or void from the PaymentIntent's state; a
// refund among the PaymentIntent's refunds by its key.
func (p *Provider) LookupOperation(ctx context.Context, q *surgepay.LookupQuery) (*surgepay.ProviderResult, error) {
	switch q.Operation {
	case surgepay.TxCapture, surgepay.TxVoid:
		return p.lookupState(ctx, q)
	case surgepay.TxRefund:
		return p.lookupRefund(ctx, q)
	}
	return p.lookupAuthorization(ctx, q)
}

func (p *Provider) lookupAuthorization(ctx context.Context, q *surgepay.LookupQuery) (*surgepay.ProviderResult, error) {
	if q.Reference != "" {
		// An authorization awaiting 3-D Secure: its PaymentIntent is read
		// at once, where search could miss it for a minute or more.
		pi, err := p.retrieve(ctx, q.Reference)
		if err != nil && !surgepay.IsNotPerformed(err) {
			return nil, err
		}
		if err == nil && pi.Metadata[MetadataKey] == q.Key {
			return p.authorizationResult(ctx, pi)
		}
		// Not there, or another's: search by the key, as without it.
	}
	params := &stripego.PaymentIntentSearchParams{}
	params.Query = fmt.Sprintf("metadata['%s']:'%s'", MetadataKey, strings.ReplaceAll(q.Key, "'", `\'`))
	params.Limit = stripego.Int64(searchPageMax)
	params.Context = ctx
	var found *stripego.PaymentIntent
	for pi, err := range p.c.V1PaymentIntents.Search(ctx, params) {
		if err != nil {
			return p.lookupFailed("lookup", err)
		}
		if pi.Metadata[MetadataKey] == q.Key { // a key names one PaymentIntent
			found = pi
			break
		}
	}
	if found == nil {
		return nil, p.notFound(q, errors.New("no payment intent carries this key"))
	}
	return p.authorizationResult(ctx, found)
}

// authorizationResult is the outcome of the authorization pi, found by a
// lookup: a PaymentIntent cancelled without an error is one surgepay
// cancelled because it asked a server's payment for 3-D Secure.
func (p *Provider) authorizationResult(ctx context.Context, pi *stripego.PaymentIntent) (*surgepay.ProviderResult, error) {
	res, err := p.authorizationOf(ctx, pi)
	if err == nil && !res.Approved && pi.Status == stripego.PaymentIntentStatusCanceled && pi.LastPaymentError == nil {
		res.DeclineCode = surgepay.DeclineAuthenticationRequired
	}
	return res, err
}

// notFound answers a lookup that found no trace of q's operation. A
// request Stripe is still executing leaves no trace yet (its client gave
// up: a timeout, a cut connection; a resend got 409 in progress), and
// Stripe's search lags its writes: so nothing found proves "not
// performed" only once Config.SearchLag (never less than a call's
// timeout) has passed since the last attempt (q.Attempted); before, the
// outcome stays unknown. Answering "not performed" early told clients to
// retry captures and refunds that Stripe completed a moment later
// (issue 34: a second refund under a new key refunded twice).
func (p *Provider) notFound(q *surgepay.LookupQuery, err error) error {
	lag := max(p.cfg.SearchLag, p.cfg.CallTimeout)
	if (q.Attempted.IsZero() && lag >= time.Second) || time.Since(q.Attempted) < lag {
		return &surgepay.ProviderError{Outcome: surgepay.Unknown, Op: "lookup", Processor: p.cfg.Name,
			Err: fmt.Errorf("%w yet; the request may still be executing at Stripe", err)}
	}
	return p.notPerformed("lookup", err)
}

// lookupState reads a capture's or a void's outcome from the
// PaymentIntent's state. A state the operation can no longer reach
// (a void of a captured intent, a capture of a cancelled one) proves it
// was not performed; requires_capture proves it only after the lag
// (notFound).
func (p *Provider) lookupState(ctx context.Context, q *surgepay.LookupQuery) (*surgepay.ProviderResult, error) {
	if q.AuthorizationRef == "" {
		return nil, p.notPerformed("lookup", errors.New("a capture or void lookup needs its authorization"))
	}
	pi, err := p.retrieve(ctx, q.AuthorizationRef)
	if err != nil {
		return nil, err
	}
	switch {
	case q.Operation == surgepay.TxCapture && pi.Status == stripego.PaymentIntentStatusSucceeded:
		amount := pi.AmountReceived
		if amount == 0 { // a double that omits amount_received (localstripe)
			amount = q.Amount
		}
		return &surgepay.ProviderResult{Approved: true, Reference: pi.ID, Amount: amount, Operation: surgepay.TxCapture}, nil
	case q.Operation == surgepay.TxVoid && pi.Status == stripego.PaymentIntentStatusCanceled:
		return &surgepay.ProviderResult{Approved: true, Reference: pi.ID, Amount: pi.Amount, Operation: surgepay.TxVoid}, nil
	case pi.Status == stripego.PaymentIntentStatusProcessing:
		return nil, &surgepay.ProviderError{Outcome: surgepay.Unknown, Op: "lookup", Processor: p.cfg.Name,
			Err: fmt.Errorf("payment intent %s is processing", pi.ID)}
	case pi.Status == stripego.PaymentIntentStatusRequiresCapture:
		return nil, p.notFound(q, fmt.Errorf("payment intent %s is requires_capture: no %s found", pi.ID, q.Operation))
	}
	return nil, p.notPerformed("lookup", fmt.Errorf("payment intent %s is %s: no %s happened", pi.ID, pi.Status, q.Operation))
}

func (p *Provider) lookupRefund(ctx context.Context, q *surgepay.LookupQuery) (*surgepay.ProviderResult, error) {
	if q.AuthorizationRef == "" {
		return nil, p.notPerformed("lookup", errors.New("a refund lookup needs its authorization"))
	}
	params := &stripego.RefundListParams{PaymentIntent: stripego.String(q.AuthorizationRef)}
	params.Limit = stripego.Int64(100)
	params.Context = ctx
	for r, err := range p.c.V1Refunds.List(ctx, params) {
		if err != nil {
			return p.lookupFailed("lookup", err)
		}
		if r.Metadata[MetadataKey] == q.Key {
			return refundResult(r), nil
		}
	}
	return nil, p.notFound(q, errors.New("no refund of the payment intent carries this key"))
}

func (p *Provider) retrieve(ctx context.Context, id string) (*stripego.PaymentIntent, error) {
	params := &stripego.PaymentIntentRetrieveParams{}
	var pi *stripego.PaymentIntent
	res, err := p.call(ctx, "lookup", func(ctx context.Context) (err error) {
		params.Context = ctx
		pi, err = p.c.V1PaymentIntents.Retrieve(ctx, id, params)
		return err
	})
	if err != nil {
		// A lookup that did not happen (refused, 429, 401) proves nothing
		// about the operation: unknown, never "not performed".
		var pe *surgepay.ProviderError
		if errors.As(err, &pe) && pe.Outcome == surgepay.NotPerformed {
			pe.Outcome = surgepay.Unknown
		}
		return nil, err
	}
	if res != nil { // the PaymentIntent does not exist
		return nil, p.notPerformed("lookup", errors.New(res.Message))
	}
	return pi, nil
}

func (p *Provider) lookupFailed(op string, err error) (*surgepay.ProviderResult, error) {
	return nil, &surgepay.ProviderError{Outcome: surgepay.Unknown, Op: op, Processor: p.cfg.Name, Err: redact(err)}
}

func (p *Provider) notPerformed(op string, err error) error {
	return &surgepay.ProviderError{Outcome: surgepay.NotPerformed, Op: op, Processor: p.cfg.Name, Err: err}
}

var _ surgepay.TokenDescriber = (*Provider)(nil)

// DescribeToken reads the PaymentMethod token (pm_…) at Stripe: its card's
// brand, last four digits, expiry and Stripe's fingerprint. A token Stripe
// does not know, or not a card, is EINVALID on processor_token.token; no
// answer is EUNAVAILABLE (nothing is stored; retry).
func (p *Provider) DescribeToken(ctx context.Context, _ string, token string) (*surgepay.TokenCard, error) {
	params := &stripego.PaymentMethodRetrieveParams{}
	var pm *stripego.PaymentMethod
	res, err := p.call(ctx, "describe", func(ctx context.Context) (err error) {
		params.Context = ctx
		pm, err = p.c.V1PaymentMethods.Retrieve(ctx, token, params)
		return err
	})
	if err != nil {
		return nil, tokenUnavailable(err)
	}
	if res != nil {
		return nil, surgepay.Invalid("processor_token.token", "invalid_value", "the processor does not know this token: %s", res.Message)
	}
	if pm.Card == nil {
		return nil, surgepay.Invalid("processor_token.token", "invalid_value", "the token is not a card")
	}
	card := &surgepay.TokenCard{Brand: string(pm.Card.Brand), Last4: pm.Card.Last4, ExpMonth: int(pm.Card.ExpMonth),
		ExpYear: int(pm.Card.ExpYear), Fingerprint: pm.Card.Fingerprint}
	if pm.Customer != nil {
		card.Customer = pm.Customer.ID
	}
	return card, nil
}

// tokenUnavailable is the answer to a token Stripe did not answer about:
// EUNAVAILABLE, safe to retry, to the client; the cause (the processor's
// error, already redacted by call) for the server's log.
func tokenUnavailable(cause error) error {
	return fmt.Errorf("%w (%v)", &surgepay.Error{Code: surgepay.EUNAVAILABLE, Reason: "provider_unavailable", RetryAfter: 1,
		Message: "the processor did not answer about the token; it is safe to retry"}, cause)
}

var _ surgepay.TokenAttacher = (*Provider)(nil)

// AttachToken makes a Stripe Customer for the token (metadata: surgepay's
// merchant and customer) and attaches the token to it: Stripe lets a
// PaymentMethod that belongs to no Customer be charged once. Both calls
// carry an idempotency key derived from the token, so a retry after a
// failure makes one Customer and attaches once. EUNAVAILABLE (safe to
// retry) if Stripe did not answer; EINVALID if it refused.
func (p *Provider) AttachToken(ctx context.Context, _ string, token, merchantID, customerID string) (string, error) {
	cp := &stripego.CustomerCreateParams{}
	cp.AddMetadata(MetadataMerchant, merchantID)
	cp.AddMetadata("surgepay_customer", customerID)
	cp.SetIdempotencyKey("surgepay-customer/" + token)
	var cus *stripego.Customer
	res, err := p.call(ctx, "attach", func(ctx context.Context) (err error) {
		cp.Context = ctx
		cus, err = p.c.V1Customers.Create(ctx, cp)
		return err
	})
	if err != nil {
		return "", tokenUnavailable(err)
	}
	if res != nil {
		return "", surgepay.Invalid("processor_token.token", "invalid_value", "the processor refused a customer for the token: %s", res.Message)
	}
	ap := &stripego.PaymentMethodAttachParams{Customer: stripego.String(cus.ID)}
	ap.SetIdempotencyKey("surgepay-attach/" + token)
	res, err = p.call(ctx, "attach", func(ctx context.Context) (err error) {
		ap.Context = ctx
		_, err = p.c.V1PaymentMethods.Attach(ctx, token, ap)
		return err
	})
	if err != nil {
		return "", tokenUnavailable(err)
	}
	if res != nil {
		return "", surgepay.Invalid("processor_token.token", "invalid_value", "the processor refused to attach the token: %s", res.Message)
	}
	return cus.ID, nil
}

var _ surgepay.OutsideRefunder = (*Provider)(nil)

// refundsListMax bounds the refunds read for one PaymentIntent.
const refundsListMax = 1000

// RefundedOutside sums the PaymentIntent's refunds that surgepay did not
// make (no surgepay_key metadata) and that Stripe has not failed or
// cancelled. An error is unknown: nothing should be concluded from it.
func (p *Provider) RefundedOutside(ctx context.Context, ref string) (int64, error) {
	params := &stripego.RefundListParams{PaymentIntent: stripego.String(ref)}
	params.Limit = stripego.Int64(100)
	params.Context = ctx
	var sum int64
	n := 0
	for r, err := range p.c.V1Refunds.List(ctx, params) {
		if err != nil {
			return 0, &surgepay.ProviderError{Outcome: surgepay.Unknown, Op: "lookup", Processor: p.cfg.Name, Err: redact(err)}
		}
		if n++; n > refundsListMax {
			break
		}
		if r.Metadata[MetadataKey] == "" && r.Status != stripego.RefundStatusFailed && r.Status != stripego.RefundStatusCanceled {
			sum += r.Amount
		}
	}
	return sum, nil
}
