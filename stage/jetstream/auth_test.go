package jetstream_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/surgepay/surgepay/stage/jetstream"
)

// startNATSWith runs nats-server -js with extra arguments (auth) on a free
// loopback port, stopped at cleanup, and returns its URL; without the
// binary it skips, or fails under CI. (stagetest.StartNATS takes no server
// arguments.)
func startNATSWith(t *testing.T, args ...string) string {
	t.Helper()
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("CI is set but nats-server is not installed (apt-get install nats-server)")
		}
		t.Skip("nats-server not installed")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(bin, append([]string{"-js", "-a", "127.0.0.1", "-p", port, "-sd", t.TempDir()}, args...)...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			return "nats://" + addr
		} else if time.Now().After(deadline) {
			t.Fatalf("nats-server did not listen on %s: %v", addr, err)
		}
	}
}

// TestOpenAuth: a server that requires a user and password, or a token,
// takes records from a stage configured with them, and refuses a stage
// without them or with wrong ones, with an error that shows no secret.
func TestOpenAuth(t *testing.T) {
	const secret = "s3cret-Pw"
	for _, tc := range []struct {
		name   string
		server []string
		good   jetstream.Config
		bad    []jetstream.Config
	}{
		{"UserPassword", []string{"--user", "surgepay", "--pass", secret},
			jetstream.Config{User: "surgepay", Password: secret},
			[]jetstream.Config{{}, {User: "surgepay", Password: "wrong-" + secret}, {Token: secret}}},
		{"Token", []string{"--auth", secret},
			jetstream.Config{Token: secret},
			[]jetstream.Config{{}, {Token: "wrong-" + secret}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := startNATSWith(t, tc.server...)
			good := tc.good
			good.URL = url
			s, err := jetstream.Open(context.Background(), good)
			if err != nil {
				t.Fatalf("Open with the server's credentials: %v", err)
			}
			defer s.Close()
			put(t, s, rec(1))
			if n, _ := backlog(t, s); n != 1 {
				t.Errorf("backlog %d after one Put, want 1", n)
			}
			for _, bad := range tc.bad {
				bad.URL = url
				s, err := jetstream.Open(context.Background(), bad)
				if err == nil {
					s.Close()
					t.Errorf("Open with user %q, password set %t, token set %t: connected, want refused",
						bad.User, bad.Password != "", bad.Token != "")
					continue
				}
				if !strings.Contains(err.Error(), "uthoriz") || strings.Contains(err.Error(), secret) {
					t.Errorf("Open without the right credentials: %v; want an authorization error without the secret", err)
				}
			}
		})
	}
}

// TestOpenAuthContradictions: two ways to authenticate, a user without a
// password or a client certificate without its key are refused before
// connecting.
func TestOpenAuthContradictions(t *testing.T) {
	for _, c := range []jetstream.Config{
		{User: "u", Password: "p", Token: "t"},
		{CredsFile: "/x.creds", Token: "t"},
		{User: "u"},
		{TLSCertFile: "/c.pem"},
	} {
		c.URL = "nats://127.0.0.1:1" // never dialled
		if s, err := jetstream.Open(context.Background(), c); err == nil {
			s.Close()
			t.Errorf("Open(%+v) = nil error, want refused", c)
		}
	}
}
