package surgepay

import (
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Browser checkout (docs/checkout.md): a merchant's page embeds surgepay's
// card frame with a publishable key; the merchant's server makes the
// payment and hands the page its client secret; the frame confirms it.

// Publishable key prefixes: a publishable key (pk_test_… or pk_live_…)
// may be put in a web page; it can only create payment methods and
// confirm or read the payment a client secret names (ScopeCheckout).
const (
	PublishableKeyPrefixTest = "pk_test_"
	PublishableKeyPrefixLive = "pk_live_"
)

// ScopeCheckout is the one scope of a publishable key, and what the
// checkout routes need. It is not in AllScopes: a secret key is never
// made with it (a full-access secret key has it, as it has every scope).
const ScopeCheckout = "checkout"

// Publishable reports whether k is a publishable key.
func (k *APIKey) Publishable() bool { return strings.HasPrefix(k.Prefix, "pk_") }

// Limits of browser checkout.
const (
	// CheckoutOriginsMax bounds a merchant's checkout_origins: each is
	// listed in the frame's Content-Security-Policy header.
	CheckoutOriginsMax = 20
	// OriginBytesMax bounds one origin.
	OriginBytesMax = 200
	// ClientSecretTTL is how long a client secret confirms its payment.
	// The merchant's server gets a fresh one with each read of the
	// payment while it awaits a card (GET /v1/payments/{id}).
	ClientSecretTTL = time.Hour
	// ClientSecretBytesMax bounds a client secret a request may present.
	ClientSecretBytesMax = 300
	// ReturnURLBytesMax bounds a confirm's return_url.
	ReturnURLBytesMax = 2048
	// CheckoutClientRateDefault is a client address's sustained requests
	// per second under one publishable key (checkout_client_rate): a
	// shopper's checkout takes 2 to 4, and a few more with 3-D Secure.
	CheckoutClientRateDefault = 5
	// CheckoutClientBurstMin is the least burst of a client address.
	CheckoutClientBurstMin = 20
)

// CheckoutClientLimit returns the rate and burst of a client address
// under one of the merchant's publishable keys.
func (s MerchantSettings) CheckoutClientLimit() (rate float64, burst int) {
	rate = s.CheckoutClientRate
	if rate <= 0 {
		rate = CheckoutClientRateDefault
	}
	return rate, max(CheckoutClientBurstMin, int(min(rate*4, MerchantRateBurstMax)))
}

// CheckoutReturnPath is where a processor's authentication page (3-D
// Secure) sends the shopper back to surgepay, followed by a signed token;
// surgepay records the outcome and sends the shopper on to the
// merchant's return_url.
const CheckoutReturnPath = "/checkout/v1/return/"

// RequiresActionListed is how many payments in StatusRequiresAction a
// reconcile pass of limit payments lists besides those in processing: a
// quarter, at least one, so that authentications shoppers abandoned
// never crowd out the unknown outcomes.
func RequiresActionListed(limit int) int { return max(1, limit/4) }

// ValidOrigin reports whether o is a web origin as browsers send it in
// the Origin header: http or https, a host (a name or an IP address), an
// optional port, and nothing else (no user, path, query or fragment; no
// trailing slash), lower case, at most OriginBytesMax bytes. It is put in
// headers, so nothing that could break one passes.
func ValidOrigin(o string) bool {
	if o == "" || len(o) > OriginBytesMax || o != strings.ToLower(o) {
		return false
	}
	for i := 0; i < len(o); i++ {
		if c := o[i]; c <= ' ' || c >= 0x7f || c == ';' || c == ',' || c == '\'' || c == '"' {
			return false
		}
	}
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" || strings.HasSuffix(o, "/") ||
		strings.Contains(o, "?") || strings.Contains(o, "#") {
		return false
	}
	host := u.Hostname()
	if host == "" || strings.Contains(host, "*") {
		return false
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != p {
			return false
		}
	} else if strings.HasSuffix(u.Host, ":") {
		return false
	}
	if strings.HasPrefix(u.Host, "[") { // an IPv6 literal
		return net.ParseIP(host) != nil
	}
	return true
}
