package config

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/cache"
	"github.com/surgepay/surgepay/provider/route"
	"github.com/surgepay/surgepay/provider/stripe"
)

// ProcessorConfig is one [processors.NAME] section: a processor account.
type ProcessorConfig struct {
	// Kind is "stripe" (the only real processor so far).
	Kind string `toml:"kind"`
	// SecretKey is the account's secret or restricted key. Write it
	// sealed under the card vault's keyring ("sealed:…", from `surgepay
	// processors seal`), or give it by env
	// SURGEPAY_PROCESSOR_<NAME>_SECRET_KEY; a plain key in the file is
	// accepted with a warning. Never printed: /config shows [redacted].
	SecretKey cache.Secret `toml:"secret_key"`
	// WebhookSecret is the signing secret (whsec_…) of the processor's
	// webhook endpoint pointing at POST /v1/processor_webhooks/NAME; sealed
	// like secret_key, or env SURGEPAY_PROCESSOR_<NAME>_WEBHOOK_SECRET.
	// "" (default): the processor's webhooks are refused.
	WebhookSecret cache.Secret `toml:"webhook_secret"`
	// BaseURL is the processor's API address; "" is Stripe's own. Point it
	// at a local double (stripe-mock, localstripe) for tests and staging.
	BaseURL string `toml:"base_url"`
	// Timeout bounds one call. Default 30s.
	Timeout Duration `toml:"timeout"`
	// ConnsMax bounds pooled connections, so concurrent calls. Default 64.
	ConnsMax int `toml:"conns_max"`
	// RetriesMax is how many times a call without an answer is sent again
	// under the same idempotency key. Default 2; -1 none.
	RetriesMax int `toml:"retries_max"`
	// SearchLag: an authorization not found by search this long after it
	// was sent is taken as never made. Default 15m.
	SearchLag Duration `toml:"search_lag"`
	// CallsPerSecond is this node's call budget at the account (Stripe:
	// 100/s per account in live mode, 25/s in test mode; divide by the
	// nodes sharing the account, and leave settle its share). 0 (default):
	// unlimited. Burst: calls at once, default the rate rounded up.
	CallsPerSecond float64 `toml:"calls_per_second"`
	Burst          int     `toml:"burst"`
	// InflightMax bounds concurrent calls; 0 (default): ConnsMax.
	InflightMax int `toml:"inflight_max"`
	// BudgetWait is how long a call may wait for its budget before it is
	// refused (and the payment goes to the next processor, or gets 503
	// with Retry-After). Default 50ms.
	BudgetWait Duration `toml:"budget_wait"`
	// SettleCallsPerSecond is `surgepay settle`'s own budget at the
	// account, beside the API nodes' calls_per_second: set the two so
	// that they add up to the account's limit, and settle spends only
	// what the API leaves. 0 (default): calls_per_second.
	SettleCallsPerSecond float64 `toml:"settle_calls_per_second"`
}

// ProcessorName is what a [processors.NAME] may be called.
var ProcessorName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)

// SealedPrefix marks a secret sealed under the vault keyring.
const SealedPrefix = "sealed:"

