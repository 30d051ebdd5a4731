package surgepay

import (
	"slices"
	"strings"
)

// Scopes of a restricted API key: resource:read or resource:write, where
// write grants read. A key with no scopes has full access (every key made
// before scopes existed). The API checks the one scope each route needs
// (package api, routeScopes).
const (
	ScopeCustomersRead       = "customers:read"
	ScopeCustomersWrite      = "customers:write"
	ScopePaymentMethodsRead  = "payment_methods:read"
	ScopePaymentMethodsWrite = "payment_methods:write"
	ScopePaymentsRead        = "payments:read"
	// ScopePaymentsWrite creates, captures and voids payments; refunds
	// need ScopeRefundsWrite, so "payments without refunds" is a key
	// without it.
	ScopePaymentsWrite = "payments:write"
	ScopeRefundsWrite  = "refunds:write"
	ScopeAnalyticsRead = "analytics:read"
	ScopeWebhooksRead  = "webhook_endpoints:read"
	ScopeWebhooksWrite = "webhook_endpoints:write"
)

// Scope presets a key can be made with; each expands to a list of scopes.
const (
	ScopePresetFull              = "full"                // no restriction (stored as no scopes)
	ScopePresetReadOnly          = "read_only"           // every :read scope
	ScopePresetPaymentsNoRefunds = "payments_no_refunds" // everything but refunds:write
)

// AllScopes lists every scope, reads first.
var AllScopes = []string{
	ScopeCustomersRead, ScopePaymentMethodsRead, ScopePaymentsRead, ScopeAnalyticsRead, ScopeWebhooksRead,
	ScopeCustomersWrite, ScopePaymentMethodsWrite, ScopePaymentsWrite, ScopeRefundsWrite, ScopeWebhooksWrite,
}

// APIKeyScopesMax bounds the scopes of one key: every scope once.
var APIKeyScopesMax = len(AllScopes)

// ValidScope reports whether s is a scope of AllScopes.
func ValidScope(s string) bool { return slices.Contains(AllScopes, s) }

// ParseScopes turns a list of scopes and presets into the sorted, unique
// scopes a key stores; nil means full access. param names the field for
// errors (EINVALID invalid_scope). A list that contradicts itself is
// refused rather than read one way (issue 34: ["read_only","full"] made a
// full-access key): "full" with anything else, "read_only" with a write
// scope (or a preset that holds one), "payments_no_refunds" with
// refunds:write.
func ParseScopes(param string, in []string) ([]string, error) {
	if in != nil && len(in) == 0 {
		// An empty list given on purpose must not fail open into the
		// unrestricted key that no list means.
		return nil, Invalid(param, "invalid_scope", "%s is empty: leave it out, or give [\"full\"], for full access", param)
	}
	if len(in) > APIKeyScopesMax+3 {
		return nil, Invalid(param, "invalid_scope", "%s has %d entries, at most %d", param, len(in), APIKeyScopesMax+3)
	}
	var out []string
	full := false
	presets := map[string]bool{}
	for i, s := range in {
		s = strings.TrimSpace(s)
		switch s {
		case ScopePresetFull, ScopePresetReadOnly, ScopePresetPaymentsNoRefunds:
			presets[s] = true
		}
		switch s {
		case ScopePresetFull:
			full = true
		case ScopePresetReadOnly:
			for _, a := range AllScopes {
				if strings.HasSuffix(a, ":read") {
					out = append(out, a)
				}
			}
		case ScopePresetPaymentsNoRefunds:
			for _, a := range AllScopes {
				if a != ScopeRefundsWrite {
					out = append(out, a)
				}
			}
		default:
			if !ValidScope(s) {
				// The value is not echoed: it is free input, and could be anything.
				return nil, Invalid(param, "invalid_scope", "%s[%d] is not a scope; scopes are %s, or the presets %s, %s, %s",
					param, i, strings.Join(AllScopes, ", "), ScopePresetFull, ScopePresetReadOnly, ScopePresetPaymentsNoRefunds)
			}
			out = append(out, s)
		}
	}
	if err := scopesContradiction(param, in, presets, out); err != nil {
		return nil, err
	}
	if full {
		return nil, nil
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// scopesContradiction returns EINVALID invalid_scope when in (with
// presets, the presets it names, and out, its expansion) asks for a
// restriction and for what the restriction forbids.
func scopesContradiction(param string, in []string, presets map[string]bool, out []string) error {
	bad := func(what string) error {
		return Invalid(param, "invalid_scope", "%s contradicts itself: %s; give one or the other", param, what)
	}
	if presets[ScopePresetFull] && slices.ContainsFunc(in, func(s string) bool { return strings.TrimSpace(s) != ScopePresetFull }) {
		return bad(`"full" (no restriction) with a restriction`)
	}
	if presets[ScopePresetReadOnly] && slices.ContainsFunc(out, func(s string) bool { return strings.HasSuffix(s, ":write") }) {
		return bad(`"read_only" with a :write scope`)
	}
	if presets[ScopePresetPaymentsNoRefunds] && slices.Contains(out, ScopeRefundsWrite) {
		return bad(`"payments_no_refunds" with ` + ScopeRefundsWrite)
	}
	return nil
}

// Allows reports whether a key with scopes may act with scope need: no
// scopes is full access; resource:write grants resource:read.
func Allows(scopes []string, need string) bool {
	if len(scopes) == 0 || slices.Contains(scopes, need) {
		return true
	}
	if res, ok := strings.CutSuffix(need, ":read"); ok {
		return slices.Contains(scopes, res+":write")
	}
	return false
}
