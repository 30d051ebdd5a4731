package loadtest

import (
	"fmt"
	"maps"
	"runtime"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// result assembles the Result once every goroutine of the run has stopped.
func (r *run) result(interrupted bool) *Result {
	res := &Result{
		Version:     ResultVersion,
		StartedAt:   r.start.UTC(),
		Config:      r.resultConfig(),
		Types:       map[string]*TypeResult{},
		Scenarios:   map[string]*ScenarioResult{},
		StatusCodes: map[string]int64{},
		ErrorCodes:  map[string]int64{},
		Checks:      map[string]int64{},
		Warnings:    []string{},
		Thresholds:  []ThresholdResult{},
	}
	res.Summary = r.summary(interrupted)
	elapsed := res.Summary.ElapsedSeconds
	all, allService := r.addTypes(res, elapsed)
	res.Latency = LatencyPair{Corrected: summarize(all), Service: summarize(allService)}
	res.StartLag = summarize(r.rec.startLag)
	r.addScenarios(res, elapsed)
	r.addWindows(res)
	r.addMinutes(res)
	res.Resources = Resources{
		Server:   summarizeResources(r.res.serverSource, r.res.serverSamples),
		Injector: summarizeResources("proc", r.res.injectorSamples),
		Host:     summarizeHost(r.res.hostSamples),
		Cores:    runtime.NumCPU(),
	}
	if r.monitor != nil {
		res.Stress = r.monitor.result()
	}
	res.Trend = computeTrend(res.Windows)
	res.Warnings = r.warnings(res)
	return res
}

func (r *run) resultConfig() ResultConfig {
	c := r.cfg
	return ResultConfig{
		URL: c.URL, Profile: c.Profile, Mix: c.Mix, Rate: c.Rate,
		DurationSeconds: c.Duration.Seconds(), Poisson: c.Poisson,
		MaxInflight: c.MaxInflight, MaxIterations: c.MaxIterations,
		LateThresholdMs: float64(c.LateThreshold.Microseconds()) / 1000,
		DeclineRate:     c.DeclineRate, SetupCustomers: c.SetupCustomers,
		SLO: thresholdTexts(c.SLO), Thresholds: thresholdTexts(c.Thresholds), Seed: c.Seed,
	}
}

// summary computes the top-level numbers. The elapsed time is the planned
// duration when the schedule ran out, the pacer's running time when it was
// stopped early, and the time to the last completion for flood.
func (r *run) summary(interrupted bool) Summary {
	p := r.pacer
	s := Summary{
		PlannedSeconds: r.plan.Duration().Seconds(),
		Scheduled:      p.scheduled,
		Iterations:     p.started.Load(),
		Dropped:        p.dropped.Load(),
		LateStarts:     r.rec.late,
		Interrupted:    interrupted,
	}
	switch {
	case r.plan.FloodCount > 0:
		s.ElapsedSeconds = r.end.Sub(r.start).Seconds()
	case p.exhausted:
		s.ElapsedSeconds = s.PlannedSeconds
		s.TargetRate = r.plan.Count() / s.PlannedSeconds
	default:
		// Stopped early: the target is the plan's mean over the part run.
		elapsed := p.end.Sub(r.start)
		s.ElapsedSeconds = elapsed.Seconds()
		if s.ElapsedSeconds > 0 {
			s.TargetRate = r.plan.CountAt(elapsed) / s.ElapsedSeconds
		}
	}
	if s.ElapsedSeconds > 0 {
		s.AchievedRate = float64(s.Iterations) / s.ElapsedSeconds
	}
	for _, sc := range r.rec.scenarios {
		s.Failed += sc.failed
	}
	for t := range requestTypeCount {
		tt := &r.rec.types[t]
		s.Requests += tt.requests
		s.Errors += tt.errors
		s.Declines += tt.declines
		s.BytesSent += tt.sent
		s.BytesRecv += tt.recv
	}
	if s.Requests > 0 {
		s.ErrorRate = float64(s.Errors) / float64(s.Requests)
	}
	if s.ElapsedSeconds > 0 {
		s.RequestRate = float64(s.Requests) / s.ElapsedSeconds
	}
	return s
}

// addTypes fills the per-type results and the global tables, and returns
// the merged corrected and service histograms of all types.
func (r *run) addTypes(res *Result, elapsed float64) (*hdr.Histogram, *hdr.Histogram) {
	all, allService := newHistogram(), newHistogram()
	for t := range requestTypeCount {
		tt := &r.rec.types[t]
		if tt.requests == 0 {
			continue
		}
		c, s := r.rec.runCorrected[t], r.rec.runService[t]
		all.Merge(c)
		allService.Merge(s)
		tr := &TypeResult{
			Requests: tt.requests, Errors: tt.errors, Declines: tt.declines,
			ErrorRate: float64(tt.errors) / float64(tt.requests),
			Corrected: summarize(c), Service: summarize(s),
			Status: map[string]int64{}, Codes: maps.Clone(tt.codes), Checks: maps.Clone(tt.checks),
			BytesSent: tt.sent, BytesRecv: tt.recv,
			HDR: HDRPair{Corrected: encodeHistogram(c), Service: encodeHistogram(s)},
		}
		if elapsed > 0 {
			tr.Rate = float64(tt.requests) / elapsed
		}
		for code, n := range tt.status {
			tr.Status[statusKey(code)] += n
			res.StatusCodes[statusKey(code)] += n
		}
		addCounts(res.ErrorCodes, tt.codes)
		addCounts(res.Checks, tt.checks)
		res.Types[requestTypeNames[t]] = tr
	}
	return all, allService
}

func addCounts(dst, src map[string]int64) {
	for k, n := range src {
		dst[k] += n
	}
}

func (r *run) addScenarios(res *Result, elapsed float64) {
	for i, sc := range r.rec.scenarios {
		if sc.iterations == 0 {
			continue
		}
		sr := &ScenarioResult{
			Iterations: sc.iterations, Failed: sc.failed,
			ErrorRate: float64(sc.failed) / float64(sc.iterations),
			Corrected: summarize(sc.hist), HDR: encodeHistogram(sc.hist),
		}
		if elapsed > 0 {
			sr.Rate = float64(sc.iterations) / elapsed
		}
		res.Scenarios[scenarioTable[i].name] = sr
	}
}

// addWindows joins the recorder's windows with the pacer's per-second
// counts, the plan's target rate and the resource samples.
func (r *run) addWindows(res *Result) {
	res.Windows = r.rec.windows
	server := bySecond(r.res.serverSamples)
	injector := bySecond(r.res.injectorSamples)
	host := make(map[int]*HostSample, len(r.res.hostSamples))
	for i := range r.res.hostSamples {
		host[r.res.hostSamples[i].Second] = &r.res.hostSamples[i]
	}
	for i := range res.Windows {
		w := &res.Windows[i]
		k := w.Second
		w.Started = at(r.pacer.startedPerSecond, k)
		w.Dropped = at(r.pacer.droppedPerSecond, k)
		if r.plan.FloodCount == 0 {
			w.TargetRate = r.plan.CountAt(secondsToDuration(k+1)) - r.plan.CountAt(secondsToDuration(k))
		}
		w.Server, w.Injector, w.Host = server[k], injector[k], host[k]
	}
}

// addMinutes joins the recorder's minutes with the server's samples: CPU
// (and per request), heap allocations per request, peak RSS, bytes written
// per sale during the minute, and the data folder's bytes per sale so far.
func (r *run) addMinutes(res *Result) {
	res.Minutes = r.rec.minutes
	addMinutesHost(res.Minutes, r.res.hostSamples)
	samples := r.res.serverSamples
	if len(samples) == 0 {
		return
	}
	prevWrite, prevAllocs := samples[0].WriteBytes, samples[0].Allocs
	var prevShed map[string]int64 // the last scrape's
	for _, s := range samples {
		if s.Writer != nil {
			prevShed = s.Writer.Shed
			break
		}
	}
	var sales int64
	j := 0
	for i := range res.Minutes {
		m := &res.Minutes[i]
		sales += m.Sales
		var mr MinuteResources
		var cpu float64
		n := 0
		last := -1
		var allocs int64 // the minute's last scraped allocation count
		for ; j < len(samples) && samples[j].Second/MinuteWindows <= m.Minute; j++ {
			s := samples[j]
			if s.Second/MinuteWindows < m.Minute {
				continue
			}
			if s.Allocs > 0 {
				allocs = s.Allocs
			}
			cpu += s.CPUPercent
			mr.RSSBytesMax = max(mr.RSSBytesMax, s.RSSBytes)
			n++
			last = j
			if w := s.Writer; w != nil {
				prevShed = addWriter(&mr, s.Second, w, prevShed)
			}
		}
		if n == 0 {
			continue
		}
		mr.CPUPercentAvg = cpu / float64(n)
		if m.Requests > 0 && m.Seconds > 0 {
			mr.CPUMicrosPerRequest = mr.CPUPercentAvg * 1e4 / (float64(m.Requests) / m.Seconds)
		}
		if allocs > 0 {
			if prevAllocs > 0 {
				mr.Allocs = allocs - prevAllocs
				if m.Requests > 0 {
					mr.AllocsPerRequest = float64(mr.Allocs) / float64(m.Requests)
				}
			}
			prevAllocs = allocs
		}
		mr.WriteBytes = -1
		if w := samples[last].WriteBytes; w >= 0 && prevWrite >= 0 {
			mr.WriteBytes = w - prevWrite
			if m.Sales > 0 {
				mr.WriteBytesPerSale = float64(mr.WriteBytes) / float64(m.Sales)
			}
			prevWrite = w
		}
		mr.DataDirBytes = samples[last].DataDirBytes
		if sales > 0 && mr.DataDirBytes > 0 {
			mr.DataDirBytesPerSale = float64(mr.DataDirBytes) / float64(sales)
		}
		m.Server = &mr
	}
}

// addMinutesHost summarises the machine's CPU samples of each minute.
func addMinutesHost(ms []Minute, samples []HostSample) {
	j := 0
	for i := range ms {
		for j < len(samples) && samples[j].Second/MinuteWindows < ms[i].Minute {
			j++
		}
		k := j
		for k < len(samples) && samples[k].Second/MinuteWindows == ms[i].Minute {
			k++
		}
		ms[i].Host = summarizeHost(samples[j:k])
		j = k
	}
}

// addWriter adds one scrape of the writer at second to the minute's, and
// returns its shed totals, the base of the next scrape's growth.
func addWriter(mr *MinuteResources, second int, w *WriterSample, prevShed map[string]int64) map[string]int64 {
	mw := mr.Writer
	if mw == nil {
		mw = &MinuteWriter{StallMaxSecond: second}
		mr.Writer = mw
	}
	mw.Scrapes++
	if w.StallSeconds > mw.StallMaxSeconds {
		mw.StallMaxSeconds, mw.StallMaxSecond = w.StallSeconds, second
	}
	mw.QueueDepthMax = max(mw.QueueDepthMax, w.QueueDepth)
	for reason, n := range w.Shed {
		if d := n - prevShed[reason]; d > 0 {
			if mw.Shed == nil {
				mw.Shed = map[string]int64{}
			}
			mw.Shed[reason] += d
		}
	}
	return w.Shed
}

func bySecond(samples []ResourceSample) map[int]*ResourceSample {
	m := make(map[int]*ResourceSample, len(samples))
	for i := range samples {
		m[samples[i].Second] = &samples[i]
	}
	return m
}

func at(counts []int64, i int) int64 {
	if i < 0 || i >= len(counts) {
		return 0
	}
	return counts[i]
}

// warnings lists what the operator must know before trusting the numbers.
func (r *run) warnings(res *Result) []string {
	var w []string
	s := res.Summary
	if s.Dropped > 0 {
		w = append(w, fmt.Sprintf("%d iterations dropped at --max-inflight %d: the offered load was lower than planned; the run fails its thresholds", s.Dropped, r.cfg.MaxInflight))
	}
	if r.pacer.truncated {
		w = append(w, fmt.Sprintf("schedule cut at --max-iterations %d", r.cfg.MaxIterations))
	}
	if s.Interrupted {
		w = append(w, "run interrupted: partial results")
	}
	if r.res.serverErr != nil {
		w = append(w, "server resource sampling failed: "+r.res.serverErr.Error())
	}
	return append(w, injectorWarnings(res, r.pacer.pacerLate.Load())...)
}

// injectorWarnings blames the injector when it may be the bottleneck: its
// CPU use near its usable cores, the machine saturated, or the pacer
// launching iterations late.
func injectorWarnings(res *Result, pacerLate int64) []string {
	var w []string
	inj, srv := res.Resources.Injector, res.Resources.Server
	usable := float64(runtime.GOMAXPROCS(0)) * 100
	if inj.CPUPercentAvg > InjectorCPUShareMax*usable {
		w = append(w, fmt.Sprintf("injector CPU averaged %.0f%% of %.0f%% usable: the injector may be the bottleneck", inj.CPUPercentAvg, usable))
	}
	if all := float64(res.Resources.Cores) * 100; srv.Samples > 0 && inj.CPUPercentAvg+srv.CPUPercentAvg > MachineCPUShareMax*all {
		w = append(w, fmt.Sprintf("injector and server together averaged %.0f%% of %.0f%% CPU: the machine is saturated", inj.CPUPercentAvg+srv.CPUPercentAvg, all))
	}
	if n := res.Summary.Iterations; pacerLate >= PacerLagWarnCountMin && float64(pacerLate) > PacerLagWarnShare*float64(n) {
		w = append(w, fmt.Sprintf("the pacer itself started %d of %d iterations late: the injector is the bottleneck", pacerLate, n))
	}
	return w
}
