package jetstream_test

import (
	"context"
	"testing"
	"time"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/stage/jetstream"
	"github.com/surgepay/surgepay/stage/stagetest"
)

func open(t *testing.T, url string, ackWait time.Duration) *jetstream.Stage {
	t.Helper()
	s, err := jetstream.Open(context.Background(), jetstream.Config{URL: url, AckWait: ackWait})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func rec(n int) *surgepay.StagedRecord {
	return &surgepay.StagedRecord{ID: surgepay.NewID("stg"), MerchantID: "mer_1", PaymentID: surgepay.NewID("pay"),
		Sealed: []byte{byte(n), 1, 2, 3}, Created: time.Now().Add(-time.Duration(n) * time.Second).UTC()}
}

func put(t *testing.T, s *jetstream.Stage, recs ...*surgepay.StagedRecord) {
	t.Helper()
	for _, r := range recs {
		if err := s.Put(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
}

func backlog(t *testing.T, s *jetstream.Stage) (int, time.Time) {
	t.Helper()
	n, oldest, err := s.Backlog(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n, oldest
}

func TestPutFetchAck(t *testing.T) {
	srv := stagetest.StartNATS(t)
	s := open(t, srv.URL, 0)
	ctx := context.Background()
	if n, oldest := backlog(t, s); n != 0 || !oldest.IsZero() {
		t.Fatalf("empty backlog: %d, %v", n, oldest)
	}
	a, b, c := rec(3), rec(2), rec(1)
	before := time.Now()
	put(t, s, a, b, c)
	if n, oldest := backlog(t, s); n != 3 || oldest.Before(before.Add(-time.Second)) || oldest.After(time.Now()) {
		t.Errorf("backlog %d oldest %v, want 3 stored after %v", n, oldest, before)
	}
	got, err := s.Fetch(ctx, 2, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != a.ID || got[1].ID != b.ID {
		t.Fatalf("fetched %d, want a and b in order", len(got))
	}
	g := got[0]
	if g.MerchantID != a.MerchantID || g.PaymentID != a.PaymentID || string(g.Sealed) != string(a.Sealed) || !g.Created.Equal(a.Created) {
		t.Errorf("got %+v, want %+v", g, a)
	}
	if err := s.Ack(ctx, got); err != nil {
		t.Fatal(err)
	}
	if n, _ := backlog(t, s); n != 1 {
		t.Errorf("backlog after ack %d, want 1", n)
	}
	rest, err := s.Fetch(ctx, 10, 200*time.Millisecond)
	if err != nil || len(rest) != 1 || rest[0].ID != c.ID {
		t.Fatalf("fetch rest: %v, %d records", err, len(rest))
	}
	if err := s.Ack(ctx, rest); err != nil {
		t.Fatal(err)
	}
	if n, _ := backlog(t, s); n != 0 {
		t.Errorf("backlog %d, want 0", n)
	}
	none, err := s.Fetch(ctx, 10, 100*time.Millisecond)
	if err != nil || len(none) != 0 {
		t.Errorf("fetch from empty: %v, %d records", err, len(none))
	}
}

func TestDuplicateIDStoredOnce(t *testing.T) {
	srv := stagetest.StartNATS(t)
	s := open(t, srv.URL, 0)
	r := rec(0)
	put(t, s, r, r, r)
	if n, _ := backlog(t, s); n != 1 {
		t.Errorf("backlog %d after 3 puts of one ID, want 1", n)
	}
}

func TestUnackedRedelivered(t *testing.T) {
	srv := stagetest.StartNATS(t)
	s := open(t, srv.URL, 2*time.Second)
	ctx := context.Background()
	r := rec(0)
	put(t, s, r)
	first, err := s.Fetch(ctx, 10, 200*time.Millisecond)
	if err != nil || len(first) != 1 {
		t.Fatalf("first fetch: %v, %d", err, len(first))
	}
	if again, _ := s.Fetch(ctx, 10, 100*time.Millisecond); len(again) != 0 {
		t.Fatalf("redelivered before AckWait")
	}
	if n, _ := backlog(t, s); n != 1 {
		t.Errorf("backlog %d while unacked, want 1", n)
	}
	again, err := s.Fetch(ctx, 10, 3*time.Second)
	if err != nil || len(again) != 1 || again[0].ID != r.ID {
		t.Fatalf("after AckWait: %v, %d records, want the record again", err, len(again))
	}
	if err := s.Ack(ctx, again); err != nil {
		t.Fatal(err)
	}
	if n, _ := backlog(t, s); n != 0 {
		t.Errorf("backlog %d, want 0", n)
	}
}

// TestReleaseComesBackBeforeAckWait: a released record is delivered
// again after its delay, not after the consumer's AckWait (an hour here),
// and only once it is acknowledged does it leave the stream.
func TestReleaseComesBackBeforeAckWait(t *testing.T) {
	srv := stagetest.StartNATS(t)
	s := open(t, srv.URL, time.Hour)
	ctx := context.Background()
	a, b := rec(1), rec(0)
	put(t, s, a, b)
	got, err := s.Fetch(ctx, 10, time.Second)
	if err != nil || len(got) != 2 {
		t.Fatalf("fetch: %v, %d records", err, len(got))
	}
	if err := s.Release(ctx, got[:1], 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, got[1:], time.Hour); err != nil {
		t.Fatal(err)
	}
	again, err := s.Fetch(ctx, 10, 5*time.Second)
	if err != nil || len(again) != 1 || again[0].ID != a.ID {
		t.Fatalf("after release at once: %v, %d records, want a again", err, len(again))
	}
	if err := s.Release(ctx, again, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if none, _ := s.Fetch(ctx, 10, time.Millisecond); len(none) != 0 {
		t.Fatalf("a record released for 300ms came back at once (%d records)", len(none))
	}
	third, err := s.Fetch(ctx, 10, 10*time.Second)
	if err != nil || len(third) != 1 || third[0].ID != a.ID {
		t.Fatalf("after release for 300ms: %v, %d records, want a again", err, len(third))
	}
	if err := s.Ack(ctx, third); err != nil {
		t.Fatal(err)
	}
	if n, _ := backlog(t, s); n != 1 {
		t.Errorf("backlog %d, want b only (released for an hour)", n)
	}
	// A released delivery is answered: acknowledging it sends nothing.
	if err := s.Ack(ctx, got[1:]); err != nil {
		t.Fatal(err)
	}
	if n, _ := backlog(t, s); n != 1 {
		t.Errorf("backlog %d after acknowledging a released delivery, want 1", n)
	}
}

// TestAckWaitSetByLastOpen: the consumer's AckWait is the last opener's,
// as each settlement process sets its --ack-wait.
func TestAckWaitSetByLastOpen(t *testing.T) {
	srv := stagetest.StartNATS(t)
	ctx := context.Background()
	long := open(t, srv.URL, time.Hour)
	put(t, long, rec(0))
	if got, err := long.Fetch(ctx, 10, time.Second); err != nil || len(got) != 1 {
		t.Fatalf("fetch: %v, %d records", err, len(got))
	}
	long.Close()
	short := open(t, srv.URL, time.Second)
	if short.AckWait() != time.Second {
		t.Errorf("AckWait() %s, want 1s", short.AckWait())
	}
	// Delivered under the hour's AckWait, but the consumer now has 1s.
	got, err := short.Fetch(ctx, 10, 5*time.Second)
	if err != nil || len(got) != 1 {
		t.Fatalf("after reopening with AckWait 1s: %v, %d records, want the record again", err, len(got))
	}
}

// TestSurvivesServerCrash: a stored record outlives a SIGKILL of the
// server. An acknowledgement may be lost with the crash (the server flushes
// its consumer state lazily): the stage is at-least-once, and settlement
// makes a second delivery harmless.
func TestSurvivesServerCrash(t *testing.T) {
	srv := stagetest.StartNATS(t)
	s := open(t, srv.URL, 5*time.Second)
	a, b := rec(1), rec(0)
	put(t, s, a, b)
	got, err := s.Fetch(context.Background(), 1, time.Second)
	if err != nil || len(got) != 1 {
		t.Fatal(err)
	}
	if err := s.Ack(context.Background(), got); err != nil {
		t.Fatal(err)
	}
	s.Close()
	srv.Restart()
	s2 := open(t, srv.URL, 5*time.Second)
	rest, err := s2.Fetch(context.Background(), 10, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, r := range rest {
		ids[r.ID] = true
	}
	if !ids[b.ID] || len(rest) > 2 || len(ids) != len(rest) {
		t.Fatalf("after the crash: %d records %v, want b (and perhaps a) once each", len(rest), ids)
	}
}

func TestOpenErrors(t *testing.T) {
	if _, err := jetstream.Open(context.Background(), jetstream.Config{}); err == nil {
		t.Error("Open without URL: got nil error")
	}
	if _, err := jetstream.Open(context.Background(), jetstream.Config{URL: "nats://user:secret@127.0.0.1:1"}); err == nil {
		t.Error("Open with nothing listening: got nil error")
	} else if contains(err.Error(), "secret") {
		t.Errorf("error shows the password: %v", err)
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}
