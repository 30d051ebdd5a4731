package stripedouble

import (
	"bytes"
	"context"
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
	// CutAfter forwards the request and closes the client's connection
	// after Proxy.Cut while the double goes on executing it: the client
	// gives up on a request that Stripe completes a moment later (with
	// Proxy.Exec, a slow processor), and a resend under the same key
	// meanwhile gets Stripe's 409 idempotency_key_in_use.
	CutAfter
)

// Proxy is a loopback HTTP proxy in front of localstripe (or stripe-mock)
// that adds what localstripe lacks of Stripe's behaviour, idempotent
// requests, PaymentIntent search and 3-D Secure by redirect (threeds.go),
// and injects faults chosen by Faults.
type Proxy struct {
	URL    string
	target string
	// Faults, if set, picks the fault for each request (called
	// concurrently). Idempotent replays are answered before it is asked.
	Faults func(r *http.Request) Fault
	// Slow is the delay of SlowAfter.
	Slow time.Duration
	// Exec, if set, is how long "Stripe" takes to execute a POST that
	// carries an Idempotency-Key (called concurrently): the key is in
	// progress (409 to a resend) from its arrival, and the double
	// performs it after Exec, whether or not the client is still there.
	Exec func(r *http.Request) time.Duration
	// Cut is how long CutAfter waits before closing the client's
	// connection.
	Cut time.Duration
	// SearchLag is how long a PaymentIntent takes to appear in search
	// after it was created, as Stripe's search lags its writes ("under a
	// minute" normally); 0 is current at once. Set it before the first
	// request.
	SearchLag time.Duration

	Forwarded atomic.Int64 // requests that reached the double
	mu        sync.Mutex
	keys      map[string]*idemEntry
	byMeta    map[string][]string  // "key\x00value" → PaymentIntent ids
	indexed   map[string]time.Time // PaymentIntent id → when it was created
	returns   map[string]string    // PaymentIntent id → its return_url (threeds.go)
}

type idemEntry struct {
	params [32]byte
	done   chan struct{}
	status int
	body   []byte
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
	if p.serveChallenge(w, r) {
		return
	}
	body, _ := io.ReadAll(r.Body)
	f := Pass
	if p.Faults != nil {
		f = p.Faults(r)
	}
	if r.Method == "GET" && searchPath.MatchString(r.URL.Path) {
		if f == DropBefore {
			hangUp(w)
			return
		}
		p.search(w, r)
		return
	}
	switch f { // faults before Stripe: the request never arrives
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
	if f == CutAfter {
		// The double executes on a request of its own, unbound to the
		// client's connection, which is closed after Cut.
		r2 := r.Clone(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			p.execute(r2, body)
		}()
		select {
		case <-done:
		case <-time.After(p.Cut):
		}
		hangUp(w)
		return
	}
	a := p.execute(r, body)
	switch {
	case a.layer: // answered by the idempotency layer (409, 400): no fault applies
	case f == DropAfter: // faults after Stripe: it happened, the answer is lost
		hangUp(w)
		return
	case f == Error500After:
		writeError(w, 500, "api_error", "", "An unknown error occurred.")
		return
	case f == SlowAfter:
		time.Sleep(p.Slow)
	}
	if a.replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(a.status)
	w.Write(a.out)
}

// answer is what "Stripe" answers one request.
type answer struct {
	status   int
	out      []byte
	replayed bool // a saved answer to an earlier request under the key
	layer    bool // the idempotency layer answered (409 in progress, 400 reused)
}

// execute is "Stripe": the double behind Stripe's idempotency layer. A
// POST with an Idempotency-Key replays its saved answer, is refused 409
// while the first is in progress, and 400 idempotency_error with other
// parameters. An answer is saved once the request executed (Stripe saves
// even its own 500s then); a 409 or 429 is not. A POST with a key takes
// Exec to execute. A double that did not answer is status 0.
func (p *Proxy) execute(r *http.Request, body []byte) answer {
	key := r.Header.Get("Idempotency-Key")
	if r.Method != "POST" || key == "" {
		status, out := p.forward(r, body)
		return answer{status: status, out: out}
	}
	params := sha256.Sum256(append([]byte(r.URL.Path+"\x00"), body...))
	p.mu.Lock()
	if e, found := p.keys[key]; found {
		p.mu.Unlock()
		select {
		case <-e.done:
		default:
			return answer{status: 409, layer: true, out: errorBody("idempotency_error", "idempotency_key_in_use",
				"There is currently another in-progress request using this Idempotent Key.")}
		}
		if e.params != params {
			return answer{status: 400, layer: true, out: errorBody("idempotency_error", "idempotency_key_reused",
				"Keys for idempotent requests can only be used with the same parameters they were first used with.")}
		}
		return answer{status: e.status, out: e.body, replayed: true}
	}
	e := &idemEntry{params: params, done: make(chan struct{})}
	p.keys[key] = e
	p.mu.Unlock()
	if p.Exec != nil {
		time.Sleep(p.Exec(r))
	}
	e.status, e.body = p.forward(r, body)
	if e.status == 409 || e.status == 429 || e.status == 0 {
		p.mu.Lock()
		delete(p.keys, key)
		p.mu.Unlock()
	}
	close(e.done)
	return answer{status: e.status, out: e.body}
}

// forward sends the request to the double; status 0 if it did not answer.
func (p *Proxy) forward(r *http.Request, body []byte) (int, []byte) {
	body, returnURL := withoutReturnURL(r, body)
	req, err := http.NewRequest(r.Method, p.target+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return 0, nil
	}
	for _, h := range []string{"Authorization", "Content-Type", "Stripe-Version"} {
		req.Header.Set(h, r.Header.Get(h))
	}
	p.Forwarded.Add(1)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	p.index(r, resp.StatusCode, out)
	return resp.StatusCode, p.redirect3DS(out, returnURL)
}

// hangUp closes the client's connection without an answer.
func hangUp(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if c, _, err := hj.Hijack(); err == nil {
			c.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}

func writeError(w http.ResponseWriter, status int, typ, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(errorBody(typ, code, msg))
}

// errorBody is a Stripe error object.
func errorBody(typ, code, msg string) []byte {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"type": typ, "code": code, "message": msg}})
	return b
}

