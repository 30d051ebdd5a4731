package surgepay

import (
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

// ValidOrigin reports whether o is a web origin written as browsers send
// it in the Origin header and location.origin: CanonicalOrigin's form
// (lower case, no default port). A merchant's checkout_origins must be
// written so, since the Origin header is compared with them as it is.
func ValidOrigin(o string) bool {
	c, ok := CanonicalOrigin(o)
	return ok && c == o
}

// CanonicalOrigin checks that s is a web origin, scheme://host[:port]
// with scheme http or https, no user info, path, query or fragment, at
// most OriginBytesMax bytes, of the characters a header may carry
// unquoted (letters, digits, '.', '-', ':', '/', '[', ']'), and returns
// it as a browser writes location.origin: scheme and host in lower case,
// without the scheme's default port.
func CanonicalOrigin(s string) (string, bool) {
	if s == "" || len(s) > OriginBytesMax {
		return "", false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !alnum(c) && !strings.ContainsRune(".-:/[]", rune(c)) {
			return "", false
		}
	}
	u, err := url.Parse(s)
	if err != nil || u.Opaque != "" || u.User != nil || u.Path != "" || u.RawQuery != "" || u.ForceQuery ||
		u.Fragment != "" || !strings.HasPrefix(strings.ToLower(s), u.Scheme+"://") {
		return "", false
	}
	scheme := strings.ToLower(u.Scheme)
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if (scheme != "http" && scheme != "https") || !validHost(host) {
		return "", false
	}
	if strings.HasSuffix(u.Host, ":") || (port != "" && !validPort(port)) {
		return "", false
	}
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		return scheme + "://" + host + ":" + port, true
	}
	return scheme + "://" + host, true
}

// alnum reports whether c is an ASCII letter or digit.
func alnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }

// validHost accepts a DNS name (labels of letters, digits and inner
// hyphens), an IPv4 address, or an IPv6 address (unbracketed here).
func validHost(h string) bool {
	if h == "" {
		return false
	}
	if strings.Contains(h, ":") {
		for i := 0; i < len(h); i++ {
			c := h[i]
			if (c < '0' || c > '9') && (c < 'a' || c > 'f') && c != ':' && c != '.' {
				return false
			}
		}
		return true
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
				return false
			}
		}
	}
	return true
}

func validPort(p string) bool {
	n, err := strconv.Atoi(p)
	return err == nil && n >= 1 && n <= 65535 && p[0] != '0'
}
