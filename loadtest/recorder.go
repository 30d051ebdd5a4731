package loadtest

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// callSample is what one API request contributes to the statistics.
type callSample struct {
	typ       reqType
	stage     int
	corrected time.Duration
	service   time.Duration
	status    int
	code      string // error code when failed
	check     string // failed check, if any
	outcome   outcome
	sent      int64
	recv      int64
}

// Status classes counted per window.
const (
	statusTransport = iota
	status2xx
	status3xx
	status4xx
	status5xx
	statusClassCount
)

var statusClassNames = [statusClassCount]string{"transport", "2xx", "3xx", "4xx", "5xx"}

func statusClass(status int) int {
	if status < 200 || status > 599 {
		return statusTransport
	}
	return status/100 - 1
}

// typeTotals are whole-run counters of one request type.
type typeTotals struct {
	requests, errors, declines int64
	sent, recv                 int64
	status                     map[int]int64
	codes, checks              map[string]int64
}

// scenarioTotals are whole-run numbers of one scenario.
type scenarioTotals struct {
	iterations, failed int64
	hist               *hdr.Histogram
}

// stageTotals are per-stage numbers, used to judge stress steps.
type stageTotals struct {
	requests, errors, completed int64
	hist                        *hdr.Histogram
}

// windowSet collects one window's samples. Histograms are allocated on
// first use, so request types a run never sends cost nothing.
type windowSet struct {
	index     int
	began     time.Time
	corrected [requestTypeCount]*hdr.Histogram
	service   [requestTypeCount]*hdr.Histogram
	requests  [requestTypeCount]int64
	errors    [requestTypeCount]int64
	status    [statusClassCount]int64
	refused   int64 // 503 and 429 answers
	late      int64
}

func (w *windowSet) reset() {
	for t := range requestTypeCount {
		if w.corrected[t] != nil {
			w.corrected[t].Reset()
			w.service[t].Reset()
		}
		w.requests[t], w.errors[t] = 0, 0
	}
	w.status = [statusClassCount]int64{}
	w.late, w.refused = 0, 0
}

// Recorder aggregates samples from all iterations. Recording takes one
// mutex; once per window the window loop swaps the active window set for a
// spare and summarises the old one outside the lock, merging its histograms
// into the whole-run ones. Safe for concurrent use.
type Recorder struct {
	start         time.Time
	lateThreshold time.Duration

	mu        sync.Mutex
	active    *windowSet
	types     [requestTypeCount]typeTotals
	scenarios []scenarioTotals
	stages    []stageTotals
	startLag  *hdr.Histogram
	late      int64

	// Owned by the window loop; read by finish after the loop stopped.
	spare        *windowSet
	runCorrected [requestTypeCount]*hdr.Histogram
	runService   [requestTypeCount]*hdr.Histogram
	scratch      [2]*hdr.Histogram

	winMu   sync.Mutex
	windows []Window

	// Per-minute summaries, built by the window loop (then by finish).
	// minutePrevHist keeps the last closed minute's latencies, so that a
	// short last minute folds into it by merging histograms: taking the
	// larger of the two minutes' p50s (a drain's few slow requests) made
	// a minute's p50 13.7 ms where its requests' p50 was 7.9 ms (issue 34
	// item 12).
	minuteHist     *hdr.Histogram
	minutePrevHist *hdr.Histogram
	minuteCur      *Minute
	minutes        []Minute
}

func newRecorder(start time.Time, lateThreshold time.Duration, stageCount int) *Recorder {
	r := &Recorder{
		start:          start,
		lateThreshold:  lateThreshold,
		active:         &windowSet{began: start},
		spare:          &windowSet{},
		scenarios:      make([]scenarioTotals, len(scenarioTable)),
		stages:         make([]stageTotals, max(stageCount, 1)),
		startLag:       newHistogram(),
		scratch:        [2]*hdr.Histogram{newHistogram(), newHistogram()},
		minuteHist:     newHistogram(),
		minutePrevHist: newHistogram(),
	}
	return r
}

// micros converts d to clamped histogram units.
func micros(d time.Duration) int64 {
	return min(max(d.Microseconds(), HistogramValueMin), HistogramValueMax)
}

