package stagetest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// NATSServer is a real nats-server with JetStream, run by a test.
type NATSServer struct {
	URL  string
	addr string
	dir  string
	args []string // more server arguments (e.g. auth)
	cmd  *exec.Cmd
	t    testing.TB
}

// StartNATS starts `nats-server -js` with args on a free loopback port with
// its store in a temporary folder, stopped at cleanup. Without the binary
// the test is skipped, unless CI is set: then it fails.
func StartNATS(t testing.TB, args ...string) *NATSServer {
	t.Helper()
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		if _, serr := os.Stat("/usr/bin/nats-server"); serr == nil {
			bin = "/usr/bin/nats-server"
		} else if os.Getenv("CI") != "" {
			t.Fatal("CI is set but nats-server is not installed (apt-get install nats-server)")
		} else {
			t.Skip("nats-server not installed")
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	s := &NATSServer{URL: "nats://" + addr, addr: addr, dir: t.TempDir(), args: args, t: t}
	s.start(bin)
	t.Cleanup(s.Stop)
	return s
}

func (s *NATSServer) start(bin string) {
	s.t.Helper()
	_, port, _ := net.SplitHostPort(s.addr)
	s.cmd = exec.Command(bin, append([]string{"-js", "-a", "127.0.0.1", "-p", port, "-sd", s.dir}, s.args...)...)
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", s.addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			s.Stop()
			s.t.Fatalf("nats-server did not listen on %s: %v", s.addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Restart stops the server and starts it again on the same port and
// store, as after a crash (SIGKILL).
func (s *NATSServer) Restart() {
	s.t.Helper()
	bin := s.cmd.Path
	s.Stop()
	s.start(bin)
}

// Pause stops the server with SIGSTOP: its connections stay open and
// nothing answers, as with a frozen host. Resume (or Stop) ends it.
func (s *NATSServer) Pause() {
	s.t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		s.t.Fatal(err)
	}
	// A signal is delivered when the kernel next schedules the process: on
	// a busy machine its threads may still answer for a moment. Wait
	// until /proc says it is stopped (state T), so that what the test
	// sends next meets a stopped server.
	stat := fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid)
	for deadline := time.Now().Add(pauseWaitMax); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		b, err := os.ReadFile(stat) //nolint:gosec // G304: this process's own child
		if err != nil {
			return // no /proc (not Linux): the signal alone
		}
		// The state follows the command name's closing parenthesis.
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && b[i+2] == 'T' {
			return
		}
	}
	s.t.Fatalf("nats-server (pid %d) not stopped %s after SIGSTOP", s.cmd.Process.Pid, pauseWaitMax)
}

// pauseWaitMax bounds Pause's wait for the server to be stopped.
const pauseWaitMax = 5 * time.Second

// Resume continues a paused server (SIGCONT).
func (s *NATSServer) Resume() {
	s.t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		s.t.Fatal(err)
	}
}

// Stop kills the server and waits for it.
func (s *NATSServer) Stop() {
	if s.cmd == nil || s.cmd.Process == nil || s.cmd.ProcessState != nil {
		return
	}
	s.cmd.Process.Kill() // SIGKILL ends a paused process too
	s.cmd.Wait()
}

func (s *NATSServer) String() string { return fmt.Sprintf("nats-server at %s", s.URL) }
