package stage

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// failingKeyFile is a *os.File whose Chmod, Write or Sync fails on demand,
// as a full disk or a file system refusing the mode would.
type failingKeyFile struct {
	*os.File
	chmodErr, writeErr, syncErr error
	partial                     bool // Write writes half the data before failing
}

func (f *failingKeyFile) Chmod(mode os.FileMode) error {
	if f.chmodErr != nil {
		return f.chmodErr
	}
	return f.File.Chmod(mode)
}

func (f *failingKeyFile) Write(b []byte) (int, error) {
	if f.writeErr != nil {
		n := 0
		if f.partial {
			n, _ = f.File.Write(b[:len(b)/2])
		}
		return n, f.writeErr
	}
	return f.File.Write(b)
}

func (f *failingKeyFile) Sync() error {
	if f.syncErr != nil {
		return f.syncErr
	}
	return f.File.Sync()
}

// TestWriteKeyFileFailureReported is the regression test for a failed
// write (or chmod) of the settlement private key reported as success,
// leaving an empty or partial key file that no staged capture could ever
// be opened with: every failing step must return its error and remove the
// file.
func TestWriteKeyFileFailureReported(t *testing.T) {
	errDiskFull := errors.New("no space left on device")
	for _, tc := range []struct {
		name string
		f    failingKeyFile
	}{
		{"ErrChmod", failingKeyFile{chmodErr: errDiskFull}},
		{"ErrWrite", failingKeyFile{writeErr: errDiskFull}},
		{"ErrWritePartial", failingKeyFile{writeErr: errDiskFull, partial: true}},
		{"ErrSync", failingKeyFile{syncErr: errDiskFull}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), PrivateKeyFile)
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				t.Fatal(err)
			}
			tc.f.File = f
			err = writeKeyFile(&tc.f, path, 0o600, encodeKey(pemPrivate, "k", make([]byte, keyBytes)))
			if !errors.Is(err, errDiskFull) {
				t.Errorf("got error %v, want %v", err, errDiskFull)
			}
			if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("after a failed write, stat %s: got %v, want the file removed", path, err)
			}
		})
	}
	t.Run("OK", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), PrivateKeyFile)
		data := encodeKey(pemPrivate, "k", make([]byte, keyBytes))
		if err := writeNew(path, 0o600, data); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != string(data) {
			t.Errorf("got %q, %v, want the key written", got, err)
		}
	})
}