// validateProcessors checks the processors and every merchant's routes.
func (c *Config) validateProcessors(bad func(field, format string, args ...any)) {
	for name, p := range c.Processors {
		f := "processors." + name
		if !ProcessorName.MatchString(name) || name == route.DefaultName {
			bad(f, "a processor's name is 1-32 of a-z, 0-9 and _, starting with a letter, and not %q", route.DefaultName)
		}
		if p.Kind != "stripe" {
			bad(f+".kind", "%q must be \"stripe\"", p.Kind)
		}
		if p.SecretKey == "" {
			bad(f+".secret_key", "is required (or env SURGEPAY_PROCESSOR_%s_SECRET_KEY)", strings.ToUpper(name))
		}
		if p.BaseURL != "" && !strings.HasPrefix(p.BaseURL, "http://") && !strings.HasPrefix(p.BaseURL, "https://") {
			bad(f+".base_url", "must be an http(s) URL")
		}
		if p.CallsPerSecond < 0 || p.SettleCallsPerSecond < 0 || p.Burst < 0 || p.InflightMax < 0 || p.ConnsMax < 0 || p.RetriesMax < -1 ||
			p.RetriesMax > stripe.RetriesMaxMax {
			bad(f, "calls_per_second, burst, inflight_max and conns_max must not be negative; retries_max is -1 to %d", stripe.RetriesMaxMax)
		}
	}
	known := func(n string) bool { _, ok := c.Processors[n]; return ok || n == route.DefaultName }
	check := func(field string, names []string) {
		if len(names) > route.ProcessorsPerRouteMax {
			bad(field, "at most %d processors", route.ProcessorsPerRouteMax)
		}
		for _, n := range names {
			if !known(n) {
				bad(field, "names %q, which is no [processors.%s] section (nor \"default\")", n, n)
			}
		}
	}
	for id, m := range c.Merchants {
		check("merchants."+id+".processors", m.Processors)
		for i, r := range m.Routes {
			f := fmt.Sprintf("merchants.%s.routes[%d]", id, i)
			check(f+".processors", r.Processors)
			if len(r.Processors) == 0 {
				bad(f+".processors", "is required")
			}
			if r.Currency != "" && !validCurrency(r.Currency) {
				bad(f+".currency", "%q is not a supported ISO 4217 currency", r.Currency)
			}
		}
	}
}

// processorEnv applies SURGEPAY_PROCESSOR_<NAME>_SECRET_KEY.
func (c *Config) processorEnv(env func(string) string) {
	for name, p := range c.Processors {
		if v := env("SURGEPAY_PROCESSOR_" + strings.ToUpper(name) + "_SECRET_KEY"); v != "" {
			p.SecretKey = cache.Secret(v)
		}
		if v := env("SURGEPAY_PROCESSOR_" + strings.ToUpper(name) + "_WEBHOOK_SECRET"); v != "" {
			p.WebhookSecret = cache.Secret(v)
		}
		c.Processors[name] = p
	}
}

// fillProcessorDefaults writes into each processor's section the
// defaults its connector and router apply to a setting left at zero, so
// that /config shows the settings in effect (it showed timeout = "0s",
// conns_max = 0) and a reload compares like with like.
func (c *Config) fillProcessorDefaults() {
	for name, p := range c.Processors {
		if p.Timeout.Duration <= 0 {
			p.Timeout.Duration = stripe.CallTimeoutDefault
		}
		if p.ConnsMax == 0 {
			p.ConnsMax = stripe.ConnsPerHostMaxDefault
		}
		if p.RetriesMax == 0 {
			p.RetriesMax = stripe.RetriesMaxDefault
		}
		if p.SearchLag.Duration <= 0 {
			p.SearchLag.Duration = stripe.SearchLagDefault
		}
		p.SearchLag.Duration = max(p.SearchLag.Duration, p.Timeout.Duration) // as the connector takes it
		if p.BudgetWait.Duration <= 0 {
			p.BudgetWait.Duration = route.BudgetWaitMaxDefault
		}
		if p.InflightMax == 0 {
			p.InflightMax = p.ConnsMax
		}
		if p.SettleCallsPerSecond == 0 {
			p.SettleCallsPerSecond = p.CallsPerSecond
		}
		c.Processors[name] = p
	}
}

// NeedsKeyring reports whether a processor's secret is sealed.
func (c *Config) NeedsKeyring() bool {
	for _, p := range c.Processors {
		if strings.HasPrefix(string(p.SecretKey), SealedPrefix) || strings.HasPrefix(string(p.WebhookSecret), SealedPrefix) {
			return true
		}
	}
	return false
}

// validCurrency reports whether code is a supported ISO 4217 currency.
func validCurrency(code string) bool {
	_, err := surgepay.ValidateCurrency("currency", code)
	return err == nil
}
