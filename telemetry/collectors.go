package telemetry

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/surgepay/surgepay"
	"github.com/surgepay/surgepay/groupcommit"
)

// CacheStat is the running totals of one cache: an entity (api_key,
// payment_method, ...) in one scope (process, server, global).
type CacheStat struct {
	Entity, Scope string
	Hits          uint64 // lookups answered by the cache
	Misses        uint64 // lookups the cache could not answer
	Loads         uint64 // loads from the store after a miss
	Evictions     uint64 // entries removed for size or age
	Fallbacks     uint64 // lookups served by a lower scope because this one failed
	// Entries and Bytes are what this process's memory holds now: the
	// entries and their estimated heap bytes (cache.entities.*.bytes_max).
	Entries int
	Bytes   uint64
}

// StageStat is a snapshot of the staged-capture backlog, as the API
// server sees it. The captures settled are not in it: `surgepay settle`
// is another process, and exposes them on its own /metrics (SettleStat).
type StageStat struct {
	Depth     int           // staged records waiting for settlement
	OldestAge time.Duration // age of the oldest waiting record; 0 if none
}

// StageStats returns the current StageStat. It may read the store (a
// count over the backlog): it is called at most once a second, less often
// as it grows slower (see stageStatsCostShare), with a context bounded to
// stageStatsTimeout; scrapes in between reuse its last result.
type StageStats func(ctx context.Context) (StageStat, error)

// GroupCommit gives the metrics collector the group-commit writer's totals.
// Both functions must be cheap and safe for concurrent use; the stores'
// CommitStats and QueueDepth are.
type GroupCommit struct {
	Stats      func() groupcommit.Stats
	QueueDepth func() int
}

// IdemFilterStat is what the embedded store's filter of stored idempotency
// keys answered since it opened, and its size: the fields of
// sqlite.IdempotencyFilterStats, so that one converts to the other.
// Lookup is the read before a processor call, Insert the writer's probe
// of the stored keys; an "absent" answer spares that read, a "false" one
// is a "maybe" after which no record had the key.
type IdemFilterStat struct {
	LookupAbsent, LookupMaybe, LookupFalse uint64
	InsertAbsent, InsertMaybe, InsertFalse uint64
	Builds                                 uint64
	Bytes                                  int64
	Keys                                   int64
	Capacity                               int64
}

// idemFilterCollector reports an IdemFilterStat.
type idemFilterCollector struct {
	stats                  func() IdemFilterStat
	checks, falses, builds *prometheus.Desc
	bytes, keys, capacity  *prometheus.Desc
}

func newIdemFilterCollector(stats func() IdemFilterStat) *idemFilterCollector {
	return &idemFilterCollector{stats: stats,
		checks: desc("idempotency_filter", "checks_total", "Answers of the filter of stored idempotency keys, by who asked "+
			"(lookup: before a processor call; insert: the writer's uniqueness probe) and answer (absent: the read was spared).",
			"check", "answer"),
		falses: desc("idempotency_filter", "false_positives_total", "Answers \"maybe\" after which no stored record had the key "+
			"(false positives, or purged keys).", "check"),
		builds:   desc("idempotency_filter", "builds_total", "Filters built (at open, and when one fills)."),
		bytes:    desc("idempotency_filter", "bytes", "Memory of the filter in use."),
		keys:     desc("idempotency_filter", "keys", "Hashes added to the filter in use."),
		capacity: desc("idempotency_filter", "capacity_keys", "Keys the filter in use holds at about 1 % false positives; a fuller one is rebuilt larger."),
	}
}

func (c *idemFilterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.checks, c.falses, c.builds, c.bytes, c.keys, c.capacity} {
		ch <- d
	}
}

func (c *idemFilterCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	counter := func(d *prometheus.Desc, n uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(n), labels...)
	}
	counter(c.checks, s.LookupAbsent, "lookup", "absent")
	counter(c.checks, s.LookupMaybe, "lookup", "maybe")
	counter(c.checks, s.InsertAbsent, "insert", "absent")
	counter(c.checks, s.InsertMaybe, "insert", "maybe")
	counter(c.falses, s.LookupFalse, "lookup")
	counter(c.falses, s.InsertFalse, "insert")
	counter(c.builds, s.Builds)
	ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.GaugeValue, float64(s.Bytes))
	ch <- prometheus.MustNewConstMetric(c.keys, prometheus.GaugeValue, float64(s.Keys))
	ch <- prometheus.MustNewConstMetric(c.capacity, prometheus.GaugeValue, float64(s.Capacity))
}

