package sqlite

import "testing"

// TestParseContract: the directive a contract migration carries.
func TestParseContract(t *testing.T) {
	for _, tt := range []struct {
		name    string
		version int
		sql     string
		want    int
		wantErr bool
	}{
		{"None", 20, "-- 0020_x: a new table\nCREATE TABLE x (id INTEGER);", 0, false},
		{"OK", 20, "-- 0020_drop_foo\n-- contract: binaries before 0018 read payments.foo, dropped here\nALTER TABLE payments DROP COLUMN foo;", 18, false},
		{"Itself", 20, "-- contract: binaries before 0020\nDROP TABLE x;", 20, false},
		{"NotAtLineStart", 20, "-- see: -- contract: binaries before 0018\nSELECT 1;", 0, false},
		{"ErrAboveItself", 20, "-- contract: binaries before 0021\nDROP TABLE x;", 0, true},
		{"ErrZero", 20, "-- contract: binaries before 0000\nDROP TABLE x;", 0, true},
		{"ErrBeforeContracts", 16, "-- contract: binaries before 0010\nDROP TABLE x;", 0, true},
		{"ErrTwice", 20, "-- contract: binaries before 0018\n-- contract: binaries before 0019\nDROP TABLE x;", 0, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseContract(tt.version, tt.sql)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("parseContract = %d, %v; want %d, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}
