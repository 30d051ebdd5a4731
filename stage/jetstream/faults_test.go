package jetstream_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/stage/jetstream"
	"github.com/surgepay/surgepay/stage/stagetest"
)

// waitPutErr puts records until Put fails with a message containing want
// and returns the number of Puts that failed otherwise first, or an error
// after a bounded number of tries. It may run outside the test's
// goroutine.
func waitPutErr(s *jetstream.Stage, want string) (int, error) {
	other := 0
	for range 200 {
		err := s.Put(context.Background(), rec(0))
		if err != nil && strings.Contains(err.Error(), want) {
			if surgepay.ErrorCode(err) != surgepay.EUNAVAILABLE {
				return other, fmt.Errorf("Put: %v, want EUNAVAILABLE", err)
			}
			return other, nil
		}
		if err != nil {
			other++
		}
		time.Sleep(50 * time.Millisecond)
	}
	return other, fmt.Errorf("Put never failed with %q", want)
}

// With NATS stopped a Put fails at once (the connection is known down)
// instead of waiting out PublishTimeout, here a minute; once NATS is back
// Puts succeed again. Before the fast path every streamlined sale waited
// for the publish to time out (5.0-6.2 s at the default) before falling
// back. A Put made in the instant between the server's death and the
// client noticing it still waits (there the breaker bounds the harm), so
// the test waits for the client to notice first.
func TestPutFailsAtOnceWhileNATSDown(t *testing.T) {
	srv := stagetest.StartNATS(t)
	disconnected := make(chan struct{})
	var once sync.Once
	s, err := jetstream.Open(context.Background(), jetstream.Config{URL: srv.URL, PublishTimeout: time.Minute,
		Options: []nats.Option{nats.ReconnectWait(50 * time.Millisecond),
			nats.DisconnectErrHandler(func(*nats.Conn, error) { once.Do(func() { close(disconnected) }) })}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	put(t, s, rec(1))
	srv.Stop()
	select {
	case <-disconnected:
	case <-time.After(30 * time.Second): // a hang guard, not a measurement
		t.Fatal("the client did not notice the server's death within 30 s")
	}
	done := make(chan error, 1)
	go func() { done <- s.Put(context.Background(), rec(0)) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "connection is down") || surgepay.ErrorCode(err) != surgepay.EUNAVAILABLE {
			t.Fatalf("Put with NATS stopped: %v, want EUNAVAILABLE, the connection is down", err)
		}
	case <-time.After(30 * time.Second): // a hang guard: without the fast path Put waits PublishTimeout, a minute
		t.Fatal("Put with NATS stopped still waiting after 30 s")
	}
	srv.Restart()
	for i := 0; ; i++ {
		if err := s.Put(context.Background(), rec(2)); err == nil {
			break
		} else if i == 400 {
			t.Fatalf("Put after NATS came back: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A stage that is connected but fails every Put (here its stream is gone)
// opens the breaker after BreakerFailuresMax failures: the next Put fails
// at once without reaching NATS.
func TestPutBreakerOpensAfterRepeatedFailures(t *testing.T) {
	srv := stagetest.StartNATS(t)
	s := open(t, srv.URL, time.Minute)
	put(t, s, rec(1))
	nc, err := nats.Connect(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := natsjs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteStream(context.Background(), jetstream.StreamDefault); err != nil {
		t.Fatal(err)
	}
	n, err := waitPutErr(s, "breaker is open")
	if err != nil {
		t.Fatal(err)
	}
	if n != jetstream.BreakerFailuresMax {
		t.Errorf("%d Puts reached the stage and failed before the breaker opened, want %d", n, jetstream.BreakerFailuresMax)
	}
}

// A NATS server that hangs (SIGSTOP: its connection stays open, nothing
// answers) is found by the stage's watch within HungAfter: a Put in
// flight is cancelled and later Puts fail at once, so that sales take the
// stage fallback, instead of each waiting PublishTimeout (a minute here;
// 5 s by default, 753 sales in a row did, one node at 300/s, before the
// breaker opened). Once the server resumes, Puts succeed again.
func TestPutFailsAtOnceWhileNATSHung(t *testing.T) {
	srv := stagetest.StartNATS(t)
	s, err := jetstream.Open(context.Background(), jetstream.Config{URL: srv.URL, PublishTimeout: time.Minute,
		HungAfter: 400 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	put(t, s, rec(1))
	srv.Pause()
	resumed := false
	defer func() {
		if !resumed {
			srv.Resume()
		}
	}()
	done := make(chan error, 1)
	go func() { done <- s.Put(context.Background(), rec(2)) }() // in flight when the server stopped
	select {
	case err := <-done:
		if err == nil || surgepay.ErrorCode(err) != surgepay.EUNAVAILABLE {
			t.Fatalf("Put with NATS stopped: %v, want EUNAVAILABLE", err)
		}
	case <-time.After(30 * time.Second): // a hang guard: without the watch Put waits PublishTimeout, a minute
		t.Fatal("Put with NATS stopped still waiting after 30 s")
	}
	// Found hung: every later Put fails at once, none waits.
	for i := range 5 {
		go func() { done <- s.Put(context.Background(), rec(10+i)) }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "hung") {
				t.Fatalf("Put %d with NATS found hung: %v, want the stage hung", i, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("Put %d with NATS found hung still waiting after 30 s", i)
		}
	}
	srv.Resume()
	resumed = true
	for i := 0; ; i++ {
		if err := s.Put(context.Background(), rec(3)); err == nil {
			break
		} else if i == 400 {
			t.Fatalf("Put after NATS resumed: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
