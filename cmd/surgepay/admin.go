package main

import "log/slog"

// reloadListeners reads the TLS certificate and the admin tokens again
// (SIGHUP): new connections get the new certificate, open ones keep
// theirs; a new token is required at once and ends the dashboard logins
// made with the old one. A file that does not load is logged and the
// running one stays.
func (a *app) reloadListeners(log *slog.Logger, why string) {
	if a.certs != nil {
		if err := a.certs.Reload(); err != nil {
			log.Error("TLS certificate reload refused; the running certificate stays", "why", why, "err", err.Error())
		} else {
			log.Info("TLS certificate reloaded", "why", why, "file", a.certs.CertFile())
		}
	}
	changed, err := a.creds.Reload()
	if err != nil {
		log.Error("admin token reload refused; the running tokens stay", "why", why, "err", err.Error())
	}
	for _, what := range changed {
		log.Info(what+" changed", "why", why)
	}
}
