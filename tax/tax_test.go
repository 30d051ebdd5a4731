package tax

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const precedenceCSV = `country,region,postal_prefix,category,rate_bps
US,,,,100
US,CA,,,725
US,CA,,food,0
US,CA,9,,800
US,CA,90,,900
US,CA,900,,950
US,CA,900,food,10
US,,94,,500
US,,9,,850
US,,,digital,300
US,NY,,,400
GB,,,,2000
GB,,,food,0
GB,,SW1A,,1999
CA,QC,,,1498
`

func mustParse(t testing.TB, s string) *Table {
	t.Helper()
	tbl, err := Parse(strings.NewReader(s))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return tbl
}

func TestLookup(t *testing.T) {
	tbl := mustParse(t, precedenceCSV)
	if got, want := tbl.Len(), 15; got != want {
		t.Fatalf("Len = %d, want %d", got, want)
	}
	tests := []struct {
		name   string
		q      Query
		want   Rate
		wantOK bool
	}{
		{"CountryOnly", Query{Country: "US"}, Rate{"US", "", "", "", 100}, true},
		{"RegionBeatsCountry", Query{Country: "US", Region: "CA"}, Rate{"US", "CA", "", "", 725}, true},
		{"RegionCategory", Query{Country: "US", Region: "CA", Category: "food"}, Rate{"US", "CA", "", "food", 0}, true},
		{"CategoryWithoutRow", Query{Country: "US", Region: "CA", Category: "clothing"}, Rate{"US", "CA", "", "", 725}, true},
		{"LongestPrefix", Query{Country: "US", Region: "CA", PostalCode: "90012"}, Rate{"US", "CA", "900", "", 950}, true},
		{"ShorterPrefix", Query{Country: "US", Region: "CA", PostalCode: "90512"}, Rate{"US", "CA", "90", "", 900}, true},
		{"ShortestPrefix", Query{Country: "US", Region: "CA", PostalCode: "91000"}, Rate{"US", "CA", "9", "", 800}, true},
		{"PrefixBeatsRegionCategory", Query{Country: "US", Region: "CA", PostalCode: "90512", Category: "food"}, Rate{"US", "CA", "90", "", 900}, true},
		{"PrefixAndCategory", Query{Country: "US", Region: "CA", PostalCode: "90012", Category: "food"}, Rate{"US", "CA", "900", "food", 10}, true},
		{"LongerPrefixBeatsRegion", Query{Country: "US", Region: "CA", PostalCode: "94105"}, Rate{"US", "", "94", "", 500}, true},
		{"RegionBreaksPrefixTie", Query{Country: "US", Region: "CA", PostalCode: "91105"}, Rate{"US", "CA", "9", "", 800}, true},
		{"PrefixWithoutRegion", Query{Country: "US", Region: "WA", PostalCode: "94105"}, Rate{"US", "", "94", "", 500}, true},
		{"RegionBeatsCategory", Query{Country: "US", Region: "NY", Category: "digital"}, Rate{"US", "NY", "", "", 400}, true},
		{"CategoryBeatsCountry", Query{Country: "US", Region: "WA", Category: "digital"}, Rate{"US", "", "", "digital", 300}, true},
		{"RegionNeedsQueryRegion", Query{Country: "US", PostalCode: "90012"}, Rate{"US", "", "9", "", 850}, true},
		{"NoPrefixRowMatches", Query{Country: "US", PostalCode: "10001"}, Rate{"US", "", "", "", 100}, true},
		{"CaseInsensitive", Query{Country: "us", Region: "ca", Category: "FOOD"}, Rate{"US", "CA", "", "food", 0}, true},
		{"RegionWithCountryPrefix", Query{Country: "US", Region: "US-CA"}, Rate{"US", "CA", "", "", 725}, true},
		{"Whitespace", Query{Country: " US ", Region: " CA"}, Rate{"US", "CA", "", "", 725}, true},
		{"ZIPPlus4", Query{Country: "US", Region: "CA", PostalCode: "90012-3456"}, Rate{"US", "CA", "900", "", 950}, true},
		{"PostalSpacesAndCase", Query{Country: "gb", PostalCode: "sw1a 1aa"}, Rate{"GB", "", "SW1A", "", 1999}, true},
		{"PostalOtherArea", Query{Country: "GB", PostalCode: "SW1B 1AA"}, Rate{"GB", "", "", "", 2000}, true},
		{"ZeroRateFound", Query{Country: "GB", Category: "food"}, Rate{"GB", "", "", "food", 0}, true},
		{"CountryCodeNotRegion", Query{Country: "CA", Region: "QC"}, Rate{"CA", "QC", "", "", 1498}, true},
		{"NotFoundCountry", Query{Country: "FR"}, Rate{}, false},
		{"NotFoundRegionOnly", Query{Country: "CA", Region: "ON"}, Rate{}, false},
		{"NotFoundEmpty", Query{}, Rate{}, false},
		{"LongPostalCode", Query{Country: "US", Region: "CA", PostalCode: strings.Repeat("9", 1000)}, Rate{"US", "CA", "9", "", 800}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := tbl.Lookup(tt.q)
			if ok != tt.wantOK {
				t.Fatalf("Lookup(%+v) ok = %v, want %v", tt.q, ok, tt.wantOK)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Fatalf("Lookup(%+v) mismatch (-want +got):\n%s", tt.q, diff)
			}
		})
	}
}

