package stripedouble

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Fault is what the proxy does to one request.
type Fault int

const (
	// Pass forwards the request and returns the answer.
	Pass Fault = iota
	// DropBefore closes the connection without forwarding: nothing
	// happened, but the client cannot know (unknown outcome).
	DropBefore
	// DropAfter forwards the request, then closes the connection without
	// answering: it happened, and the client cannot know.
	DropAfter
	// Error500After forwards the request, then answers 500 api_error.
	Error500After
	// Error500Before answers 500 api_error without forwarding.
	Error500Before
	// RateLimited answers 429 rate_limit without forwarding, as Stripe
	// does past an account's rate limit.
	RateLimited
	// SlowAfter forwards the request and answers after Proxy.Slow.
	SlowAfter
)

// Proxy is a loopback HTTP proxy in front of localstripe (or stripe-mock)
// that adds what localstripe lacks of Stripe's behaviour, idempotent
// requests and PaymentIntent search, and injects faults chosen by Faults.
type Proxy struct {
	URL    string
	target string
	// Faults, if set, picks the fault for each request (called
	// concurrently). Idempotent replays are answered before it is asked.
	Faults func(r *http.Request) Fault
	// Slow is the delay of SlowAfter.
	Slow time.Duration

	Forwarded atomic.Int64 // requests that reached the double
	mu        sync.Mutex
	keys      map[string]*idemEntry
}

type idemEntry struct {
	params [32]byte
	done   chan struct{}
	status int
	body   []byte
	saved  bool
}

// NewProxy starts a proxy to target on a loopback port for the test.
func NewProxy(t testing.TB, target string) *Proxy {
	p := &Proxy{target: target, keys: make(map[string]*idemEntry)}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

var searchPath = regexp.MustCompile(`^/v1/payment_intents/search$`)

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if r.Method == "GET" && searchPath.MatchString(r.URL.Path) {
		p.search(w, r)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	if r.Method != "POST" || key == "" {
		p.serve(w, r, body)
		return
	}
	params := sha256.Sum256(append([]byte(r.URL.Path+"\x00"), body...))
	p.mu.Lock()
	e, ok := p.keys[key]
	if ok {
		p.mu.Unlock()
		select {
		case <-e.done:
		default:
			writeError(w, 409, "idempotency_error", "idempotency_key_in_use",
				"There is currently another in-progress request using this Idempotent Key.")
			return
		}
		if e.params != params {
			writeError(w, 400, "idempotency_error", "idempotency_key_reused",
				"Keys for idempotent requests can only be used with the same parameters they were first used with.")
			return
		}
		if e.saved {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Idempotent-Replayed", "true")
			w.WriteHeader(e.status)
			w.Write(e.body)
			return
		}
		p.mu.Lock() // not saved: run it again as a new request under the key
	}
	e = &idemEntry{params: params, done: make(chan struct{})}
	p.keys[key] = e
	p.mu.Unlock()
	rec := &recorder{ResponseWriter: w}
	p.serve(rec, r, body)
	// Stripe saves a result once the request started executing: not for
	// a 409, a 429 or a 5xx (the last may be retried), nor for what never
	// reached the double.
	e.status, e.body = rec.status, rec.buf.Bytes()
	e.saved = rec.forwarded && rec.status != 0 && rec.status < 500 && rec.status != 409 && rec.status != 429
	if !e.saved {
		p.mu.Lock()
		delete(p.keys, key)
		p.mu.Unlock()
	}
	close(e.done)
}

// recorder keeps what a handler wrote, for the idempotency record.
type recorder struct {
	http.ResponseWriter
	status    int
	buf       bytes.Buffer
	forwarded bool
}

func (r *recorder) WriteHeader(s int) { r.status = s; r.ResponseWriter.WriteHeader(s) }
func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = 200
	}
	r.buf.Write(b)
	return r.ResponseWriter.Write(b)
}

