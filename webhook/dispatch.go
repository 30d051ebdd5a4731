package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/telemetry"
)

// Defaults and limits of a Dispatcher. Every queue, batch, body and retry
// loop is bounded by one of them.
const (
	WorkersDefault = 16  // deliveries in flight at once
	WorkersMax     = 256 // Config.Workers ceiling
	// TimeoutDefault bounds one delivery: connect, TLS, request and
	// answer. TimeoutMax is the ceiling of Config.Timeout.
	TimeoutDefault = 10 * time.Second
	TimeoutMax     = time.Minute
	// AttemptsMaxDefault is the attempts at one delivery before it is kept
	// as failed: with the default backoff, at most about 32 hours of
	// retries (30s, 1m, 2m, ... 4h16m, then every 6h; jitter shortens each
	// wait by up to half).
	AttemptsMaxDefault = 15
	AttemptsMaxLimit   = 30
	// BackoffBaseDefault is the wait after the first failed attempt,
	// doubled after each, up to BackoffMaxDefault; each wait is drawn
	// between half and all of that (jitter), so that the retries of one
	// outage do not arrive together.
	BackoffBaseDefault = 30 * time.Second
	BackoffMaxDefault  = 6 * time.Hour
	// PollIntervalDefault is how often an idle dispatcher looks for due
	// deliveries; a commit on this node wakes it at once.
	PollIntervalDefault = time.Second
	// ClaimBatchMax bounds one claim; a claim also takes no more than the
	// idle workers, nor more of one endpoint than its room (see
	// Config.EndpointInflightMax), so every claimed delivery starts at once.
	ClaimBatchMax = 100
	// ResultBatchMax bounds the results recorded in one store call.
	ResultBatchMax = 256
	// ResponseBodyBytesMax bounds what is read of an answer (and thrown
	// away), so that its connection can be reused.
	ResponseBodyBytesMax = 64 << 10
	// LeaseMargin is added to the timeout to lease a claim: the time a
	// result may take to be recorded before another node may claim the
	// delivery again (and send it twice).
	LeaseMargin = time.Minute
	// BacklogInterval spaces the backlog counts (a scan of the outbox).
	BacklogInterval = 10 * time.Second
	// FailedRetentionDefault is how long failed deliveries are kept.
	FailedRetentionDefault = 30 * 24 * time.Hour
	// DeliveredRetentionDefault is how long succeeded deliveries are kept
	// (listed, and resendable): three days, a weekend and a day to look
	// into a receiver's "never got it". Each kept row holds its event's
	// body (about 1.5 KB), so a merchant with one endpoint and 100
	// payment changes a second keeps about 40 GB at the default: lower it
	// for such volumes. DeliveredRetentionMin and DeliveredRetentionMax
	// bound the setting.
	DeliveredRetentionDefault = 72 * time.Hour
	DeliveredRetentionMin     = time.Minute
	DeliveredRetentionMax     = 90 * 24 * time.Hour
	// PurgeInterval and PurgeBatchMax bound the deletion of old failed
	// and succeeded deliveries: every PurgeInterval, batches of
	// PurgeBatchMax until one is not full, at most PurgeBatchesMax of
	// them (10 million rows an hour, far above what one node delivers).
	PurgeInterval   = 10 * time.Minute
	PurgeBatchMax   = 10_000
	PurgeBatchesMax = 100
	// errorBytesMax bounds the error text kept with a delivery.
	errorBytesMax = 200
	// recordTriesMax bounds the tries at recording one batch of results;
	// recordTimeout bounds each.
	recordTriesMax = 5
	recordTimeout  = 10 * time.Second
)

