package loadtest

import (
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// Windows fold into minutes: counts add up, refusals (503, 429) and sales
// (payment.create without error) are counted, the minute's p99 comes from
// its merged histogram and its worst second is kept; the last, partial
// minute is closed by finishWindows.
func TestMinutes(t *testing.T) {
	start := time.Unix(1_700_000_000, 0)
	r := newRecorder(start, time.Second, 1)
	sample := func(typ reqType, ms int, status int) {
		o := outcomeOK
		if status >= 400 {
			o = outcomeFailed
		}
		r.recordCall(&callSample{typ: typ, corrected: time.Duration(ms) * time.Millisecond,
			service: time.Millisecond, status: status, outcome: o})
	}
	for sec := range 130 { // minutes 0 and 1 whole, 10 s of minute 2 (not folded: over MinuteFoldSeconds)
		for range 10 {
			sample(typePaymentCreate, 2, http.StatusOK)
		}
		if sec == 70 {
			sample(typePaymentCreate, 900, http.StatusServiceUnavailable)
			sample(typeCustomerGet, 5, http.StatusTooManyRequests)
		}
		r.roll(start.Add(time.Duration(sec+1)*time.Second), sec+1)
	}
	r.finishWindows(start.Add(131 * time.Second))
	if len(r.minutes) != 3 {
		t.Fatalf("%d minutes, want 3", len(r.minutes))
	}
	m0, m1, m2 := r.minutes[0], r.minutes[1], r.minutes[2]
	if m0.Requests != 600 || m0.Sales != 600 || m0.Refused != 0 || m0.Seconds != 60 {
		t.Errorf("minute 0: %+v, want 600 requests, 600 sales, 0 refused, 60 s", m0)
	}
	if m1.Requests != 602 || m1.Sales != 600 || m1.Refused != 2 || m1.Errors != 2 {
		t.Errorf("minute 1: %+v, want 602 requests, 600 sales, 2 refused, 2 errors", m1)
	}
	if m1.Corrected.Max < 900 || m1.WorstSecondP99 < 900 || m1.Corrected.P99 > 10 {
		t.Errorf("minute 1 latency: max %v, worst second p99 %v, p99 %v; want max and worst second ≥ 900 ms, p99 ≤ 10 ms",
			m1.Corrected.Max, m1.WorstSecondP99, m1.Corrected.P99)
	}
	if m2.Minute != 2 || m2.Requests != 100 {
		t.Errorf("minute 2: %+v, want minute 2 with 100 requests", m2)
	}
}

// Bytes written per sale come from /proc/PID/io's write_bytes deltas and
// the sales of each minute; the data folder's bytes over all sales so far.
func TestAddMinutesResources(t *testing.T) {
	r := &run{rec: &Recorder{minutes: []Minute{{Minute: 0, Sales: 100}, {Minute: 1, Sales: 200}}},
		res: &resourceMonitor{serverSamples: []ResourceSample{
			{Second: 1, RSSBytes: 10, WriteBytes: 1000, DataDirBytes: 500},
			{Second: 59, RSSBytes: 30, WriteBytes: 101_000, DataDirBytes: 50_500},
			{Second: 60, RSSBytes: 20, WriteBytes: 150_000, DataDirBytes: 60_000},
			{Second: 119, RSSBytes: 25, WriteBytes: 501_000, DataDirBytes: 150_500},
		}}}
	res := &Result{}
	r.addMinutes(res)
	s0, s1 := res.Minutes[0].Server, res.Minutes[1].Server
	if s0 == nil || s0.RSSBytesMax != 30 || s0.WriteBytes != 100_000 || s0.WriteBytesPerSale != 1000 || s0.DataDirBytesPerSale != 505 {
		t.Errorf("minute 0 server: %+v, want RSS max 30, 100000 written, 1000 per sale, 505 stored per sale", s0)
	}
	if s1 == nil || s1.WriteBytes != 400_000 || s1.WriteBytesPerSale != 2000 || s1.DataDirBytesPerSale != 150_500.0/300 {
		t.Errorf("minute 1 server: %+v, want 400000 written, 2000 per sale, %v stored per sale", s1, 150_500.0/300)
	}
}

// CPU and heap allocations per request come from each minute's requests:
// the CPU's average over the minute's rate, and the growth of the
// allocation counter from the last scrape before the minute to the
// minute's last (a scrape without the counter is skipped, not read as 0).
// Merging several injectors' results divides by all their requests.
func TestAddMinutesPerRequest(t *testing.T) {
	r := &run{rec: &Recorder{minutes: []Minute{
		{Minute: 0, Seconds: 60, Requests: 6000, Sales: 6000},
		{Minute: 1, Seconds: 60, Requests: 3000, Sales: 3000},
		{Minute: 2, Seconds: 60, Requests: 3000, Sales: 3000},
	}}, res: &resourceMonitor{serverSamples: []ResourceSample{
		{Second: 0, CPUPercent: 20, WriteBytes: -1, Allocs: 1_000},
		{Second: 30, CPUPercent: 40, WriteBytes: -1, Allocs: 400_000},
		{Second: 58, CPUPercent: 30, WriteBytes: -1, Allocs: 601_000},
		{Second: 59, CPUPercent: 30, WriteBytes: -1}, // scraped without the counter
		{Second: 60, CPUPercent: 30, WriteBytes: -1},
		{Second: 119, CPUPercent: 30, WriteBytes: -1, Allocs: 1_201_000},
	}}}
	res := &Result{}
	r.addMinutes(res)
	s0, s1 := res.Minutes[0].Server, res.Minutes[1].Server
	// Minute 0: 30 % of a core over 100 requests/s is 3,000 µs each (the
	// CPU averages 20, 40, 30, 30);
	// 600,000 allocations over 6,000 requests.
	if s0 == nil || s0.CPUMicrosPerRequest != 3000 || s0.Allocs != 600_000 || s0.AllocsPerRequest != 100 {
		t.Errorf("minute 0: %+v, want 3000 µs and 100 allocations a request", s0)
	}
	// Minute 1: 30 % over 50/s is 6,000 µs; 601,000 → 1,201,000 over 3,000.
	if s1 == nil || s1.CPUMicrosPerRequest != 6000 || s1.Allocs != 600_000 || s1.AllocsPerRequest != 200 {
		t.Errorf("minute 1: %+v, want 6000 µs and 200 allocations a request", s1)
	}
	if res.Minutes[2].Server != nil {
		t.Errorf("minute 2 has no sample but a server: %+v", res.Minutes[2].Server)
	}
	var b strings.Builder
	printMinutes(&b, res.Minutes)
	if !strings.Contains(b.String(), "allocs/req") || !strings.Contains(b.String(), "200.0") || !strings.Contains(b.String(), "6000.0") {
		t.Errorf("minute table lacks CPU and allocations a request:\n%s", b.String())
	}

	// Two injectors, each with half of minute 0's requests: the merged
	// minute divides the server's allocations and CPU by both.
	out := &Result{Minutes: []Minute{{Minute: 0, Seconds: 60, Requests: 12_000, Sales: 12_000, Server: s0}}}
	finishMerge(out, newHistogram(), newHistogram(), nil)
	if m := out.Minutes[0].Server; m.AllocsPerRequest != 50 || m.CPUMicrosPerRequest != 1500 {
		t.Errorf("merged minute 0: %+v, want 50 allocations and 1500 µs a request", m)
	}
	if s0.AllocsPerRequest != 100 {
		t.Errorf("the merge changed the first result's minute: %+v", s0)
	}
}

func TestParseProcIOWriteBytes(t *testing.T) {
	io := "rchar: 1\nwchar: 2\nsyscr: 3\nsyscw: 4\nread_bytes: 5\nwrite_bytes: 123456\ncancelled_write_bytes: 7\n"
	if got := parseProcIOWriteBytes(io); got != 123456 {
		t.Errorf("write_bytes = %d, want 123456", got)
	}
	if got := parseProcIOWriteBytes("rchar: 1\n"); got != -1 {
		t.Errorf("without write_bytes: %d, want -1", got)
	}
}

// A last minute of a moment (a run of 120.3 s) is folded into the one
// before.
func TestLastMinuteFolded(t *testing.T) {
	start := time.Unix(1_700_000_000, 0)
	r := newRecorder(start, time.Second, 1)
	for sec := range 120 {
		r.recordCall(&callSample{typ: typePaymentCreate, corrected: time.Millisecond, service: time.Millisecond,
			status: http.StatusOK})
		r.roll(start.Add(time.Duration(sec+1)*time.Second), sec+1)
	}
	r.recordCall(&callSample{typ: typePaymentCreate, corrected: 7 * time.Millisecond, service: time.Millisecond,
		status: http.StatusOK})
	r.finishWindows(start.Add(120*time.Second + 300*time.Millisecond))
	if len(r.minutes) != 2 {
		t.Fatalf("%d minutes, want 2 (the last 0.3 s folded into minute 1)", len(r.minutes))
	}
	if m := r.minutes[1]; m.Requests != 61 || m.Corrected.Max < 7 {
		t.Errorf("minute 1: %d requests, max %v ms; want 61 and the folded 7 ms", m.Requests, m.Corrected.Max)
	}
}

// The server's writer gauges fold into minutes: the longest stall and the
// second it was scraped, the deepest queue, and the requests shed by
// reason as the growth of the counters since the last scrape (a failed
// scrape in between loses nothing).
func TestAddMinutesWriter(t *testing.T) {
	w := func(stall float64, queue int64, shed map[string]int64) *WriterSample {
		return &WriterSample{StallSeconds: stall, QueueDepth: queue, Shed: shed}
	}
	r := &run{rec: &Recorder{minutes: []Minute{{Minute: 0, Sales: 100}, {Minute: 1, Sales: 200}}},
		res: &resourceMonitor{serverSamples: []ResourceSample{
			{Second: 1, WriteBytes: -1, Writer: w(0.01, 2, map[string]int64{"overloaded": 5})},
			{Second: 30, WriteBytes: -1, Writer: w(3.2, 4096, map[string]int64{"overloaded": 5, "write_queue_full": 70})},
			{Second: 59, WriteBytes: -1, Writer: w(0.5, 10, map[string]int64{"overloaded": 5, "write_queue_full": 90})},
			{Second: 60, WriteBytes: -1}, // the scrape failed
			{Second: 61, WriteBytes: -1, Writer: w(0.02, 1, map[string]int64{"overloaded": 8, "write_queue_full": 90})},
		}}}
	res := &Result{}
	r.addMinutes(res)
	w0, w1 := res.Minutes[0].Server.Writer, res.Minutes[1].Server.Writer
	if w0 == nil || w0.StallMaxSeconds != 3.2 || w0.StallMaxSecond != 30 || w0.QueueDepthMax != 4096 || w0.Scrapes != 3 ||
		len(w0.Shed) != 1 || w0.Shed["write_queue_full"] != 90 {
		t.Errorf("minute 0 writer: %+v, want stall 3.2 s at second 30, queue 4096, 3 scrapes, 90 write_queue_full shed", w0)
	}
	if w1 == nil || w1.StallMaxSeconds != 0.02 || w1.Scrapes != 1 || len(w1.Shed) != 1 || w1.Shed["overloaded"] != 3 {
		t.Errorf("minute 1 writer: %+v, want stall 0.02 s, 1 scrape, 3 overloaded shed", w1)
	}
	var b strings.Builder
	printMinutes(&b, res.Minutes)
	if !strings.Contains(b.String(), "3200") || !strings.Contains(b.String(), "write_queue_full=90") {
		t.Errorf("minute table lacks the writer's columns:\n%s", b.String())
	}
}

func TestParseProm(t *testing.T) {
	text := `# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 12.5
process_resident_memory_bytes 3.0e+08
surgepay_groupcommit_stall_seconds 1.25
surgepay_groupcommit_queue_depth 17
surgepay_http_requests_shed_total{reason="overloaded"} 4
surgepay_http_requests_shed_total{reason="write_queue_full"} 9
surgepay_groupcommit_stall_seconds_other 99
go_memstats_mallocs_total 1.234567e+06
`
	m, err := parseProm(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	w := m.writer()
	if m.cpu != 12.5 || m.rss != 3e8 || w == nil || w.StallSeconds != 1.25 || w.QueueDepth != 17 ||
		w.Shed["overloaded"] != 4 || w.Shed["write_queue_full"] != 9 || len(w.Shed) != 2 {
		t.Errorf("parseProm = %+v, writer %+v", m, w)
	}
	if m.allocs() != 1_234_567 {
		t.Errorf("allocations %d, want 1234567", m.allocs())
	}
	if m, _ := parseProm(strings.NewReader("process_cpu_seconds_total 1\nprocess_resident_memory_bytes 2\n")); m.writer() != nil || m.allocs() != 0 {
		t.Errorf("a server without writer gauges or Go metrics has a writer %+v, %d allocations", m.writer(), m.allocs())
	}
}

// TestMinuteFoldMergesLatencies is issue 34 item 12: bench/event.sh's
// last minute said p50 13.7 ms where the run said 7.9 ms for the same
// requests. A last minute of a few seconds (the drain's few, slower
// requests) was folded into the one before by taking the larger p50 of
// the two; its latencies now merge into that minute's histogram, so a
// run of one minute and a bit has one minute with the run's percentiles.
func TestMinuteFoldMergesLatencies(t *testing.T) {
	start := time.Unix(1_700_000_000, 0)
	r := newRecorder(start, time.Second, 1)
	sample := func(ms int) {
		r.recordCall(&callSample{typ: typePaymentCreate, corrected: time.Duration(ms) * time.Millisecond,
			service: time.Duration(ms) * time.Millisecond, status: http.StatusOK, outcome: outcomeOK})
	}
	for sec := range 60 {
		for range 100 {
			sample(8)
		}
		r.roll(start.Add(time.Duration(sec+1)*time.Second), sec+1)
	}
	for range 20 { // the drain: 0.5 s of minute 1, folded
		sample(14)
	}
	r.finishWindows(start.Add(60*time.Second + 500*time.Millisecond))
	if len(r.minutes) != 1 {
		t.Fatalf("%d minutes, want 1 (the last 0.5 s folded)", len(r.minutes))
	}
	m, run := r.minutes[0], summarize(r.runCorrected[typePaymentCreate])
	if m.Requests != 6020 || m.Corrected.Count != run.Count {
		t.Errorf("folded minute: %d requests, %d in its latencies; want 6020, as the run (%d)", m.Requests, m.Corrected.Count, run.Count)
	}
	if m.Corrected.P50 != run.P50 || m.Corrected.P99 != run.P99 || m.Corrected.Max != run.Max {
		t.Errorf("folded minute p50 %v p99 %v max %v ms, want the run's %v, %v, %v for the same requests",
			m.Corrected.P50, m.Corrected.P99, m.Corrected.Max, run.P50, run.P99, run.Max)
	}
}

// The machine's CPU comes from /proc/stat's "cpu" line: steal and busy
// in percent of all cores between two readings, summarised per minute
// (average, and the worst second) and shown in the minutes table.
func TestHostSamples(t *testing.T) {
	a, ok := parseProcCPU("cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n")
	if !ok || a != (procCPU{total: 1000, idle: 850, steal: 0}) {
		t.Fatalf("parse: %+v %v", a, ok)
	}
	// 200 ticks later: 60 user, 20 system, 70 idle, 10 iowait, 40 stolen.
	b, _ := parseProcCPU("cpu  160 0 70 870 60 0 0 40 0 0")
	s, ok := hostSampleOf(7, a, b)
	if !ok || s.Second != 7 || s.StealPercent != 20 || s.BusyPercent != 40 {
		t.Fatalf("sample: %+v %v; want steal 20 %%, busy 40 %%", s, ok)
	}
	if _, ok := hostSampleOf(8, b, b); ok {
		t.Error("a sample with no time between the readings")
	}
	for _, bad := range []string{"", "intr 1 2 3", "cpu 1 2 3", "cpu a b c d e f g h i j"} {
		if _, ok := parseProcCPU(bad); ok {
			t.Errorf("parsed %q", bad)
		}
	}

	ms := []Minute{{Minute: 0}, {Minute: 1}, {Minute: 2}}
	addMinutesHost(ms, []HostSample{{Second: 1, StealPercent: 1, BusyPercent: 50}, {Second: 59, StealPercent: 3, BusyPercent: 70},
		{Second: 61, StealPercent: 40, BusyPercent: 10}, {Second: 62, StealPercent: 0, BusyPercent: 90}})
	if h := ms[0].Host; h == nil || h.Samples != 2 || h.StealPercentAvg != 2 || h.StealPercentMax != 3 || h.StealMaxSecond != 59 || h.BusyPercentAvg != 60 {
		t.Errorf("minute 0: %+v", h)
	}
	if h := ms[1].Host; h == nil || h.Samples != 2 || h.StealPercentMax != 40 || h.StealMaxSecond != 61 {
		t.Errorf("minute 1: %+v", h)
	}
	if ms[2].Host != nil {
		t.Errorf("minute 2 has no samples: %+v", ms[2].Host)
	}
	var out strings.Builder
	printMinutes(&out, ms)
	if lines := strings.Split(out.String(), "\n"); !strings.HasSuffix(strings.TrimSpace(lines[0]), "steal max %") ||
		!strings.HasSuffix(strings.TrimSpace(lines[2]), "40.0") || !strings.HasSuffix(strings.TrimSpace(lines[3]), "-") {
		t.Errorf("minutes table:\n%s", out.String())
	}
}

// The monitor reads the machine's CPU while it runs (on Linux).
func TestHostTrackerReadsProcStat(t *testing.T) {
	var h hostTracker
	if _, err := os.Stat("/proc/stat"); err != nil {
		t.Skip("no /proc/stat on this system")
	}
	if _, ok := h.next(0); ok {
		t.Fatal("the first reading gave a sample")
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		if s, ok := h.next(1); ok {
			if s.StealPercent < 0 || s.StealPercent > 100 || s.BusyPercent < 0 || s.BusyPercent > 100 {
				t.Fatalf("sample out of range: %+v", s)
			}
			return
		}
	}
	t.Fatal("no sample from /proc/stat in 5 s")
}
