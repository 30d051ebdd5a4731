package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"
)

// Latency distribution kinds.
const (
	LatencyFixed     = "fixed"
	LatencyUniform   = "uniform"
	LatencyLognormal = "lognormal"
)

// LatencyMax bounds every configured latency and every sampled one: a
// lognormal sample beyond it is cut to it. It keeps a typo ("30m" for "30ms")
// from parking handlers for hours.
const LatencyMax = 5 * time.Minute

// z99 is the 0.99 quantile of the standard normal distribution.
const z99 = 2.3263478740408408

// lognormalRatioMax is the largest p99/mean a lognormal distribution can
// have: ln(p99/mean) = z99·σ − σ²/2 peaks at σ = z99, where it is z99²/2.
var lognormalRatioMax = math.Exp(z99 * z99 / 2)

// Latency is a distribution of call latencies. The zero value is a fixed
// latency of 0.
//
// Kinds and the fields they use:
//   - "fixed" (or ""): every call takes Fixed.
//   - "uniform": uniform in [Min, Max].
//   - "lognormal": lognormal with the given Mean and 99th percentile P99.
//     With X = exp(μ + σZ), mean = exp(μ + σ²/2) and p99 = exp(μ + 2.326σ),
//     so σ = 2.326 − sqrt(2.326² − 2·ln(P99/Mean)) and μ = ln(Mean) − σ²/2.
//     P99 must be at least Mean and at most about 14.97 × Mean (the most
//     skewed lognormal the two numbers can describe).
//
// Its text form, used in flags, config files and the JSON config, is what
// ParseLatency reads and String writes.
type Latency struct {
	Kind  string
	Fixed time.Duration
	Min   time.Duration
	Max   time.Duration
	Mean  time.Duration
	P99   time.Duration
}

// ParseLatency reads a latency distribution:
//
//	0                               no latency
//	20ms, fixed:20ms                always 20ms
//	uniform:5ms-50ms                uniform between 5ms and 50ms
//	lognormal:mean=20ms,p99=200ms   lognormal with that mean and 99th percentile
//
// Durations use Go's syntax (time.ParseDuration). Errors name the problem.
func ParseLatency(s string) (Latency, error) {
	kind, arg, found := strings.Cut(strings.TrimSpace(s), ":")
	if !found {
		kind, arg = LatencyFixed, kind
	}
	var l Latency
	var err error
	switch kind {
	case LatencyFixed:
		l.Kind = LatencyFixed
		l.Fixed, err = parseDuration("fixed latency", arg)
	case LatencyUniform:
		l, err = parseUniform(arg)
	case LatencyLognormal:
		l, err = parseLognormal(arg)
	default:
		err = fmt.Errorf("unknown kind %q (want fixed, uniform or lognormal)", kind)
	}
	if err == nil {
		err = l.Validate()
	}
	if err != nil {
		return Latency{}, fmt.Errorf("latency %q: %w", s, err)
	}
	return l, nil
}

func parseUniform(arg string) (Latency, error) {
	lo, hi, ok := strings.Cut(arg, "-")
	if !ok {
		return Latency{}, fmt.Errorf("uniform wants MIN-MAX, e.g. uniform:5ms-50ms")
	}
	l := Latency{Kind: LatencyUniform}
	var err error
	if l.Min, err = parseDuration("uniform min", lo); err != nil {
		return Latency{}, err
	}
	if l.Max, err = parseDuration("uniform max", hi); err != nil {
		return Latency{}, err
	}
	return l, nil
}

func parseLognormal(arg string) (Latency, error) {
	l := Latency{Kind: LatencyLognormal}
	var haveMean, haveP99 bool
	for _, part := range strings.Split(arg, ",") {
		name, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return Latency{}, fmt.Errorf("lognormal wants mean=D,p99=D, got %q", part)
		}
		d, err := parseDuration("lognormal "+name, val)
		if err != nil {
			return Latency{}, err
		}
		switch name {
		case "mean":
			l.Mean, haveMean = d, true
		case "p99":
			l.P99, haveP99 = d, true
		default:
			return Latency{}, fmt.Errorf("lognormal: unknown parameter %q (want mean and p99)", name)
		}
	}
	if !haveMean || !haveP99 {
		return Latency{}, fmt.Errorf("lognormal needs both mean and p99, e.g. lognormal:mean=20ms,p99=200ms")
	}
	return l, nil
}

