// Command faultclient is deploy/local/smoke.sh's merchant. While the
// script injects faults into the local cluster (deploy/local/cluster.sh),
// it sends sales through HAProxy at a steady open-model rate (a sale
// starts on schedule whether or not earlier ones have been answered),
// refunds part of some, and receives both merchants' webhooks; it acts on
// every answer as a merchant would: a 5xx, a 409, a 429, a 502 from
// HAProxy or a broken connection is the same request again, under the
// same Idempotency-Key, after Retry-After; a 200 is final and believed;
// another 4xx is final and a failure of the run.
//
// Afterwards it checks surgepay's books: against its own answers, the
// promoted database, the card network (the shared simulator) and the
// webhooks it received.
//
//	faultclient run -url URL -dir DIR [-rate 40] [-webhooks 127.0.0.1:PORT]
//	faultclient check -dir DIR -dsn DSN -simulator URL
//
// run reads the merchants' keys and cards from the environment
// (STANDARD_KEY, STANDARD_PM, STREAMLINED_KEY, STREAMLINED_PM: source
// the cluster's keys.env), the current phase's name from DIR/phase
// (written by the script), and stops sending once DIR/stop exists. It
// then waits for every started sale to be answered, prints what clients
// saw in each phase (statuses, for how long, when it recovered), writes
// DIR/ledger.json and DIR/stopped, and keeps receiving webhooks until it
// is signalled. check reads the ledger and DIR/webhooks.tsv and exits 1
// when any of the books differ.
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: faultclient run|check [flags] (see the package comment)")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "run":
		err = run(os.Args[2:])
	case "check":
		err = check(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q: run or check", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "faultclient:", err)
		os.Exit(1)
	}
}
