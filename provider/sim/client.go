package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/surgepay/surgepay"
)

// Client limits.
const (
	// ClientTimeoutDefault bounds one call of the default HTTP client,
	// connection, latency and response included.
	ClientTimeoutDefault = 30 * time.Second
	// ClientIdleConnsPerHostMax is the default client's idle connection
	// pool. Go's default of 2 makes a client at thousands of calls a second
	// open and close a connection per call and pile up TIME_WAIT sockets.
	ClientIdleConnsPerHostMax = 256
)

// Client is a surgepay.Provider that talks to a simulator over HTTP (see
// NewHandler). It maps transport failures to the three outcomes:
//   - a 200 answer is a result, approved or declined;
//   - 503, 429 and other 4xx answers, and failures before any byte of the
//     request was written (connection refused, DNS, a cancelled context),
//     are NotPerformed;
//   - 504 and other 5xx answers, failures after the request was written
//     (timeouts, broken connections, unreadable or oversized bodies) are
//     Unknown.
//
// Errors name the method, path and status, never card data. Safe for
// concurrent use.
type Client struct {
	base string
	hc   *http.Client
}

var _ surgepay.Provider = (*Client)(nil)

// NewHTTPClient returns an HTTP client for NewClient: timeout per call
// (ClientTimeoutDefault if 0), ClientIdleConnsPerHostMax idle connections,
// no redirects followed.
func NewHTTPClient(timeout time.Duration) *http.Client {
	if timeout <= 0 {
		timeout = ClientTimeoutDefault
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 2 * ClientIdleConnsPerHostMax
	t.MaxIdleConnsPerHost = ClientIdleConnsPerHostMax
	return &http.Client{
		Timeout:       timeout,
		Transport:     t,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// NewClient returns a client of the simulator at baseURL, such as
// "http://127.0.0.1:8181". A nil httpClient means NewHTTPClient(0).
func NewClient(baseURL string, httpClient *http.Client) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("simulator URL %q: want http://host:port", baseURL)
	}
	if httpClient == nil {
		httpClient = NewHTTPClient(0)
	}
	return &Client{base: strings.TrimRight(baseURL, "/"), hc: httpClient}, nil
}

// Authorize implements surgepay.Provider.
func (c *Client) Authorize(ctx context.Context, req *surgepay.AuthorizeRequest) (*surgepay.ProviderResult, error) {
	b := authorizeBody{MerchantID: req.MerchantID, PaymentID: req.PaymentID, Amount: req.Amount,
		Currency: req.Currency, Capture: req.Capture, ReturnURL: req.ReturnURL,
		Card: cardBody{Number: req.Card.Number.Digits(), ExpMonth: req.Card.ExpMonth,
			ExpYear: req.Card.ExpYear, CVC: req.Card.CVC.Value()}}
	return c.operation(ctx, surgepay.TxAuthorization, http.MethodPost, "/v1/authorize", req.IdempotencyKey, &b)
}

// Capture implements surgepay.Provider.
func (c *Client) Capture(ctx context.Context, req *surgepay.CaptureRequest) (*surgepay.ProviderResult, error) {
	b := refBody{AuthorizationRef: req.AuthorizationRef, Amount: req.Amount, Currency: req.Currency}
	return c.operation(ctx, surgepay.TxCapture, http.MethodPost, "/v1/capture", req.IdempotencyKey, &b)
}

// Void implements surgepay.Provider.
func (c *Client) Void(ctx context.Context, req *surgepay.VoidRequest) (*surgepay.ProviderResult, error) {
	b := refBody{AuthorizationRef: req.AuthorizationRef}
	return c.operation(ctx, surgepay.TxVoid, http.MethodPost, "/v1/void", req.IdempotencyKey, &b)
}

// Refund implements surgepay.Provider.
func (c *Client) Refund(ctx context.Context, req *surgepay.RefundRequest) (*surgepay.ProviderResult, error) {
	b := refBody{AuthorizationRef: req.AuthorizationRef, Amount: req.Amount, Currency: req.Currency}
	return c.operation(ctx, surgepay.TxRefund, http.MethodPost, "/v1/refund", req.IdempotencyKey, &b)
}

// Lookup implements surgepay.Provider.
func (c *Client) Lookup(ctx context.Context, key string) (*surgepay.ProviderResult, error) {
	if key == "" {
		return nil, notPerformed(OpLookup, ErrKeyInvalid)
	}
	res, err := c.operation(ctx, OpLookup, http.MethodGet, "/v1/operations/"+url.PathEscape(key), "", nil)
	if surgepay.IsNotPerformed(err) && !errors.Is(err, ErrNoSuchOperation) {
		// The lookup itself did not happen (connection refused, 503,
		// 429): that proves nothing about the operation, which stays
		// unknown. Read as "not performed", a router failed over while
		// the simulator held the first attempt's charge (issue 34).
		return nil, unknown(OpLookup, err)
	}
	return res, err
}

// operation sends one provider call and maps its outcome.
func (c *Client) operation(ctx context.Context, op, method, path, key string, in any) (*surgepay.ProviderResult, error) {
	status, data, sent, err := c.do(ctx, method, path, key, in)
	if err != nil {
		if sent {
			return nil, unknown(op, err)
		}
		return nil, notPerformed(op, err)
	}
	switch {
	case status == http.StatusOK:
		var b resultBody
		if err := json.Unmarshal(data, &b); err != nil {
			return nil, unknown(op, fmt.Errorf("%s %s: decode response: %w", method, path, err))
		}
		return b.result(), nil
	case status == http.StatusServiceUnavailable || (status >= 400 && status < 500):
		return nil, notPerformed(op, statusError(method, path, status, data))
	}
	return nil, unknown(op, statusError(method, path, status, data))
}

// do sends a request and reads the whole bounded response. sent reports
// whether any of the request may have been written: after that, a failure
// leaves the outcome unknown.
func (c *Client) do(ctx context.Context, method, path, key string, in any) (status int, data []byte, sent bool, err error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, nil, false, fmt.Errorf("%s %s: encode request: %w", method, path, err)
		}
		body = bytes.NewReader(b)
	}
	var wrote atomic.Bool
	trace := &httptrace.ClientTrace{WroteHeaders: func() { wrote.Store(true) }}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), method, c.base+path, body)
	if err != nil {
		return 0, nil, false, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set(HeaderIdempotencyKey, key)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, nil, wrote.Load(), err // *url.Error names method and URL.
	}
	defer resp.Body.Close() //nolint:errcheck // read-only: closing loses nothing
	data, err = io.ReadAll(io.LimitReader(resp.Body, BodyBytesMax+1))
	if err != nil {
		return 0, nil, true, fmt.Errorf("%s %s: status %d: read response: %w", method, path, resp.StatusCode, err)
	}
	if len(data) > BodyBytesMax {
		return 0, nil, true, fmt.Errorf("%s %s: response exceeds %d bytes", method, path, BodyBytesMax)
	}
	return resp.StatusCode, data, true, nil
}