// Config configures a Dispatcher. Store and Vault are required; zero
// values of the rest take the defaults.
type Config struct {
	Store surgepay.WebhookStore
	// Vault opens the endpoints' sealed secrets.
	Vault  surgepay.Vault
	Logger *slog.Logger
	// Workers bounds the deliveries in flight. Default 16.
	Workers int
	// EndpointInflightMax bounds the deliveries in flight to one endpoint
	// (on this node), so that a slow or dead endpoint holds at most this
	// many workers while the others' deliveries go on: a delivery of an
	// endpoint at its bound is not claimed (it stays due, its attempt
	// uncounted) until one of them ends. An endpoint that keeps failing
	// has one in flight (FailingEndpointStreak). It also caps what one
	// endpoint can receive: about EndpointInflightMax / its answer time
	// deliveries per second per node. 1 to Workers; default
	// EndpointInflightDefault (4), or Workers if fewer.
	EndpointInflightMax int
	// Timeout bounds one delivery. Default 10s.
	Timeout time.Duration
	// AttemptsMax is the attempts at a delivery before it is kept as
	// failed. Default 15.
	AttemptsMax int
	// BackoffBase and BackoffMax shape the waits between attempts.
	// Defaults 30s and 6h.
	BackoffBase, BackoffMax time.Duration
	// PollInterval is how often an idle Run looks for due deliveries.
	// Default 1s.
	PollInterval time.Duration
	// FailedRetention is how long failed deliveries are kept. Default 30
	// days.
	FailedRetention time.Duration
	// DeliveredRetention is how long succeeded deliveries are kept, listed
	// and resendable. Default 72h; DeliveredRetentionMin to
	// DeliveredRetentionMax.
	DeliveredRetention time.Duration
	// AllowPrivateNetworks lets deliveries reach loopback, private,
	// link-local and other non-public addresses. Default false: such an
	// address is refused when connecting (after DNS), so that a merchant's
	// URL cannot reach the operator's internal services.
	AllowPrivateNetworks bool
	// Wake, if set, makes an idle Run look for due deliveries at once
	// (Outbox.Wake).
	Wake <-chan struct{}
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

func (c *Config) defaults() error {
	if c.Store == nil || c.Vault == nil {
		return errors.New("webhook: Store and Vault are required")
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	for _, d := range []struct {
		v    *int
		def  int
		max  int
		name string
	}{{&c.Workers, WorkersDefault, WorkersMax, "Workers"}, {&c.AttemptsMax, AttemptsMaxDefault, AttemptsMaxLimit, "AttemptsMax"}} {
		if *d.v == 0 {
			*d.v = d.def
		}
		if *d.v < 1 || *d.v > d.max {
			return fmt.Errorf("webhook: %s %d must be 1 to %d", d.name, *d.v, d.max)
		}
	}
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&c.Timeout, TimeoutDefault}, {&c.BackoffBase, BackoffBaseDefault}, {&c.BackoffMax, BackoffMaxDefault},
		{&c.PollInterval, PollIntervalDefault}, {&c.FailedRetention, FailedRetentionDefault},
		{&c.DeliveredRetention, DeliveredRetentionDefault}} {
		if *d.v <= 0 {
			*d.v = d.def
		}
	}
	if c.DeliveredRetention < DeliveredRetentionMin || c.DeliveredRetention > DeliveredRetentionMax {
		return fmt.Errorf("webhook: DeliveredRetention %s must be %s to %s", c.DeliveredRetention,
			DeliveredRetentionMin, DeliveredRetentionMax)
	}
	if c.Timeout > TimeoutMax {
		return fmt.Errorf("webhook: Timeout %s exceeds %s", c.Timeout, TimeoutMax)
	}
	if c.EndpointInflightMax == 0 {
		c.EndpointInflightMax = min(EndpointInflightDefault, c.Workers)
	}
	if c.EndpointInflightMax < 1 || c.EndpointInflightMax > c.Workers {
		return fmt.Errorf("webhook: EndpointInflightMax %d must be 1 to Workers (%d)", c.EndpointInflightMax, c.Workers)
	}
	return nil
}

// Stats are a Dispatcher's running totals and the last backlog count.
type Stats struct {
	Delivered, Retried, Failed, Dropped uint64
	Backlog                             surgepay.WebhookBacklog
}

// Dispatcher delivers the outbox. Safe for concurrent use; run one Run
// per process.
type Dispatcher struct {
	cfg     Config
	client  *http.Client
	claimer BoundedClaimer // nil if the store has no bounded claim
	eps     *endpoints

	delivered, retried, failed, dropped atomic.Uint64
	mu                                  sync.Mutex
	backlog                             surgepay.WebhookBacklog
}

