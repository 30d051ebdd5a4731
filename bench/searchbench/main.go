// Command searchbench is the benchmark of the operators' console search
// over a large store (issue 38 item 4). bench/search.sh is its entry
// point; it runs two steps:
//
//	searchbench fill  makes a store of N payments (embedded SQLite data
//	                  folder, or a PostgreSQL database), or reuses one
//	                  filled before with the same N
//	searchbench run   starts `surgepay serve` on it, times each kind of
//	                  console search over real HTTP, then the API under
//	                  `surgepay loadtest` without and with operators
//	                  searching; prints Markdown for bench/RESULTS.md
//
// The fill makes real templates through the API (a customer, a saved card,
// one payment of each status, with the simulator), stops the server, and
// multiplies them in bulk in the database, with the indexes dropped
// during the load and created again after it (all of them, whatever the
// migrations made). Limits: the fill writes through the database directly,
// so it must keep what the stores derive consistent by itself (see
// fillsqlite.go, fillpostgres.go); stored answers of the sample of
// idempotency keys are minimal payment objects, not full API answers.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// options are the flags of both steps.
type options struct {
	store     string // "sqlite" or "postgres"
	dir       string // the fill folder: data/, fill.json, samples.json
	pgURL     string // the PostgreSQL database (storage = "postgres")
	bin       string // the surgepay binary
	work      string // the run's work folder: configs, logs, reports
	port      int    // the API listener
	adminPort int    // the admin listener (console)
	n         int    // payments of the large merchant
	keys      int    // idempotency keys in the sample
	seed      uint64

	requests  int           // console searches per kind, one at a time
	warmup    int           // searches per kind before those, not counted
	operators int           // operators searching during the second load
	rate      int           // the API load, sales per second
	duration  time.Duration // each load phase
}

func main() {
	if len(os.Args) < 2 || (os.Args[1] != "fill" && os.Args[1] != "run") {
		if len(os.Args) >= 2 && (os.Args[1] == "help" || os.Args[1] == "-h" || os.Args[1] == "--help") {
			usage(os.Stdout)
			return
		}
		usage(os.Stderr)
		os.Exit(2)
	}
	step := os.Args[1]
	var o options
	fs := flag.NewFlagSet("searchbench "+step, flag.ContinueOnError)
	fs.StringVar(&o.store, "store", "sqlite", "sqlite or postgres")
	fs.StringVar(&o.dir, "dir", "", "the fill folder (data folder, fill.json, samples.json); required")
	fs.StringVar(&o.pgURL, "pg-url", "", "the PostgreSQL database URL (-store postgres); its name must contain \"searchbench\"")
	fs.StringVar(&o.bin, "bin", "", "the surgepay binary; required")
	fs.StringVar(&o.work, "work", "", "the run's work folder (configs, logs, reports); default: the fill folder")
	fs.IntVar(&o.port, "port", 0, "the API listener's port on 127.0.0.1; required")
	fs.IntVar(&o.adminPort, "admin-port", 0, "the admin listener's port on 127.0.0.1; required")
	fs.IntVar(&o.n, "n", 10_000_000, "payments of the large merchant")
	fs.IntVar(&o.keys, "keys", 100_000, "idempotency keys in the sample (at most n/10)")
	fs.Uint64Var(&o.seed, "seed", 38, "the random seed of the fill and of the searches")
	fs.IntVar(&o.requests, "requests", 200, "console searches per kind, one at a time")
	fs.IntVar(&o.warmup, "warmup", 10, "searches per kind before the measured ones, not counted")
	fs.IntVar(&o.operators, "operators", 1, "operators searching in a loop during the second load phase")
	fs.IntVar(&o.rate, "rate", 1000, "the API load: sales per second (surgepay loadtest, open model)")
	fs.DurationVar(&o.duration, "duration", 30*time.Second, "each load phase")
	if err := fs.Parse(os.Args[2:]); err != nil {
		if err == flag.ErrHelp {
			return
		}
		os.Exit(2)
	}
	if err := o.check(); err != nil {
		fmt.Fprintln(os.Stderr, "searchbench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	if step == "fill" {
		err = fill(ctx, &o)
	} else {
		err = run(ctx, &o)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "searchbench:", err)
		os.Exit(1)
	}
}

func usage(w *os.File) {
	fmt.Fprintln(w, "usage: searchbench fill|run -store sqlite|postgres -dir FILL_DIR -bin SURGEPAY -port P -admin-port A [flags]")
	fmt.Fprintln(w, "       (bench/search.sh runs both; searchbench fill -h lists the flags)")
}

func (o *options) check() error {
	switch {
	case o.store != "sqlite" && o.store != "postgres":
		return fmt.Errorf("-store %q: want sqlite or postgres", o.store)
	case o.store == "postgres" && o.pgURL == "":
		return fmt.Errorf("-store postgres needs -pg-url")
	case o.dir == "" || o.bin == "":
		return fmt.Errorf("-dir and -bin are required")
	case o.port <= 0 || o.adminPort <= 0:
		return fmt.Errorf("-port and -admin-port are required")
	case o.n < 100 || o.n > 1_000_000_000:
		return fmt.Errorf("-n %d: want 100 to 1,000,000,000", o.n)
	case o.requests < 1 || o.requests > 100_000:
		return fmt.Errorf("-requests %d: want 1 to 100,000", o.requests)
	case o.operators < 0 || o.operators > 64:
		return fmt.Errorf("-operators %d: want 0 to 64", o.operators)
	case o.rate < 1 || o.rate > 100_000:
		return fmt.Errorf("-rate %d: want 1 to 100,000", o.rate)
	case o.duration < time.Second || o.duration > time.Hour:
		return fmt.Errorf("-duration %s: want 1s to 1h", o.duration)
	}
	o.keys = max(0, min(o.keys, o.n/10))
	if o.work == "" {
		o.work = o.dir
	}
	return nil
}
