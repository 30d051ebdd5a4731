// Package stripedouble runs the local Stripe doubles the connector's tests
// use, as real processes on loopback ports, and a loopback proxy in front
// of them that injects faults.
//
//   - stripe-mock (Stripe's own, stateless) checks every request against
//     Stripe's OpenAPI spec and answers with fixtures.
//   - localstripe (PyPI) is stateful: PaymentIntents with manual and
//     partial capture, cancel, refunds, decline test cards. It lacks two
//     things the connector relies on, which the Proxy adds as Stripe
//     documents them: idempotent requests (a key replays its first answer;
//     other parameters get idempotency_error; a key in progress gets 409)
//     and PaymentIntent search by metadata.
//
// .ci/run installs both. Without them the tests skip, and under CI
// (CI=true) they fail instead.
package stripedouble

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// startTimeout bounds how long a double may take to answer after start.
const startTimeout = 30 * time.Second

// missing skips the test, or fails it under CI.
func missing(t testing.TB, what string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("%s is not installed (.ci/run installs it)", what)
	}
	t.Skipf("%s is not installed; .ci/run shows how to install it", what)
}

// StripeMockPath returns the stripe-mock binary, or "".
func StripeMockPath() string {
	if p, err := exec.LookPath("stripe-mock"); err == nil {
		return p
	}
	gopath := os.Getenv("GOPATH")
	if gopath == "" {
		home, _ := os.UserHomeDir()
		gopath = filepath.Join(home, "go")
	}
	p := filepath.Join(gopath, "bin", "stripe-mock")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	return ""
}

// LocalstripePython returns a Python interpreter that can import
// localstripe: $SURGEPAY_LOCALSTRIPE_PYTHON, the virtualenv .ci/run makes
// (/opt/localstripe), or python3; "" if none can.
func LocalstripePython() string {
	for _, py := range []string{os.Getenv("SURGEPAY_LOCALSTRIPE_PYTHON"), "/opt/localstripe/bin/python", "python3"} {
		if py == "" {
			continue
		}
		if exec.Command(py, "-c", "import localstripe").Run() == nil {
			return py
		}
	}
	return ""
}

// StartStripeMock starts stripe-mock on a free loopback port for the test
// and returns its base URL.
func StartStripeMock(t testing.TB) string {
	t.Helper()
	bin := StripeMockPath()
	if bin == "" {
		missing(t, "stripe-mock")
	}
	for try := 0; ; try++ {
		port := freePort(t)
		addr := "127.0.0.1:" + strconv.Itoa(port)
		cmd := exec.Command(bin, "-http-addr", addr)
		if err := cmd.Start(); err != nil {
			t.Fatalf("start stripe-mock: %v", err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		if waitTCP(addr, startTimeout) {
			return "http://" + addr
		}
		if try >= 2 {
			t.Fatalf("stripe-mock did not listen on %s", addr)
		}
	}
}

// localstripeMain starts localstripe's app on a free loopback port (its
// own command binds every interface) with its per-write dump of the whole
// store to /tmp turned off, and prints the port.
const localstripeMain = `
import socket
from aiohttp import web
from localstripe import resources, server
resources.Store.dump_to_disk = lambda self: None
sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
sock.bind(('127.0.0.1', 0))
print(sock.getsockname()[1], flush=True)
web.run_app(server.app, sock=sock, print=None, access_log=None)
`

// StartLocalstripe starts localstripe on a free loopback port for the test
// and returns its base URL.
func StartLocalstripe(t testing.TB) string {
	t.Helper()
	py := LocalstripePython()
	if py == "" {
		missing(t, "localstripe")
	}
	cmd := exec.Command(py, "-c", localstripeMain)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start localstripe: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			line <- strings.TrimSpace(sc.Text())
		}
		close(line)
	}()
	select {
	case port, ok := <-line:
		if !ok || port == "" {
			t.Fatal("localstripe exited before listening")
		}
		addr := "127.0.0.1:" + port
		if !waitTCP(addr, startTimeout) {
			t.Fatalf("localstripe did not listen on %s", addr)
		}
		return "http://" + addr
	case <-time.After(startTimeout):
		t.Fatal("localstripe did not start")
	}
	return ""
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func waitTCP(addr string, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for ctx.Err() == nil {
		c, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", addr)
		if err == nil {
			c.Close()
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// Get fetches a JSON list or object from a double, for tests that inspect
// its state.
func Get(base, path string) (*http.Response, error) {
	req, err := http.NewRequest("GET", base+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer sk_test_double")
	return http.DefaultClient.Do(req)
}

// GetJSON decodes a GET of path at a double into v, failing the test on
// any error.
func GetJSON(t testing.TB, base, path string, v any) {
	t.Helper()
	resp, err := Get(base, path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %s", path, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}
