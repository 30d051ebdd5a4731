package telemetry_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/surgepay/surgepay/groupcommit"
	"github.com/surgepay/surgepay/telemetry"
)

// TestSettleMetricsHandler: settle's /metrics shows its SettleStat as read
// at each scrape, under the documented names, with declines collapsed into
// one reason (decline codes are the networks': unbounded).
func TestSettleMetricsHandler(t *testing.T) {
	var mu sync.Mutex
	st := telemetry.SettleStat{}
	srv := httptest.NewServer(telemetry.SettleMetricsHandler(func() telemetry.SettleStat {
		mu.Lock()
		defer mu.Unlock()
		return st
	}))
	defer srv.Close()
	scrape := func() string {
		t.Helper()
		res, err := http.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != 200 {
			t.Fatalf("status %d: %s", res.StatusCode, b)
		}
		return string(b)
	}
	want := func(body string, lines ...string) {
		t.Helper()
		for _, l := range lines {
			if !strings.Contains(body, "\n"+l+"\n") {
				t.Errorf("/metrics lacks %q:\n%s", l, body)
			}
		}
	}
	want(scrape(), "surgepay_settle_captures_total 0", "surgepay_settle_backlog_records 0",
		"# TYPE surgepay_settle_captures_total counter", "# TYPE surgepay_settle_backlog_records gauge")

	mu.Lock()
	st = telemetry.SettleStat{BacklogDepth: 40, OldestAge: 90 * time.Second, LastBatchSize: 7, CapturesPerSecond: 1234.5,
		Captured: 17, Failed: 2, Left: 1, Failures: map[string]int{"tampered": 1, "declined:insufficient_funds": 1,
			"declined:do_not_honor": 1, "retry_later": 3}}
	mu.Unlock()
	body := scrape()
	want(body,
		"surgepay_settle_backlog_records 40",
		"surgepay_settle_backlog_oldest_age_seconds 90",
		"surgepay_settle_last_batch_size 7",
		"surgepay_settle_captures_per_second 1234.5",
		"surgepay_settle_captures_total 17",
		"surgepay_settle_captures_failed_total 2",
		"surgepay_settle_left_records 1",
		`surgepay_settle_failures_total{reason="declined"} 2`,
		`surgepay_settle_failures_total{reason="retry_later"} 3`,
		`surgepay_settle_failures_total{reason="tampered"} 1`,
		"# TYPE surgepay_settle_failures_total counter",
	)
	if strings.Contains(body, "insufficient_funds") {
		t.Errorf("a decline code became a label value:\n%s", body)
	}
	if !strings.Contains(body, "go_goroutines") || !strings.Contains(body, "process_") {
		t.Errorf("/metrics lacks the Go runtime's and the process's metrics")
	}
}

// The group committer's longest recent stall is a gauge in seconds.
func TestGroupCommitStallGauge(t *testing.T) {
	tel, err := telemetry.New(telemetry.DefaultConfig(), telemetry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	err = tel.RegisterGroupCommit(telemetry.GroupCommit{Stats: func() groupcommit.Stats {
		return groupcommit.Stats{Batches: 3, Items: 9, StallMax: 1500 * time.Millisecond}
	}, QueueDepth: func() int { return 2 }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(tel.MetricsHandler())
	defer srv.Close()
	res, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	for _, want := range []string{"surgepay_groupcommit_stall_seconds 1.5", "surgepay_groupcommit_batches_total 3",
		"surgepay_groupcommit_queue_depth 2"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// TestCacheMemoryGauges: what each cache entity holds in memory, entries
// and bytes, is on /metrics as gauges beside its counters.
func TestCacheMemoryGauges(t *testing.T) {
	tel, err := telemetry.New(telemetry.DefaultConfig(), telemetry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	err = tel.RegisterCache(func() []telemetry.CacheStat {
		return []telemetry.CacheStat{{Entity: "idempotency", Scope: "process", Hits: 5, Entries: 12, Bytes: 14_160}}
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(tel.MetricsHandler())
	defer srv.Close()
	res, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	for _, want := range []string{
		`surgepay_cache_hits_total{entity="idempotency",scope="process"} 5`,
		"# TYPE surgepay_cache_entries gauge", `surgepay_cache_entries{entity="idempotency",scope="process"} 12`,
		"# TYPE surgepay_cache_bytes gauge", `surgepay_cache_bytes{entity="idempotency",scope="process"} 14160`,
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// TestIdempotencyPurgedCounter: the records the purge deletes add up on
// /metrics.
func TestIdempotencyPurgedCounter(t *testing.T) {
	tel, err := telemetry.New(telemetry.DefaultConfig(), telemetry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	tel.ObserveIdempotencyPurged(1000)
	tel.ObserveIdempotencyPurged(7)
	srv := httptest.NewServer(tel.MetricsHandler())
	defer srv.Close()
	res, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if want := "\nsurgepay_idempotency_purged_total 1007\n"; !strings.Contains(string(b), want) {
		t.Errorf("/metrics lacks %q", want)
	}
}
