package config

import "github.com/surgepay/surgepay/admin"

// AdminReadOnlyClientsMax bounds tls.admin_read_only_clients.
const AdminReadOnlyClientsMax = 1000

// validateAdminToken checks the length of SURGEPAY_ADMIN_TOKEN and
// SURGEPAY_ADMIN_READ_TOKEN, that they differ, and the names of
// tls.admin_read_only_clients: never printing a token.
func (c *Config) validateAdminToken(bad func(field, format string, args ...any)) {
	for name, tok := range map[string]string{"SURGEPAY_ADMIN_TOKEN": c.adminToken.Reveal(), "SURGEPAY_ADMIN_READ_TOKEN": c.adminReadToken.Reveal()} {
		if n := len(tok); n > 0 && (n < admin.TokenLenMin || n > admin.TokenLenMax) {
			bad(name, "is %d characters; it must be %d to %d (a random one: `openssl rand -hex 32`)",
				n, admin.TokenLenMin, admin.TokenLenMax)
		}
	}
	if c.adminToken != "" && c.adminToken == c.adminReadToken {
		bad("SURGEPAY_ADMIN_READ_TOKEN", "is SURGEPAY_ADMIN_TOKEN: the read-only token must be another")
	}
	names := c.TLS.AdminReadOnlyClients
	if len(names) > 0 && c.TLS.AdminClientCAFile == "" {
		bad("tls.admin_read_only_clients", "names client certificates, which need tls.admin_client_ca_file")
	}
	if len(names) > AdminReadOnlyClientsMax {
		bad("tls.admin_read_only_clients", "holds %d names; at most %d", len(names), AdminReadOnlyClientsMax)
		return
	}
	seen := make(map[string]bool, len(names))
	for i, n := range names {
		if err := admin.CheckCertName(n); err != nil {
			bad("tls.admin_read_only_clients", "name %d: %v", i+1, err)
		}
		if seen[n] {
			bad("tls.admin_read_only_clients", "name %d, %q, is given twice", i+1, n)
		}
		seen[n] = true
	}
}

// AdminCredentials loads (or creates) the admin listener's tokens:
// SURGEPAY_ADMIN_TOKEN or admin_token_file, and
// SURGEPAY_ADMIN_READ_TOKEN or admin_read_token_file.
func (c *Config) AdminCredentials() (*admin.Credentials, error) {
	return admin.LoadCredentials(admin.AdminTokenSource(c.adminToken.Reveal(), c.AdminTokenFile),
		admin.ReadTokenSource(c.adminReadToken.Reveal(), c.AdminReadTokenFile))
}

// AdminGuard is the guard of the admin listener (and of settle's
// --metrics-listen) of c, with the tokens of creds (nil: none, only a
// client certificate or admin_metrics_open opens it).
func (c *Config) AdminGuard(creds *admin.Credentials) admin.Guard {
	g := admin.Guard{MetricsOpen: c.AdminMetricsOpen, ClientCert: c.TLS.AdminClientCAFile != "",
		ReadOnlyClients: c.TLS.AdminReadOnlyClients, SecureCookie: c.TLS.ProxyTerminated}
	if creds != nil {
		g.Token, g.ReadToken = creds.Token, creds.ReadToken
	}
	return g
}
