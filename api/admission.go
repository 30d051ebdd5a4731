package api

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/telemetry"
)

// Admission: how a request gets a place on the server.
//
// A request
//
//  1. is authenticated (the key comes from the cache: no SQL, no slot);
//  2. takes one of the server's inflight_max slots: a full server
//     answers 503 overloaded with Retry-After. The slot is held while the
//     body arrives, so at most inflight_max bodies are buffered at once
//     (64 KiB each at most): the memory of what is in flight is bounded
//     by the server's bound, whatever the merchants' shares add up to;
//  3. takes one of its tenant's slots (merchant_inflight_max; a tenant is
//     a merchant, or all the processors' webhooks together): over its
//     share it gets 429 merchant_concurrency_limit at once, and only its
//     tenant does. A merchant alone on its server holds all of
//     inflight_max: at that bound it meets the server's 503 (step 2), the
//     node's overload, not a share of its own;
//  4. passes the merchant's rate limit (ratelimit.go);
//  5. reads its body, within BodyReadTimeout: a slow body holds one of
//     its own merchant's slots, so a flood of them costs that merchant
//     its share of the server and the others keep theirs.

// Defaults of the admission bounds.
const (
	// BodyReadTimeoutDefault bounds reading a request's body: 64 KiB (the
	// largest body) in 10 s is 6.5 KB/s, slower than any client that
	// means to pay.
	BodyReadTimeoutDefault = 10 * time.Second
	// MerchantInflightShareDefault is the share of InflightMax one
	// merchant may hold when MerchantInflightMax is 0 and more than one
	// merchant is enabled: a quarter, so that it takes four merchants
	// flooding at once to fill the server.
	MerchantInflightShareDefault = 4
)

// ETIMEOUT is the API's own code for a request whose body did not arrive
// within BodyReadTimeout: 408.
const ETIMEOUT = "request_timeout"

// processorWebhooksTenant is the tenant of the processors' webhooks: they
// carry no API key, so they share one tenant's slots.
const processorWebhooksTenant = "processor_webhooks"

// tenantSlots counts the requests each tenant has in flight, up to a
// share that a reload may change. A tenant is in the table only while it
// has requests in flight, so the table holds at most as many tenants as
// there are requests being served. Safe for concurrent use.
type tenantSlots struct {
	max atomic.Int64
	mu  sync.Mutex
	m   map[string]int64
}

func newTenantSlots(n int) *tenantSlots {
	ts := &tenantSlots{m: make(map[string]int64)}
	ts.max.Store(int64(n))
	return ts
}

// acquire takes one of tenant's slots, of n (0: the share of every
// tenant); false (and the share) when the tenant holds them all.
func (ts *tenantSlots) acquire(tenant string, n int64) (int64, bool) {
	if n <= 0 {
		n = ts.max.Load()
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	held := ts.m[tenant]
	if held >= n {
		return n, false
	}
	ts.m[tenant] = held + 1
	return n, true
}

// release gives back one of tenant's slots.
func (ts *tenantSlots) release(tenant string) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if held := ts.m[tenant] - 1; held > 0 {
		ts.m[tenant] = held
	} else {
		delete(ts.m, tenant)
	}
}

// merchantInflightMax returns the share of one merchant: n if positive;
// else, while exactly one merchant is enabled (merchants, as counted by
// SetMerchantsEnabled; negative: not counted), all of InflightMax, since a
// merchant alone on its server has no one to be fair to and a writer stall
// in its event should queue its requests, not refuse them; else
// InflightMax / MerchantInflightShareDefault (at least 1). Never more than
// InflightMax.
func merchantInflightMax(n, inflightMax, merchants int) int {
	if n <= 0 {
		if merchants == 1 {
			return inflightMax
		}
		n = max(1, inflightMax/MerchantInflightShareDefault)
	}
	return min(n, inflightMax)
}

// shares holds what a merchant's share of in-flight requests is made of:
// the configured merchant_inflight_max and the count of enabled merchants.
type shares struct {
	mu        sync.Mutex
	n         int // Config.MerchantInflightMax, as last set
	merchants int // enabled merchants; -1 until counted
}

// SetMerchantInflightMax changes how many requests one merchant may have
// in flight (Config.MerchantInflightMax; 0: the default share), at once:
// requests already in flight keep their slots. Safe for concurrent use.
func (s *Server) SetMerchantInflightMax(n int) {
	s.shares.mu.Lock()
	defer s.shares.mu.Unlock()
	s.shares.n = n
	s.tenants.max.Store(int64(merchantInflightMax(n, s.cfg.InflightMax, s.shares.merchants)))
}

// SetMerchantsEnabled tells the server how many merchants are enabled:
// with merchant_inflight_max at 0, one merchant alone may hold all of
// inflight_max, and each of two or more a quarter. serve counts them at
// start, after each change through the admin API and once a minute (a
// merchant made on another node counts here within the minute). Safe for
// concurrent use.
func (s *Server) SetMerchantsEnabled(n int) {
	s.shares.mu.Lock()
	defer s.shares.mu.Unlock()
	s.shares.merchants = n
	s.tenants.max.Store(int64(merchantInflightMax(s.shares.n, s.cfg.InflightMax, n)))
}

