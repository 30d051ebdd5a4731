package tax

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// ParseError reports the first problem in a table file: the 1-based line,
// the field ("country", "region", "postal_prefix", "category", "rate_bps",
// or "header", "row", "line" for whole-line problems) and why.
type ParseError struct {
	Line   int
	Field  string
	Reason string
}

// Error returns "line N: field: reason".
func (e *ParseError) Error() string {
	return fmt.Sprintf("line %d: %s: %s", e.Line, e.Field, e.Reason)
}

// Parse reads a table in CSV form: a header line equal to Header, then one
// row per line with the columns country, region, postal_prefix, category,
// rate_bps. Blank lines and lines starting with # are ignored anywhere.
// Fields are trimmed of spaces and may be wrapped in double quotes; they
// cannot contain commas.
//
//   - country: two ASCII letters (ISO 3166-1 alpha-2; the shape is checked,
//     not membership in the standard), required.
//   - region: up to RegionBytesMax letters or digits, optional.
//   - postal_prefix: up to PostalPrefixBytesMax letters or digits, optional.
//   - category: up to CategoryBytesMax of a-z, 0-9, _ and -, optional.
//   - rate_bps: an integer 0..RateBPSMax.
//
// Letters are accepted in either case and stored normalised. A bad file is
// refused with a *ParseError naming the first bad line and field: a wrong
// header, a wrong number of columns, a bad value, a row whose country,
// region, postal_prefix and category repeat an earlier row, a line longer
// than LineBytesMax, more than RowsMax rows, or no rows at all. Errors from
// r are returned wrapped.
func Parse(r io.Reader) (*Table, error) {
	t := &Table{countries: map[string]*node{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), LineBytesMax+2) // +2 for "\r\n".
	line, headerSeen := 0, false
	for sc.Scan() {
		line++
		text := sc.Text()
		if line == 1 {
			text = strings.TrimPrefix(text, "\uFEFF") // Spreadsheet byte-order mark.
		}
		if len(text) > LineBytesMax {
			return nil, &ParseError{line, "line", fmt.Sprintf("longer than %d bytes", LineBytesMax)}
		}
		text = strings.TrimSpace(text)
		if text == "" || text[0] == '#' {
			continue
		}
		if !headerSeen {
			if !strings.EqualFold(strings.ReplaceAll(text, " ", ""), Header) {
				return nil, &ParseError{line, "header", fmt.Sprintf("got %q, want %q", truncate(text), Header)}
			}
			headerSeen = true
			continue
		}
		if t.rows >= RowsMax {
			return nil, &ParseError{line, "row", fmt.Sprintf("more than %d rows", RowsMax)}
		}
		r, perr := parseRow(text, line)
		if perr != nil {
			return nil, perr
		}
		if dup := t.add(r, line); dup != 0 {
			return nil, &ParseError{line, "row", fmt.Sprintf("duplicate of line %d (same country, region, postal_prefix and category)", dup)}
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, &ParseError{line + 1, "line", fmt.Sprintf("longer than %d bytes", LineBytesMax)}
		}
		return nil, fmt.Errorf("tax: read table: %w", err)
	}
	if !headerSeen {
		return nil, &ParseError{line + 1, "header", fmt.Sprintf("missing; want %q", Header)}
	}
	if t.rows == 0 {
		return nil, &ParseError{line + 1, "row", "no rates after the header"}
	}
	return t, nil
}

func parseRow(text string, line int) (Rate, *ParseError) {
	fields := strings.Split(text, ",")
	if len(fields) != 5 {
		return Rate{}, &ParseError{line, "row", fmt.Sprintf("got %d columns, want 5 (%s)", len(fields), Header)}
	}
	for i, f := range fields {
		f = strings.TrimSpace(f)
		if len(f) >= 2 && f[0] == '"' && f[len(f)-1] == '"' {
			f = strings.TrimSpace(f[1 : len(f)-1])
		}
		fields[i] = f
	}
	r := Rate{
		Country:      strings.ToUpper(fields[0]),
		Region:       strings.ToUpper(fields[1]),
		PostalPrefix: strings.ToUpper(fields[2]),
		Category:     strings.ToLower(fields[3]),
	}
	switch {
	case len(r.Country) != 2 || !isAll(r.Country, isLetter):
		return Rate{}, &ParseError{line, "country", fmt.Sprintf("%q is not a two-letter ISO 3166-1 code", truncate(fields[0]))}
	case len(r.Region) > RegionBytesMax || !isAll(r.Region, isAlnum):
		return Rate{}, &ParseError{line, "region", fmt.Sprintf("%q is not up to %d letters or digits", truncate(fields[1]), RegionBytesMax)}
	case len(r.PostalPrefix) > PostalPrefixBytesMax || !isAll(r.PostalPrefix, isAlnum):
		return Rate{}, &ParseError{line, "postal_prefix", fmt.Sprintf("%q is not up to %d letters or digits", truncate(fields[2]), PostalPrefixBytesMax)}
	case len(r.Category) > CategoryBytesMax || !isAll(r.Category, isCategoryByte):
		return Rate{}, &ParseError{line, "category", fmt.Sprintf("%q is not up to %d of a-z, 0-9, _ and -", truncate(fields[3]), CategoryBytesMax)}
	}
	bps, perr := parseRateBPS(fields[4], line)
	if perr != nil {
		return Rate{}, perr
	}
	r.RateBPS = bps
	return r, nil
}

func parseRateBPS(s string, line int) (int, *ParseError) {
	if s == "" || !isAll(s, isDigit) {
		return 0, &ParseError{line, "rate_bps", fmt.Sprintf("%q is not a non-negative integer of basis points", truncate(s))}
	}
	n, err := strconv.Atoi(s)
	if err != nil || n > RateBPSMax {
		return 0, &ParseError{line, "rate_bps", fmt.Sprintf("%s is outside 0..%d", truncate(s), RateBPSMax)}
	}
	return n, nil
}

func isAll(s string, ok func(byte) bool) bool {
	for i := 0; i < len(s); i++ {
		if !ok(s[i]) {
			return false
		}
	}
	return true
}

func isLetter(c byte) bool       { return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' }
func isDigit(c byte) bool        { return '0' <= c && c <= '9' }
func isAlnum(c byte) bool        { return isLetter(c) || isDigit(c) }
func isCategoryByte(c byte) bool { return 'a' <= c && c <= 'z' || isDigit(c) || c == '_' || c == '-' }

// truncate shortens s for an error message.
func truncate(s string) string {
	const bytesMax = 40
	if len(s) <= bytesMax {
		return s
	}
	return s[:bytesMax] + "…"
}

// LoadFile parses the table file at path. Errors are those of Parse (a
// *ParseError for a bad file, reachable with errors.As) and of opening the
// file, wrapped with the path.
func LoadFile(path string) (*Table, error) {
	f, err := os.Open(path) //nolint:gosec // G304: the operator names the table file
	if err != nil {
		return nil, fmt.Errorf("tax: load table: %w", err)
	}
	defer f.Close() //nolint:errcheck // read-only: closing loses nothing
	t, err := Parse(f)
	if err != nil {
		return nil, fmt.Errorf("tax: load table %s: %w", path, err)
	}
	return t, nil
}