func desc(subsystem, name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(prometheus.BuildFQName(namespace, subsystem, name), help, labels, nil)
}

// cacheCollector turns a func() []CacheStat into counters and gauges per
// entity and scope.
type cacheCollector struct {
	stats                                     func() []CacheStat
	hits, misses, loads, evictions, fallbacks *prometheus.Desc
	entries, bytes                            *prometheus.Desc
}

func newCacheCollector(stats func() []CacheStat) *cacheCollector {
	l := []string{"entity", "scope"}
	return &cacheCollector{stats: stats,
		hits:      desc("cache", "hits_total", "Cache lookups answered by the cache.", l...),
		misses:    desc("cache", "misses_total", "Cache lookups the cache could not answer.", l...),
		loads:     desc("cache", "loads_total", "Loads from the store after a cache miss.", l...),
		evictions: desc("cache", "evictions_total", "Cache entries removed for size or age.", l...),
		fallbacks: desc("cache", "fallbacks_total", "Lookups served by a lower scope because this scope failed.", l...),
		entries:   desc("cache", "entries", "Entries held in this process's memory.", l...),
		bytes: desc("cache", "bytes", "Estimated heap bytes of the entries held in this process's memory "+
			"(bounded by cache.entities.*.bytes_max).", l...),
	}
}

func (c *cacheCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.hits, c.misses, c.loads, c.evictions, c.fallbacks, c.entries, c.bytes} {
		ch <- d
	}
}

func (c *cacheCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.stats() {
		for _, v := range []struct {
			d *prometheus.Desc
			n uint64
		}{{c.hits, s.Hits}, {c.misses, s.Misses}, {c.loads, s.Loads}, {c.evictions, s.Evictions}, {c.fallbacks, s.Fallbacks}} {
			ch <- prometheus.MustNewConstMetric(v.d, prometheus.CounterValue, float64(v.n), s.Entity, s.Scope)
		}
		ch <- prometheus.MustNewConstMetric(c.entries, prometheus.GaugeValue, float64(s.Entries), s.Entity, s.Scope)
		ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.GaugeValue, float64(s.Bytes), s.Entity, s.Scope)
	}
}

// stageCollector reads StageStats at most once a second, and less often
// as the read grows slower: counting a backlog is a scan (SQL count(*)),
// and the dashboard gathers every second. Over a half-hour event without
// settlement the embedded stage held 3.5 M records and the count took
// about a tenth of every second of one core (bench/RESULTS.md, issue 14
// session 8); after a read that took d the next waits d divided by
// stageStatsCostShare. A scrape never waits for a read (the embedded
// store paces its count, which then takes seconds: ~8 s at millions of
// records, over a Prometheus scrape's timeout): it starts one in the
// background when one is due and reports the last figures, and until a
// read has succeeded it reports neither gauge.
type stageCollector struct {
	stats         StageStats
	depth, oldest *prometheus.Desc
	now           func() time.Time // time.Now; tests set a clock

	mu      sync.Mutex
	last    StageStat
	lastAt  time.Time     // when last was read
	at      time.Time     // when the last read ended, successful or not
	wait    time.Duration // from at to the next read
	reading chan struct{} // closed when the read under way ends; nil if none
}

const (
	// stageStatsInterval is the least time between two reads of StageStats.
	stageStatsInterval = time.Second
	// stageStatsIntervalMax is the most: the gauges are at most this old,
	// and the read's own time.
	stageStatsIntervalMax = time.Minute
	// stageStatsCostShare is the share of one core the reads may take.
	stageStatsCostShare = 0.02
	// stageStatsTimeout bounds one read.
	stageStatsTimeout = time.Minute
)