// New returns a Dispatcher.
func New(cfg Config) (*Dispatcher, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	d := &Dispatcher{cfg: cfg, client: newClient(cfg), eps: newEndpoints(cfg.EndpointInflightMax, cfg.Logger)}
	if c, ok := cfg.Store.(BoundedClaimer); ok {
		d.claimer = c
	} else {
		cfg.Logger.Warn("webhooks: the store cannot bound the deliveries claimed per endpoint; " +
			"one slow endpoint may hold every worker")
	}
	return d, nil
}

// errAddressNotAllowed refuses a connection to a non-public address.
var errAddressNotAllowed = errors.New("address not allowed (not a public address)")

// newClient returns the HTTP client of deliveries: no proxy, no redirects
// (a 3xx is a failed attempt), bounded in time and header size, refusing
// non-public addresses unless allowed. The check runs on the address the
// dialer connects to, after DNS, so a name that resolves to an internal
// address is refused too.
func newClient(cfg Config) *http.Client {
	d := &net.Dialer{Timeout: cfg.Timeout, KeepAlive: 30 * time.Second}
	if !cfg.AllowPrivateNetworks {
		d.Control = func(network, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil || !publicAddr(ap.Addr()) {
				return errAddressNotAllowed
			}
			return nil
		}
	}
	t := &http.Transport{
		Proxy:                  nil,
		DialContext:            d.DialContext,
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    cfg.Timeout,
		ResponseHeaderTimeout:  cfg.Timeout,
		MaxIdleConns:           cfg.Workers,
		MaxIdleConnsPerHost:    max(4, cfg.EndpointInflightMax),
		IdleConnTimeout:        90 * time.Second,
		MaxResponseHeaderBytes: 16 << 10,
		DisableCompression:     true,
	}
	return &http.Client{Transport: t, Timeout: cfg.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// notPublic are ranges that IsGlobalUnicast and IsPrivate let through but
// that reach no public host: carrier-grade NAT (RFC 6598), benchmarking
// (RFC 2544), IETF protocol assignments, reserved class E, and the IPv6
// forms that carry an IPv4 address (NAT64 RFC 6052/8215, 6to4, Teredo,
// IPv4-compatible) or are deprecated site-local.
var notPublic = []netip.Prefix{
	netip.MustParsePrefix("100.64.0.0/10"), netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("192.0.0.0/24"), netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("64:ff9b::/96"), netip.MustParsePrefix("64:ff9b:1::/48"),
	netip.MustParsePrefix("2002::/16"), netip.MustParsePrefix("2001::/32"),
	netip.MustParsePrefix("::/96"), netip.MustParsePrefix("fec0::/10"),
}

func publicAddr(a netip.Addr) bool {
	a = a.Unmap()
	if !a.IsValid() || !a.IsGlobalUnicast() || a.IsPrivate() || (a.Is4() && a.As4()[0] == 0) {
		return false
	}
	for _, p := range notPublic {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

// Stats returns the running totals. Cheap; safe for concurrent use.
func (d *Dispatcher) Stats() Stats {
	d.mu.Lock()
	b := d.backlog
	d.mu.Unlock()
	return Stats{Delivered: d.delivered.Load(), Retried: d.retried.Load(), Failed: d.failed.Load(),
		Dropped: d.dropped.Load(), Backlog: b}
}

// lease is how long a claim holds its deliveries.
func (d *Dispatcher) lease() time.Duration { return d.cfg.Timeout + LeaseMargin }

// Run delivers until ctx ends: it claims as many due deliveries as it has
// idle workers (no more of one endpoint than its room), sends each on its
// own worker, and records the results in batches on another goroutine.
// An attempt that ends gives its endpoint room again, so Run claims again
// at once. When ctx ends it claims no more, lets the deliveries in flight
// finish (each bounded by Timeout) and records their results.
func (d *Dispatcher) Run(ctx context.Context) {
	results := make(chan *surgepay.WebhookResult, d.cfg.Workers)
	recorded := make(chan struct{})
	go func() { defer close(recorded); d.recordLoop(results) }()
	// ended receives one value per attempt that ends: at most Workers are
	// in flight, so a send never blocks.
	ended := make(chan struct{}, d.cfg.Workers)
	busy := 0 // workers in flight; only this goroutine counts
	var inflight sync.WaitGroup
	d.refreshBacklog(ctx)
	backlog, purge := time.NewTicker(BacklogInterval), time.NewTicker(PurgeInterval)
	defer backlog.Stop()
	defer purge.Stop()
	poll := time.NewTimer(0)
	defer poll.Stop()
	for ctx.Err() == nil {
		for len(ended) > 0 {
			<-ended
			busy--
		}
		n := min(d.cfg.Workers-busy, ClaimBatchMax)
		var ds []*surgepay.WebhookDelivery
		if n > 0 {
			var err error
			if ds, err = d.claim(ctx, n); err != nil && ctx.Err() == nil {
				d.cfg.Logger.Warn("webhooks: claim deliveries", "err", err.Error())
			}
		}
		for _, dl := range ds {
			busy++
			inflight.Go(func() {
				results <- d.attemptCounted(dl)
				ended <- struct{}{}
			})
		}
		if len(ds) > 0 {
			continue // perhaps more are due: a claim stops at endpoints' bounds
		}
		if n > 0 {
			poll.Reset(d.cfg.PollInterval)
		}
		select {
		case <-ctx.Done():
		case <-ended:
			busy--
		case <-d.cfg.Wake:
		case <-poll.C:
		case <-backlog.C:
			d.refreshBacklog(ctx)
		case <-purge.C:
			d.Purge(ctx)
		}
	}
	inflight.Wait()
	close(results)
	<-recorded
}

// claim claims up to n due deliveries, within their endpoints' room, and
// counts them in flight.
func (d *Dispatcher) claim(ctx context.Context, n int) ([]*surgepay.WebhookDelivery, error) {
	now := d.cfg.Now()
	var ds []*surgepay.WebhookDelivery
	var err error
	if d.claimer != nil {
		ds, err = d.claimer.ClaimWebhookDeliveriesBounded(ctx, now, now.Add(d.lease()), n, d.cfg.EndpointInflightMax,
			d.eps.room())
	} else {
		ds, err = d.cfg.Store.ClaimWebhookDeliveries(ctx, now, now.Add(d.lease()), n)
	}
	for _, dl := range ds {
		d.eps.started(dl)
	}
	return ds, err
}

// DeliverDue claims the deliveries due now (up to ClaimBatchMax, no more of
// one endpoint than its room), sends them on at most Workers goroutines,
// records the results and returns how many it attempted. Run does the
// same continuously; DeliverDue is one synchronous round, for tests and
// tools.
func (d *Dispatcher) DeliverDue(ctx context.Context) (int, error) {
	ds, err := d.claim(ctx, ClaimBatchMax)
	if err != nil {
		return 0, err
	}
	rs := make([]*surgepay.WebhookResult, len(ds))
	sem := make(chan struct{}, d.cfg.Workers)
	var wg sync.WaitGroup
	for i, dl := range ds {
		sem <- struct{}{}
		wg.Go(func() {
			rs[i] = d.attemptCounted(dl)
			<-sem
		})
	}
	wg.Wait()
	if len(rs) > 0 && !d.record(rs) {
		return len(rs), errors.New("webhook: results not recorded")
	}
	return len(rs), nil
}

// attemptCounted attempts a claimed delivery and counts it out of flight.
func (d *Dispatcher) attemptCounted(dl *surgepay.WebhookDelivery) *surgepay.WebhookResult {
	r, sent := d.attempt(dl)
	d.eps.ended(r, sent)
	return r
}

// attempt sends one delivery and returns its result, and whether it sent
// a request.
func (d *Dispatcher) attempt(dl *surgepay.WebhookDelivery) (*surgepay.WebhookResult, bool) {
	r := &surgepay.WebhookResult{EventID: dl.EventID, EndpointID: dl.EndpointID, MerchantID: dl.MerchantID,
		Attempt: dl.Attempt}
	switch {
	case dl.URL == "":
		r.Outcome, r.At = surgepay.WebhookDropped, d.cfg.Now()
		return r, false
	case dl.Attempt > d.cfg.AttemptsMax:
		// Its last attempt's dispatcher died before recording it.
		r.Outcome, r.Error, r.At = surgepay.WebhookFailed, "attempts exhausted", d.cfg.Now()
		return r, false
	}
	r.StatusCode, r.Error = d.send(dl)
	r.At, r.Sent = d.cfg.Now(), true
	switch {
	case r.Error == "":
		r.Outcome = surgepay.WebhookDelivered
	case dl.Attempt >= d.cfg.AttemptsMax:
		r.Outcome = surgepay.WebhookFailed
	default:
		r.Outcome, r.NextAttempt = surgepay.WebhookRetry, r.At.Add(d.backoff(dl.Attempt))
	}
	return r, true
}

// backoff returns the wait after failed attempt n (1 for the first):
// BackoffBase doubled n-1 times, at most BackoffMax, of which a random
// half to all.
func (d *Dispatcher) backoff(n int) time.Duration {
	w := d.cfg.BackoffBase
	for i := 1; i < n && w < d.cfg.BackoffMax; i++ {
		w *= 2
	}
	w = min(w, d.cfg.BackoffMax)
	return w/2 + rand.N(w/2+1) //nolint:gosec // G404: jitter spreads retries; nothing depends on it being unpredictable
}

// send POSTs the delivery and returns the HTTP status and, if the attempt
// failed, why. The reason never holds the URL (it may carry a token), the
// secret or the answer's body.
func (d *Dispatcher) send(dl *surgepay.WebhookDelivery) (int, string) {
	aad := surgepay.WebhookSecretAAD(dl.MerchantID, dl.EndpointID)
	secret, err := d.cfg.Vault.Decrypt(dl.SealedSecret, aad)
	if err != nil {
		d.cfg.Logger.Error("webhooks: cannot open an endpoint's secret (is the vault keyring complete?)",
			"endpoint", dl.EndpointID, "merchant", dl.MerchantID)
		return 0, "the endpoint's secret cannot be opened"
	}
	now := d.cfg.Now()
	secrets := [][]byte{secret}
	if len(dl.PreviousSealedSecret) > 0 && now.Before(dl.PreviousSecretExpires) {
		// The overlap of a roll: a signature under each secret, so that
		// the receiver verifies with either while it switches.
		if prev, err := d.cfg.Vault.Decrypt(dl.PreviousSealedSecret, aad); err == nil {
			secrets = append(secrets, prev)
		} else {
			d.cfg.Logger.Error("webhooks: cannot open an endpoint's previous secret; signed with the current one only",
				"endpoint", dl.EndpointID, "merchant", dl.MerchantID)
		}
	}
	req, err := http.NewRequest(http.MethodPost, dl.URL, bytes.NewReader(dl.Payload))
	if err != nil {
		return 0, "invalid URL"
	}
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "surgepay-webhooks/1")
	h.Set(HeaderEventID, dl.EventID)
	h.Set(HeaderEventType, dl.Type)
	h.Set(HeaderAttempt, strconv.Itoa(dl.Attempt))
	h.Set(HeaderSignature, Signature(now, dl.Payload, secrets...))
	res, err := d.client.Do(req)
	if err != nil {
		return 0, reason(err, d.cfg.Timeout)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, ResponseBodyBytesMax))
	_ = res.Body.Close() // drained for reuse; the status is the attempt's outcome
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return res.StatusCode, "HTTP " + strconv.Itoa(res.StatusCode)
	}
	return res.StatusCode, ""
}

// reason names a failed request without its URL.
func reason(err error, timeout time.Duration) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var dns *net.DNSError
	var op *net.OpError
	var to interface{ Timeout() bool }
	switch {
	case errors.Is(err, errAddressNotAllowed):
		return errAddressNotAllowed.Error()
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded),
		errors.As(err, &to) && to.Timeout():
		return "timeout after " + timeout.String()
	case errors.As(err, &dns):
		return truncate("dns: " + dns.Err)
	case errors.As(err, &op) && op.Err != nil:
		return truncate(op.Op + ": " + op.Err.Error())
	}
	return truncate(err.Error())
}