// recordCall adds one request.
func (r *Recorder) recordCall(s *callSample) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.active
	if w.corrected[s.typ] == nil {
		w.corrected[s.typ], w.service[s.typ] = newHistogram(), newHistogram()
	}
	_ = w.corrected[s.typ].RecordValue(micros(s.corrected))
	_ = w.service[s.typ].RecordValue(micros(s.service))
	w.requests[s.typ]++
	w.status[statusClass(s.status)]++
	if s.status == http.StatusServiceUnavailable || s.status == http.StatusTooManyRequests {
		w.refused++
	}
	st := &r.stages[s.stage]
	if st.hist == nil {
		st.hist = newHistogram()
	}
	_ = st.hist.RecordValue(micros(s.corrected))
	st.requests++
	r.countType(s)
	if s.outcome == outcomeFailed {
		w.errors[s.typ]++
		st.errors++
	}
}

// countType updates the whole-run counters of the sample's type.
func (r *Recorder) countType(s *callSample) {
	t := &r.types[s.typ]
	if t.status == nil {
		t.status, t.codes, t.checks = map[int]int64{}, map[string]int64{}, map[string]int64{}
	}
	t.requests++
	t.sent += s.sent
	t.recv += s.recv
	t.status[s.status]++
	switch s.outcome {
	case outcomeDeclined:
		t.declines++
	case outcomeFailed:
		t.errors++
		if s.code != "" {
			countBounded(t.codes, s.code)
		}
	}
	if s.check != "" {
		countBounded(t.checks, s.check)
	}
}

// countBounded counts key, folding keys past ErrorCodeCountMax into "other".
func countBounded(m map[string]int64, key string) {
	if _, ok := m[key]; !ok && len(m) >= ErrorCodeCountMax {
		key = "other"
	}
	m[key]++
}

// iterationStarted records the lag between an iteration's intended start
// and its first send.
func (r *Recorder) iterationStarted(lag time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	_ = r.startLag.RecordValue(micros(lag))
	if lag > r.lateThreshold {
		r.late++
		r.active.late++
	}
}

// iterationDone records a whole iteration of scenario sc in stage.
func (r *Recorder) iterationDone(sc, stage int, latency time.Duration, failed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := &r.scenarios[sc]
	if s.hist == nil {
		s.hist = newHistogram()
	}
	_ = s.hist.RecordValue(micros(latency))
	s.iterations++
	if failed {
		s.failed++
	}
	r.stages[stage].completed++
}

// stageSnapshot returns the numbers of one stage so far.
func (r *Recorder) stageSnapshot(stage int) (requests, errors, completed int64, corrected LatencySummary) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := &r.stages[stage]
	return st.requests, st.errors, st.completed, summarize(st.hist)
}

// totals returns whole-run request and error counts so far.
func (r *Recorder) totals() (requests, errors int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for t := range requestTypeCount {
		requests += r.types[t].requests
		errors += r.types[t].errors
	}
	return requests, errors
}

// lastWindow returns the most recent completed window, if any.
func (r *Recorder) lastWindow() (Window, bool) {
	r.winMu.Lock()
	defer r.winMu.Unlock()
	if len(r.windows) == 0 {
		return Window{}, false
	}
	return r.windows[len(r.windows)-1], true
}

// windowLoop rolls the window at every WindowDuration boundary until done
// is closed. A late wake-up skips window indexes rather than emitting empty
// slivers; each window records its real duration.
func (r *Recorder) windowLoop(done <-chan struct{}) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	index := 0
	for {
		next := r.start.Add(time.Duration(index+1) * WindowDuration)
		timer.Reset(time.Until(next))
		select {
		case <-done:
			return
		case now := <-timer.C:
			if i := int(now.Sub(r.start) / WindowDuration); i > index {
				index = i
				r.roll(now, index)
			}
		}
	}
}

// roll starts window index at now and summarises the previous one.
func (r *Recorder) roll(now time.Time, index int) {
	r.mu.Lock()
	old := r.active
	r.spare.index, r.spare.began = index, now
	r.active, r.spare = r.spare, old
	r.mu.Unlock()
	w := r.summarizeWindow(old, now)
	old.reset()
	r.winMu.Lock()
	r.windows = append(r.windows, w)
	r.winMu.Unlock()
}

