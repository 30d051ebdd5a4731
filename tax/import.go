package tax

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
)

// Import validates the table file src and, only if it parses, copies it
// byte for byte to dstPath, atomically and durably (temporary file in the
// destination directory, fsync, rename, fsync of the directory), creating
// missing directories with mode 0700; the file gets mode 0644. It backs
// `surgepay tax import FILE`. On any error dstPath is left as it was.
// Errors are those of Parse (a *ParseError, reachable with errors.As) and
// of the file system, wrapped with the paths. Two concurrent imports to the
// same dstPath each write a complete file; the last rename wins.
func Import(src, dstPath string) (*Table, error) {
	in, err := os.Open(src) //nolint:gosec // G304: the operator names the file to import
	if err != nil {
		return nil, fmt.Errorf("tax: import: %w", err)
	}
	defer in.Close() //nolint:errcheck // read-only: closing loses nothing
	dir := filepath.Dir(dstPath)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("tax: import: %w", err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(dstPath)+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("tax: import: %w", err)
	}
	defer func() {
		// Best effort: on success tmp is closed and renamed (both fail
		// harmlessly); on failure the first error is the one returned.
		_ = tmp.Close()
		_ = os.Remove(tmp.Name())
	}()
	// Parse reads src to the end on success, so the copy is complete.
	t, err := Parse(io.TeeReader(in, tmp))
	if err != nil {
		return nil, fmt.Errorf("tax: import %s: %w", src, err)
	}
	if err := commit(tmp, dstPath); err != nil {
		return nil, fmt.Errorf("tax: import %s to %s: %w", src, dstPath, err)
	}
	return t, nil
}

func commit(tmp *os.File, dstPath string) error {
	if err := tmp.Chmod(0o644); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), dstPath); err != nil {
		return err
	}
	if runtime.GOOS == "windows" {
		return nil // Directories cannot be opened for sync there.
	}
	d, err := os.Open(filepath.Dir(dstPath))
	if err != nil {
		return err
	}
	defer d.Close() //nolint:errcheck // opened only to sync; Sync's error is returned
	return d.Sync()
}
