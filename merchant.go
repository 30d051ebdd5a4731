package surgepay

import (
	"math"
	"time"
)

// Merchant owns every other object. Settings are read on every request and
// so are cached by the engine.
type Merchant struct {
	ID      string
	Name    string
	Created time.Time
	// Disabled merchants' API keys are refused (403 merchant_disabled);
	// their stored payments, settlement and webhooks are untouched (see
	// docs/merchants.md).
	Disabled bool
}

// MerchantStatus sets the Disabled flag of a merchant (Write.MerchantStatus).
type MerchantStatus struct {
	MerchantID string
	Disabled   bool
}

// APIKey authenticates a merchant. Only a keyed hash of the secret is
// stored (HMAC-SHA256 under the server's API-key secret): checking a key is
// one hash and one map or index lookup, microseconds, not a slow password
// hash per request.
type APIKey struct {
	ID         string // public identifier, e.g. "key_...", recorded in the audit trail.
	MerchantID string
	Hash       []byte // HMAC-SHA256 of the secret.
	Prefix     string // first characters of the secret, to help people tell keys apart.
	Created    time.Time
	Revoked    bool
	// Scopes restrict what the key may do (see Scope); empty: everything,
	// the access every key made before scopes existed keeps.
	Scopes []string
	// Expires is when the key stops working; zero: never. A roll sets the
	// old key's Expires to the end of its grace period.
	Expires time.Time
	// LastUsed is when the key last authenticated a request, as of the
	// last flush of the engine's in-memory record (not per request); zero:
	// never.
	LastUsed time.Time
	// MerchantDisabled is the Disabled flag of the key's merchant, read
	// with the key (stores join it; it is not stored with the key), so
	// that one lookup tells whether a request may go on.
	MerchantDisabled bool
}

// Expired reports whether the key has an expiry at or before now.
func (k *APIKey) Expired(now time.Time) bool {
	return !k.Expires.IsZero() && !now.Before(k.Expires)
}

// APIKeyExpiry brings an API key's expiry forward to Expires, or keeps it
// if it is already earlier (Write.APIKeyExpire).
type APIKeyExpiry struct {
	ID      string
	Expires time.Time
}

// APIKeyUse records that a key was last used at At (Write.APIKeysUsed);
// a store keeps the later of the stored and the given time.
type APIKeyUse struct {
	ID string
	At time.Time
}

// MerchantSettings are the per-merchant switches of the payment pipeline.
// They change at run time (the config file is reloaded on SIGHUP or when
// it changes) without a restart.
type MerchantSettings struct {
	// Processing is PathStandard (default: everything synchronous) or
	// PathStreamlined (sales authorize now; the capture is sealed, staged
	// and settled in batches by `surgepay settle`).
	Processing string `toml:"processing" json:"processing"`
	// Audit is "detailed" (default: an audit row per transaction, in the
	// request) or "minimal" (streamlined sales write no audit row at
	// authorization: the payment's transactions and settlement's rows
	// remain; this is what keeps a streamlined sale at one SQL statement).
	Audit string `toml:"audit" json:"audit"`
	// Tax is "inline" (default: computed from the static table in the
	// request) or "off" (a payment asking for tax is refused with 400).
	Tax string `toml:"tax" json:"tax"`
	// Webhooks is "on" (default: a payment change that writes audit events
	// queues a webhook to each of the merchant's endpoints, in the same
	// transaction) or "off" (nothing is queued; the audit events stay).
	Webhooks string `toml:"webhooks" json:"webhooks"`
	// Analytics is "on" (default: each payment change adds to the
	// merchant's daily counters in its own transaction; the group-commit
	// writer applies a batch's counters with one statement) or "off" (the
	// counters do not move; the streamlined sale is then one statement).
	// See docs/analytics.md.
	Analytics string `toml:"analytics" json:"analytics"`
	// RateLimit is the merchant's sustained request rate, in requests per
	// second: a token bucket refilled at this rate admits each
	// authenticated API request, and a request that finds it empty is
	// refused with 429 and Retry-After, before it does anything. 0
	// (default): unlimited. It may be fractional (0.5: one request every
	// two seconds), from MerchantRateLimitMin to MerchantRateLimitMax. The
	// limit holds across the nodes that share a Redis ([rate_limits]),
	// else per node: N nodes admit N times the rate. See
	// docs/rate-limits.md.
	RateLimit float64 `toml:"rate_limit" json:"rate_limit"`
	// RateBurst is how many requests the bucket holds: how many may arrive
	// at once after a quiet spell. 0 (default): the rate rounded up, at
	// least 1 (see Burst). At most MerchantRateBurstMax; ignored while
	// RateLimit is 0.
	RateBurst int `toml:"rate_burst" json:"rate_burst"`
	// InflightMax is the merchant's share of a node's in-flight requests
	// (its bodies being read included): beyond it its requests get 429
	// merchant_concurrency_limit. 0 (default): the node's
	// merchant_inflight_max. At most MerchantInflightMax; a node never
	// gives more than its inflight_max.
	InflightMax int `toml:"inflight_max" json:"inflight_max,omitempty"`
	// Processors is the merchant's processors in order of preference,
	// named as in the configuration's [processors.NAME] sections;
	// "default" is the [provider] section. An authorization goes to the
	// first that can take it and fails over to the next only when the
	// first provably did nothing (docs/processors.md). Empty (default):
	// the default processor alone.
	Processors []string `toml:"processors" json:"processors,omitempty"`
	// Routes, checked in order, send the payments of one currency and/or
	// card brand to their own processors; a payment no route matches uses
	// Processors.
	Routes []ProcessorRoute `toml:"routes" json:"routes,omitempty"`
	// CheckoutOrigins are the web origins (scheme://host[:port]) of the
	// merchant's pages that may embed the card frame and call the
	// checkout API with a publishable key (docs/checkout.md). Empty
	// (default): none, so browser checkout is off.
	CheckoutOrigins []string `toml:"checkout_origins" json:"checkout_origins,omitempty"`
	// CheckoutClientRate is the requests per second one client address
	// may make with one of the merchant's publishable keys (bursts of
	// four times as many, at least CheckoutClientBurstMin). 0 (default):
	// CheckoutClientRateDefault. Raise it behind a proxy that hides the
	// shoppers' addresses, or for a load test from one machine.
	CheckoutClientRate float64 `toml:"checkout_client_rate" json:"checkout_client_rate,omitempty"`
}