func newStageCollector(stats StageStats) *stageCollector {
	return &stageCollector{stats: stats, now: time.Now,
		depth: desc("stage", "backlog_records", "Staged captures waiting for settlement, as last counted (at most a second old, "+
			"up to a minute and the count's time while the backlog holds millions of records)."),
		oldest: desc("stage", "backlog_oldest_age_seconds", "Age of the oldest staged capture waiting for settlement."),
	}
}

func (c *stageCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.depth
	ch <- c.oldest
}

func (c *stageCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	if c.reading == nil && (c.at.IsZero() || c.now().Sub(c.at) >= c.wait) {
		c.reading = make(chan struct{})
		go c.read(c.reading)
	}
	s, known := c.last, !c.lastAt.IsZero()
	if s.OldestAge > 0 { // the oldest record read then has aged since
		s.OldestAge += c.now().Sub(c.lastAt)
	}
	c.mu.Unlock()
	if !known {
		return // no figures yet: no series, rather than a backlog of 0
	}
	ch <- prometheus.MustNewConstMetric(c.depth, prometheus.GaugeValue, float64(s.Depth))
	ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, s.OldestAge.Seconds())
}

// read reads StageStats once, sets when the next read is due, and closes
// done.
func (c *stageCollector) read(done chan struct{}) {
	start := c.now()
	ctx, cancel := context.WithTimeout(context.Background(), stageStatsTimeout)
	s, err := c.stats(ctx)
	cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at, c.reading = c.now(), nil
	c.wait = min(max(time.Duration(float64(c.at.Sub(start))/stageStatsCostShare), stageStatsInterval), stageStatsIntervalMax)
	if err == nil {
		c.last, c.lastAt = s, c.at
	}
	close(done)
}

// groupCommitCollector reports the committer's totals and queue depth.
type groupCommitCollector struct {
	gc                            GroupCommit
	batches, writes, queue, stall *prometheus.Desc
}

func newGroupCommitCollector(gc GroupCommit) *groupCommitCollector {
	return &groupCommitCollector{gc: gc,
		batches: desc("groupcommit", "batches_total", "Group-commit transactions committed."),
		writes:  desc("groupcommit", "writes_total", "Writes committed by group commit."),
		queue:   desc("groupcommit", "queue_depth", "Writes waiting for the group-commit writer."),
		stall: desc("groupcommit", "stall_seconds", "Longest group commit of the last 10 s, or the one in progress if longer: "+
			"how long writes waited on one transaction (writer stalls)."),
	}
}

func (c *groupCommitCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.batches
	ch <- c.writes
	ch <- c.queue
	ch <- c.stall
}

func (c *groupCommitCollector) Collect(ch chan<- prometheus.Metric) {
	if c.gc.Stats != nil {
		s := c.gc.Stats()
		ch <- prometheus.MustNewConstMetric(c.batches, prometheus.CounterValue, float64(s.Batches))
		ch <- prometheus.MustNewConstMetric(c.writes, prometheus.CounterValue, float64(s.Items))
		ch <- prometheus.MustNewConstMetric(c.stall, prometheus.GaugeValue, s.StallMax.Seconds())
	}
	if c.gc.QueueDepth != nil {
		ch <- prometheus.MustNewConstMetric(c.queue, prometheus.GaugeValue, float64(c.gc.QueueDepth()))
	}
}

// RegisterStore registers what store s can report: the group-commit totals
// and queue depth if it has CommitStats and QueueDepth (package sqlite and
// postgres do), and the staged-capture backlog if it has the
// surgepay.StagedStore capability. Pass the store itself, not a decorator.
func (t *Telemetry) RegisterStore(s any) error {
	var errs []error
	if gc, ok := s.(interface {
		CommitStats() groupcommit.Stats
		QueueDepth() int
	}); ok {
		errs = append(errs, t.RegisterGroupCommit(GroupCommit{Stats: gc.CommitStats, QueueDepth: gc.QueueDepth}))
	}
	if st, ok := s.(surgepay.StagedStore); ok {
		errs = append(errs, t.RegisterStage(func(ctx context.Context) (StageStat, error) {
			n, oldest, err := st.StagedBacklog(ctx)
			if err != nil {
				return StageStat{}, err
			}
			var age time.Duration
			if n > 0 && !oldest.IsZero() {
				age = time.Since(oldest)
			}
			return StageStat{Depth: n, OldestAge: age}, nil
		}))
	}
	return errors.Join(errs...)
}

