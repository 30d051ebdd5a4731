package tax

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func FuzzParse(f *testing.F) {
	f.Add(sampleCSV)
	f.Add(precedenceCSV)
	f.Add(Header + "\nUS,CA,900,food,725\n")
	f.Add(Header + "\nus,ca,9a,,10000\n\"DE\",,,,0\n")
	f.Add("")
	f.Fuzz(func(t *testing.T, input string) {
		tbl, err := Parse(strings.NewReader(input))
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error is not a *ParseError: %v", err)
			}
			if pe.Line < 1 || pe.Field == "" || pe.Reason == "" {
				t.Fatalf("incomplete ParseError %+v", pe)
			}
			return
		}
		if tbl.Len() < 1 {
			t.Fatalf("Len = %d for a table that parsed", tbl.Len())
		}
		// Every row must be found by a query made of its own fields.
		for _, line := range strings.Split(input, "\n") {
			r, perr := parseRow(strings.TrimSpace(strings.TrimPrefix(line, "\uFEFF")), 0)
			if perr != nil {
				continue
			}
			got, ok := tbl.Lookup(Query{r.Country, r.Region, r.PostalPrefix, r.Category})
			if !ok || got != r {
				t.Fatalf("Lookup of row %+v = %+v, %v", r, got, ok)
			}
		}
	})
}

func FuzzLookup(f *testing.F) {
	f.Add("US", "CA", "90012-3456", "food")
	f.Add("gb", "", "sw1a 1aa", "")
	f.Add("", "", "", "")
	tbl := Sample()
	f.Fuzz(func(t *testing.T, country, region, postal, category string) {
		r, ok := tbl.Lookup(Query{country, region, postal, category})
		if !ok {
			return
		}
		if r.RateBPS < 0 || r.RateBPS > RateBPSMax || !strings.EqualFold(r.Country, strings.TrimSpace(country)) {
			t.Fatalf("Lookup = %+v for country %q", r, country)
		}
	})
}

func FuzzCompute(f *testing.F) {
	f.Add(int64(1999), 725)
	f.Add(int64(10), 500)
	f.Add(int64(math.MaxInt64), 10000)
	f.Add(int64(math.MaxInt64), 5000)
	f.Add(int64(-1), 725)
	f.Add(int64(100), 10001)
	f.Fuzz(func(t *testing.T, amount int64, bps int) {
		got, err := Compute(amount, bps)
		if amount < 0 || bps < 0 || bps > RateBPSMax {
			if err == nil {
				t.Fatalf("Compute(%d, %d) = %d, nil; want error", amount, bps, got)
			}
			return
		}
		if err != nil {
			t.Fatalf("Compute(%d, %d): %v", amount, bps, err)
		}
		if got < 0 || got > amount {
			t.Fatalf("Compute(%d, %d) = %d, outside 0..amount", amount, bps, got)
		}
		// got is the nearest integer to amount*bps/10000, ties up:
		// |got*10000 - amount*bps| <= 5000, with -5000 excluded.
		if amount <= math.MaxInt64/RateBPSMax {
			diff := got*RateBPSMax - amount*int64(bps)
			if diff <= -5000 || diff > 5000 {
				t.Fatalf("Compute(%d, %d) = %d, off by %d/10000", amount, bps, got, diff)
			}
		}
	})
}