func parseDuration(what, s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%s: %q is not a duration like 20ms", what, s)
	}
	return d, nil
}

// Validate checks the fields the kind uses: no negative durations, nothing
// above LatencyMax, Min ≤ Max, and Mean ≤ P99 ≤ 14.97 × Mean.
func (l Latency) Validate() error {
	check := func(name string, d time.Duration) error {
		if d < 0 || d > LatencyMax {
			return fmt.Errorf("%s %v must be between 0 and %v", name, d, LatencyMax)
		}
		return nil
	}
	switch l.Kind {
	case "", LatencyFixed:
		return check("fixed latency", l.Fixed)
	case LatencyUniform:
		if err := check("uniform min", l.Min); err != nil {
			return err
		}
		if err := check("uniform max", l.Max); err != nil {
			return err
		}
		if l.Min > l.Max {
			return fmt.Errorf("uniform min %v exceeds max %v", l.Min, l.Max)
		}
	case LatencyLognormal:
		if err := check("lognormal mean", l.Mean); err != nil {
			return err
		}
		if err := check("lognormal p99", l.P99); err != nil {
			return err
		}
		if l.Mean <= 0 {
			return fmt.Errorf("lognormal mean must be positive")
		}
		if l.P99 < l.Mean {
			return fmt.Errorf("lognormal p99 %v must be at least the mean %v", l.P99, l.Mean)
		}
		if float64(l.P99)/float64(l.Mean) > lognormalRatioMax {
			return fmt.Errorf("lognormal p99 %v must be at most %.2f × the mean %v", l.P99, lognormalRatioMax, l.Mean)
		}
	default:
		return fmt.Errorf("unknown latency kind %q (want fixed, uniform or lognormal)", l.Kind)
	}
	return nil
}

// String returns the text form that ParseLatency reads.
func (l Latency) String() string {
	switch l.Kind {
	case LatencyUniform:
		return "uniform:" + l.Min.String() + "-" + l.Max.String()
	case LatencyLognormal:
		return "lognormal:mean=" + l.Mean.String() + ",p99=" + l.P99.String()
	case "", LatencyFixed:
		return "fixed:" + l.Fixed.String()
	}
	return "invalid:" + l.Kind
}

// MarshalText writes the text form, so JSON and TOML carry "fixed:20ms".
func (l Latency) MarshalText() ([]byte, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	return []byte(l.String()), nil
}

// UnmarshalText reads the text form with ParseLatency.
func (l *Latency) UnmarshalText(b []byte) error {
	v, err := ParseLatency(string(b))
	if err != nil {
		return err
	}
	*l = v
	return nil
}

// sampler draws durations from a validated Latency. Its parameters are
// computed once per configuration, not per call.
type sampler struct {
	kind  string
	fixed time.Duration
	min   time.Duration
	span  int64   // uniform: Max − Min, nanoseconds.
	mu    float64 // lognormal: location, ln(nanoseconds).
	sigma float64 // lognormal: scale.
}

func newSampler(l Latency) sampler {
	s := sampler{kind: l.Kind}
	switch l.Kind {
	case "", LatencyFixed:
		s.kind = LatencyFixed
		s.fixed = l.Fixed
	case LatencyUniform:
		s.min, s.span = l.Min, int64(l.Max-l.Min)
	case LatencyLognormal:
		s.sigma = z99 - math.Sqrt(z99*z99-2*math.Log(float64(l.P99)/float64(l.Mean)))
		s.mu = math.Log(float64(l.Mean)) - s.sigma*s.sigma/2
	}
	return s
}

// random reports whether sample needs random numbers.
func (s *sampler) random() bool { return s.kind != LatencyFixed }

// sample draws one latency. r may be nil for a fixed latency.
func (s *sampler) sample(r *rand.Rand) time.Duration {
	switch s.kind {
	case LatencyUniform:
		if s.span == 0 {
			return s.min
		}
		return s.min + time.Duration(r.Int64N(s.span+1))
	case LatencyLognormal:
		ns := math.Exp(s.mu + s.sigma*r.NormFloat64())
		if ns >= float64(LatencyMax) {
			return LatencyMax
		}
		return time.Duration(ns)
	}
	return s.fixed
}
