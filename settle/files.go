package settle

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"
)

// LogProgress returns a Config.OnStats that logs settlement progress to
// log at most every interval.
func LogProgress(log *slog.Logger, interval time.Duration) func(Stats) {
	var last time.Time
	return func(s Stats) {
		if time.Since(last) < interval {
			return
		}
		last = time.Now()
		log.Info("settlement progress", "backlog", s.BacklogDepth, "oldest_age", s.OldestAge.Round(time.Second).String(),
			"batch_size", s.LastBatchSize, "captured", s.Captured, "capture_declined", s.Failed,
			"captures_per_second", int(s.CapturesPerSecond), "left", s.Left)
	}
}

// WriteFiles writes the report as JSON to jsonPath (none when "") and as
// text to textPath, or to stdout when textPath is "" or "-".
func (rep *Report) WriteFiles(jsonPath, textPath string, stdout io.Writer) error {
	if jsonPath != "" {
		f, err := os.Create(jsonPath) //nolint:gosec // G304: the operator names the report file
		if err != nil {
			return err
		}
		err = rep.WriteJSON(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("report %s: %w", jsonPath, err)
		}
	}
	if textPath == "" || textPath == "-" {
		return rep.WriteText(stdout)
	}
	f, err := os.Create(textPath) //nolint:gosec // G304: the operator names the report file
	if err != nil {
		return err
	}
	err = rep.WriteText(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
