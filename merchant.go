package surgepay

import "time"

// Merchant owns every other object. Settings are read on every request and
// so are cached by the engine.
type Merchant struct {
	ID      string
	Name    string
	Created time.Time
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
	}
	return nil
}
