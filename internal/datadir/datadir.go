// Package datadir keeps surgepay's data folder private: its mode, and
// the files written in it through a rename.
package datadir

import (
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
)

// Mode is the data folder's mode: it holds the database, the
// keyring, the admin token and the development API key, which nobody but
// the server's user may read.
const Mode fs.FileMode = 0o700

// Ensure makes the data folder dir with Mode, or tightens
// an existing one that the group or others may read or enter (0755, as
// mkdir makes it) to Mode and says so on log: the files in it are
// 0600, but their names, sizes and times would still show, and a file
// made looser later (a restored backup, an editor) would be open. A
// folder that the group or others may write is refused instead of
// tightened: it is someone else's too (a shared /tmp), and they could
// have put or replaced files in it already.
func Ensure(dir string, log *slog.Logger) error {
	if err := os.MkdirAll(dir, Mode); err != nil {
		return fmt.Errorf("data folder %s: %w", dir, err)
	}
	if runtime.GOOS == "windows" {
		return nil // modes are not permissions there
	}
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("data folder %s: %w", dir, err)
	}
	mode := st.Mode().Perm()
	if mode&0o022 != 0 {
		return fmt.Errorf("data folder %s: mode %v lets others write into it; use a folder of the server's own (mkdir -m 700)",
			dir, mode)
	}
	if mode&0o077 == 0 {
		return nil
	}
	if err := os.Chmod(dir, Mode); err != nil {
		return fmt.Errorf("data folder %s: mode %v lets others read it, and it cannot be tightened to %v: %w",
			dir, mode, Mode, err)
	}
	log.Warn("data folder tightened: it holds the database, keyring and tokens", "dir", dir,
		"mode_was", mode.String(), "mode", Mode.String())
	return nil
}

// WriteFileAtomic writes data to path (mode 0600) through a temporary file
// and a rename, so a crash leaves the old file or the new one.
func WriteFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) //nolint:errcheck // after the rename nothing is left to remove; before it, the write's error is reported
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close() // the write's error is the one to report
		return err
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close() // the sync's error is the one to report
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
