//go:build unix

package webhook_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/internal/testenv"
	"github.com/surgepay/surgepay/postgres"
	"github.com/surgepay/surgepay/sqlite"
	"github.com/surgepay/surgepay/webhook"
)

// restartChildEnv tells a child process of TestOutboxSurvivesRestart what
// to write to: "sqlite|<path>|<merchant>" or "postgres|<schema>|<merchant>".
const restartChildEnv = "SURGEPAY_WEBHOOK_RESTART_CHILD"

// TestOutboxSurvivesRestart stores a sale with its webhook in a child
// process, which prints the event's ID once Apply returned (the client
// would have been answered) and dies by SIGKILL without closing the
// store. Reopened by another process, the store holds the delivery, and a
// dispatcher delivers it.
func TestOutboxSurvivesRestart(t *testing.T) {
	if v := os.Getenv(restartChildEnv); v != "" {
		restartChild(t, v)
		return
	}
	t.Run("sqlite", func(t *testing.T) {
		rcv := newReceiver(t)
		path := filepath.Join(t.TempDir(), "surgepay.db")
		db, err := sqlite.Open(t.Context(), sqlite.Config{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		f := newFixture(t, db, rcv.srv.URL)
		db.Close() // one process at a time on a SQLite file
		id := runChild(t, "sqlite|"+path+"|"+f.merchant)
		db, err = sqlite.Open(t.Context(), sqlite.Config{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		f.store, f.ws = db, db
		wantDelivered(t, f, rcv, id)
	})
	t.Run("postgres", func(t *testing.T) {
		rcv := newReceiver(t)
		db, schema := testenv.OpenPostgresSchema(t)
		f := newFixture(t, db, rcv.srv.URL)
		id := runChild(t, "postgres|"+schema+"|"+f.merchant)
		wantDelivered(t, f, rcv, id)
	})
}

// runChild runs the child and returns the event ID it acknowledged.
func runChild(t *testing.T, arg string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestOutboxSurvivesRestart$", "-test.count=1")
	cmd.Env = append(os.Environ(), restartChildEnv+"="+arg)
	out, err := cmd.Output()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child: %v, want death by SIGKILL; output:\n%s", err, out)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if id, ok := strings.CutPrefix(sc.Text(), "acknowledged "); ok {
			return id
		}
	}
	t.Fatalf("child acknowledged nothing; output:\n%s", out)
	return ""
}

func wantDelivered(t *testing.T, f *fixture, rcv *receiver, eventID string) {
	t.Helper()
	if bl := backlog(t, f.ws); bl.Pending != 1 {
		t.Fatalf("after the restart, backlog = %+v, want the 1 pending delivery", bl)
	}
	d := f.dispatcher(t, webhook.Config{})
	deliverDue(t, d)
	got := rcv.requests()
	if len(got) != 1 || got[0].header.Get(webhook.HeaderEventID) != eventID {
		t.Fatalf("receiver got %d requests, want 1 of event %s", len(got), eventID)
	}
	if err := webhook.Verify(f.secret, got[0].header.Get(webhook.HeaderSignature), got[0].body, 5*time.Minute, f.clock.Now()); err != nil {
		t.Errorf("signature: %v", err)
	}
}

func restartChild(t *testing.T, arg string) {
	parts := strings.Split(arg, "|")
	kind, where, merchant := parts[0], parts[1], parts[2]
	ctx := context.Background()
	var store surgepay.Store
	var err error
	if kind == "sqlite" {
		store, err = sqlite.Open(ctx, sqlite.Config{Path: where})
	} else {
		store, err = postgres.Open(ctx, postgres.Config{DSN: testenv.PostgresURL(t), Schema: where})
	}
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{store: store, ws: store.(surgepay.WebhookStore), merchant: merchant}
	w := f.sale(t, f.outbox(t))
	fmt.Printf("acknowledged %s\n", w.Webhook.ID)
	_ = os.Stdout.Sync() // best effort before the SIGKILL; the parent checks the line
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}
