package cache

import "github.com/redis/rueidis"

// ClientOption returns the options of the Redis client of scope
// (ScopeServer or ScopeGlobal) as the cache builds its own: addresses,
// credentials, TLS, Sentinel or Cluster, dial and write timeouts, no
// retries; without client-side caching. For the other users of the
// cache's Redis (the shared rate limits), so that cache.redis is
// configured once.
func ClientOption(scope Scope, cfg Config) (rueidis.ClientOption, error) {
	opt, err := clientOptions(scope, cfg)
	opt.DisableCache = true
	return opt, err
}
