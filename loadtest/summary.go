package loadtest

import (
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// printSummary writes the human-readable end-of-run summary.
func printSummary(w io.Writer, r *Result) {
	s := r.Summary
	fmt.Fprintf(w, "target rate %.1f/s  achieved %.1f/s  iterations %d (failed %d)  late starts %d  dropped %d\n",
		s.TargetRate, s.AchievedRate, s.Iterations, s.Failed, s.LateStarts, s.Dropped)
	fmt.Fprintf(w, "requests %d (%.1f/s)  errors %d (%.3f%%)  declines %d  sent %d B  received %d B\n",
		s.Requests, s.RequestRate, s.Errors, 100*s.ErrorRate, s.Declines, s.BytesSent, s.BytesRecv)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "type\trequests\trate/s\terrors\tp50 ms\tp95 ms\tp99 ms\tp99.9 ms\tmax ms\tsvc p50\tsvc p99\t")
	printLatencyRow(tw, "all", s.Requests, s.RequestRate, s.ErrorRate, r.Latency)
	for _, name := range sortedKeys(r.Types) {
		t := r.Types[name]
		printLatencyRow(tw, name, t.Requests, t.Rate, t.ErrorRate, LatencyPair{t.Corrected, t.Service})
	}
	for _, name := range sortedKeys(r.Scenarios) {
		sc := r.Scenarios[name]
		printLatencyRow(tw, "scenario "+name, sc.Iterations, sc.Rate, sc.ErrorRate, LatencyPair{Corrected: sc.Corrected})
	}
	tw.Flush()
	printCodes(w, "status codes", r.StatusCodes)
	printCodes(w, "error codes", r.ErrorCodes)
	printCodes(w, "failed checks", r.Checks)
	printStress(w, r.Stress)
	printMinutes(w, r.Minutes)
	fmt.Fprintf(w, "trend: p99 %+.3f ms/min, server RSS %+.0f B/min, injector RSS %+.0f B/min\n",
		r.Trend.P99MsPerMinute, r.Trend.ServerRSSBytesPerMinute, r.Trend.InjectorRSSBytesPerMinute)
	res := r.Resources
	fmt.Fprintf(w, "resources: injector CPU avg %.0f%% max %.0f%% RSS max %d B; server (%s) CPU avg %.0f%% max %.0f%% RSS max %d B\n",
		res.Injector.CPUPercentAvg, res.Injector.CPUPercentMax, res.Injector.RSSBytesMax,
		orNone(res.Server.Source), res.Server.CPUPercentAvg, res.Server.CPUPercentMax, res.Server.RSSBytesMax)
	if h := res.Host; h != nil {
		fmt.Fprintf(w, "host (all %d cores): busy avg %.0f%%; stolen by the hypervisor avg %.1f%%, max %.1f%% at second %d\n",
			res.Cores, h.BusyPercentAvg, h.StealPercentAvg, h.StealPercentMax, h.StealMaxSecond)
	}
	for _, t := range r.Thresholds {
		verdict := "ok"
		if !t.OK {
			verdict = "BREACHED"
		}
		fmt.Fprintf(w, "threshold %-32s observed %-12.4g %s\n", t.Threshold, t.Observed, verdict)
	}
}

// printMinutes prints the per-minute table of a run longer than a minute.
func printMinutes(w io.Writer, ms []Minute) {
	if len(ms) < 2 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "minute	requests	sales	refused	p50 ms	p99 ms	worst 1s p99	max ms	CPU us/req	allocs/req	RSS MiB	written/sale	stored/sale	stall ms	queue max	shed	steal max %	")
	for _, m := range ms {
		cpu, allocs, rss, written, stored, stall, queue, shed, steal := "-", "-", "-", "-", "-", "-", "-", "-", "-"
		if h := m.Host; h != nil {
			steal = fmt.Sprintf("%.1f", h.StealPercentMax)
		}
		if s := m.Server; s != nil {
			if s.CPUMicrosPerRequest > 0 {
				cpu = fmt.Sprintf("%.1f", s.CPUMicrosPerRequest)
			}
			if s.AllocsPerRequest > 0 {
				allocs = fmt.Sprintf("%.1f", s.AllocsPerRequest)
			}
			rss = fmt.Sprintf("%.1f", float64(s.RSSBytesMax)/(1<<20))
			if s.WriteBytes >= 0 && m.Sales > 0 {
				written = fmt.Sprintf("%.0f", s.WriteBytesPerSale)
			}
			if s.DataDirBytesPerSale > 0 {
				stored = fmt.Sprintf("%.0f", s.DataDirBytesPerSale)
			}
			if wr := s.Writer; wr != nil {
				stall, queue, shed = fmt.Sprintf("%.0f", wr.StallMaxSeconds*1000), strconv.FormatInt(wr.QueueDepthMax, 10), shedText(wr.Shed)
			}
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", m.Minute, m.Requests, m.Sales, m.Refused,
			m.Corrected.P50, m.Corrected.P99, m.WorstSecondP99, m.Corrected.Max, cpu, allocs, rss, written, stored, stall, queue, shed, steal)
	}
	tw.Flush()
}

