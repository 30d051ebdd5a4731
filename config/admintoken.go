package config

const (
	// AdminTokenFileName is the admin token's file in the data folder.
	AdminTokenFileName = "admin-token"
	// AdminTokenLenMin is the shortest admin token accepted from
	// SURGEPAY_ADMIN_TOKEN or a token file: 16 characters of a random
	// token are 96 bits or more.
	AdminTokenLenMin = 16
	// AdminTokenLenMax bounds a token (and what is read of its file).
	AdminTokenLenMax = 512
)

// validateAdminToken checks the length of SURGEPAY_ADMIN_TOKEN.
func (c *Config) validateAdminToken(bad func(field, format string, args ...any)) {
	if n := len(c.adminToken); n > 0 && (n < AdminTokenLenMin || n > AdminTokenLenMax) {
		bad("SURGEPAY_ADMIN_TOKEN", "is %d characters; it must be %d to %d (a random one: `openssl rand -hex 32`)",
			n, AdminTokenLenMin, AdminTokenLenMax)
	}
}
