package jetstream_test

import (
	"context"
	"strings"
	"testing"

	"github.com/surgepay/surgepay/stage/jetstream"
	"github.com/surgepay/surgepay/stage/stagetest"
)

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
			url := stagetest.StartNATS(t, tc.server...).URL
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
