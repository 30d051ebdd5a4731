package tax

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestImport(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "rates.csv")
	dst := filepath.Join(dir, "data", "tax", "tax-rates.csv")
	if err := os.WriteFile(src, []byte(precedenceCSV), 0o600); err != nil {
		t.Fatal(err)
	}
	tbl, err := Import(src, dst)
	if err != nil {
		t.Fatalf("Import: %v", err)
	}
	if tbl.Len() != 15 {
		t.Fatalf("Len = %d, want 15", tbl.Len())
	}
	got, err := os.ReadFile(dst)
	if err != nil || string(got) != precedenceCSV {
		t.Fatalf("dst content differs from src (err %v)", err)
	}
	loaded, err := LoadFile(dst)
	if err != nil || loaded.Len() != tbl.Len() {
		t.Fatalf("LoadFile(dst) = %v, %v", loaded, err)
	}

	t.Run("ErrParseKeepsOld", func(t *testing.T) {
		bad := filepath.Join(dir, "bad.csv")
		if err := os.WriteFile(bad, []byte(Header+"\nUS,,,,100\nXYZ,,,,1\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Import(bad, dst)
		var pe *ParseError
		if !errors.As(err, &pe) || pe.Line != 3 || pe.Field != "country" {
			t.Fatalf("err = %v, want *ParseError line 3 country", err)
		}
		if got, _ := os.ReadFile(dst); string(got) != precedenceCSV {
			t.Fatal("a failed import changed dst")
		}
		entries, _ := os.ReadDir(filepath.Dir(dst))
		if len(entries) != 1 {
			t.Fatalf("dst directory holds %d entries, want 1 (no temp files)", len(entries))
		}
	})
	t.Run("ErrNotExist", func(t *testing.T) {
		if _, err := Import(filepath.Join(dir, "missing.csv"), dst); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("err = %v, want fs.ErrNotExist", err)
		}
	})
}

func TestLoadFileErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadFile(filepath.Join(dir, "missing.csv")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("err = %v, want fs.ErrNotExist", err)
	}
	bad := filepath.Join(dir, "bad.csv")
	if err := os.WriteFile(bad, []byte(Header+"\nUS,,,,abc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := LoadFile(bad)
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Line != 2 || pe.Field != "rate_bps" {
		t.Fatalf("err = %v, want *ParseError line 2 rate_bps", err)
	}
}

func TestSampleFileMatchesEtc(t *testing.T) {
	etc, err := os.ReadFile(filepath.Join("..", "etc", "tax-rates.csv"))
	if err != nil {
		t.Skipf("etc/tax-rates.csv: %v", err)
	}
	if string(etc) != sampleCSV {
		t.Fatal("etc/tax-rates.csv differs from tax/sample.csv; copy tax/sample.csv over it")
	}
}
