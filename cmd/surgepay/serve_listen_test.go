package main

import (
	"net"
	"strings"
	"testing"
)

// TestServeListenInUse: serve on a port in use (the API's or the admin
// listener's) exits non-zero with one human line naming the address and
// the settings to change, after the JSON log line, and creates nothing: it
// used to create the data folder, a merchant and an API key first.
func TestServeListenInUse(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	addr := busy.Addr().String()
	isolateEnv(t)
	for _, tc := range []struct {
		name, listen, admin, want string
	}{
		{"API", addr, "off", addr + " is already in use; set SURGEPAY_LISTEN or listen in the config file"},
		{"Admin", "127.0.0.1:0", addr, addr + ` is already in use; set SURGEPAY_ADMIN_LISTEN or admin_listen (or "off") in the config file`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("SURGEPAY_LISTEN", tc.listen)
			t.Setenv("SURGEPAY_ADMIN_LISTEN", tc.admin)
			code, stdout, stderr, created := runIn(t, "serve")
			if code == 0 {
				t.Errorf("exit 0, want non-zero")
			}
			var lines []string // the INFO lines of start-up (GC settings) aside
			for _, l := range strings.Split(strings.TrimSuffix(stderr, "\n"), "\n") {
				if !strings.HasPrefix(l, "{") || !strings.Contains(l, `"level":"INFO"`) {
					lines = append(lines, l)
				}
			}
			if last := lines[len(lines)-1]; last != "surgepay: "+tc.want {
				t.Errorf("last line on stderr: got %q, want %q", last, "surgepay: "+tc.want)
			}
			if len(lines) != 2 || !strings.HasPrefix(lines[0], "{") || !strings.Contains(lines[0], `"level":"ERROR"`) {
				t.Errorf("stderr: got %q, want the JSON log line, then the human one", stderr)
			}
			if stdout != "" || len(created) > 0 {
				t.Errorf("stdout %q, created %v, want nothing (no data folder, no dev-api-key)", stdout, created)
			}
		})
	}
}