// MerchantInflightMax returns how many requests one merchant may have in
// flight now.
func (s *Server) MerchantInflightMax() int { return int(s.tenants.max.Load()) }

// processorWebhooksShare is the share of one processor's webhooks: what a
// merchant's would be among several merchants. They carry no API key, so
// they never take the whole of a lone merchant's share.
func (s *Server) processorWebhooksShare() int {
	s.shares.mu.Lock()
	defer s.shares.mu.Unlock()
	return merchantInflightMax(s.shares.n, s.cfg.InflightMax, -1)
}

// admit runs next for a request of tenant once the request holds one of
// the tenant's slots, its body (read within BodyReadTimeout when readMax
// is positive, into the request's state) and one of the server's slots;
// else it answers the refusal. Tenant "" takes no tenant's slot; share
// is the tenant's own (merchants.*.inflight_max), 0 for the default
// (MerchantInflightMax). pass, if not nil, runs between the
// tenant's slot and the body (the rate limit) and may refuse too.
func (s *Server) admit(w http.ResponseWriter, r *http.Request, tenant string, share int, readMax int64, pass func() error, next func()) {
	select {
	case s.inflight <- struct{}{}:
	default:
		s.tel.Shed(telemetry.ShedOverloaded)
		s.writeError(w, r, errOverloaded)
		return
	}
	// held says which slots the request still holds: a refusal gives
	// them back before it is written, since writing it may wait for a
	// slow body (closeIfBodyUnread).
	held := struct{ server, tenant bool }{server: true}
	release := func() {
		if held.tenant {
			s.tenants.release(tenant)
			held.tenant = false
		}
		if held.server {
			<-s.inflight
			held.server = false
		}
	}
	defer release()
	if tenant != "" {
		n, ok := s.tenants.acquire(tenant, int64(min(share, s.cfg.InflightMax)))
		if !ok {
			release()
			s.tel.Shed(telemetry.ShedMerchantConcurrency)
			who := "this merchant has"
			if strings.HasPrefix(tenant, processorWebhooksTenant+":") {
				who = "the processors' webhooks have"
			}
			s.writeError(w, r, &surgepay.Error{Code: surgepay.ERATELIMIT, Reason: "merchant_concurrency_limit", RetryAfter: 1,
				Message: fmt.Sprintf("%s %d requests in flight, the share of one merchant on this server "+
					"(merchant_inflight_max); retry after 1 s", who, n)})
			return
		}
		held.tenant = true
	}
	if pass != nil {
		if err := pass(); err != nil {
			release()
			s.writeError(w, r, err)
			return
		}
	}
	if readMax > 0 && r.Body != nil && r.Body != http.NoBody {
		st := requestStateFrom(r.Context())
		st.body, st.bodyErr = s.readBodyWithin(w, r, readMax)
		st.bodyRead = true
		if st.bodyErr != nil {
			release()
			if strings.HasPrefix(tenant, processorWebhooksTenant+":") && surgepay.ErrorReason(st.bodyErr) == "body_too_large" {
				s.processorEventTooLarge(w, r, st.bodyErr)
				return
			}
			// The rest of a body too large or too slow is not read: close
			// rather than let net/http drain it.
			w.Header().Set("Connection", "close")
			s.writeError(w, r, st.bodyErr)
			return
		}
	}
	if readMax > 0 && s.cfg.WritesOverloaded != nil && s.cfg.WritesOverloaded() {
		release()
		s.tel.Shed(telemetry.ShedWritesBehind)
		s.writeError(w, r, &surgepay.Error{Code: surgepay.EUNAVAILABLE, Reason: "overloaded", RetryAfter: 1,
			Message: "the server's writes are queued beyond its target delay (queue_delay_target); retry shortly"})
		return
	}
	next()
}

// errOverloaded is the answer of a server at its inflight_max.
var errOverloaded = &surgepay.Error{Code: surgepay.EUNAVAILABLE, Reason: "overloaded", RetryAfter: 1,
	Message: "the server is at its limit of requests in flight; retry shortly"}

// readBodyWithin reads r's body, at most readMax bytes, before
// BodyReadTimeout from now: past it the connection's read deadline cuts
// the read, the request is answered 408 body_timeout and net/http closes
// the connection.
func (s *Server) readBodyWithin(w http.ResponseWriter, r *http.Request, readMax int64) ([]byte, error) {
	d := s.cfg.BodyReadTimeout
	if d <= 0 {
		return readBodyMax(w, r, readMax)
	}
	// ErrNotSupported (a ResponseWriter that is not a connection's, in a
	// unit test): the server's ReadTimeout still bounds the read.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(d))
	b, err := readBodyMax(w, r, readMax)
	if err == nil {
		// The deadline bounds the body, not the handler: left set,
		// net/http's background read of the idle connection would hit it
		// while a slow handler runs and cancel the request's context.
		_ = rc.SetReadDeadline(time.Time{})
	}
	return b, err
}