func TestLookupConcurrent(t *testing.T) {
	tbl := mustParse(t, precedenceCSV)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				if r, ok := tbl.Lookup(Query{Country: "US", Region: "CA", PostalCode: "90012"}); !ok || r.RateBPS != 950 {
					t.Errorf("Lookup = %+v, %v", r, ok)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestSample(t *testing.T) {
	tbl := Sample()
	if tbl.Len() < 12 {
		t.Fatalf("Sample().Len() = %d, want >= 12", tbl.Len())
	}
	if Sample() != tbl {
		t.Fatal("Sample returns a new table each call")
	}
	tests := []struct {
		q    Query
		want int
	}{
		{Query{Country: "US", Region: "CA", PostalCode: "94103"}, 725},
		{Query{Country: "US", Region: "CA", PostalCode: "90012"}, 950},
		{Query{Country: "US", Region: "CA", PostalCode: "90012", Category: "food"}, 0},
		{Query{Country: "US", Region: "TX", PostalCode: "77002"}, 825},
		{Query{Country: "US", Region: "NY"}, 400},
		{Query{Country: "DE", Category: "food"}, 700},
		{Query{Country: "FR"}, 2000},
		{Query{Country: "GB", PostalCode: "SW1A 1AA"}, 2000},
	}
	for _, tt := range tests {
		if r, ok := tbl.Lookup(tt.q); !ok || r.RateBPS != tt.want {
			t.Errorf("Sample Lookup(%+v) = %d, %v; want %d, true", tt.q, r.RateBPS, ok, tt.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	const h = Header + "\n"
	tests := []struct {
		name  string
		input string
		want  ParseError
	}{
		{"ErrHeaderMissing", "", ParseError{1, "header", ""}},
		{"ErrHeaderOnlyComments", "# nothing\n\n", ParseError{3, "header", ""}},
		{"ErrHeaderWrong", "country,region,postal,category,rate\nUS,,,,1\n", ParseError{1, "header", ""}},
		{"ErrHeaderAfterComment", "# c\n\nUS,,,,1\n", ParseError{3, "header", ""}},
		{"ErrNoRows", h + "# only a comment\n", ParseError{3, "row", ""}},
		{"ErrCountryLong", h + "USA,,,,100\n", ParseError{2, "country", ""}},
		{"ErrCountryDigits", h + "U1,,,,100\n", ParseError{2, "country", ""}},
		{"ErrCountryEmpty", h + ",CA,,,100\n", ParseError{2, "country", ""}},
		{"ErrRegion", h + "US,C A,,,100\n", ParseError{2, "region", ""}},
		{"ErrRegionLong", h + "US,ABCDEFGHI,,,100\n", ParseError{2, "region", ""}},
		{"ErrPostalPrefix", h + "US,CA,900-1,,100\n", ParseError{2, "postal_prefix", ""}},
		{"ErrCategory", h + "US,CA,,food stuff,100\n", ParseError{2, "category", ""}},
		{"ErrRateRange", h + "US,,,,100\n\n# c\nDE,,,,10001\n", ParseError{5, "rate_bps", ""}},
		{"ErrRateHuge", h + "US,,,,99999999999999999999999\n", ParseError{2, "rate_bps", ""}},
		{"ErrRateNegative", h + "US,,,,-1\n", ParseError{2, "rate_bps", ""}},
		{"ErrRateDecimal", h + "US,,,,7.25\n", ParseError{2, "rate_bps", ""}},
		{"ErrRateEmpty", h + "US,,,,\n", ParseError{2, "rate_bps", ""}},
		{"ErrRatePercent", h + "US,,,,7%\n", ParseError{2, "rate_bps", ""}},
		{"ErrColumnsFew", h + "US,CA,100\n", ParseError{2, "row", ""}},
		{"ErrColumnsMany", h + "US,CA,,,100,x\n", ParseError{2, "row", ""}},
		{"ErrDuplicate", h + "US,CA,900,,100\nUS,CA,,,725\nus,ca,900,,200\n", ParseError{4, "row", ""}},
		{"ErrDuplicateQuoted", h + "DE,,,food,700\n\"DE\",\"\",\"\",\"FOOD\",\"700\"\n", ParseError{3, "row", ""}},
		{"ErrLineTooLong", h + "US,,,,1\n# " + strings.Repeat("x", LineBytesMax) + "\n", ParseError{3, "line", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tt.input))
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v, want *ParseError", err)
			}
			if pe.Line != tt.want.Line || pe.Field != tt.want.Field {
				t.Fatalf("got line %d field %q, want line %d field %q (%v)", pe.Line, pe.Field, tt.want.Line, tt.want.Field, pe)
			}
			if pe.Reason == "" {
				t.Fatal("empty Reason")
			}
			if want := fmt.Sprintf("line %d: %s: %s", pe.Line, pe.Field, pe.Reason); pe.Error() != want {
				t.Fatalf("Error() = %q, want %q", pe.Error(), want)
			}
		})
	}
}

func TestParseDuplicateNamesFirstLine(t *testing.T) {
	_, err := Parse(strings.NewReader(Header + "\nUS,CA,,,725\n\nUS,CA,,,700\n"))
	if err == nil || err.Error() != "line 4: row: duplicate of line 2 (same country, region, postal_prefix and category)" {
		t.Fatalf("err = %v", err)
	}
}

func TestParseTolerant(t *testing.T) {
	input := "\uFEFF# comment\r\n\r\n  Country, Region ,postal_prefix,CATEGORY,rate_bps\r\n" +
		"  # indented comment\r\n" +
		" us , ca , 9a0 , Food , 0725 \r\n" +
		"\"DE\",\"\",\"\",\"\",\"1900\"\r\n" +
		"FR,,,,0" // No final newline.
	tbl := mustParse(t, input)
	if tbl.Len() != 3 {
		t.Fatalf("Len = %d, want 3", tbl.Len())
	}
	got, ok := tbl.Lookup(Query{Country: "US", Region: "CA", PostalCode: "9A012", Category: "food"})
	if want := (Rate{"US", "CA", "9A0", "food", 725}); !ok || got != want {
		t.Fatalf("Lookup = %+v, %v; want %+v", got, ok, want)
	}
	if r, ok := tbl.Lookup(Query{Country: "FR"}); !ok || r.RateBPS != 0 {
		t.Fatalf("Lookup(FR) = %+v, %v", r, ok)
	}
}

func TestParseErrRead(t *testing.T) {
	boom := errors.New("boom")
	_, err := Parse(&errReader{Header + "\nUS,,,,1\n", boom})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want wrapping %v", err, boom)
	}
}

type errReader struct {
	s   string
	err error
}

func (r *errReader) Read(p []byte) (int, error) {
	if r.s == "" {
		return 0, r.err
	}
	n := copy(p, r.s)
	r.s = r.s[n:]
	return n, nil
}

func TestCompute(t *testing.T) {
	tests := []struct {
		name    string
		amount  int64
		bps     int
		want    int64
		wantErr error
	}{
		{"Doc1999x725", 1999, 725, 145, nil},       // 144.9275
		{"DocHalfRoundsUp", 10, 500, 1, nil},       // 0.5
		{"JustBelowHalf", 1, 4999, 0, nil},         // 0.4999
		{"ExactHalf", 1, 5000, 1, nil},             // 0.5
		{"JustAboveHalf", 1, 5001, 1, nil},         // 0.5001
		{"HalfAtLargerAmount", 30, 5000, 15, nil},  // exact
		{"HalfOdd", 3, 5000, 2, nil},               // 1.5
		{"HalfOfTwoAndHalf", 25, 1000, 3, nil},     // 2.5
		{"BelowHalf", 1249, 1000, 125, nil},        // 124.9
		{"ExactlyHalfCents", 1245, 1000, 125, nil}, // 124.5
		{"Exact", 10000, 725, 725, nil},
		{"Zero amount", 0, 725, 0, nil},
		{"ZeroRate", 123456, 0, 0, nil},
		{"FullRate", 123456, 10000, 123456, nil},
		{"MaxAmountFullRate", math.MaxInt64, 10000, math.MaxInt64, nil},
		{"MaxAmountHalf", math.MaxInt64, 5000, 4611686018427387904, nil}, // ...903.5
		{"MaxAmount725", math.MaxInt64, 725, 668694472671971246, nil},    // ...246.0460...
		{"MaxAmountOneBPS", math.MaxInt64, 1, 922337203685478, nil},      // ...477.58
		{"LargeAmountNoOverflow", math.MaxInt64 / 10, 9999, 922244969965109032, nil},
		{"ErrAmountNegative", -1, 725, 0, ErrAmountNegative},
		{"ErrAmountMinInt", math.MinInt64, 725, 0, ErrAmountNegative},
		{"ErrRateNegative", 100, -1, 0, ErrRateRange},
		{"ErrRateTooHigh", 100, 10001, 0, ErrRateRange},
		{"ErrRateHuge", math.MaxInt64, math.MaxInt, 0, ErrRateRange},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Compute(tt.amount, tt.bps)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Compute(%d, %d) err = %v, want %v", tt.amount, tt.bps, err, tt.wantErr)
			}
			if got != tt.want {
				t.Fatalf("Compute(%d, %d) = %d, want %d", tt.amount, tt.bps, got, tt.want)
			}
		})
	}
}

func BenchmarkLookup(b *testing.B) {
	tbl := Sample()
	q := Query{Country: "US", Region: "CA", PostalCode: "90012-3456", Category: "food"}
	for b.Loop() {
		tbl.Lookup(q)
	}
}
