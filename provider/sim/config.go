package sim

import (
	"github.com/surgepay/surgepay"

	"errors"
	"fmt"
	"math"
	"net/url"
	"time"
)

// RecordsMaxDefault is the default Config.RecordsMax, sized for the
// simulator inside `surgepay serve`, which must stay within 256 MB during
// an event: a record takes about 130 bytes whatever its key's length
// (TestRecordBytes), so about 25 MB at this bound.
// At 5,000 sales/s it keeps the last 40 s of operations, 8 reconcile
// intervals of serve (docs/simulator.md, Memory).
const RecordsMaxDefault = 200_000

// MainRecordsMaxDefault is the default --records-max of `surgepay
// simulator` (Main): about 650 MB of its own process. It serves load tests
// in which `surgepay settle` captures authorizations long after serve made
// them (settle lags behind the API when capped with --max-rate), so it
// keeps about 8 minutes at 5,000 sales and their captures a second.
const MainRecordsMaxDefault = 5_000_000

// RecordsMaxMin is the smallest records bound an operator may set
// (serve's provider.records_max, --records-max): fewer would keep under a
// second of operations at a modest rate, less than a call and its
// reconciliation take. Config itself accepts any bound, for tests.
const RecordsMaxMin = 1_000

// RecordsMaxLimit is the largest Config.RecordsMax accepted.
const RecordsMaxLimit = 100_000_000

// Bounds of Config.Retention. The default is how long Stripe keeps an
// idempotency key; the minimum keeps a record longer than any call and
// its reconciliation take, the maximum a month.
const (
	RetentionDefault = 24 * time.Hour
	RetentionMin     = time.Minute
	RetentionMax     = 720 * time.Hour
)

// Bounds of Config.ChallengeTTL, how long a cardholder has to pass a 3-D
// Secure challenge. The default is a real issuer's order of magnitude (an
// ACS session lasts minutes); the minimum lets a browser test watch one
// expire; the maximum keeps an abandoned one from holding its place for
// days (see ChallengesMax).
const (
	ChallengeTTLDefault = 10 * time.Minute
	ChallengeTTLMin     = 5 * time.Second
	ChallengeTTLMax     = 24 * time.Hour
)

// PagesURLBytesMax bounds Config.PagesURL: every challenge keeps its
// action URL, which starts with it.
const PagesURLBytesMax = 512