// searchQuery is the one search form the connector sends.
var searchQuery = regexp.MustCompile(`^metadata\['([^']+)'\]:'((?:[^'\\]|\\.)*)'$`)

// index records the PaymentIntents the double created, by each metadata
// pair, from the answers that passed through (answered or not).
func (p *Proxy) index(r *http.Request, status int, body []byte) {
	if r.Method != "POST" || r.URL.Path != "/v1/payment_intents" {
		return
	}
	type pi struct {
		ID       string            `json:"id"`
		Metadata map[string]string `json:"metadata"`
	}
	var v struct {
		pi
		Error struct {
			PaymentIntent *pi `json:"payment_intent"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &v) != nil {
		return
	}
	obj := v.pi
	if obj.ID == "" && v.Error.PaymentIntent != nil {
		obj = *v.Error.PaymentIntent
	}
	if obj.ID == "" {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.byMeta == nil {
		p.byMeta = make(map[string][]string)
		p.indexed = make(map[string]time.Time)
	}
	if _, seen := p.indexed[obj.ID]; !seen {
		p.indexed[obj.ID] = time.Now()
	}
	for k, val := range obj.Metadata {
		p.byMeta[k+"\x00"+val] = append(p.byMeta[k+"\x00"+val], obj.ID)
	}
}

// search answers Stripe's PaymentIntent search for metadata['k']:'v' from
// what the double created at least SearchLag ago, read fresh.
func (p *Proxy) search(w http.ResponseWriter, r *http.Request) {
	m := searchQuery.FindStringSubmatch(r.URL.Query().Get("query"))
	if m == nil {
		writeError(w, 400, "invalid_request_error", "", "unsupported search query")
		return
	}
	v := regexp.MustCompile(`\\(.)`).ReplaceAllString(m[2], "$1")
	p.mu.Lock()
	var ids []string
	for _, id := range p.byMeta[m[1]+"\x00"+v] {
		if time.Since(p.indexed[id]) >= p.SearchLag {
			ids = append(ids, id)
		}
	}
	p.mu.Unlock()
	found := []json.RawMessage{}
	for _, id := range ids {
		req, _ := http.NewRequest("GET", p.target+"/v1/payment_intents/"+url.PathEscape(id), nil)
		req.Header.Set("Authorization", r.Header.Get("Authorization"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			writeError(w, 502, "api_error", "", "the double did not answer")
			return
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 200 {
			found = append(found, p.redirect3DS(raw, ""))
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"object": "search_result", "url": "/v1/payment_intents/search",
		"has_more": false, "data": found})
}
