package admin

import (
	"bytes"
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/surgepay/surgepay/api"
	"github.com/surgepay/surgepay/telemetry"
	"github.com/surgepay/surgepay/tlsconfig"
)

// Config is what the admin listener serves.
type Config struct {
	// Ready reports whether the server takes traffic (GET /readyz).
	Ready func() bool
	// Telemetry serves /metrics and /dashboard; nil: neither.
	Telemetry *telemetry.Telemetry
	// Config returns the effective configuration with secrets redacted
	// (GET /config, as TOML); nil: no /config.
	Config func() any
	// Auth is the credential every route but /healthz and /readyz needs
	// (auth.go); its zero value refuses them all.
	Auth Guard
	// TLS, when set, makes the listener serve TLS only.
	TLS *tls.Config
	// AdminAPI serves /admin/v1/ (merchants, API keys, audit trail;
	// docs/admin-api.md); nil: none.
	AdminAPI http.Handler
	// Console serves the operators' console under /console/ (package
	// console, docs/console.md); nil: none.
	Console http.Handler
}

// Handler serves the admin listener: liveness, readiness, the Go
// profiler, Prometheus metrics, the effective configuration and the live
// dashboard, every route but the probes behind c.Auth. It is bound to
// loopback by default.
func Handler(c Config) http.Handler { return c.Auth.Wrap(newMux(c)) }

// newMux routes the admin listener, without the credential check.
func newMux(c Config) *http.ServeMux {
	if c.Ready == nil {
		c.Ready = func() bool { return true }
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if !c.Ready() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("GET /debug/flight-recorder", func(w http.ResponseWriter, r *http.Request) {
		fr := c.Telemetry.FlightRecorder()
		if fr == nil {
			http.Error(w, "the flight recorder is off ([flight_recorder] enabled = true)", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Disposition", `attachment; filename="surgepay-flight.trace"`)
		if _, err := fr.WriteTo(w); err != nil {
			// Nothing written yet when another snapshot is in progress.
			http.Error(w, "flight recorder: "+err.Error(), http.StatusServiceUnavailable)
		}
	})
	if c.Telemetry != nil {
		mux.Handle("GET /metrics", c.Telemetry.MetricsHandler())
		dash := c.Telemetry.DashboardHandler()
		mux.Handle("GET /dashboard", dash)
		mux.Handle("GET /dashboard/", dash)
	}
	if c.AdminAPI != nil {
		mux.Handle(api.AdminPrefix, c.AdminAPI)
	}
	if c.Console != nil {
		mux.Handle("/console/", c.Console)
	}
	if c.Config != nil {
		mux.HandleFunc("GET /config", func(w http.ResponseWriter, r *http.Request) {
			var b bytes.Buffer
			if err := toml.NewEncoder(&b).Encode(c.Config()); err != nil {
				http.Error(w, "encode configuration: "+err.Error(), http.StatusInternalServerError)
				return
			}
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Header().Set("Cache-Control", "no-store")
			w.Write(b.Bytes())
		})
	}
	return mux
}

// Serve runs the admin listener with c on ln until ctx ends.
func Serve(ctx context.Context, ln net.Listener, c Config, log *slog.Logger) error {
	srv := &http.Server{Handler: Handler(c), ReadHeaderTimeout: 5 * time.Second, TLSConfig: c.TLS,
		ErrorLog: tlsconfig.ErrorLog(log)}
	go func() {
		<-ctx.Done()
		_ = srv.Close() // Serve returns ErrServerClosed; what is left of a connection is of no use
	}()
	log.Info("admin listening", "addr", ln.Addr().String(), "tls", c.TLS != nil)
	if err := tlsconfig.Serve(srv, ln); err != http.ErrServerClosed {
		return err
	}
	return nil
}

// ListenMetrics serves GET /metrics with h on addr (settle's
// --metrics-listen), behind guard and in TLS with tc when set, until stop
// is called. The listener is open when it returns: a port in use is an
// error now.
func ListenMetrics(addr string, guard Guard, tc *tls.Config, h http.Handler, log *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", h)
	srv := &http.Server{Handler: guard.Wrap(mux), ReadHeaderTimeout: 5 * time.Second, TLSConfig: tc,
		ErrorLog: tlsconfig.ErrorLog(log)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := tlsconfig.Serve(srv, ln); err != http.ErrServerClosed {
			log.Error("settlement metrics listener", "err", err.Error())
		}
	}()
	log.Info("settlement metrics listening", "addr", ln.Addr().String())
	return func() { _ = srv.Close(); <-done }, nil // Serve returns ErrServerClosed; what is left of a connection is of no use
}