// Config is the simulator's behaviour. All fields except Seed and
// RecordsMax can change at run time with (*Provider).SetConfig or
// PUT /v1/config. Its JSON form is what /v1/config serves.
type Config struct {
	// Latency is how long every call waits before the network answers.
	// Default: fixed 0.
	Latency Latency `json:"latency"`
	// TimeoutLatency is how long a call that times out (amount 9101 or
	// TimeoutRate) waits before it returns NotPerformed. Default: fixed 0;
	// set e.g. fixed:30s to mimic a real gateway's timeout.
	TimeoutLatency Latency `json:"timeout_latency"`

	// DeclineRate, TimeoutRate, UnknownRate and RateLimitRate are the
	// probabilities, each in [0, 1] and together at most 1, that a call
	// meets that fault at random. Timeouts and rate limits happen before
	// the network, to any Authorize, Capture, Void or Refund call, replays
	// included. A random decline (surgepay.DeclineGeneric) replaces an
	// approval of an operation performed for the first time, and records
	// no effect. An unknown outcome befalls an operation performed for the
	// first time: it is performed and stored, but the answer is lost; a
	// replay or Lookup returns it. Lookup is never faulted at random.
	// Default: 0.
	DeclineRate   float64 `json:"decline_rate"`
	TimeoutRate   float64 `json:"timeout_rate"`
	UnknownRate   float64 `json:"unknown_rate"`
	RateLimitRate float64 `json:"rate_limit_rate"`

	// Outage makes every call, Lookup included, return NotPerformed with
	// ErrOutage at once, without latency.
	Outage bool `json:"outage"`

	// UnknownDropsConnection makes the HTTP handler answer an unknown
	// outcome by closing the connection without a response, instead of
	// status 504. Both leave the client with Unknown.
	UnknownDropsConnection bool `json:"unknown_drops_connection"`

	// Seed seeds the random faults and latencies: with the same seed and
	// the same calls made one at a time, a run repeats exactly. 0 picks a
	// random seed at New; Config then reports the seed in use. Fixed at New:
	// SetConfig rejects a different non-zero seed.
	Seed uint64 `json:"seed"`

	// RecordsMax bounds the stored operations. Beyond it the oldest are
	// evicted first in, first out (per shard of the key space), and counted
	// in Totals.RecordsEvicted. An evicted key is forgotten: a replay of it
	// performs the operation again, and Lookup no longer finds it. 0 means
	// RecordsMaxDefault. Fixed at New: SetConfig rejects a different
	// non-zero value.
	RecordsMax int `json:"records_max"`

	// Retention is how long an operation is stored: older ones expire,
	// to the second, and are forgotten like evicted ones (counted in
	// Totals.RecordsExpired). Whichever of RecordsMax and Retention comes
	// first applies. 0 means RetentionDefault; otherwise RetentionMin to
	// RetentionMax. Fixed at New like RecordsMax.
	Retention Duration `json:"retention"`

	// PagesURL is where shoppers' browsers reach the simulator's pages
	// (Pages: the 3-D Secure challenge), e.g. "http://127.0.0.1:8181" for
	// `surgepay simulator`, which serves them on its own listener. A
	// challenge's ActionURL is PagesURL + surgepay.PagesPrefix + "3ds/" +
	// its ID. Empty: the scheme and host of the authorization's ReturnURL,
	// right for the simulator inside `surgepay serve`, whose pages are
	// served on the API listener the shopper returns to.
	PagesURL string `json:"pages_url,omitempty"`

	// ChallengeTTL is how long a 3-D Secure challenge waits for the
	// cardholder: one not completed in time is abandoned, declined
	// surgepay.DeclineAuthenticationFailed. 0 means ChallengeTTLDefault
	// (SetConfig: keeps the current value); otherwise ChallengeTTLMin to
	// ChallengeTTLMax.
	ChallengeTTL Duration `json:"challenge_ttl"`
}

// Duration is a time.Duration that JSON (/v1/config) and flags write as
// text, "24h0m0s", rather than as nanoseconds.
type Duration time.Duration

func (d Duration) String() string { return time.Duration(d).String() }

// MarshalText writes d as time.Duration.String does.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText reads a duration in Go's syntax: "24h", "90m".
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("%q is not a duration like 24h or 90m", b)
	}
	*d = Duration(v)
	return nil
}

// DefaultConfig returns a simulator that answers at once, never faults at
// random, and keeps up to RecordsMaxDefault operations for RetentionDefault.
func DefaultConfig() Config {
	return Config{
		Latency:        Latency{Kind: LatencyFixed},
		TimeoutLatency: Latency{Kind: LatencyFixed},
		RecordsMax:     RecordsMaxDefault,
		Retention:      Duration(RetentionDefault),
		ChallengeTTL:   Duration(ChallengeTTLDefault),
	}
}

// Validate checks the latencies, that each rate is in [0, 1] and that the
// rates sum to at most 1, that RecordsMax is in [0, RecordsMaxLimit], and
// that Retention is 0 or in [RetentionMin, RetentionMax], that PagesURL is
// empty or an http(s) origin with an optional path, and that ChallengeTTL
// is 0 or in [ChallengeTTLMin, ChallengeTTLMax].
func (c *Config) Validate() error {
	if err := c.Latency.Validate(); err != nil {
		return fmt.Errorf("latency: %w", err)
	}
	if err := c.TimeoutLatency.Validate(); err != nil {
		return fmt.Errorf("timeout_latency: %w", err)
	}
	rates := []struct {
		name string
		v    float64
	}{
		{"decline_rate", c.DeclineRate}, {"timeout_rate", c.TimeoutRate},
		{"unknown_rate", c.UnknownRate}, {"rate_limit_rate", c.RateLimitRate},
	}
	sum := 0.0
	for _, r := range rates {
		if math.IsNaN(r.v) || r.v < 0 || r.v > 1 {
			return fmt.Errorf("%s %v must be between 0 and 1", r.name, r.v)
		}
		sum += r.v
	}
	if sum > 1+1e-9 {
		return fmt.Errorf("decline_rate + timeout_rate + unknown_rate + rate_limit_rate = %v must be at most 1", sum)
	}
	if c.RecordsMax < 0 || c.RecordsMax > RecordsMaxLimit {
		return fmt.Errorf("records_max %d must be between 0 (default %d) and %d", c.RecordsMax, RecordsMaxDefault, RecordsMaxLimit)
	}
	if r := time.Duration(c.Retention); r != 0 && (r < RetentionMin || r > RetentionMax) {
		return fmt.Errorf("retention %s must be between %s and %s (0: %s)", r, RetentionMin, RetentionMax, RetentionDefault)
	}
	if err := validatePagesURL(c.PagesURL); err != nil {
		return err
	}
	if d := time.Duration(c.ChallengeTTL); d != 0 && (d < ChallengeTTLMin || d > ChallengeTTLMax) {
		return fmt.Errorf("challenge_ttl %s must be between %s and %s (0: %s)", d, ChallengeTTLMin, ChallengeTTLMax, ChallengeTTLDefault)
	}
	return nil
}

