package config

import (
	"time"

	"github.com/surgepay/surgepay/cache"
	"github.com/surgepay/surgepay/ratelimit"
)

// RateLimitsConfig says where the merchants' rate_limit is counted
// (docs/rate-limits.md). Read at start.
type RateLimitsConfig struct {
	// Shared is "auto" (the default): when cache.redis names a Redis
	// (global_addrs, else server_addr), a merchant's rate_limit holds
	// across every node using it, counted there; else, or with "off",
	// each node counts alone.
	Shared string `toml:"shared"`
	// Timeout bounds the Redis call of one request; past it (or while
	// Redis is skipped after failures, for cache.breaker_open_duration)
	// the node's own bucket decides. Default 20ms; 1ms to 100ms.
	Timeout Duration `toml:"timeout"`
}

// defaultRateLimits is the default [rate_limits].
func defaultRateLimits() RateLimitsConfig {
	return RateLimitsConfig{Shared: "auto", Timeout: Duration{ratelimit.TimeoutDefault}}
}

// validate checks [rate_limits].
func (r RateLimitsConfig) validate(bad func(field, format string, args ...any)) {
	if r.Shared != "auto" && r.Shared != "off" {
		bad("rate_limits.shared", "%q must be \"auto\" or \"off\"", r.Shared)
	}
	if d := r.Timeout.Duration; d < time.Millisecond || d > ratelimit.TimeoutMax {
		bad("rate_limits.timeout", "%s must be between 1ms and %s", d, ratelimit.TimeoutMax)
	}
}

// SharedRateScope returns the cache scope whose Redis counts the shared
// rate limits, or "" when they are not shared.
func (c *Config) SharedRateScope() cache.Scope {
	switch {
	case c.RateLimits.Shared == "off":
		return ""
	case len(c.Cache.Redis.GlobalAddrs) > 0:
		return cache.ScopeGlobal
	case c.Cache.Redis.ServerAddr != "":
		return cache.ScopeServer
	}
	return ""
}