// truncate bounds s to errorBytesMax bytes of valid UTF-8, card-number-like
// runs of digits redacted: part of s may come from the receiver (a
// malformed status line), the error is stored and shown to the merchant
// and the operator, and PostgreSQL refuses invalid UTF-8 in text, which
// would fail the whole batch of results.
func truncate(s string) string {
	s = telemetry.Redact(s)
	if len(s) > errorBytesMax {
		n := errorBytesMax
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n]
	}
	return strings.ToValidUTF8(s, "")
}

// recordLoop records results as they come, in batches of what is
// waiting, until results is closed.
func (d *Dispatcher) recordLoop(results <-chan *surgepay.WebhookResult) {
	buf := make([]*surgepay.WebhookResult, 0, ResultBatchMax)
	for r := range results {
		buf = append(buf[:0], r)
	fill:
		for len(buf) < ResultBatchMax {
			select {
			case r, ok := <-results:
				if !ok {
					break fill
				}
				buf = append(buf, r)
			default:
				break fill
			}
		}
		d.record(buf)
	}
}

// record stores results, retrying a failing store a few times, and counts
// and logs them once stored. If they cannot be stored, their deliveries
// are claimed again when their lease ends (and may be sent twice).
func (d *Dispatcher) record(rs []*surgepay.WebhookResult) bool {
	var err error
	for try := range recordTriesMax {
		if try > 0 {
			time.Sleep(100 * time.Millisecond << try)
		}
		ctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
		err = d.cfg.Store.RecordWebhookResults(ctx, rs)
		cancel()
		if err == nil {
			break
		}
	}
	if err != nil {
		d.cfg.Logger.Error("webhooks: results not recorded; their deliveries will be attempted again after their lease",
			"results", len(rs), "err", err.Error())
		return false
	}
	for _, r := range rs {
		d.count(r)
	}
	return true
}

