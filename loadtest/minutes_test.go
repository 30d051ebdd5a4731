package loadtest

import (
	"net/http"
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