// serve applies the fault and forwards.
func (p *Proxy) serve(w http.ResponseWriter, r *http.Request, body []byte) {
	f := Pass
	if p.Faults != nil {
		f = p.Faults(r)
	}
	switch f {
	case DropBefore:
		hangUp(w)
		return
	case Error500Before:
		writeError(w, 500, "api_error", "", "An unknown error occurred.")
		return
	case RateLimited:
		writeError(w, 429, "invalid_request_error", "rate_limit", "Too many requests hit the API too quickly.")
		return
	}
	resp, err := p.forward(r, body)
	if rec, ok := w.(*recorder); ok {
		rec.forwarded = err == nil
	}
	if err != nil {
		writeError(w, 502, "api_error", "", "the double did not answer")
		return
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	switch f {
	case DropAfter:
		hangUp(w)
		return
	case Error500After:
		writeError(w, 500, "api_error", "", "An unknown error occurred.")
		return
	case SlowAfter:
		time.Sleep(p.Slow)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(resp.StatusCode)
	w.Write(out)
}

func (p *Proxy) forward(r *http.Request, body []byte) (*http.Response, error) {
	req, err := http.NewRequest(r.Method, p.target+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for _, h := range []string{"Authorization", "Content-Type", "Stripe-Version"} {
		req.Header.Set(h, r.Header.Get(h))
	}
	p.Forwarded.Add(1)
	return http.DefaultClient.Do(req)
}

// hangUp closes the client's connection without an answer.
func hangUp(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if c, _, err := hj.Hijack(); err == nil {
			c.Close()
			return
		}
	}
	if rec, ok := w.(*recorder); ok {
		hangUp(rec.ResponseWriter)
		return
	}
	panic(http.ErrAbortHandler)
}

func writeError(w http.ResponseWriter, status int, typ, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"type": typ, "code": code, "message": msg}})
}

// searchQuery is the one search form the connector sends.
var searchQuery = regexp.MustCompile(`^metadata\['([^']+)'\]:'((?:[^'\\]|\\.)*)'$`)

// search answers Stripe's PaymentIntent search for metadata['k']:'v' from
// the double's full list, which is current at once (Stripe's lags).
func (p *Proxy) search(w http.ResponseWriter, r *http.Request) {
	m := searchQuery.FindStringSubmatch(r.URL.Query().Get("query"))
	if m == nil {
		writeError(w, 400, "invalid_request_error", "", "unsupported search query")
		return
	}
	k, v := m[1], regexp.MustCompile(`\\(.)`).ReplaceAllString(m[2], "$1")
	var found []json.RawMessage
	after := ""
	for page := 0; page < 1000; page++ {
		q := url.Values{"limit": {"100"}}
		if after != "" {
			q.Set("starting_after", after)
		}
		req, _ := http.NewRequest("GET", p.target+"/v1/payment_intents?"+q.Encode(), nil)
		req.Header.Set("Authorization", r.Header.Get("Authorization"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			writeError(w, 502, "api_error", "", "the double did not answer")
			return
		}
		var list struct {
			Data    []json.RawMessage `json:"data"`
			HasMore bool              `json:"has_more"`
		}
		err = json.NewDecoder(resp.Body).Decode(&list)
		resp.Body.Close()
		if err != nil {
			writeError(w, 502, "api_error", "", "the double answered badly")
			return
		}
		for _, raw := range list.Data {
			var pi struct {
				ID       string            `json:"id"`
				Metadata map[string]string `json:"metadata"`
			}
			if json.Unmarshal(raw, &pi) == nil {
				after = pi.ID
				if pi.Metadata[k] == v {
					found = append(found, raw)
				}
			}
		}
		if !list.HasMore || len(list.Data) == 0 {
			break
		}
	}
	if found == nil {
		found = []json.RawMessage{}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"object": "search_result", "url": "/v1/payment_intents/search",
		"has_more": false, "data": found})
}
