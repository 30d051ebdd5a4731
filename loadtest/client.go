package loadtest

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// client sends API requests over one tuned transport. Safe for concurrent use.
type client struct {
	http *http.Client
	base string
	auth string
	// publishableAuth is the Authorization of calls marked publishable
	// (the browser's), "" when the run has no publishable key.
	publishableAuth string
	timeout         time.Duration // per request, headers and body
}

// newClient builds the injector's HTTP client. Connections are kept alive
// and idle ones are kept up to maxInflight per host, so a steady run does not
// re-dial; compression is off because it costs the injector CPU and the
// server's JSON is small. The per-request timeout is the request's context
// deadline, not http.Client.Timeout, which starts a goroutine and a timer
// per request (6-7 % of the injector's CPU in a profile at 2,500/s).
func newClient(baseURL, apiKey string, timeout time.Duration, maxInflight int64, tc *tls.Config) *client {
	dialer := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	idle := int(min(maxInflight, 100_000))
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           dialer.DialContext,
		MaxIdleConns:          idle,
		MaxIdleConnsPerHost:   idle,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   5 * time.Second,
		TLSClientConfig:       tc,
		ExpectContinueTimeout: 0,
		DisableCompression:    true,
		ForceAttemptHTTP2:     false,
		WriteBufferSize:       8 << 10,
		ReadBufferSize:        8 << 10,
	}
	c := &client{
		http:    &http.Client{Transport: tr},
		base:    strings.TrimRight(baseURL, "/"),
		timeout: timeout,
	}
	if apiKey != "" {
		c.auth = "Bearer " + apiKey
	}
	return c
}

// setPublishableKey sets the key that calls marked publishable send;
// call it before the client is shared.
func (cl *client) setPublishableKey(key string) {
	if key != "" {
		cl.publishableAuth = "Bearer " + key
	}
}

func (cl *client) close() { cl.http.CloseIdleConnections() }

// apiError is the JSON error body of the payments API.
type apiError struct {
	Type        string          `json:"type"`
	Code        string          `json:"code"`
	Message     string          `json:"message"`
	Param       string          `json:"param"`
	DeclineCode string          `json:"decline_code"`
	Payment     json.RawMessage `json:"payment"`
}

// apiReply holds the fields of any API object the scenarios check.
type apiReply struct {
	ID             string    `json:"id"`
	Object         string    `json:"object"`
	Status         string    `json:"status"`
	Amount         int64     `json:"amount"`
	AmountCaptured int64     `json:"amount_captured"`
	AmountRefunded int64     `json:"amount_refunded"`
	ClientSecret   string    `json:"client_secret"`
	PaymentMethod  string    `json:"payment_method"`
	Deleted        bool      `json:"deleted"`
	HasMore        bool      `json:"has_more"`
	Data           []listRow `json:"data"`
	Error          *apiError `json:"error"`
}

type listRow struct {
	ID string `json:"id"`
}

// call is one API request of a scenario.
type call struct {
	typ    reqType
	method string
	path   string
	body   []byte
	// decline marks a request made with a decline card: a 402 card_error
	// is then the expected outcome, not an error.
	decline bool
	// check returns a description of the first failed check, or "".
	check func(r *apiReply) string
	// raw skips decoding a successful body (the "get" scenario).
	raw bool
	// publishable sends the publishable key instead of the secret key:
	// the call is the shopper's browser's.
	publishable bool
}

// outcome is how a call ended.
type outcome int

const (
	outcomeOK outcome = iota
	outcomeDeclined
	outcomeFailed
)

// bufferPool recycles response buffers: reading bodies is the injector's
// main allocation.
var bufferPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// idempotencyKey returns 32 random hex characters. math/rand/v2's global
// generator is ChaCha8 seeded from the OS, unpredictable enough for
// uniqueness and free of system calls.
func idempotencyKey() string {
	var b [32]byte
	const digits = "0123456789abcdef"
	for half := range 2 {
		v := rand.Uint64() //nolint:gosec // G404: the key needs to be unique, not secret
		for i := range 16 {
			b[half*16+i] = digits[v&0xf]
			v >>= 4
		}
	}
	return string(b[:])
}

// send performs c and fills reply; it returns the HTTP status (0 on a
// transport error), the error class for transport errors, and byte counts.
func (cl *client) send(ctx context.Context, c *call, reply *apiReply) (status int, transport string, recv int64) {
	var body io.Reader
	if c.body != nil {
		body = bytes.NewReader(c.body)
	}
	ctx, cancel := context.WithTimeout(ctx, cl.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, c.method, cl.base+c.path, body)
	if err != nil {
		return 0, "request", 0
	}
	auth := cl.auth
	if c.publishable {
		auth = cl.publishableAuth
	}
	if auth != "" {
		req.Header["Authorization"] = []string{auth}
	}
	if c.body != nil {
		req.Header["Content-Type"] = []string{"application/json"}
	}
	if c.method == http.MethodPost {
		req.Header["Idempotency-Key"] = []string{idempotencyKey()}
	}
	resp, err := cl.http.Do(req)
	if err != nil {
		return 0, transportClass(err), 0
	}
	defer resp.Body.Close() //nolint:errcheck // read-only: closing loses nothing
	buf := bufferPool.Get().(*bytes.Buffer)
	defer bufferPool.Put(buf)
	buf.Reset()
	n, err := buf.ReadFrom(io.LimitReader(resp.Body, ResponseBytesMax))
	if err != nil {
		return 0, transportClass(err), n
	}
	*reply = apiReply{Data: reply.Data[:0]}
	if !c.raw || resp.StatusCode >= 300 {
		// A body that is not JSON leaves reply empty, and the call's
		// checks on its fields fail.
		_ = json.Unmarshal(buf.Bytes(), reply)
	}
	return resp.StatusCode, "", n
}

// transportClass names a transport error for the error-code table.
func transportClass(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	}
	return "transport"
}

// classify decides the outcome of a call and the error code to count.
func classify(c *call, status int, transport string, r *apiReply) (outcome, string) {
	switch {
	case transport != "":
		return outcomeFailed, transport
	case status == http.StatusPaymentRequired && c.decline && r.Error != nil && r.Error.Type == "card_error":
		return outcomeDeclined, ""
	case status >= 200 && status < 300:
		return outcomeOK, ""
	case r.Error != nil && r.Error.Code != "":
		return outcomeFailed, r.Error.Code
	}
	return outcomeFailed, "http_" + strconv.Itoa(status)
}
