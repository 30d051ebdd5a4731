package main

import (
	"fmt"
	"log/slog"

	"github.com/surgepay/surgepay/cache"
	"github.com/surgepay/surgepay/config"
	"github.com/surgepay/surgepay/ratelimit"
)

// openSharedRateLimiter returns the shared rate limiter of cfg, or nil
// when each node counts alone: the merchants' rate limits and the
// processors' call budgets. A Redis down at start is not an error:
// the nodes count alone until it answers.
func openSharedRateLimiter(cfg config.Config, log *slog.Logger) (*ratelimit.Redis, func(), error) {
	scope := cfg.SharedRateScope()
	if scope == "" {
		return nil, func() {}, nil
	}
	opt, err := cache.ClientOption(scope, cfg.Cache)
	if err != nil {
		return nil, nil, fmt.Errorf("rate_limits: %w", err)
	}
	opt.ClientName = "surgepay-ratelimit"
	rl, err := ratelimit.New(ratelimit.Config{Client: opt, Namespace: cfg.Cache.Namespace, Timeout: cfg.RateLimits.Timeout.Duration,
		BreakerOpenDuration: cfg.Cache.BreakerOpenDuration, Logger: log})
	if err != nil {
		return nil, nil, fmt.Errorf("rate_limits: %w", err)
	}
	log.Info("rate limits: counted across the nodes through redis", "scope", string(scope), "timeout", cfg.RateLimits.Timeout.String())
	return rl, rl.Close, nil
}
