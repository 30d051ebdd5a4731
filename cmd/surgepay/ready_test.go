package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/surgepay/surgepay/config"
)

// TestReadinessFollowsTheStore: /readyz's store probe is true while the
// store answers and false once it cannot.
func TestReadinessFollowsTheStore(t *testing.T) {
	cfg := testConfig(t, t.TempDir(), nil)
	a, err := openApp(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if !a.storeReachable(context.Background()) {
		t.Fatal("store reachable = false on an open store")
	}
	a.store.Close()
	if a.storeReachable(context.Background()) {
		t.Fatal("store reachable = true on a closed store")
	}
}

// TestShutdownTurnsNotReadyFirst: on its signal, serve answers /readyz 503
// at once and goes on serving API requests for shutdown_delay (a load
// balancer stops sending here meanwhile), then stops; before, the API
// listener closed at once while /readyz still said ready, and requests a
// balancer sent in between failed.
func TestShutdownTurnsNotReadyFirst(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir, nil)
	cfg.ShutdownDelay = config.Duration{Duration: 8 * time.Second}
	s := startServe(t, cfg)
	ready := "http://" + s.admin + "/readyz"
	for _, u := range []string{ready, s.url + "/readyz"} {
		if code, _ := get(t, u); code != http.StatusOK {
			t.Fatalf("%s before the signal: %d, want 200", u, code)
		}
	}
	c := newClient(s.url, readDevKey(t, dir))
	defer c.hc.CloseIdleConnections()
	c.must(t, "POST", "/v1/customers", "", map[string]string{"name": "before"}, http.StatusOK, nil)

	s.cancel() // the signal
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, _ := get(t, ready)
		if code == http.StatusServiceUnavailable {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz still %d 30 s after the signal, want 503", code)
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case err := <-s.done:
		t.Fatalf("serve returned (%v) as soon as it turned not ready, want it serving for shutdown_delay", err)
	default:
	}
	// The API listener's /readyz says the same (a load balancer may check
	// either); it always answered 200.
	if code, _ := get(t, s.url+"/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("the API listener's /readyz after the signal: %d, want 503", code)
	}
	// On a new connection: the listener is still open.
	c.hc.CloseIdleConnections()
	c.must(t, "POST", "/v1/customers", "", map[string]string{"name": "while draining"}, http.StatusOK, nil)
	s.ended = true
	select {
	case err := <-s.done:
		if err != nil {
			t.Errorf("serve returned %v, want nil", err)
		}
	case <-time.After(stopTimeout + cfg.ShutdownDelay.Duration): // a hang guard
		t.Fatal("serve did not return after shutdown_delay")
	}
}

// TestDrainTimeoutEndsTheDrain: after the signal serve lets requests in
// flight finish for drain_timeout, then returns, even while one is still
// waiting for its processor (was a fixed 30 s).
func TestDrainTimeoutEndsTheDrain(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir, nil)
	cfg.DrainTimeout = config.Duration{Duration: time.Second}
	cfg.Provider.Latency = "fixed:5s" // every simulator call, longer than the drain
	s := startServe(t, cfg)
	c := newClient(s.url, readDevKey(t, dir))
	defer c.hc.CloseIdleConnections()
	var cus, pm object
	c.must(t, "POST", "/v1/customers", "", map[string]any{"name": "Ada"}, http.StatusOK, &cus)
	c.must(t, "POST", "/v1/payment_methods", "", map[string]any{"customer": cus.ID,
		"card": map[string]any{"number": "4242424242424242", "exp_month": 12, "exp_year": 2030, "cvc": "123"}}, http.StatusOK, &pm)
	answered := make(chan struct{})
	go func() {
		defer close(answered)
		_, _ = c.do(context.Background(), "POST", "/v1/payments", "drain-1", map[string]any{"amount": 1500, "currency": "usd",
			"customer": cus.ID, "payment_method": pm.ID}) // its answer, if any, comes after serve returned
	}()
	time.Sleep(500 * time.Millisecond) // the sale reaches the simulator
	s.cancel()
	s.ended = true
	select {
	case err := <-s.done:
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "drain_timeout") {
			t.Errorf("serve returned %v, want the drain_timeout it ran out of", err)
		}
	case <-answered:
		t.Fatal("the sale was answered before serve returned: the drain waited for it, longer than drain_timeout")
	case <-time.After(stopTimeout):
		t.Fatal("serve did not return")
	}
	select {
	case <-answered:
		t.Fatal("the sale was answered before serve returned")
	default:
	}
}

// TestListeningLineSaysStartup: at info, serve's listening line says how
// long it took to take requests (startup_seconds), the figure to read
// after a restart.
func TestListeningLineSaysStartup(t *testing.T) {
	cfg := testConfig(t, t.TempDir(), map[string]string{"SURGEPAY_LOG_LEVEL": "info"})
	logs := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, cfg, newLogger(cfg, logs), io.Discard) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve returned %v", err)
		}
	}()
	if err := waitHealthy("http://"+cfg.Listen, startTimeout, done); err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(logs.String()) {
		var l struct {
			Msg     string   `json:"msg"`
			Startup *float64 `json:"startup_seconds"`
		}
		if json.Unmarshal([]byte(line), &l) != nil || l.Msg != "listening" {
			continue
		}
		if l.Startup == nil || *l.Startup <= 0 {
			t.Fatalf("listening line %s: want startup_seconds above 0", line)
		}
		return
	}
	t.Fatalf("no listening line in:\n%s", logs)
}
