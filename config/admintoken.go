package config

import "github.com/surgepay/surgepay/admin"

// validateAdminToken checks the length of SURGEPAY_ADMIN_TOKEN.
func (c *Config) validateAdminToken(bad func(field, format string, args ...any)) {
	if n := len(c.adminToken); n > 0 && (n < admin.TokenLenMin || n > admin.TokenLenMax) {
		bad("SURGEPAY_ADMIN_TOKEN", "is %d characters; it must be %d to %d (a random one: `openssl rand -hex 32`)",
			n, admin.TokenLenMin, admin.TokenLenMax)
	}
}
