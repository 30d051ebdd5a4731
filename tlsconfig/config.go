package tlsconfig

// Config configures TLS on the API and admin listeners of `surgepay
// serve` (and settle's --metrics-listen). See docs/tls.md.
type Config struct {
	// CertFile is a PEM certificate chain (the server's certificate
	// first) and KeyFile its private key: set both and the API and admin
	// listeners speak only TLS (1.2 or newer). Both files are read again
	// on SIGHUP; connections already open keep the certificate they
	// started with. Env SURGEPAY_TLS_CERT_FILE, SURGEPAY_TLS_KEY_FILE.
	// Default none: plain HTTP, which serve allows on loopback addresses
	// only (see ProxyTerminated).
	CertFile string `toml:"cert_file"`
	KeyFile  string `toml:"key_file"`
	// AdminClientCAFile is a PEM file of the certificate authorities whose
	// client certificates the admin listener accepts as a credential
	// (mutual TLS), beside the admin token. Requires CertFile. Default
	// none: the admin token only.
	AdminClientCAFile string `toml:"admin_client_ca_file"`
	// AdminReadOnlyClients names the client certificates (of
	// AdminClientCAFile) that are read-only on the admin listener: they
	// read everything (GET) and change nothing, as the read-only token
	// (docs/console.md). A name is the certificate subject's common name
	// as the audit trail records it ("admin_api:cert:NAME"): printable
	// ASCII, at most 64 characters, matched exactly. Every other
	// certificate the CA signed may act. Read at start. Default none.
	AdminReadOnlyClients []string `toml:"admin_read_only_clients"`
	// ProxyTerminated says that a proxy in front terminates TLS: serve
	// then listens in plain HTTP on any address. Without it (and without
	// CertFile) serve refuses a listen or admin_listen address that is
	// not loopback, since card numbers and the admin token would cross
	// the network in clear. Env SURGEPAY_TLS_PROXY_TERMINATED. Default
	// false.
	ProxyTerminated bool `toml:"proxy_terminated"`
}

// Enabled reports whether the listeners serve TLS.
func (t Config) Enabled() bool { return t.CertFile != "" }

// Validate checks that the certificate and key go together and that the
// client CA has a certificate to go with, calling bad for each problem.
func (t Config) Validate(bad func(field, format string, args ...any)) {
	if (t.CertFile == "") != (t.KeyFile == "") {
		bad("tls.cert_file", "and tls.key_file go together: set both or neither")
	}
	if t.AdminClientCAFile != "" && t.CertFile == "" {
		bad("tls.admin_client_ca_file", "requires tls.cert_file and tls.key_file: client certificates are checked over TLS")
	}
}