// shedText is requests shed by reason, "reason=n,..." in reason order, or
// "0".
func shedText(shed map[string]int64) string {
	var parts []string
	for _, r := range sortedKeys(shed) {
		parts = append(parts, fmt.Sprintf("%s=%d", r, shed[r]))
	}
	if len(parts) == 0 {
		return "0"
	}
	return strings.Join(parts, ",")
}

func printLatencyRow(w io.Writer, name string, n int64, rate, errRate float64, l LatencyPair) {
	c, s := l.Corrected, l.Service
	svc := "-\t-"
	if s.Count > 0 {
		svc = fmt.Sprintf("%.2f\t%.2f", s.P50, s.P99)
	}
	fmt.Fprintf(w, "%s\t%d\t%.1f\t%.2f%%\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%s\t\n",
		name, n, rate, 100*errRate, c.P50, c.P95, c.P99, c.P999, c.Max, svc)
}

func printCodes(w io.Writer, title string, m map[string]int64) {
	if len(m) == 0 {
		return
	}
	fmt.Fprintf(w, "%s:", title)
	for _, k := range sortedKeys(m) {
		fmt.Fprintf(w, " %s=%d", k, m[k])
	}
	fmt.Fprintln(w)
}

func printStress(w io.Writer, st *StressResult) {
	if st == nil {
		return
	}
	for _, s := range st.Steps {
		verdict := "held"
		if !s.Held {
			verdict = "BROKE: " + s.Reason
		}
		fmt.Fprintf(w, "step %8.1f/s achieved %8.1f/s p99 %9.2fms errors %6.3f%% %s\n",
			s.Rate, s.AchievedRate, s.P99, 100*s.ErrorRate, verdict)
	}
	fmt.Fprintf(w, "capacity: %.1f iterations/s (SLO broken: %v)\n", st.CapacityRate, st.Broken)
}

func orNone(s string) string {
	if s == "" {
		return "not sampled"
	}
	return s
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

const tableUsage = `Usage: surgepay loadtest table [--header] [--label NAME] a.json...

Prints one Markdown table row per load-test result (for bench/RESULTS.md).
`

// mainTable runs "table [--header] a.json...": one Markdown table row per
// result, for appending to bench/RESULTS.md.
func mainTable(args []string, stdout, stderr io.Writer) int {
	c := newCommand("table", tableUsage)
	header := c.Flags.Bool("header", false, "print the table header first")
	label := c.Flags.String("label", "", "label for the rows (default: the file name)")
	files, code, ok := c.ParseInterleaved(args, stdout, stderr)
	if !ok {
		return code
	}
	if *header {
		fmt.Fprintln(stdout, "| run | profile | scenarios | capacity/s | achieved/s | p50 ms | p99 ms | errors | dropped | injector CPU % | server CPU % | server RSS MiB |")
		fmt.Fprintln(stdout, "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	}
	for _, f := range files {
		r, err := ReadResult(f)
		if err != nil {
			fmt.Fprintf(stderr, "loadtest table: %v\n", err)
			return ExitUsage
		}
		name := *label
		if name == "" {
			name = filepath.Base(f)
		}
		fmt.Fprintln(stdout, markdownRow(name, r))
	}
	return ExitOK
}

func markdownRow(name string, r *Result) string {
	var mix []string
	for _, m := range r.Config.Mix {
		mix = append(mix, fmt.Sprintf("%s×%d", m.Name, m.Weight))
	}
	capacity := "-"
	if r.Stress != nil {
		capacity = fmt.Sprintf("%.0f", r.Stress.CapacityRate)
		if !r.Stress.Broken {
			// The steps ran out before the SLO broke.
			capacity = "≥" + capacity
		}
	}
	s, c, res := r.Summary, r.Latency.Corrected, r.Resources
	return fmt.Sprintf("| %s | %s | %s | %s | %.1f | %.2f | %.2f | %.3f%% | %d | %.0f | %.0f | %.1f |",
		name, r.Config.Profile, strings.Join(mix, " "), capacity, s.AchievedRate, c.P50, c.P99,
		100*s.ErrorRate, s.Dropped, res.Injector.CPUPercentAvg, res.Server.CPUPercentAvg,
		float64(res.Server.RSSBytesMax)/(1<<20))
}
