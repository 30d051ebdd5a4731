// Package redistest runs real redis-server processes for tests: on a free
// TCP port of 127.0.0.1 or on a unix socket, without persistence. A test
// is skipped when redis-server is not installed, unless the environment
// sets CI (then it fails: CI must install it).
package redistest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// StartTimeout bounds how long a server may take to answer PING.
const StartTimeout = 10 * time.Second

// Server is one redis-server process. Its methods are safe for concurrent
// use.
type Server struct {
	t       testing.TB
	bin     string
	Addr    string // "127.0.0.1:port", or "" for a unix-socket-only server
	Socket  string // the unix socket's path, or ""
	network string
	args    []string

	// TLSAddr is the "127.0.0.1:port" of the TLS port of a StartTLS
	// server, or "".
	TLSAddr string

	mu   sync.Mutex
	cmd  *exec.Cmd
	exit chan struct{} // closed when cmd has exited
}

// Start runs redis-server on a free port of 127.0.0.1.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := binary(t)
	port := freePort(t)
	s := &Server{t: t, bin: bin, Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), network: "tcp",
		args: []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1"}}
	s.start()
	return s
}

// TLSOptions configures the TLS port of StartTLS: the server's
// certificate and key, and the CA (PEM files) that signs the client
// certificates it asks for when AuthClients is true.
type TLSOptions struct {
	CertFile, KeyFile, CAFile string
	AuthClients               bool
}

// StartTLS runs redis-server on two free ports of 127.0.0.1: Addr plain
// (the helpers' own checks use it) and TLSAddr in TLS with o. It fails
// the test if this redis-server was built without TLS.
func StartTLS(t testing.TB, o TLSOptions) *Server {
	t.Helper()
	bin := binary(t)
	port, tlsPort := freePort(t), freePort(t)
	auth := "no"
	if o.AuthClients {
		auth = "yes"
	}
	s := &Server{t: t, bin: bin, Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		TLSAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(tlsPort)), network: "tcp",
		args: []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--tls-port", strconv.Itoa(tlsPort),
			"--tls-cert-file", o.CertFile, "--tls-key-file", o.KeyFile, "--tls-ca-cert-file", o.CAFile,
			"--tls-auth-clients", auth}}
	s.start()
	return s
}

// StartUnix runs redis-server on a unix socket only (port 0), as the
// server scope of one host would.
func StartUnix(t testing.TB) *Server {
	t.Helper()
	bin := binary(t)
	// A socket path is limited to ~107 bytes: t.TempDir can be longer.
	dir, err := os.MkdirTemp("", "redis")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "redis.sock")
	s := &Server{t: t, bin: bin, Socket: sock, network: "unix",
		args: []string{"--port", "0", "--unixsocket", sock, "--unixsocketperm", "700"}}
	s.start()
	return s
}

// URL is the address in the form cache.RedisConfig takes: host:port, or
// unix:///path for a socket.
func (s *Server) URL() string {
	if s.Socket != "" {
		return "unix://" + s.Socket
	}
	return s.Addr
}

func binary(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("redis-server not installed (CI must install it: apt-get install redis-server): %v", err)
		}
		t.Skipf("redis-server not installed: %v", err)
	}
	return bin
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (s *Server) start() {
	s.t.Helper()
	args := append([]string{"--save", "", "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning"}, s.args...)
	cmd := exec.Command(s.bin, args...)
	cmd.SysProcAttr = procAttr() // never outlive the test binary (Linux)
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start redis-server: %v", err)
	}
	exit := make(chan struct{})
	go func() { cmd.Wait(); close(exit) }()
	s.mu.Lock()
	s.cmd, s.exit = cmd, exit
	s.mu.Unlock()
	s.t.Cleanup(s.Kill)
	deadline := time.Now().Add(StartTimeout)
	for {
		if err := s.ping(); err == nil {
			return
		} else if time.Now().After(deadline) {
			s.Kill()
			s.t.Fatalf("redis-server %s did not answer PING within %s: %v", s.URL(), StartTimeout, err)
		}
		select {
		case <-exit:
			s.t.Fatalf("redis-server %s exited at start (port taken?)", s.URL())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (s *Server) dialAddr() string {
	if s.Socket != "" {
		return s.Socket
	}
	return s.Addr
}

func (s *Server) ping() error {
	_, err := s.Do("PING")
	return err
}

// Do sends one command with a plain connection and returns the first line
// of the reply (e.g. "+PONG", ":3", "$5" ...): enough for test checks.
func (s *Server) Do(args ...string) (string, error) {
	c, err := net.DialTimeout(s.network, s.dialAddr(), time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.Write([]byte(b.String())); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimRight(line, "\r\n"), err
}

// Kill ends the server with SIGKILL and waits for it: a crash, not a
// shutdown. Killing a dead server does nothing.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, exit := s.cmd, s.exit
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	if sigCont != nil {
		cmd.Process.Signal(sigCont) // a paused process dies too, but be explicit
	}
	cmd.Process.Kill()
	<-exit
}

// Restart starts the server again on the same port or socket, empty.
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	if s.Socket != "" {
		os.Remove(s.Socket)
	}
	s.start()
}

// Pause stops the process (SIGSTOP): connections are accepted by the
// kernel but never answered, like a Redis stuck on a slow command. Where
// there are no such signals (Windows) the test is skipped.
func (s *Server) Pause() { s.signal(sigStop) }

// Resume continues a paused process (SIGCONT).
func (s *Server) Resume() { s.signal(sigCont) }

func (s *Server) signal(sig os.Signal) {
	if sig == nil {
		s.t.Skip("redistest: pausing a process needs SIGSTOP and SIGCONT")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		s.cmd.Process.Signal(sig)
	}
}
