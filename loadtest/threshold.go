package loadtest

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Threshold is a pass/fail rule on a result, written
// [target:]metric op value, e.g. "checkout:p99<250ms", "errors<0.1%",
// "payment.create:rate>=90". Target is empty (all requests), a scenario
// (whole iterations) or a request type. Latency metrics compare corrected
// latency in milliseconds; errors compares a fraction; rate compares
// iterations (global, scenario) or requests (type) per second.
type Threshold struct {
	Text   string
	Target string
	Metric string
	Op     string
	Value  float64
}

// ThresholdResult is a threshold evaluated against a result.
type ThresholdResult struct {
	Threshold string  `json:"threshold"`
	Observed  float64 `json:"observed"`
	OK        bool    `json:"ok"`
	// Missing is set when the target saw no traffic; the threshold fails.
	Missing bool `json:"missing,omitempty"`
}

var thresholdMetrics = map[string]bool{
	"p50": true, "p90": true, "p95": true, "p99": true, "p999": true,
	"max": true, "mean": true, "min": true, "errors": true, "rate": true,
}

// ParseThreshold parses one threshold expression.
func ParseThreshold(text string) (Threshold, error) {
	t := Threshold{Text: strings.TrimSpace(text)}
	expr := t.Text
	if i := strings.IndexByte(expr, ':'); i >= 0 {
		t.Target, expr = expr[:i], expr[i+1:]
	}
	i := strings.IndexAny(expr, "<>")
	if i <= 0 {
		return t, fmt.Errorf("threshold %q: want [target:]metric<value", text)
	}
	t.Metric = strings.ReplaceAll(strings.TrimSpace(expr[:i]), "p99.9", "p999")
	t.Op = expr[i : i+1]
	rest := expr[i+1:]
	if strings.HasPrefix(rest, "=") {
		t.Op += "="
		rest = rest[1:]
	}
	if !thresholdMetrics[t.Metric] {
		return t, fmt.Errorf("threshold %q: unknown metric %q", text, t.Metric)
	}
	v, err := parseThresholdValue(t.Metric, strings.TrimSpace(rest))
	if err != nil {
		return t, fmt.Errorf("threshold %q: %w", text, err)
	}
	t.Value = v
	return t, nil
}

// parseThresholdValue reads a duration (to milliseconds), a percentage or
// fraction (errors), or a plain number (rate).
func parseThresholdValue(metric, s string) (float64, error) {
	switch metric {
	case "errors":
		if p, ok := strings.CutSuffix(s, "%"); ok {
			v, err := strconv.ParseFloat(p, 64)
			return v / 100, err
		}
		return strconv.ParseFloat(s, 64)
	case "rate":
		return strconv.ParseFloat(strings.TrimSuffix(s, "/s"), 64)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("want a duration such as 250ms: %w", err)
	}
	return float64(d) / float64(time.Millisecond), nil
}

// ParseSLO parses a comma-separated list of global thresholds. A missing
// latency term defaults to p99<250ms and a missing errors term to errors<1%.
func ParseSLO(text string) ([]Threshold, error) {
	var out []Threshold
	var latency, errs bool
	for part := range strings.SplitSeq(text, ",") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		t, err := ParseThreshold(part)
		if err != nil {
			return nil, fmt.Errorf("--slo: %w", err)
		}
		if t.Target != "" {
			return nil, fmt.Errorf("--slo %q: SLO terms are global, drop %q", part, t.Target+":")
		}
		errs = errs || t.Metric == "errors"
		latency = latency || t.Metric != "errors"
		out = append(out, t)
	}
	if !latency {
		out = append(out, Threshold{Text: "p99<250ms", Metric: "p99", Op: "<", Value: 250})
	}
	if !errs {
		out = append(out, Threshold{Text: "errors<1%", Metric: "errors", Op: "<", Value: 0.01})
	}
	return out, nil
}

// checkThresholdNames rejects targets that are neither a scenario of the
// mix nor a request type one of its scenarios sends.
func checkThresholdNames(ts []Threshold, mix []MixEntry) error {
	known := map[string]bool{}
	for _, m := range mix {
		known[m.Name] = true
		if sc, ok := scenarioByName(m.Name); ok {
			for _, rt := range sc.types {
				known[requestTypeNames[rt]] = true
			}
		}
	}
	for _, t := range ts {
		if t.Target != "" && !known[t.Target] {
			return fmt.Errorf("threshold %q: %q is not a scenario or request type of this run", t.Text, t.Target)
		}
	}
	return nil
}

// Evaluate checks t against r.
func (t Threshold) Evaluate(r *Result) ThresholdResult {
	out := ThresholdResult{Threshold: t.Text}
	lat, errRate, rate, count, ok := thresholdSubject(r, t.Target)
	if !ok || count == 0 {
		out.Missing = true
		return out
	}
	switch t.Metric {
	case "errors":
		out.Observed = errRate
	case "rate":
		out.Observed = rate
	default:
		out.Observed = latencyMetric(lat, t.Metric)
	}
	out.OK = compare(out.Observed, t.Op, t.Value)
	return out
}

// thresholdSubject finds the numbers a threshold's target refers to.
func thresholdSubject(r *Result, target string) (LatencySummary, float64, float64, int64, bool) {
	if target == "" {
		s := r.Summary
		return r.Latency.Corrected, s.ErrorRate, s.AchievedRate, s.Requests, true
	}
	if sc, ok := r.Scenarios[target]; ok {
		return sc.Corrected, sc.ErrorRate, sc.Rate, sc.Iterations, true
	}
	if ty, ok := r.Types[target]; ok {
		return ty.Corrected, ty.ErrorRate, ty.Rate, ty.Requests, true
	}
	return LatencySummary{}, 0, 0, 0, false
}

func latencyMetric(l LatencySummary, metric string) float64 {
	switch metric {
	case "p50":
		return l.P50
	case "p90":
		return l.P90
	case "p95":
		return l.P95
	case "p99":
		return l.P99
	case "p999":
		return l.P999
	case "max":
		return l.Max
	case "min":
		return l.Min
	case "mean":
		return l.Mean
	}
	panic("loadtest: unknown latency metric " + metric)
}

func compare(observed float64, op string, limit float64) bool {
	switch op {
	case "<":
		return observed < limit
	case "<=":
		return observed <= limit
	case ">":
		return observed > limit
	case ">=":
		return observed >= limit
	}
	panic("loadtest: unknown operator " + op)
}

// evaluateThresholds evaluates every threshold and reports whether all held.
// Dropped iterations fail the run even with no thresholds: the ceiling was
// hit and the offered load was not what was asked for.
func evaluateThresholds(r *Result, ts []Threshold) bool {
	held := r.Summary.Dropped == 0
	r.Thresholds = r.Thresholds[:0]
	for _, t := range ts {
		tr := t.Evaluate(r)
		r.Thresholds = append(r.Thresholds, tr)
		held = held && tr.OK
	}
	if r.Summary.Dropped > 0 {
		r.Thresholds = append(r.Thresholds, ThresholdResult{
			Threshold: "dropped==0", Observed: float64(r.Summary.Dropped),
		})
	}
	return held
}

// thresholdTexts returns the source texts of ts.
func thresholdTexts(ts []Threshold) []string {
	out := make([]string, 0, len(ts))
	for _, t := range ts {
		out = append(out, t.Text)
	}
	return out
}