// validatePagesURL checks that s is empty or an absolute http(s) URL with
// a host whose characters may stand in a Content-Security-Policy, and no
// user, query or fragment: challenge URLs are built by appending to it.
func validatePagesURL(s string) error {
	if s == "" {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil || len(s) > PagesURLBytesMax || (u.Scheme != "http" && u.Scheme != "https") ||
		!originHostOK(u.Host) || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return fmt.Errorf("pages_url %q must be an http(s) URL like http://127.0.0.1:8181, at most %d bytes, without query", s, PagesURLBytesMax)
	}
	return nil
}

// Errors carried by *surgepay.ProviderError. Test them with errors.Is; the
// HTTP client maps the server's error codes back to them.
var (
	// ErrKeyReused: the idempotency key was used before with different
	// parameters (operation, amount, currency, authorization reference,
	// card last4 or capture flag). NotPerformed. It is the engine's
	// surgepay.ErrKeyReused, so the engine answers 422 idempotency_key_reused.
	ErrKeyReused = surgepay.ErrKeyReused
	// ErrNoSuchOperation: Lookup found nothing under the key. NotPerformed.
	ErrNoSuchOperation = errors.New("no operation under this idempotency key")
	// ErrRateLimited: the network refused the call. NotPerformed.
	ErrRateLimited = errors.New("rate limited by the network")
	// ErrTimeout: the call timed out before it reached the network. NotPerformed.
	ErrTimeout = errors.New("timed out before reaching the network")
	// ErrOutage: the network is down. NotPerformed.
	ErrOutage = errors.New("network outage")
	// ErrAnswerLost: the operation was performed but its answer was lost. Unknown.
	ErrAnswerLost = errors.New("operation performed but the answer was lost")
	// ErrKeyInvalid: the idempotency key is empty or longer than
	// surgepay.IdempotencyKeyBytesMax bytes. NotPerformed.
	ErrKeyInvalid = errors.New("idempotency key missing or too long")
	// ErrRequestInvalid: the HTTP request could not be read. NotPerformed.
	ErrRequestInvalid = errors.New("invalid request")
)

// Decline codes the simulator adds to the surgepay.DeclineXxx ones.
const (
	// DeclineInvalidRequest: the request breaks a money rule (capture more
	// than authorized, capture twice, void a captured authorization, refund
	// more than captured, unknown authorization, currency mismatch, ...).
	DeclineInvalidRequest = "invalid_request"
	// DeclineIncorrectNumber: the card number is not digits or fails Luhn.
	DeclineIncorrectNumber = "incorrect_number"
)

// errorCodes names the errors on the wire, both ways.
var errorCodes = []struct {
	code string
	err  error
}{
	{"key_reused", ErrKeyReused},
	{"no_such_operation", ErrNoSuchOperation},
	{"rate_limited", ErrRateLimited},
	{"timeout", ErrTimeout},
	{"outage", ErrOutage},
	{"answer_lost", ErrAnswerLost},
	{"key_invalid", ErrKeyInvalid},
	{"invalid_request", ErrRequestInvalid},
}

func errorCode(err error) string {
	for _, c := range errorCodes {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return "other"
}

func codeError(code string) error {
	for _, c := range errorCodes {
		if c.code == code {
			return c.err
		}
	}
	return nil
}
