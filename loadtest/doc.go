// Package loadtest is the surgepay load harness: an open-model injector that
// drives the payments HTTP API with scenarios, measures latency from each
// iteration's intended start, and writes a JSON result and an offline HTML
// report.
//
// The command line entry point is Main, wired by cmd/surgepay as
//
//	surgepay loadtest [flags]
//	surgepay loadtest compare base.json new.json [--tolerance 10%]
//	surgepay loadtest merge a.json b.json --out merged.json
//	surgepay loadtest table [--header] a.json...   (Markdown rows for bench/RESULTS.md)
//
// # Workload model
//
// Arrivals are open: a single pacer goroutine walks a precomputed arrival
// plan (constant, ramping, stepped or flood) and starts one goroutine per
// iteration at its intended start time, whether or not earlier iterations
// have finished. In-flight iterations are bounded only by --max-inflight;
// an iteration due while the ceiling is reached is dropped, counted, warned
// about, and fails the run's thresholds. The pacer never throttles silently.
//
// # Latency
//
// Corrected latency is measured from the intended start, so a stalled server
// is charged for the time iterations waited to be sent (no coordinated
// omission). For the first request of an iteration the intended start is the
// iteration's scheduled time; for each later request it is the end of the
// previous request of the same iteration, because the scenario sends it as
// soon as it can. Service time is measured from the actual send to the end of
// the response body. Scenario latency is the whole iteration, from the
// scheduled time to the end of its last request.
//
// # Exit codes
//
//	0 ExitOK          run finished and every threshold held; compare found no regression
//	1 ExitUsage       bad flags, unreadable files, or test-data set-up failed
//	2 ExitThresholds  a --threshold was breached, or iterations were dropped at --max-inflight
//	3 ExitRegression  compare found a regression beyond --tolerance
//	4 ExitInterrupted the run was cancelled (signal or context); partial results were written
//
// # Limits
//
// Memory is constant in the request rate: samples go into HDR histograms
// (1µs to 60s, 3 significant digits), and each one-second window keeps only a
// compact summary. Memory grows by one summary per second of run, which is
// why --duration is capped at DurationMax. The injector shares the machine
// with the server in most set-ups; it warns when its own CPU use or pacing lag
// suggests it, not the server, is the bottleneck.
//
// The harness is safe for concurrent use only through Run and Main; its other
// types belong to one run.
package loadtest

// Exit codes returned by Main. They are part of the command line contract.
const (
	ExitOK          = 0
	ExitUsage       = 1
	ExitThresholds  = 2
	ExitRegression  = 3
	ExitInterrupted = 4
)
