package loadtest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Stage is one segment of an arrival plan: the rate moves linearly from
// RateStart to RateEnd, in iterations per second, over Duration.
type Stage struct {
	Duration  time.Duration
	RateStart float64
	RateEnd   float64
}

// count returns the expected iterations in the whole stage.
func (s Stage) count() float64 {
	return (s.RateStart + s.RateEnd) / 2 * s.Duration.Seconds()
}

// countAt returns the expected iterations in the first t of the stage.
func (s Stage) countAt(t time.Duration) float64 {
	sec := min(max(t.Seconds(), 0), s.Duration.Seconds())
	slope := (s.RateEnd - s.RateStart) / s.Duration.Seconds()
	return s.RateStart*sec + slope*sec*sec/2
}

// offsetOf inverts countAt: the offset into the stage by which n iterations
// are due. It uses 2n/(r0+sqrt(r0²+2an)), which is exact for constant rates
// and does not cancel catastrophically for small slopes.
func (s Stage) offsetOf(n float64) time.Duration {
	if n <= 0 {
		return 0
	}
	d := s.Duration.Seconds()
	slope := (s.RateEnd - s.RateStart) / d
	disc := max(s.RateStart*s.RateStart+2*slope*n, 0)
	denom := s.RateStart + math.Sqrt(disc)
	if denom <= 0 {
		return s.Duration
	}
	sec := min(2*n/denom, d)
	return time.Duration(sec * float64(time.Second))
}

// Plan is the arrival schedule of a run. When FloodCount is positive every
// iteration is due at offset zero and Stages is ignored.
type Plan struct {
	Stages     []Stage
	FloodCount int64
}

// Duration returns the planned length of the arrival schedule.
func (p Plan) Duration() time.Duration {
	var d time.Duration
	for _, s := range p.Stages {
		d += s.Duration
	}
	return d
}

// Count returns the expected number of iterations in the plan.
func (p Plan) Count() float64 {
	if p.FloodCount > 0 {
		return float64(p.FloodCount)
	}
	var n float64
	for _, s := range p.Stages {
		n += s.count()
	}
	return n
}

// CountAt returns the expected iterations due before offset t.
func (p Plan) CountAt(t time.Duration) float64 {
	if p.FloodCount > 0 {
		return float64(p.FloodCount)
	}
	var n float64
	var begin time.Duration
	for _, s := range p.Stages {
		if t <= begin {
			break
		}
		n += s.countAt(t - begin)
		begin += s.Duration
	}
	return n
}

// StageAt returns the index of the stage running at offset t, or -1 past
// the end of the plan.
func (p Plan) StageAt(t time.Duration) int {
	var begin time.Duration
	for i, s := range p.Stages {
		begin += s.Duration
		if t < begin {
			return i
		}
	}
	return -1
}

// StageBegin returns the offset at which stage i starts.
func (p Plan) StageBegin(i int) time.Duration {
	var begin time.Duration
	for _, s := range p.Stages[:i] {
		begin += s.Duration
	}
	return begin
}

// validate checks the plan against the limits.
func (p Plan) validate() error {
	if p.FloodCount > 0 {
		return nil
	}
	if len(p.Stages) == 0 || len(p.Stages) > StageCountMax {
		return fmt.Errorf("plan has %d stages, want 1..%d", len(p.Stages), StageCountMax)
	}
	for i, s := range p.Stages {
		if s.Duration <= 0 {
			return fmt.Errorf("stage %d: duration %v, want > 0", i, s.Duration)
		}
		if s.RateStart < 0 || s.RateEnd < 0 || s.RateStart > RateMax || s.RateEnd > RateMax {
			return fmt.Errorf("stage %d: rate outside 0..%g", i, RateMax)
		}
	}
	if d := p.Duration(); d > DurationMax {
		return fmt.Errorf("plan lasts %v, longer than %v", d, DurationMax)
	}
	return nil
}

// scheduler yields the intended offsets of successive iterations by
// inverting the plan's cumulative count. With poisson set, the gaps between
// arrivals are exponential, which makes arrivals a (non-homogeneous) Poisson
// process with the plan's rate. Not safe for concurrent use: the pacer owns it.
type scheduler struct {
	plan    Plan
	poisson bool
	rng     *rand.Rand
	n       float64 // cumulative position of the next arrival
	issued  int64
	stage   int
	base    float64       // expected count before the current stage
	offset  time.Duration // offset of the current stage
}

func newScheduler(plan Plan, poisson bool, seed uint64) *scheduler {
	return &scheduler{plan: plan, poisson: poisson, rng: rand.New(rand.NewPCG(seed, 0x5eed))} //nolint:gosec // G404: seeded on purpose, so a run can be repeated
}

// next returns the offset and stage of the next arrival, or ok false when the
// plan is exhausted.
func (s *scheduler) next() (offset time.Duration, stage int, ok bool) {
	if s.plan.FloodCount > 0 {
		if s.issued >= s.plan.FloodCount {
			return 0, 0, false
		}
		s.issued++
		return 0, 0, true
	}
	n := s.n
	if s.poisson {
		n += s.rng.ExpFloat64()
		s.n = n
	} else {
		s.n++
	}
	for s.stage < len(s.plan.Stages) {
		st := s.plan.Stages[s.stage]
		c := st.count()
		if n < s.base+c {
			s.issued++
			return s.offset + st.offsetOf(n-s.base), s.stage, true
		}
		s.base += c
		s.offset += st.Duration
		s.stage++
	}
	return 0, 0, false
}
