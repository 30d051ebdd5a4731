// Package probe is `surgepay healthcheck`: one GET of a running serve's
// /readyz (or /healthz) on its own host, for a container runtime's
// HEALTHCHECK where the image has no shell nor HTTP client (the
// distroless image of deploy/docker), or a script.
package probe

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/surgepay/surgepay/config"
	"github.com/surgepay/surgepay/internal/cli"
)

const usage = `Usage: surgepay healthcheck [--live] [--timeout D] [--config FILE]

Asks the running serve of this configuration whether it takes traffic
(GET /readyz; --live: whether it answers at all, GET /healthz) on its admin
listener, or on its API listener when admin_listen is off, on this host,
and exits 0 for a 200, else 1 with the reason on stderr. For a container's
HEALTHCHECK where the image has no shell nor curl (docs/deploy.md).
`

// Main is the healthcheck command: its flags, the configuration (as
// serve reads it: --config or SURGEPAY_CONFIG, then SURGEPAY_*), Check.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := cli.New("healthcheck", usage)
	path := c.Flags.String("config", "", "TOML config `FILE` (default: $SURGEPAY_CONFIG)")
	live := c.Flags.Bool("live", false, "ask /healthz (the process answers) instead of /readyz (it takes traffic)")
	timeout := c.Flags.Duration("timeout", TimeoutDefault, "bound on the whole check (`D`, such as 3s)")
	if code, ok := c.Parse(args, stdout, stderr); !ok {
		return code
	}
	if *timeout <= 0 {
		return c.Fail(stderr, "--timeout %s: want a positive duration", *timeout)
	}
	cfg, err := config.Load(*path, os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "surgepay: %v\n", err)
		return cli.ExitUsage
	}
	p := "/readyz"
	if *live {
		p = "/healthz"
	}
	if err := Check(ctx, cfg, p, *timeout); err != nil {
		fmt.Fprintf(stderr, "surgepay healthcheck: %v\n", err)
		return 1
	}
	return cli.ExitOK
}

// TimeoutDefault bounds one check: connecting, the answer and its body.
const TimeoutDefault = 3 * time.Second

// bodyBytesMax bounds the answer read for the message.
const bodyBytesMax = 512

// URL is where Check asks: path on the admin listener, or on the API
// listener when the admin listener is off; an unspecified host
// (0.0.0.0, ::, "") is asked on loopback; https when the listeners speak
// TLS (tls.cert_file).
func URL(cfg config.Config, path string) (string, error) {
	addr := cfg.AdminListen
	if addr == "" {
		addr = cfg.Listen
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("listener address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		if ip != nil && ip.To4() == nil {
			host = "::1"
		}
	}
	scheme := "http"
	if cfg.TLS.Enabled() {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(host, port) + path, nil
}

// Check GETs path (/readyz or /healthz) of the serve that cfg describes,
// within timeout, and returns nil for a 200, else an error saying what
// came back or why nothing did. Over TLS it does not verify the
// certificate: it asks its own host's listener for a status, sends no
// credential and believes nothing but the status code (the listener's
// name need not be one its certificate holds).
func Check(ctx context.Context, cfg config.Config, path string, timeout time.Duration) error {
	u, err := URL(cfg, path)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}, //nolint:gosec // G402: a status probe of its own host's listener; see Check
		DisableKeepAlives: true,
	}}
	res, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	defer res.Body.Close() //nolint:errcheck // read-only: closing loses nothing
	body, _ := io.ReadAll(io.LimitReader(res.Body, bodyBytesMax))
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", u, res.Status, body)
	}
	return nil
}