// ProcessorRoute sends one currency's and/or card brand's payments to
// Processors, in order. An empty Currency or Brand matches any.
type ProcessorRoute struct {
	Currency   string   `toml:"currency" json:"currency,omitempty"`
	Brand      string   `toml:"brand" json:"brand,omitempty"`
	Processors []string `toml:"processors" json:"processors"`
}

// Bounds of the per-merchant request rate limit.
const (
	// MerchantRateLimitMin is the lowest positive rate_limit (requests per
	// second): one request per 100 s, which bounds Retry-After to 100 s.
	MerchantRateLimitMin = 0.01
	// MerchantRateLimitMax is the highest rate_limit: far above what one
	// node serves, so it never binds by accident.
	MerchantRateLimitMax = 1_000_000
	// MerchantRateBurstMax is the highest rate_burst.
	MerchantRateBurstMax = 1_000_000
	// MerchantInflightMax is the highest inflight_max of a merchant (the
	// highest inflight_max of a node).
	MerchantInflightMax = 1_000_000
)

// Burst returns the capacity of the merchant's token bucket: RateBurst,
// or when it is 0 the rate rounded up, at least 1.
func (s *MerchantSettings) Burst() int {
	if s.RateBurst > 0 {
		return s.RateBurst
	}
	return max(1, int(math.Ceil(s.RateLimit)))
}

// DefaultMerchantSettings is the standard path with every step inline.
func DefaultMerchantSettings() MerchantSettings {
	return MerchantSettings{Processing: PathStandard, Audit: "detailed", Tax: "inline", Webhooks: "on", Analytics: "on"}
}

// Validate checks the settings; field names the config section.
func (s *MerchantSettings) Validate(field string) error {
	switch {
	case s.Processing != PathStandard && s.Processing != PathStreamlined:
		return Invalid(field+".processing", "invalid_value", "%s.processing %q must be standard or streamlined", field, s.Processing)
	case s.Audit != "detailed" && s.Audit != "minimal":
		return Invalid(field+".audit", "invalid_value", "%s.audit %q must be detailed or minimal", field, s.Audit)
	case s.Tax != "inline" && s.Tax != "off":
		return Invalid(field+".tax", "invalid_value", "%s.tax %q must be inline or off", field, s.Tax)
	case s.Webhooks != "on" && s.Webhooks != "off":
		return Invalid(field+".webhooks", "invalid_value", "%s.webhooks %q must be on or off", field, s.Webhooks)
	case s.Analytics != "on" && s.Analytics != "off":
		return Invalid(field+".analytics", "invalid_value", "%s.analytics %q must be on or off", field, s.Analytics)
	case s.RateLimit != 0 && !(s.RateLimit >= MerchantRateLimitMin && s.RateLimit <= MerchantRateLimitMax):
		// Written so that NaN fails too.
		return Invalid(field+".rate_limit", "invalid_value", "%s.rate_limit %v must be 0 (unlimited) or %v to %d requests per second",
			field, s.RateLimit, MerchantRateLimitMin, MerchantRateLimitMax)
	case s.RateBurst < 0 || s.RateBurst > MerchantRateBurstMax:
		return Invalid(field+".rate_burst", "invalid_value", "%s.rate_burst %d must be 0 (the rate, rounded up) to %d",
			field, s.RateBurst, MerchantRateBurstMax)
	case s.InflightMax < 0 || s.InflightMax > MerchantInflightMax:
		return Invalid(field+".inflight_max", "invalid_value", "%s.inflight_max %d must be 0 (the node's merchant_inflight_max) to %d",
			field, s.InflightMax, MerchantInflightMax)
	case s.CheckoutClientRate != 0 && !(s.CheckoutClientRate >= MerchantRateLimitMin && s.CheckoutClientRate <= MerchantRateLimitMax):
		return Invalid(field+".checkout_client_rate", "invalid_value", "%s.checkout_client_rate %v must be 0 (the default, %v) or %v to %d requests per second",
			field, s.CheckoutClientRate, CheckoutClientRateDefault, MerchantRateLimitMin, MerchantRateLimitMax)
	case len(s.CheckoutOrigins) > CheckoutOriginsMax:
		return Invalid(field+".checkout_origins", "invalid_value", "%s.checkout_origins has %d origins, at most %d",
			field, len(s.CheckoutOrigins), CheckoutOriginsMax)
	}
	for i, o := range s.CheckoutOrigins {
		if !ValidOrigin(o) {
			return Invalid(field+".checkout_origins", "invalid_value",
				"%s.checkout_origins[%d] must be an origin as browsers send it: http or https, a lower-case host, a port only if not the scheme's default, nothing after (like https://shop.example)",
				field, i)
		}
	}
	return nil
}
