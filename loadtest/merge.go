package loadtest

import (
	"errors"
	"fmt"
	"io"
	"slices"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// MergeResults combines results of injectors that ran side by side against
// the same server. Counts and rates add up. Whole-run latencies are exact:
// the encoded HDR histograms are merged. Per-window latencies cannot be
// merged from summaries; a merged window keeps the larger value of each
// percentile, an upper bound. Config, resources and stress come from the
// first result.
func MergeResults(results ...*Result) (*Result, error) {
	if len(results) == 0 {
		return nil, errors.New("merge: no results")
	}
	first := results[0]
	out := &Result{
		Version: ResultVersion, StartedAt: first.StartedAt, Config: first.Config,
		Types: map[string]*TypeResult{}, Scenarios: map[string]*ScenarioResult{},
		StatusCodes: map[string]int64{}, ErrorCodes: map[string]int64{}, Checks: map[string]int64{},
		Resources: first.Resources, Stress: first.Stress, Thresholds: []ThresholdResult{}, Warnings: []string{},
	}
	all, allService := newHistogram(), newHistogram()
	scenarioHists := map[string]*hdr.Histogram{}
	for _, r := range results {
		mergeSummary(&out.Summary, r.Summary)
		addCounts(out.StatusCodes, r.StatusCodes)
		addCounts(out.ErrorCodes, r.ErrorCodes)
		addCounts(out.Checks, r.Checks)
		out.StartLag = maxSummary(out.StartLag, r.StartLag)
		out.Warnings = append(out.Warnings, r.Warnings...)
		out.Windows = mergeWindows(out.Windows, r.Windows)
		out.Minutes = mergeMinutes(out.Minutes, r.Minutes)
		if err := mergeTypes(out.Types, r.Types, all, allService); err != nil {
			return nil, err
		}
		if err := mergeScenarios(out.Scenarios, r.Scenarios, scenarioHists); err != nil {
			return nil, err
		}
	}
	finishMerge(out, all, allService, scenarioHists)
	return out, nil
}

func mergeSummary(dst *Summary, s Summary) {
	dst.PlannedSeconds = max(dst.PlannedSeconds, s.PlannedSeconds)
	dst.ElapsedSeconds = max(dst.ElapsedSeconds, s.ElapsedSeconds)
	dst.TargetRate += s.TargetRate
	dst.AchievedRate += s.AchievedRate
	dst.Scheduled += s.Scheduled
	dst.Iterations += s.Iterations
	dst.Failed += s.Failed
	dst.LateStarts += s.LateStarts
	dst.Dropped += s.Dropped
	dst.Requests += s.Requests
	dst.Errors += s.Errors
	dst.Declines += s.Declines
	dst.RequestRate += s.RequestRate
	dst.BytesSent += s.BytesSent
	dst.BytesRecv += s.BytesRecv
	dst.Interrupted = dst.Interrupted || s.Interrupted
}

// mergeTypes adds src's request types into dst, merging their histograms
// and adding them to the global ones.
func mergeTypes(dst, src map[string]*TypeResult, all, allService *hdr.Histogram) error {
	for name, t := range src {
		c, err := decodeHistogram(t.HDR.Corrected)
		if err != nil {
			return fmt.Errorf("merge %s: %w", name, err)
		}
		s, err := decodeHistogram(t.HDR.Service)
		if err != nil {
			return fmt.Errorf("merge %s: %w", name, err)
		}
		all.Merge(c)
		allService.Merge(s)
		d, ok := dst[name]
		if !ok {
			d = &TypeResult{Status: map[string]int64{}, Codes: map[string]int64{}, Checks: map[string]int64{}}
			dst[name] = d
		}
		if err := mergeEncoded(&d.HDR.Corrected, c); err != nil {
			return err
		}
		if err := mergeEncoded(&d.HDR.Service, s); err != nil {
			return err
		}
		d.Requests += t.Requests
		d.Errors += t.Errors
		d.Declines += t.Declines
		d.Rate += t.Rate
		d.BytesSent += t.BytesSent
		d.BytesRecv += t.BytesRecv
		addCounts(d.Status, t.Status)
		addCounts(d.Codes, t.Codes)
		addCounts(d.Checks, t.Checks)
	}
	return nil
}

// mergeEncoded merges h into the encoded histogram *enc.
func mergeEncoded(enc *string, h *hdr.Histogram) error {
	acc, err := decodeHistogram(*enc)
	if err != nil {
		return err
	}
	acc.Merge(h)
	*enc = encodeHistogram(acc)
	return nil
}

func mergeScenarios(dst, src map[string]*ScenarioResult, hists map[string]*hdr.Histogram) error {
	for name, s := range src {
		h, err := decodeHistogram(s.HDR)
		if err != nil {
			return fmt.Errorf("merge scenario %s: %w", name, err)
		}
		if hists[name] == nil {
			hists[name] = newHistogram()
			dst[name] = &ScenarioResult{}
		}
		hists[name].Merge(h)
		d := dst[name]
		d.Iterations += s.Iterations
		d.Failed += s.Failed
		d.Rate += s.Rate
	}
	return nil
}

// finishMerge recomputes the derived numbers from the merged counts.
func finishMerge(out *Result, all, allService *hdr.Histogram, scenarioHists map[string]*hdr.Histogram) {
	s := &out.Summary
	if s.Requests > 0 {
		s.ErrorRate = float64(s.Errors) / float64(s.Requests)
	}
	out.Latency = LatencyPair{Corrected: summarize(all), Service: summarize(allService)}
	// Bytes per sale, CPU and allocations per request over every
	// injector's sales and requests.
	var sales int64
	for i := range out.Minutes {
		m := &out.Minutes[i]
		sales += m.Sales
		if m.Server == nil {
			continue
		}
		r := *m.Server // shared with the first result's minute
		if r.WriteBytes >= 0 && m.Sales > 0 {
			r.WriteBytesPerSale = float64(r.WriteBytes) / float64(m.Sales)
		}
		if r.DataDirBytes > 0 && sales > 0 {
			r.DataDirBytesPerSale = float64(r.DataDirBytes) / float64(sales)
		}
		if m.Requests > 0 && m.Seconds > 0 && r.CPUMicrosPerRequest > 0 {
			r.CPUMicrosPerRequest = r.CPUPercentAvg * 1e4 / (float64(m.Requests) / m.Seconds)
		}
		if r.Allocs > 0 && m.Requests > 0 {
			r.AllocsPerRequest = float64(r.Allocs) / float64(m.Requests)
		}
		m.Server = &r
	}
	for _, t := range out.Types {
		c, _ := decodeHistogram(t.HDR.Corrected)
		sv, _ := decodeHistogram(t.HDR.Service)
		t.Corrected, t.Service = summarize(c), summarize(sv)
		if t.Requests > 0 {
			t.ErrorRate = float64(t.Errors) / float64(t.Requests)
		}
	}
	for name, sc := range out.Scenarios {
		sc.Corrected, sc.HDR = summarize(scenarioHists[name]), encodeHistogram(scenarioHists[name])
		if sc.Iterations > 0 {
			sc.ErrorRate = float64(sc.Failed) / float64(sc.Iterations)
		}
	}
	out.Trend = computeTrend(out.Windows)
}

// mergeWindows adds src's windows into dst by second.
func mergeWindows(dst, src []Window) []Window {
	for _, w := range src {
		i, found := slices.BinarySearchFunc(dst, w.Second, func(a Window, s int) int { return a.Second - s })
		if !found {
			dst = slices.Insert(dst, i, Window{Second: w.Second, Status: map[string]int64{}, Types: map[string]TypeWindow{}})
		}
		d := &dst[i]
		d.DurationSeconds = max(d.DurationSeconds, w.DurationSeconds)
		d.TargetRate += w.TargetRate
		d.Started += w.Started
		d.Dropped += w.Dropped
		d.Late += w.Late
		d.Requests += w.Requests
		d.Errors += w.Errors
		d.Refused += w.Refused
		addCounts(d.Status, w.Status)
		d.Corrected = maxSummary(d.Corrected, w.Corrected)
		d.Service = maxSummary(d.Service, w.Service)
		for name, t := range w.Types {
			m := d.Types[name]
			m.Requests += t.Requests
			m.Errors += t.Errors
			m.P50, m.P99 = max(m.P50, t.P50), max(m.P99, t.P99)
			d.Types[name] = m
		}
	}
	return dst
}

// mergeMinutes adds src's minutes into dst by minute: counts add up,
// latencies take the larger (an upper bound, as for windows); the server's
// resources and the machine's CPU are the first result's (one server,
// sampled by each injector).
func mergeMinutes(dst, src []Minute) []Minute {
	for _, m := range src {
		i, found := slices.BinarySearchFunc(dst, m.Minute, func(a Minute, n int) int { return a.Minute - n })
		if !found {
			dst = slices.Insert(dst, i, Minute{Minute: m.Minute, Server: m.Server, Host: m.Host})
		}
		d := &dst[i]
		d.Seconds = max(d.Seconds, m.Seconds)
		d.Requests += m.Requests
		d.Errors += m.Errors
		d.Refused += m.Refused
		d.Sales += m.Sales
		d.Corrected = maxSummary(d.Corrected, m.Corrected)
		d.WorstSecondP99 = max(d.WorstSecondP99, m.WorstSecondP99)
	}
	return dst
}

// maxSummary takes the larger of each field, and the sum of the counts.
func maxSummary(a, b LatencySummary) LatencySummary {
	minMs := min(a.Min, b.Min)
	if a.Count == 0 || b.Count == 0 {
		minMs = max(a.Min, b.Min)
	}
	return LatencySummary{
		Count: a.Count + b.Count, Min: minMs, Mean: max(a.Mean, b.Mean),
		P50: max(a.P50, b.P50), P90: max(a.P90, b.P90), P95: max(a.P95, b.P95),
		P99: max(a.P99, b.P99), P999: max(a.P999, b.P999), Max: max(a.Max, b.Max),
	}
}

const mergeUsage = `Usage: surgepay loadtest merge a.json b.json... --out merged.json [--html report.html]

Merges the results of injectors that ran at the same time into one result.
`

// mainMerge runs "merge a.json b.json... --out merged.json".
func mainMerge(args []string, stdout, stderr io.Writer) int {
	c := newCommand("merge", mergeUsage)
	out := c.Flags.String("out", "", "write the merged JSON result to `FILE` (required)")
	html := c.Flags.String("html", "", "also write an HTML report to `FILE`")
	files, code, ok := c.ParseInterleaved(args, stdout, stderr)
	if !ok {
		return code
	}
	if len(files) < 1 || *out == "" {
		return c.Fail(stderr, "want one result file or more and --out FILE")
	}
	var err error
	var results []*Result
	for _, f := range files {
		if err != nil {
			break
		}
		var r *Result
		r, err = ReadResult(f)
		results = append(results, r)
	}
	var merged *Result
	if err == nil {
		merged, err = MergeResults(results...)
	}
	if err == nil {
		err = writeOutputs(merged, cliOptions{out: *out, html: *html})
	}
	if err != nil {
		fmt.Fprintf(stderr, "loadtest merge: %v\n", err)
		return ExitUsage
	}
	printSummary(stdout, merged)
	return ExitOK
}
