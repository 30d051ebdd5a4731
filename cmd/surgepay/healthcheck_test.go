package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestHealthcheck: `surgepay healthcheck` with serve's configuration
// exits 0 while serve takes traffic (--live too), and 1, saying why,
// once serve has stopped.
func TestHealthcheck(t *testing.T) {
	file, cfg, srv := serveFromFile(t, "")
	check := func(args ...string) (int, string) {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), append([]string{"healthcheck", "--config", file}, args...), &stdout, &stderr)
		return code, stderr.String()
	}
	if code, errs := check(); code != 0 {
		t.Fatalf("healthcheck of a running serve: exit %d: %s", code, errs)
	}
	if code, errs := check("--live"); code != 0 {
		t.Fatalf("healthcheck --live of a running serve: exit %d: %s", code, errs)
	}
	if err := srv.stop(); err != nil {
		t.Fatal(err)
	}
	if code, errs := check(); code != 1 || !strings.Contains(errs, cfg.AdminListen) {
		t.Fatalf("healthcheck after serve stopped: exit %d, stderr %q; want 1 naming %s", code, errs, cfg.AdminListen)
	}
}
