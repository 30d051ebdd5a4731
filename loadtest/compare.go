package loadtest

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Delta is one metric of compare: a new result against a base.
type Delta struct {
	Subject    string  // "all" or a request type
	Metric     string  // rate, p50, p95, p99, errors, requests
	Base       float64 // rate per second, latency in ms, error rate as a fraction
	New        float64
	Change     float64 // (New-Base)/Base; NaN when Base is 0
	Regression bool
	Note       string
}

// Compare compares cur with base per request type and overall. Rates
// regress when they fall by more than tolerance (a fraction); latencies when
// they rise by more than tolerance; error rates when they rise by more than
// tolerance and by more than ErrorRateSlack in absolute terms. A request type
// of base missing from cur is a regression.
func Compare(base, cur *Result, tolerance float64) []Delta {
	out := compareSubject("all", base.Summary.AchievedRate, cur.Summary.AchievedRate,
		base.Latency.Corrected, cur.Latency.Corrected, base.Summary.ErrorRate, cur.Summary.ErrorRate, tolerance)
	for _, name := range sortedKeys(base.Types) {
		b := base.Types[name]
		c, ok := cur.Types[name]
		if !ok {
			out = append(out, Delta{Subject: name, Metric: "requests", Base: float64(b.Requests), Change: -1, Regression: true, Note: "missing in new"})
			continue
		}
		out = append(out, compareSubject(name, b.Rate, c.Rate, b.Corrected, c.Corrected, b.ErrorRate, c.ErrorRate, tolerance)...)
	}
	for _, name := range sortedKeys(cur.Types) {
		if _, ok := base.Types[name]; !ok {
			c := cur.Types[name]
			out = append(out, Delta{Subject: name, Metric: "requests", New: float64(c.Requests), Change: math.NaN(), Note: "new in new"})
		}
	}
	return out
}

func compareSubject(subject string, bRate, cRate float64, b, c LatencySummary, bErr, cErr, tol float64) []Delta {
	d := []Delta{
		delta(subject, "rate", bRate, cRate),
		delta(subject, "p50", b.P50, c.P50),
		delta(subject, "p95", b.P95, c.P95),
		delta(subject, "p99", b.P99, c.P99),
		delta(subject, "errors", bErr, cErr),
	}
	d[0].Regression = cRate < bRate*(1-tol)
	for i := 1; i <= 3; i++ {
		d[i].Regression = d[i].New > d[i].Base*(1+tol) && b.Count > 0
	}
	d[4].Regression = cErr > bErr*(1+tol) && cErr-bErr > ErrorRateSlack
	return d
}

func delta(subject, metric string, base, cur float64) Delta {
	change := math.NaN()
	if base != 0 {
		change = (cur - base) / base
	}
	return Delta{Subject: subject, Metric: metric, Base: base, New: cur, Change: change}
}

// ParseTolerance reads "10%" or "0.1" as a fraction.
func ParseTolerance(s string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
	if err != nil {
		return 0, fmt.Errorf("--tolerance %q: want e.g. 10%%", s)
	}
	if strings.HasSuffix(s, "%") {
		v /= 100
	}
	if v < 0 || v > 100 {
		return 0, fmt.Errorf("--tolerance %q: out of range", s)
	}
	return v, nil
}

const compareUsage = `Usage: surgepay loadtest compare BASE.json NEW.json [--tolerance 10%]

Compares two load-test results metric by metric; exits 3 if any got worse
by more than the tolerance.
`

// mainCompare runs "compare base.json new.json [--tolerance 10%]".
func mainCompare(args []string, stdout, stderr io.Writer) int {
	c := newCommand("compare", compareUsage)
	tolText := c.Flags.String("tolerance", "10%", "allowed change before a metric counts as a regression")
	files, code, ok := c.ParseInterleaved(args, stdout, stderr)
	if !ok {
		return code
	}
	if len(files) != 2 {
		return c.Fail(stderr, "want two result files, BASE and NEW; got %d", len(files))
	}
	tol, err := ParseTolerance(*tolText)
	if err != nil {
		return c.Fail(stderr, "%v", err)
	}
	var cur *Result
	base, err := ReadResult(files[0])
	if err == nil {
		cur, err = ReadResult(files[1])
	}
	if err != nil {
		fmt.Fprintf(stderr, "loadtest compare: %v\n", err)
		return ExitUsage
	}
	deltas := Compare(base, cur, tol)
	if printDeltas(stdout, deltas, tol) {
		return ExitRegression
	}
	return ExitOK
}

// printDeltas prints the comparison and reports whether any metric regressed.
func printDeltas(w io.Writer, deltas []Delta, tol float64) bool {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "subject\tmetric\tbase\tnew\tchange\tverdict")
	regressed := 0
	for _, d := range deltas {
		verdict := "ok"
		if d.Regression {
			verdict = "REGRESSION"
			regressed++
		}
		if d.Note != "" {
			verdict += " (" + d.Note + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", d.Subject, d.Metric,
			formatMetric(d.Metric, d.Base), formatMetric(d.Metric, d.New), formatChange(d.Change), verdict)
	}
	tw.Flush()
	fmt.Fprintf(w, "%d regressions beyond %.1f%%\n", regressed, 100*tol)
	return regressed > 0
}

func formatMetric(metric string, v float64) string {
	switch metric {
	case "errors":
		return strconv.FormatFloat(100*v, 'f', 3, 64) + "%"
	case "rate":
		return strconv.FormatFloat(v, 'f', 1, 64) + "/s"
	case "requests":
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64) + "ms"
}

func formatChange(c float64) string {
	if math.IsNaN(c) {
		return "n/a"
	}
	return fmt.Sprintf("%+.1f%%", 100*c)
}