// SettleStat is a snapshot of one settlement processor (`surgepay
// settle`), taken from its settle.Stats: totals are since the process
// started.
type SettleStat struct {
	BacklogDepth      int           // records at the stage, delivered or not
	OldestAge         time.Duration // age of the oldest; 0 if none
	LastBatchSize     int           // records in the last batch; 0 after a fetch that found nothing
	CapturesPerSecond float64       // over the last batch
	Captured          int64         // captures recorded
	Failed            int64         // captures the network declined: payments moved to failed
	Left              int           // records left at the stage and not settled since
	// Failures counts deliveries by reason (settle.Report.Failures):
	// "declined:<code>" counts under "declined", for decline codes are the
	// networks' (unbounded) and Failed counts them.
	Failures map[string]int
}

// settleCollector reads a SettleStat at every scrape.
type settleCollector struct {
	stats                                                     func() SettleStat
	depth, oldest, batch, rate, captured, failed, left, fails *prometheus.Desc
}

func newSettleCollector(stats func() SettleStat) *settleCollector {
	return &settleCollector{stats: stats,
		depth:    desc("settle", "backlog_records", "Staged captures at the stage, delivered or not, as settle last saw them (at most a second old while records flow)."),
		oldest:   desc("settle", "backlog_oldest_age_seconds", "Age of the oldest staged capture at the stage, as settle last saw it."),
		batch:    desc("settle", "last_batch_size", "Records in settle's last batch; 0 after a fetch that found nothing."),
		rate:     desc("settle", "captures_per_second", "Captures per second over settle's last batch, fetch to acknowledgement."),
		captured: desc("settle", "captures_total", "Staged captures settled (captured and recorded) by this settle process."),
		failed:   desc("settle", "captures_failed_total", "Staged captures the network declined, their payments moved to failed, by this settle process."),
		left:     desc("settle", "left_records", "Records this settle process left at the stage (for later, or for an operator) and has not settled since."),
		fails: desc("settle", "failures_total", "Deliveries settle did not capture, by reason (tampered, mismatch, wrong_key, key_reused need an "+
			"operator; retry_later, unknown, orphan_wait, store_error, deadline come back; orphan is dropped; declined).", "reason"),
	}
}

func (c *settleCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.depth, c.oldest, c.batch, c.rate, c.captured, c.failed, c.left, c.fails} {
		ch <- d
	}
}

func (c *settleCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	for _, v := range []struct {
		d *prometheus.Desc
		t prometheus.ValueType
		v float64
	}{
		{c.depth, prometheus.GaugeValue, float64(s.BacklogDepth)},
		{c.oldest, prometheus.GaugeValue, s.OldestAge.Seconds()},
		{c.batch, prometheus.GaugeValue, float64(s.LastBatchSize)},
		{c.rate, prometheus.GaugeValue, s.CapturesPerSecond},
		{c.captured, prometheus.CounterValue, float64(s.Captured)},
		{c.failed, prometheus.CounterValue, float64(s.Failed)},
		{c.left, prometheus.GaugeValue, float64(s.Left)},
	} {
		ch <- prometheus.MustNewConstMetric(v.d, v.t, v.v)
	}
	by := map[string]int{}
	for reason, n := range s.Failures {
		if strings.HasPrefix(reason, "declined:") {
			reason = "declined"
		}
		by[reason] += n
	}
	for reason, n := range by {
		ch <- prometheus.MustNewConstMetric(c.fails, prometheus.CounterValue, float64(n), reason)
	}
}

// SettleMetricsHandler returns the /metrics handler of `surgepay settle`:
// the settle_* metrics read from stats at every scrape, and the Go
// runtime's and the process's. stats must be cheap and safe for
// concurrent use. A scrape is bounded as MetricsHandler's is.
func SettleMetricsHandler(stats func() SettleStat) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(newSettleCollector(stats), newGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{MaxRequestsInFlight: 2, Timeout: 10 * time.Second,
		ErrorHandling: promhttp.ContinueOnError})
}