func (d *Dispatcher) count(r *surgepay.WebhookResult) {
	log := d.cfg.Logger
	switch r.Outcome {
	case surgepay.WebhookDelivered:
		d.delivered.Add(1)
		log.Debug("webhook delivered", "event", r.EventID, "endpoint", r.EndpointID, "attempt", r.Attempt,
			"status", r.StatusCode)
	case surgepay.WebhookRetry:
		d.retried.Add(1)
		log.Info("webhook attempt failed; will retry", "event", r.EventID, "endpoint", r.EndpointID,
			"attempt", r.Attempt, "error", r.Error, "next_attempt", r.NextAttempt.Format(time.RFC3339))
	case surgepay.WebhookFailed:
		d.failed.Add(1)
		log.Warn("webhook failed: no attempts left; kept as failed", "event", r.EventID, "endpoint", r.EndpointID,
			"attempts", r.Attempt, "error", r.Error)
	case surgepay.WebhookDropped:
		d.dropped.Add(1)
		log.Info("webhook dropped: its endpoint was deleted", "event", r.EventID, "endpoint", r.EndpointID)
	}
}

// refreshBacklog counts the outbox for Stats.
func (d *Dispatcher) refreshBacklog(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, BacklogInterval)
	defer cancel()
	b, err := d.cfg.Store.WebhookBacklog(ctx)
	if err != nil {
		if ctx.Err() == nil {
			d.cfg.Logger.Warn("webhooks: count the backlog", "err", err.Error())
		}
		return
	}
	d.mu.Lock()
	d.backlog = b
	d.mu.Unlock()
}

