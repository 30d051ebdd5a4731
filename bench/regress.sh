#!/usr/bin/env bash
# bench/regress.sh: issue 14's memory and write bounds as a check that CI
# can run in about a minute and that fails on a regression. It runs
# bench/event.sh (a fresh embedded `surgepay serve`, the built-in
# simulator, sales on a saved card) for about 100,000 sales, then fails
# (exit 1, naming each bound crossed) if
#
#   - the server's largest RSS exceeds REGRESS_RSS_MIB_MAX,
#   - its RSS before the run exceeds REGRESS_IDLE_RSS_MIB_MAX,
#   - the bytes it wrote (/proc/PID/io write_bytes: WAL, checkpoints and
#     all) per sale exceed REGRESS_WRITE_BYTES_PER_SALE_MAX,
#   - the heap objects it allocated per request (go_memstats_mallocs_total)
#     exceed REGRESS_ALLOCS_PER_REQUEST_MAX: the one CPU-side bound that
#     does not move with a shared machine's speed,
#   - a sale's p50 with 8 connections in a closed loop (each sending its
#     next sale when its last is answered; bench/linger.sh, wrk) exceeds
#     REGRESS_P50_8_OVER_1_MAX times its p50 with one, in the same run: the
#     writer's linger must not tax a few checkout workers (issue 35: 17x
#     with a fixed 8 ms linger, 2.5x without one),
#   - more than REGRESS_REFUSED_PERCENT_MAX % of the requests were refused
#     (503, 429), or fewer than REGRESS_SALES_MIN sales succeeded (a run
#     that did little would pass the other checks).
#
#   bench/regress.sh            run, then check
#   bench/regress.sh --check    check the last run's report again (no load)
#
# Environment: the thresholds below; REGRESS_RATE and REGRESS_DURATION
# (default 2500/s for 40s: 100,000 sales); REGRESS_PATH (streamlined, the
# event set-up, or standard); BENCH_DIR (default /tmp/surgepay-regress,
# where --check finds the report); SURGEPAY_BIN and the other BENCH_*
# variables of bench/event.sh (which picks free ports unless BENCH_PORT
# and BENCH_ADMIN_PORT say). Needs python3.
set -euo pipefail

# The bounds: the figures measured after issue 14's write and memory work
# (session 7, 2,500/s for 40 s on the 2-core VM: RSS 154 MiB at most,
# 33 MiB idle, 12.7 KB written per sale, nothing refused but the
# simulator's faults) with room for a noisy shared machine. Before that
# work the same run took ~1 GB of RSS and wrote ~40 KB per sale; either
# would fail here. The write bound was 20,000 until session 19, when CI's
# run wrote 9.4 KB a sale and the event's 5,000/s runs 5-8 KB: 14,000
# still leaves a noisy machine room and fails a lost deferred index or a
# return to 2 ms batches with 4 KiB pages. The allocation bound (session
# 22): 168-173 a request at 5,000/s, the build issue 14 began from 221;
# 200 fails a third of the way back. Override any of them from the
# environment.
REGRESS_RSS_MIB_MAX=${REGRESS_RSS_MIB_MAX:-320}
REGRESS_IDLE_RSS_MIB_MAX=${REGRESS_IDLE_RSS_MIB_MAX:-64}
REGRESS_WRITE_BYTES_PER_SALE_MAX=${REGRESS_WRITE_BYTES_PER_SALE_MAX:-14000}
REGRESS_REFUSED_PERCENT_MAX=${REGRESS_REFUSED_PERCENT_MAX:-1}
REGRESS_ALLOCS_PER_REQUEST_MAX=${REGRESS_ALLOCS_PER_REQUEST_MAX:-200}
REGRESS_P50_8_OVER_1_MAX=${REGRESS_P50_8_OVER_1_MAX:-5}

rate=${REGRESS_RATE:-2500}
duration=${REGRESS_DURATION:-40s}
path=${REGRESS_PATH:-streamlined}
export BENCH_DIR=${BENCH_DIR:-/tmp/surgepay-regress}
repo=$(cd "$(dirname "$0")/.." && pwd)
report=$BENCH_DIR/event-$rate-$duration-$path.json
out=$BENCH_DIR/regress-event.txt

case ${1:-} in
--check) ;;
"")
	mkdir -p "$BENCH_DIR"
	rm -f "$report"
	"$repo/bench/event.sh" "$rate" "$duration" "$path" | tee "$out"
	LINGER_CONNS="1 8" "$repo/bench/linger.sh" 5s 1 default | tee "$BENCH_DIR/regress-linger.txt"
	;;
*)
	echo "usage: bench/regress.sh [--check]" >&2
	exit 2
	;;