func unknown(op string, err error) error {
	return &surgepay.ProviderError{Outcome: surgepay.Unknown, Op: op, Err: err}
}

// statusError describes a non-200 answer, wrapping the simulator's error
// (ErrKeyReused, ErrRateLimited, ...) when its code names one.
func statusError(method, path string, status int, data []byte) error {
	var b errorBody
	if json.Unmarshal(data, &b) == nil {
		if e := codeError(b.Code); e != nil {
			return fmt.Errorf("%s %s: status %d: %w", method, path, status, e)
		}
		if b.Error != "" {
			return fmt.Errorf("%s %s: status %d: %s", method, path, status, truncate(b.Error, 200))
		}
	}
	return fmt.Errorf("%s %s: status %d", method, path, status)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// Effects returns GET /v1/effects?payment=paymentID.
func (c *Client) Effects(ctx context.Context, paymentID string) (Effects, error) {
	var e Effects
	err := c.admin(ctx, http.MethodGet, "/v1/effects?payment="+url.QueryEscape(paymentID), nil, &e)
	return e, err
}

// TotalEffects returns GET /v1/effects.
func (c *Client) TotalEffects(ctx context.Context) (Totals, error) {
	var t Totals
	err := c.admin(ctx, http.MethodGet, "/v1/effects", nil, &t)
	return t, err
}

// Config returns GET /v1/config.
func (c *Client) Config(ctx context.Context) (Config, error) {
	var cfg Config
	err := c.admin(ctx, http.MethodGet, "/v1/config", nil, &cfg)
	return cfg, err
}

// SetConfig sends PUT /v1/config and returns the configuration in use.
func (c *Client) SetConfig(ctx context.Context, cfg Config) (Config, error) {
	var out Config
	err := c.admin(ctx, http.MethodPut, "/v1/config", &cfg, &out)
	return out, err
}

// Reset sends POST /v1/reset.
func (c *Client) Reset(ctx context.Context) error {
	return c.admin(ctx, http.MethodPost, "/v1/reset", nil, nil)
}

func (c *Client) admin(ctx context.Context, method, path string, in, out any) error {
	status, data, _, err := c.do(ctx, method, path, "", in)
	if err != nil {
		return err
	}
	if status/100 != 2 {
		return statusError(method, path, status, data)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: decode response: %w", method, path, err)
	}
	return nil
}
