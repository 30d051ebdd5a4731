package main

import (
	"fmt"
	"io"
	"log/slog"
	"net"

	"github.com/surgepay/surgepay/admin"
	"github.com/surgepay/surgepay/tlsconfig"
)

// useAdminToken guards the admin listener with token (from
// admin.LoadToken, created or not) and prints its address at addr with how
// to log in.
func (a *app) useAdminToken(out io.Writer, token string, created bool, addr net.Addr, secure bool) {
	a.adminToken.Store(&token)
	where := "SURGEPAY_ADMIN_TOKEN"
	if a.cfg.AdminToken() == "" {
		where = "the file " + a.cfg.AdminTokenFile
		if created {
			where = "the file " + a.cfg.AdminTokenFile + ", just created"
		}
	}
	fmt.Fprintf(out, "Admin dashboard: %s://%s/dashboard (log in with the admin token in %s)\n",
		tlsconfig.Scheme(secure), addr, where)
}

// adminGuard returns the admin listener's guard, reading the token that
// admin.LoadToken stored (and reloads replace).
func (a *app) adminGuard() admin.Guard {
	return admin.Guard{
		Token: func() string {
			if t := a.adminToken.Load(); t != nil {
				return *t
			}
			return ""
		},
		MetricsOpen:  a.cfg.AdminMetricsOpen,
		ClientCert:   a.cfg.TLS.AdminClientCAFile != "",
		SecureCookie: a.cfg.TLS.ProxyTerminated,
	}
}

// reloadListeners reads the TLS certificate and the admin token again
// (SIGHUP): new connections get the new certificate, open ones keep
// theirs; the new token is required at once and ends every dashboard
// login. A file that does not load is logged and the running one stays.
func (a *app) reloadListeners(log *slog.Logger, why string) {
	if a.certs != nil {
		if err := a.certs.Reload(); err != nil {
			log.Error("TLS certificate reload refused; the running certificate stays", "why", why, "err", err.Error())
		} else {
			log.Info("TLS certificate reloaded", "why", why, "file", a.certs.CertFile())
		}
	}
	if a.adminToken.Load() == nil {
		return
	}
	token, _, err := admin.LoadToken(a.cfg.AdminToken().Reveal(), a.cfg.AdminTokenFile)
	if err != nil {
		log.Error("admin token reload refused; the running token stays", "why", why, "err", err.Error())
		return
	}
	if token != *a.adminToken.Load() {
		a.adminToken.Store(&token)
		log.Info("admin token changed", "why", why)
	}
}