esac
if [[ ! -s $report || ! -s $out ]]; then
	echo "regress: FAIL: no report of the run ($report, $out): see bench/event.sh's output above," \
		"or run without --check" >&2
	exit 1
fi

# At least 90 % of the planned sales, unless REGRESS_SALES_MIN says.
seconds=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["summary"]["planned_seconds"])' "$report")
sales_min=${REGRESS_SALES_MIN:-$(python3 -c 'import sys; print(int(0.9 * float(sys.argv[1]) * float(sys.argv[2])))' "$rate" "$seconds")}

python3 - "$report" "$out" "$REGRESS_RSS_MIB_MAX" "$REGRESS_IDLE_RSS_MIB_MAX" \
	"$REGRESS_WRITE_BYTES_PER_SALE_MAX" "$REGRESS_REFUSED_PERCENT_MAX" "$sales_min" \
	"$REGRESS_ALLOCS_PER_REQUEST_MAX" "$REGRESS_P50_8_OVER_1_MAX" "$BENCH_DIR/regress-linger.txt" <<'PY'
import json, os, re, sys
report, out = sys.argv[1], sys.argv[2]
rss_max, idle_max, write_max, refused_max, sales_min, allocs_max, p50_ratio_max = map(float, sys.argv[3:10])
linger = sys.argv[10]
d = json.load(open(report))
ms = d.get('minutes') or []
sales = sum(m['sales'] for m in ms)
refused = sum(m['refused'] for m in ms)
requests = d['summary']['requests']
writes = [m['server']['write_bytes'] for m in ms if m.get('server')]
rss = d['resources']['server']['rss_bytes_max'] / 2**20
idle = re.search(r'server RSS idle (\d+) MiB', open(out).read())

rows, failed = [], []
def check(name, got, limit, unit, known=True):
    if not known:
        rows.append(f"  {name:<24} unknown          max {limit:>10,.0f} {unit}")
        failed.append(f"{name} unknown")
        return
    ok = got <= limit
    rows.append(f"  {name:<24} {got:>10,.1f} {unit:<5} max {limit:>10,.0f} {unit}  {'ok' if ok else 'OVER'}")
    if not ok:
        failed.append(f"{name} {got:,.1f} {unit} > {limit:,.0f} {unit}")

check('server RSS', rss, rss_max, 'MiB', d['resources']['server']['samples'] > 0)
check('server RSS idle', float(idle.group(1)) if idle else 0, idle_max, 'MiB', idle is not None)
check('written per sale', sum(writes) / max(1, sales), write_max, 'B', bool(writes) and min(writes) >= 0)
check('refused', 100 * refused / max(1, requests), refused_max, '%')
# Minutes with a scraped allocation count (from the first scrape on).
allocs = [(m['server']['allocs'], m['requests']) for m in ms if m.get('server') and m['server'].get('allocs')]
check('allocations per request', sum(a for a, _ in allocs) / max(1, sum(r for _, r in allocs)), allocs_max, '', bool(allocs))
# The closed loop's p50 at 8 connections over its p50 at 1 (wrk's units).
def to_ms(v):
    m = re.fullmatch(r'([0-9.]+)(us|ms|s)', v or '')
    return float(m.group(1)) * {'us': 0.001, 'ms': 1, 's': 1000}[m.group(2)] if m else None
p50 = {}
if os.path.exists(linger):
    for line in open(linger):
        m = re.search(r'connections +(\d+) .* p50 (\S+)', line)
        if m:
            p50[int(m.group(1))] = to_ms(m.group(2))
known = bool(p50.get(1)) and p50.get(8) is not None
check('p50 8 conns / 1 conn', p50[8] / p50[1] if known else 0, p50_ratio_max, 'x', known)
rows.append(f"  {'sales':<24} {sales:>10,}       min {sales_min:>10,.0f}  {'ok' if sales >= sales_min else 'UNDER'}")
# The writer's gauges (reported, not judged: a stall is the machine's as
# much as the code's); never scraped means the admin /metrics wiring broke.
ws = [m['server']['writer'] for m in ms if m.get('server') and m['server'].get('writer')]
if ws:
    rows.append(f"  {'longest commit':<24} {1000 * max(w['stall_max_seconds'] for w in ws):>10,.1f} ms    (reported)")
else:
    rows.append(f"  {'longest commit':<24} unknown")
    failed.append("the server's writer gauges were never scraped (--server-metrics)")
if sales < sales_min:
    failed.append(f"sales {sales:,} < {sales_min:,.0f}")
print(f"regress: {report}")
print("\n".join(rows))
if failed:
    print("regress: FAIL: " + "; ".join(failed), file=sys.stderr)
    sys.exit(1)
print("regress: ok")
PY