// addToMinute adds window w (its corrected latencies in all) to its
// minute's summary, closing the previous minute when w starts a new one.
func (r *Recorder) addToMinute(w *Window, all *hdr.Histogram) {
	m := w.Second / MinuteWindows
	if r.minuteCur != nil && r.minuteCur.Minute != m {
		r.closeMinute()
	}
	if r.minuteCur == nil {
		r.minuteCur = &Minute{Minute: m}
	}
	c := r.minuteCur
	c.Seconds += w.DurationSeconds
	c.Requests += w.Requests
	c.Errors += w.Errors
	c.Refused += w.Refused
	for _, st := range saleTypes {
		if t, ok := w.Types[requestTypeNames[st]]; ok {
			c.Sales += t.Requests - t.Errors
		}
	}
	c.WorstSecondP99 = max(c.WorstSecondP99, w.Corrected.P99)
	r.minuteHist.Merge(all)
}

// closeMinute summarises the minute being built.
func (r *Recorder) closeMinute() {
	if r.minuteCur == nil {
		return
	}
	r.minuteCur.Corrected = summarize(r.minuteHist)
	r.minuteHist, r.minutePrevHist = r.minutePrevHist, r.minuteHist
	r.minuteHist.Reset()
	r.winMu.Lock()
	r.minutes = append(r.minutes, *r.minuteCur)
	r.winMu.Unlock()
	r.minuteCur = nil
}

// finishWindows summarises the last, partial window and minute. Call
// after windowLoop returned.
func (r *Recorder) finishWindows(now time.Time) {
	r.roll(now, r.active.index+1)
	if !r.foldLastMinute() {
		r.closeMinute()
	}
	r.winMu.Lock()
	defer r.winMu.Unlock()
	if n := len(r.windows); n > 0 && r.windows[n-1].Requests == 0 && r.windows[n-1].DurationSeconds < 0.1 {
		r.windows = r.windows[:n-1]
	}
}

// foldLastMinute folds the minute being built into the one before when
// it is shorter than MinuteFoldSeconds (a run of 300.2 s), and reports
// whether it did: its per-sale figures would be noise. Its latencies
// merge into the minute's histogram (minutePrevHist), so the folded
// minute's percentiles are those of its requests.
func (r *Recorder) foldLastMinute() bool {
	r.winMu.Lock()
	defer r.winMu.Unlock()
	last, n := r.minuteCur, len(r.minutes)
	if last == nil || n == 0 || last.Seconds >= MinuteFoldSeconds {
		return false
	}
	prev := &r.minutes[n-1]
	prev.Seconds += last.Seconds
	prev.Requests += last.Requests
	prev.Errors += last.Errors
	prev.Refused += last.Refused
	prev.Sales += last.Sales
	r.minutePrevHist.Merge(r.minuteHist)
	prev.Corrected = summarize(r.minutePrevHist)
	prev.WorstSecondP99 = max(prev.WorstSecondP99, last.WorstSecondP99)
	r.minuteCur = nil
	r.minuteHist.Reset()
	return true
}

// summarizeWindow builds the compact summary of w, which ended at end, and
// merges its histograms into the whole-run ones.
func (r *Recorder) summarizeWindow(w *windowSet, end time.Time) Window {
	out := Window{
		Second:          w.index,
		DurationSeconds: end.Sub(w.began).Seconds(),
		Late:            w.late,
		Status:          map[string]int64{},
		Types:           map[string]TypeWindow{},
	}
	all, allService := r.scratch[0], r.scratch[1]
	for t := range requestTypeCount {
		if w.requests[t] == 0 {
			continue
		}
		r.mergeRun(reqType(t), w)
		all.Merge(w.corrected[t])
		allService.Merge(w.service[t])
		s := summarize(w.corrected[t])
		out.Types[requestTypeNames[t]] = TypeWindow{Requests: w.requests[t], Errors: w.errors[t], P50: s.P50, P99: s.P99}
		out.Requests += w.requests[t]
		out.Errors += w.errors[t]
	}
	out.Corrected, out.Service = summarize(all), summarize(allService)
	out.Refused = w.refused
	r.addToMinute(&out, all)
	all.Reset()
	allService.Reset()
	for c, n := range w.status {
		if n > 0 {
			out.Status[statusClassNames[c]] = n
		}
	}
	return out
}

// mergeRun merges one type's window histograms into the whole-run ones.
func (r *Recorder) mergeRun(t reqType, w *windowSet) {
	if r.runCorrected[t] == nil {
		r.runCorrected[t], r.runService[t] = newHistogram(), newHistogram()
	}
	r.runCorrected[t].Merge(w.corrected[t])
	r.runService[t].Merge(w.service[t])
}

// statusKey formats a status code for JSON maps; 0 is a transport error.
func statusKey(status int) string {
	if status == 0 {
		return "transport"
	}
	return strconv.Itoa(status)
}
