package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// serveStartMax bounds the wait for `surgepay serve` to listen: opening
// a large SQLite file indexes the idempotency records after indexed_upto
// first (a fraction of a second for the sample).
const serveStartMax = 5 * time.Minute

// server is a running `surgepay serve`.
type server struct {
	cmd                 *exec.Cmd
	api, admin          string // base URLs
	apiKey, adminToken  string // the dev merchant's key, the admin token
	dataDir, stderrPath string
	done                chan error // Wait's answer
}

// serveConfig writes the configuration of `surgepay serve` on the fill's
// store and returns its path. sales makes the merchants' sales the
// event's (streamlined, minimal audit, no analytics: bench/event.sh);
// the fill's templates are made on the standard path, so that a sale can
// be refunded at once.
func serveConfig(o *options, name string, sales bool) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "listen = \"127.0.0.1:%d\"\nadmin_listen = \"127.0.0.1:%d\"\n", o.port, o.adminPort)
	fmt.Fprintf(&b, "data_dir = %q\nlog_level = \"warn\"\n", filepath.Join(o.dir, "data"))
	// The sample of idempotency keys spans the fill's 30 days: kept a
	// year, it is still there when the fill is reused.
	b.WriteString("idempotency_retention = \"8760h\"\n")
	if o.store == "postgres" {
		b.WriteString("storage = \"postgres\"\n")
	}
	if sales {
		keys := filepath.Join(o.work, "keys")
		if _, err := os.Stat(filepath.Join(keys, "settlement.pub")); err != nil {
			out, err := exec.Command(o.bin, "keys", "settlement", "--out", keys).CombinedOutput() //nolint:gosec // as serve
			if err != nil {
				return "", fmt.Errorf("surgepay keys settlement: %v: %s", err, out)
			}
		}
		b.WriteString("[merchants.default]\nprocessing = \"streamlined\"\naudit = \"minimal\"\nanalytics = \"off\"\n")
		fmt.Fprintf(&b, "[stage]\npublic_key_file = %q\n", filepath.Join(keys, "settlement.pub"))
	}
	// The DSN (with its password) goes by SURGEPAY_POSTGRES_DSN only
	// (startServe), never into a file.
	path := filepath.Join(o.work, name+".toml")
	return path, os.WriteFile(path, []byte(b.String()), 0o600)
}

// startServe starts `surgepay serve` with the configuration at cfg and
// waits until both listeners answer. Its output goes to WORK/NAME.err.
func startServe(ctx context.Context, o *options, cfg, name string) (*server, error) {
	s := &server{api: "http://127.0.0.1:" + strconv.Itoa(o.port), admin: "http://127.0.0.1:" + strconv.Itoa(o.adminPort),
		dataDir: filepath.Join(o.dir, "data"), stderrPath: filepath.Join(o.work, name+".err")}
	for _, p := range []int{o.port, o.adminPort} {
		if c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(p), 200*time.Millisecond); err == nil {
			c.Close() //nolint:errcheck // a probe; the port is taken either way
			return nil, fmt.Errorf("port %d is already taken", p)
		}
	}
	errf, err := os.Create(s.stderrPath)
	if err != nil {
		return nil, err
	}
	defer errf.Close()                                    //nolint:errcheck // the child writes through its own descriptor
	s.cmd = exec.Command(o.bin, "serve", "--config", cfg) //nolint:gosec // the operator's own binary (-bin)
	s.cmd.Stdout, s.cmd.Stderr = errf, errf
	if o.store == "postgres" {
		s.cmd.Env = append(os.Environ(), "SURGEPAY_POSTGRES_DSN="+o.pgURL)
	}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start serve: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- s.cmd.Wait() }()
	deadline := time.Now().Add(serveStartMax)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			return nil, fmt.Errorf("serve exited (%v): see %s:\n%s", err, s.stderrPath, tail(s.stderrPath))
		case <-ctx.Done():
			s.stopWith(exited)
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if s.ready() {
			s.done = exited
			return s, nil
		}
	}
	s.stopWith(exited)
	return nil, fmt.Errorf("serve did not listen within %s: see %s", serveStartMax, s.stderrPath)
}

func (s *server) ready() bool {
	key, err1 := os.ReadFile(filepath.Join(s.dataDir, "dev-api-key"))
	tok, err2 := os.ReadFile(filepath.Join(s.dataDir, "admin-token"))
	if err1 != nil || err2 != nil {
		return false
	}
	s.apiKey, s.adminToken = strings.TrimSpace(string(key)), strings.TrimSpace(string(tok))
	for _, u := range []string{s.api + "/readyz", s.admin + "/readyz"} {
		resp, err := http.Get(u) //nolint:gosec // the server this program started, on 127.0.0.1
		if err != nil {
			return false
		}
		resp.Body.Close() //nolint:errcheck // a probe: the status is enough
	}
	return true
}

// stop ends the server (SIGTERM, then SIGKILL after 30 s) and waits.
func (s *server) stop() { s.stopWith(s.done) }

func (s *server) stopWith(exited chan error) {
	if s == nil || s.cmd == nil || s.cmd.Process == nil {
		return
	}
	// A stopped server's exit status is SIGTERM's (or SIGKILL's): not
	// an error of the benchmark, so Wait's answer is dropped.
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited: //nolint:errcheck // see above
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-exited //nolint:errcheck // see above
	}
}

// call sends an API (or admin, with admin true) request and decodes the
// JSON answer into out; key is an Idempotency-Key or "".
func (s *server) call(method, path, body string, admin bool, out any) (int, error) {
	base, auth := s.api, s.apiKey
	if admin {
		base, auth = s.admin, s.adminToken
	}
	req, err := http.NewRequest(method, base+path, bytes.NewBufferString(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+auth)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close() //nolint:errcheck // read with ReadAll, whose error is checked
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return resp.StatusCode, err
	}
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, b)
		}
	}
	return resp.StatusCode, nil
}

// tail returns the last lines of a log.
func tail(path string) string {
	b, _ := os.ReadFile(path) //nolint:gosec // the server's log in the work folder
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-10):], "\n")
}
