// Package tax looks up sales-tax and VAT rates in a static table held in
// memory, and computes tax amounts with integer arithmetic.
//
// The table replaces a remote tax service: a lookup is a few map reads, so
// it never blocks a payment. The table is only as right as its file; the
// embedded Sample is illustrative data, not tax advice. Rates are whole basis
// points, so a rate such as 8.875 % cannot be expressed; round it in the
// file or use a finer table upstream. See docs/tax.md.
package tax

import (
	_ "embed"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strings"
	"sync"
)

// Limits.
const (
	// RowsMax is the most rate rows a table may hold.
	RowsMax = 1_000_000
	// LineBytesMax is the longest line of a table file, comments included,
	// without its line ending.
	LineBytesMax = 4096
	// RateBPSMax is the highest rate: 10000 basis points is 100 %.
	RateBPSMax = 10_000
	// RegionBytesMax is the longest region code (ISO 3166-2 subdivision
	// codes are 1 to 3 characters after the country).
	RegionBytesMax = 8
	// PostalPrefixBytesMax is the longest postal prefix in a table.
	PostalPrefixBytesMax = 12
	// CategoryBytesMax is the longest category name.
	CategoryBytesMax = 32
)

// Header is the required first line (after comments and blank lines) of a
// table file.
const Header = "country,region,postal_prefix,category,rate_bps"

// Rate is one row of the table. Empty Region, PostalPrefix or Category
// match any value. Country and Region are upper case, PostalPrefix is upper
// case letters and digits, Category is lower case.
type Rate struct {
	Country      string
	Region       string
	PostalPrefix string
	Category     string
	RateBPS      int // Basis points, 0..RateBPSMax: 725 is 7.25 %.
}

// Query describes what is being taxed. Matching ignores case. Region may be
// given as "CA" or "US-CA". Spaces and hyphens in PostalCode are ignored, so
// "SW1A 1AA" and "94105-1804" work.
type Query struct {
	Country    string
	Region     string
	PostalCode string
	Category   string
}

// Table is a tax-rate table. It is immutable after Parse, LoadFile, Import
// or Sample return it, and safe for concurrent use.
type Table struct {
	countries map[string]*node
	rows      int
}

// node is a postal-prefix trie node. The root of a country holds the rows
// without a postal prefix.
type node struct {
	children map[byte]*node
	rates    map[selector]entry
}

type selector struct{ region, category string }

type entry struct {
	rate Rate
	line int // For duplicate-row errors.
}

// Len returns the number of rate rows.
func (t *Table) Len() int { return t.rows }

// Lookup returns the most specific rate that matches q, and false if no row
// matches. A row matches when its country equals q.Country and each of its
// region, postal prefix and category is empty or matches q (the postal
// prefix must be a prefix of q.PostalCode). Among matching rows the most
// specific wins, in this order of precedence:
//
//  1. the longest postal prefix;
//  2. then a row with a region over one without;
//  3. then a row with a category over one without.
//
// So a postal-prefix row without a category beats a region-wide category
// row; write a row with both when a category rate must hold inside a postal
// area (the sample has US,CA,900,food). Rows are unique by country, region,
// postal prefix and category, so the winner is always unique. The cost is
// proportional to the length of q.PostalCode, not to the number of rows.
func (t *Table) Lookup(q Query) (Rate, bool) {
	country := strings.ToUpper(strings.TrimSpace(q.Country))
	root := t.countries[country]
	if root == nil {
		return Rate{}, false
	}
	region := strings.ToUpper(strings.TrimSpace(q.Region))
	region = strings.TrimPrefix(region, country+"-")
	category := strings.ToLower(strings.TrimSpace(q.Category))

	var path [PostalPrefixBytesMax + 1]*node
	path[0] = root
	depth := 0
	for i := 0; i < len(q.PostalCode) && depth < PostalPrefixBytesMax; i++ {
		c := q.PostalCode[i]
		if c == ' ' || c == '-' {
			continue
		}
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		next := path[depth].children[c]
		if next == nil {
			break
		}
		depth++
		path[depth] = next
	}
	selectors := [4]selector{{region, category}, {region, ""}, {"", category}, {"", ""}}
	for d := depth; d >= 0; d-- {
		if path[d].rates == nil {
			continue
		}
		for _, s := range selectors {
			if e, ok := path[d].rates[s]; ok {
				return e.rate, true
			}
		}
	}
	return Rate{}, false
}

// add inserts r, or returns the line of the row with the same key.
func (t *Table) add(r Rate, line int) (dupLine int) {
	n := t.countries[r.Country]
	if n == nil {
		n = &node{}
		t.countries[r.Country] = n
	}
	for i := 0; i < len(r.PostalPrefix); i++ {
		c := r.PostalPrefix[i]
		next := n.children[c]
		if next == nil {
			if n.children == nil {
				n.children = map[byte]*node{}
			}
			next = &node{}
			n.children[c] = next
		}
		n = next
	}
	s := selector{r.Region, r.Category}
	if e, dup := n.rates[s]; dup {
		return e.line
	}
	if n.rates == nil {
		n.rates = map[selector]entry{}
	}
	n.rates[s] = entry{rate: r, line: line}
	t.rows++
	return 0
}

//go:embed sample.csv
var sampleCSV string

var sample = sync.OnceValue(func() *Table {
	t, err := Parse(strings.NewReader(sampleCSV))
	if err != nil {
		panic("tax: embedded sample.csv: " + err.Error())
	}
	return t
})

// Sample returns the small embedded sample table (the same file as
// etc/tax-rates.csv). Its rates are illustrative, not tax advice. Every call
// returns the same immutable table.
func Sample() *Table { return sample() }

// Errors from Compute.
var (
	ErrAmountNegative = errors.New("tax: amount is negative")
	ErrRateRange      = errors.New("tax: rate outside 0..10000 basis points")
)

// Compute returns the tax on amountMinor (in minor units, such as cents) at
// rateBPS basis points: the exact quotient amountMinor × rateBPS / 10000,
// rounded half up (a remainder of half or more rounds up; amounts are never
// negative, so this is also half away from zero). Examples:
//
//	1999 × 725 bps = 144.9275 → 145
//	  10 × 500 bps =   0.5    →   1
//	   1 × 4999 bps =  0.4999 →   0
//
// The product is computed in 128 bits with integer arithmetic only, so
// Compute is exact for every int64 amount and cannot overflow: the result
// never exceeds amountMinor. It returns an error wrapping ErrAmountNegative
// for a negative amount and ErrRateRange for a rate outside 0..RateBPSMax.
func Compute(amountMinor int64, rateBPS int) (taxMinor int64, err error) {
	if amountMinor < 0 {
		return 0, fmt.Errorf("compute tax on %d: %w", amountMinor, ErrAmountNegative)
	}
	if rateBPS < 0 || rateBPS > RateBPSMax {
		return 0, fmt.Errorf("compute tax at %d bps: %w", rateBPS, ErrRateRange)
	}
	hi, lo := bits.Mul64(uint64(amountMinor), uint64(rateBPS))
	// hi < RateBPSMax because amountMinor < 2^63 and rateBPS <= RateBPSMax,
	// so Div64 cannot panic and q <= amountMinor.
	q, r := bits.Div64(hi, lo, RateBPSMax)
	if 2*r >= RateBPSMax {
		q++
	}
	if q > math.MaxInt64 || q > uint64(amountMinor) {
		panic(fmt.Sprintf("tax: Compute(%d, %d) = %d exceeds the amount", amountMinor, rateBPS, q))
	}
	return int64(q), nil
}
