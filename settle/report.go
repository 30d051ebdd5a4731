package settle

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"
)

// Report is what a Run did. Failures count deliveries: a record left for
// later and delivered again in the same run counts each time.
type Report struct {
	Started         time.Time `json:"started"`
	Finished        time.Time `json:"finished"`
	DurationSeconds float64   `json:"duration_seconds"`
	Batches         int       `json:"batches"`
	Records         int       `json:"records"` // deliveries processed
	Captured        int       `json:"captured"`
	Failed          int       `json:"failed"` // declined captures: payments moved to failed
	AlreadySettled  int       `json:"already_settled"`
	// Currencies holds counts and amounts (minor units) per currency.
	Currencies map[string]*CurrencyTotals `json:"currencies"`
	// Failures counts records by reason: declined:<code>, tampered, orphan,
	// orphan_wait, retry_later, unknown, mismatch, wrong_key, key_reused,
	// store_error.
	Failures map[string]int `json:"failures"`
	// Left is the records this run left at the stage for a later run.
	Left int `json:"left"`
	// PendingWithoutRecord is the streamlined payments found with their
	// capture pending and no record at the stage (Config.PendingCheckWindow).
	PendingWithoutRecord int `json:"pending_without_record"`
	// PendingCheckInterrupted: the run ended before that check was done;
	// PendingWithoutRecord counts only what it had found.
	PendingCheckInterrupted bool `json:"pending_check_interrupted,omitempty"`
	// BacklogDepth is the records at the stage when the run ended.
	BacklogDepth      int     `json:"backlog_depth"`
	CapturesPerSecond float64 `json:"captures_per_second"`
	// NearExpiry and PastExpiry count the captures this run attempted
	// whose authorization was older than Config.AuthorizationLifetime less
	// ExpiryWarning, or older than the lifetime itself: the processor may
	// have released it (Stripe: about 7 days), and the capture then fails.
	NearExpiry int `json:"near_expiry"`
	PastExpiry int `json:"past_expiry"`
}

// CurrencyTotals are the captures and declined captures of one currency.
type CurrencyTotals struct {
	Captured       int   `json:"captured"`
	AmountCaptured int64 `json:"amount_captured"`
	Failed         int   `json:"failed"`
	AmountFailed   int64 `json:"amount_failed"`
}

func newReport(now time.Time) *Report {
	return &Report{Started: now, Currencies: map[string]*CurrencyTotals{}, Failures: map[string]int{}}
}

func (rep *Report) add(o outcome) {
	rep.Records++
	if o.reason != "" {
		rep.Failures[o.reason]++
	}
	switch o.result {
	case resultSettled:
		rep.AlreadySettled++
	case resultCaptured, resultFailed:
		c := rep.Currencies[o.currency]
		if c == nil {
			c = &CurrencyTotals{}
			rep.Currencies[o.currency] = c
		}
		if o.result == resultCaptured {
			rep.Captured++
			c.Captured++
			c.AmountCaptured += o.amount
		} else {
			rep.Failed++
			c.Failed++
			c.AmountFailed += o.amount
		}
	}
}

func (rep *Report) close(now time.Time) {
	rep.Finished = now
	d := now.Sub(rep.Started)
	rep.DurationSeconds = d.Seconds()
	if d > 0 {
		rep.CapturesPerSecond = float64(rep.Captured) / d.Seconds()
	}
}

// WriteJSON writes the report as indented JSON.
func (rep *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// WriteText writes the report for people.
func (rep *Report) WriteText(w io.Writer) error {
	p := &errWriter{w: w}
	p.printf("settlement %s .. %s (%.1fs), %d batches, %d records\n",
		rep.Started.UTC().Format(time.RFC3339), rep.Finished.UTC().Format(time.RFC3339), rep.DurationSeconds, rep.Batches, rep.Records)
	p.printf("captured %d (%.0f/s), capture declined %d, already settled %d\n",
		rep.Captured, rep.CapturesPerSecond, rep.Failed, rep.AlreadySettled)
	for _, cur := range slices.Sorted(maps.Keys(rep.Currencies)) {
		c := rep.Currencies[cur]
		p.printf("  %-4s captured %8d  amount %14d   declined %6d  amount %12d\n", cur, c.Captured, c.AmountCaptured, c.Failed, c.AmountFailed)
	}
	if len(rep.Failures) > 0 {
		p.printf("failures:\n")
		for _, k := range slices.Sorted(maps.Keys(rep.Failures)) {
			p.printf("  %-28s %d\n", k, rep.Failures[k])
		}
	}
	p.printf("left for a later run %d; backlog at the end %d\n", rep.Left, rep.BacklogDepth)
	if rep.PendingCheckInterrupted {
		p.printf("the check for pending captures with no staged record was interrupted: run again\n")
	}
	if rep.PendingWithoutRecord > 0 {
		p.printf("payments with a pending capture and no staged record %d (their IDs are in the log)\n", rep.PendingWithoutRecord)
	}
	return p.err
}

type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}
