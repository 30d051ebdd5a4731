package config

import (
	"context"
	"os"
	"time"
)

// PollInterval is how often the config file's modification time is
// checked for a reload: a change to a file every node reads (one
// Kubernetes ConfigMap, a shared volume) reaches every node within about
// this long, well inside a second. A stat is cheap.
const PollInterval = 500 * time.Millisecond

// Watch calls reload on each signal from hup and whenever the file
// at path changes (polled every PollInterval), until ctx ends.
func Watch(ctx context.Context, path string, hup <-chan os.Signal, reload func(why string)) {
	mtime := modTime(path)
	t := time.NewTicker(PollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			reload("SIGHUP")
		case <-t.C:
			if m := modTime(path); path != "" && !m.Equal(mtime) {
				mtime = m
				reload("file changed")
			}
		}
	}
}

func modTime(path string) time.Time {
	if path == "" {
		return time.Time{}
	}
	fi, err := os.Stat(path)
	if err != nil {
		return time.Time{}
	}
	return fi.ModTime()
}
