package config

import "github.com/surgepay/surgepay/tlsconfig"

// TLSConfig is [tls]: TLS on the API and admin listeners (docs/tls.md).
type TLSConfig = tlsconfig.Config