// Purge deletes failed deliveries older than FailedRetention and
// succeeded ones older than DeliveredRetention, in batches of
// PurgeBatchMax until one is not full, at most PurgeBatchesMax of each
// (the rest waits for the next round). Run calls it every PurgeInterval.
func (d *Dispatcher) Purge(ctx context.Context) {
	now := d.cfg.Now()
	for _, p := range []struct {
		status string
		del    func(context.Context, time.Time, int) (int, error)
		before time.Time
	}{
		{surgepay.WebhookStatusFailed, d.cfg.Store.DeleteFailedWebhooksBefore, now.Add(-d.cfg.FailedRetention)},
		{surgepay.WebhookStatusSucceeded, d.cfg.Store.DeleteSucceededWebhooksBefore, now.Add(-d.cfg.DeliveredRetention)},
	} {
		total := 0
		for range PurgeBatchesMax {
			n, err := p.del(ctx, p.before, PurgeBatchMax)
			if err != nil {
				if ctx.Err() == nil {
					d.cfg.Logger.Warn("webhooks: purge deliveries", "status", p.status, "err", err.Error())
				}
				break
			}
			if total += n; n < PurgeBatchMax {
				break
			}
		}
		if total > 0 {
			d.cfg.Logger.Info("webhooks: purged deliveries past their retention", "status", p.status, "count", total)
		}
	}
}
