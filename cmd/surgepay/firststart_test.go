package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/surgepay/surgepay/internal/datadir"
)

// TestServeFirstStartHintSendsJSON is issue 34 item 12: the curl that
// the first start prints sent no Content-Type, and the API answered
// 415. The printed command, run as printed, creates a customer.
func TestServeFirstStartHintSendsJSON(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("curl is not on the PATH")
		}
		t.Skip("curl is not on the PATH")
	}
	s := startServe(t, testConfig(t, t.TempDir(), nil))
	var hint string
	for _, line := range strings.Split(s.out.String(), "\n") {
		if cmd, ok := strings.CutPrefix(strings.TrimSpace(line), "Try:"); ok {
			hint = strings.TrimSpace(cmd)
		}
	}
	if !strings.HasPrefix(hint, "curl ") {
		t.Fatalf("first start printed no Try: curl line:\n%s", s.out)
	}
	// The shell runs the line as printed; -w adds the status after the body.
	out, err := exec.Command("sh", "-c", hint+` -w '\n%{http_code}'`).CombinedOutput()
	if err != nil {
		t.Fatalf("%s (%s): %v\n%s", hint, curl, err, out)
	}
	text := strings.TrimSpace(string(out))
	i := strings.LastIndexByte(text, '\n')
	body, code := strings.TrimSpace(text[:max(i, 0)]), text[i+1:]
	if code != "200" && code != "201" || !strings.Contains(body, `"cus_`) {
		t.Errorf("the first start's hint %s: status %s, body %s; want 200 or 201 with a customer", hint, code, body)
	}
}

// TestServeTightensLooseDataDir is issue 34 item 12: an existing data
// folder of mode 0755 (mkdir's) stayed 0755. serve tightens it to 0700
// and says so; a folder others can write is refused, naming the mode.
func TestServeTightensLooseDataDir(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("modes are not permissions on Windows")
	}
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil { // whatever the umask
		t.Fatal(err)
	}
	s := startServe(t, testConfig(t, dir, nil))
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o700 {
		t.Errorf("data folder mode %v after serve started in a 0755 one, want 0700", got)
	}
	if !strings.Contains(s.logs.String(), "data folder tightened") {
		t.Errorf("serve tightened the data folder without saying so; logs:\n%s", s.logs)
	}

	shared := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	err = datadir.Ensure(shared, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "others write") || !strings.Contains(err.Error(), shared) {
		t.Errorf("a data folder of mode 0777: %v; want refused, naming it and why", err)
	}
	if fi, _ := os.Stat(shared); fi.Mode().Perm() != 0o777 {
		t.Errorf("a refused data folder's mode changed to %v", fi.Mode().Perm())
	}
}

// TestServeAdminTokenLooseRefusedFirst is issue 34 item 12: an
// admin-token file that others can read was refused only after the
// development merchant and its key were created and printed. serve
// refuses it before it creates or prints anything.
func TestServeAdminTokenLooseRefusedFirst(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("modes are not permissions on Windows")
	}
	dir := t.TempDir()
	cfg := testConfig(t, dir, nil)
	if err := os.WriteFile(cfg.AdminTokenFile, []byte("loose-admin-token-0123456789\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(cfg.AdminTokenFile, 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err := serve(context.Background(), cfg, slog.New(slog.DiscardHandler), &out)
	if err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("serve with a 0644 admin-token: %v; want refused with chmod 600", err)
	}
	if out.Len() > 0 {
		t.Errorf("serve printed %q before refusing the admin token, want nothing", out.String())
	}
	for _, name := range []string{"dev-api-key", "surgepay.db", "keyring.json"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			t.Errorf("serve created %s before refusing the admin token", name)
		}
	}
}

// TestServeWithoutDevMerchant: with dev_merchant = false, a first start on
// an empty database creates no merchant and no key, writes no
// dev-api-key and prints no key; with the default it does (the README's
// first payment).
func TestServeWithoutDevMerchant(t *testing.T) {
	for _, on := range []bool{false, true} {
		t.Run(fmt.Sprint("dev_merchant=", on), func(t *testing.T) {
			dir := t.TempDir()
			cfg := testConfig(t, dir, map[string]string{"SURGEPAY_DEV_MERCHANT": fmt.Sprint(on)})
			s := startServe(t, cfg)
			if err := s.stop(); err != nil {
				t.Fatal(err)
			}
			_, err := os.Stat(filepath.Join(dir, "dev-api-key"))
			printed := strings.Contains(s.out.String(), "Created development merchant")
			if on != (err == nil) || on != printed {
				t.Errorf("dev-api-key written %v, key printed %v; want both %v\nstdout: %s", err == nil, printed, on, s.out)
			}
		})
	}
}
