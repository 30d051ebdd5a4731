package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/surgepay/surgepay/config"
)

// reloadTimeout bounds the wait for one reload to show: a SIGHUP is
// handled at once, a file change within config.PollInterval.
const reloadTimeout = 15 * time.Second

// TestReloadProcess runs `surgepay serve` as a process with a config file
// and checks the three ways a reload ends: a SIGHUP after a merchant
// setting changed applies it (GET /config on the admin listener, and a
// rate limit that answers 429), while a restart-only setting keeps its
// running value and is named in pending_restart; a rewrite of the file
// without a signal is applied by the watcher; a bad file is refused and
// the server goes on with the running configuration.
func TestReloadProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds surgepay and runs it: not in -short")
	}
	bin := buildSurgepay(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "surgepay.toml")
	writeConfig := func(text string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeConfig("inflight_max = 100\n")
	listen, admin := freeAddr(t), freeAddr(t)
	p := startProcess(t, "serve", bin, []string{"serve", "--config", path}, map[string]string{
		"SURGEPAY_DATA_DIR": dir, "SURGEPAY_LISTEN": listen, "SURGEPAY_ADMIN_LISTEN": admin, "SURGEPAY_LOG_FORMAT": "text"})
	if err := waitHealthy("http://"+listen, startTimeout, p.doneErr()); err != nil {
		t.Fatalf("serve: %v", err)
	}
	api := newClient("http://"+listen, readDevKey(t, dir))
	adminURL := "http://" + admin + "/config"

	// waitConfig polls GET /config until ok accepts it or reloadTimeout
	// passes.
	waitConfig := func(what string, ok func(config.View) bool) config.View {
		t.Helper()
		var v config.View
		for deadline := time.Now().Add(reloadTimeout); ; time.Sleep(50 * time.Millisecond) {
			code, body := getAuth(t, adminURL, readAdminToken(t, dir))
			v = config.View{}
			if _, err := toml.Decode(body, &v); code != http.StatusOK || err != nil {
				t.Fatalf("GET /config: status %d, %v\n%s", code, err, body)
			}
			if ok(v) {
				return v
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %s; /config rate_limit %v, inflight_max %d, pending_restart %v",
					what, reloadTimeout, v.MerchantSettings().Default.RateLimit, v.InflightMax, v.PendingRestart)
			}
		}
	}
	rateLimit := func(v config.View) float64 { return v.MerchantSettings().Default.RateLimit }
	// limited reports whether quick requests of the dev merchant meet a 429.
	limited := func() bool {
		for range 5 {
			r, err := api.do(context.Background(), "GET", "/v1/customers", "", nil)
			if err != nil {
				t.Fatalf("GET /v1/customers: %v", err)
			}
			if r.status == http.StatusTooManyRequests {
				return true
			}
		}
		return false
	}
	if v := waitConfig("the start", func(v config.View) bool { return true }); rateLimit(v) != 0 || limited() {
		t.Fatalf("at start: rate_limit %v, limited %t; want unlimited", rateLimit(v), limited())
	}

	t.Run("SIGHUP", func(t *testing.T) {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		writeConfig("inflight_max = 50\n[merchants.default]\nrate_limit = 0.01\nrate_burst = 1\n")
		// The file's old modification time: only the signal can reload it.
		if err := os.Chtimes(path, fi.ModTime(), fi.ModTime()); err != nil {
			t.Fatal(err)
		}
		if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		v := waitConfig("the SIGHUP's merchant setting", func(v config.View) bool { return rateLimit(v) == 0.01 })
		if v.InflightMax != 100 || strings.Join(v.PendingRestart, ",") != "inflight_max" {
			t.Errorf("after the SIGHUP inflight_max %d, pending_restart %v; want the running 100, [inflight_max]",
				v.InflightMax, v.PendingRestart)
		}
		if !limited() {
			t.Error("after the SIGHUP set rate_limit 0.01/s, burst 1: no 429, want one")
		}
	})

	t.Run("FileChanged", func(t *testing.T) {
		writeConfig("inflight_max = 100\n[merchants.default]\nrate_limit = 0\n")
		v := waitConfig("the rewritten file", func(v config.View) bool { return rateLimit(v) == 0 })
		if len(v.PendingRestart) != 0 {
			t.Errorf("with inflight_max back at the running value, pending_restart %v, want none", v.PendingRestart)
		}
		if limited() {
			t.Error("after the file removed the rate limit: 429, want none")
		}
	})

	t.Run("Refused", func(t *testing.T) {
		writeConfig("[merchants.default]\nrate_limit = -1\n")
		if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		// Refused twice: by the signal and by the watcher.
		for deadline := time.Now().Add(reloadTimeout); ; time.Sleep(50 * time.Millisecond) {
			b, err := os.ReadFile(p.logPath)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Count(string(b), "configuration reload refused") >= 2 {
				if !strings.Contains(string(b), "merchants.default.rate_limit") {
					t.Error("the refusal does not name merchants.default.rate_limit")
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no two refusals logged within %s", reloadTimeout)
			}
		}
		if v := waitConfig("the running configuration", func(config.View) bool { return true }); rateLimit(v) != 0 {
			t.Errorf("after a refused reload /config rate_limit %v, want the running 0", rateLimit(v))
		}
		api.must(t, "GET", "/v1/customers", "", nil, http.StatusOK, nil)
	})

	if err := p.terminate(stopTimeout); err != nil {
		t.Errorf("serve after SIGTERM: %v", err)
	}
}

// TestServeSIGHUPWhileStarting: SIGHUPs sent while serve opens its
// database and preheats (before its watcher runs) are reloads, not the
// default action that ends the process: serve comes up and answers.
func TestServeSIGHUPWhileStarting(t *testing.T) {
	if testing.Short() {
		t.Skip("builds surgepay and runs it: not in -short")
	}
	bin := buildSurgepay(t)
	dir := t.TempDir()
	listen := freeAddr(t)
	p := startProcess(t, "serve", bin, []string{"serve"}, map[string]string{
		"SURGEPAY_DATA_DIR": dir, "SURGEPAY_LISTEN": listen, "SURGEPAY_ADMIN_LISTEN": "off"})
	// The database file appears once serve is opening its store, after it
	// took over SIGHUP; from then on, signal it until it answers.
	db := filepath.Join(dir, "surgepay.db")
	for deadline := time.Now().Add(startTimeout); ; time.Sleep(time.Millisecond) {
		if _, err := os.Stat(db); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not create %s within %s", db, startTimeout)
		}
	}
	stop := make(chan struct{})
	sent := make(chan int, 1)
	go func() {
		n := 0
		defer func() { sent <- n }()
		for {
			select {
			case <-stop:
				return
			case <-p.done:
				return
			case <-time.After(2 * time.Millisecond):
				if p.cmd.Process.Signal(syscall.SIGHUP) == nil {
					n++
				}
			}
		}
	}()
	err := waitHealthy("http://"+listen, startTimeout, p.doneErr())
	close(stop)
	n := <-sent
	if err != nil {
		t.Fatalf("serve after %d SIGHUPs while starting: %v", n, err)
	}
	if n == 0 {
		t.Fatal("no SIGHUP was sent while serve started: the test proved nothing")
	}
}
