#!/usr/bin/env bash
# bench/event.sh: the event as a profile. One open-model run of sales on a
# saved card against a fresh `surgepay serve` (embedded SQLite, built-in
# simulator) at RATE sales per second for DURATION, with the server's CPU,
# RSS, bytes written (/proc/PID/io write_bytes: WAL, checkpoints and all)
# and data-folder size sampled every second, and its writer's gauges
# scraped from its admin /metrics every second (the longest group commit,
# the write queue, requests shed by reason). The JSON and HTML reports have
# a per-minute section (p50 / p99 / worst second / max, refusals, server
# CPU and heap allocations per request, RSS, bytes written per sale,
# data-folder bytes per sale, longest commit, deepest queue, shed) with
# charts; the text summary ends with the same table. Allocations per
# request (go_memstats_mallocs_total) do not depend on the machine's speed
# or its neighbours: compare them across days, and CPU only within one.
#
#   bench/event.sh RATE DURATION [PATH]
#
# DURATION is a Go duration (30m, 90s). PATH is streamlined (default: the
# event set-up of docs/streamlined.md: processing = "streamlined", audit =
# "minimal", analytics = "off") or standard (every switch at its default).
#
# Environment: SURGEPAY_BIN (default: build ./cmd/surgepay into the work
# directory), BENCH_DIR (the work directory; default a fresh one,
# mktemp -d /tmp/surgepay-event.XXXXXX), BENCH_PORT and BENCH_ADMIN_PORT
# (default: free ports), so that two runs on one machine do not collide;
# BENCH_KEEP_DATA=1 (keep the run's data folder, BENCH_DIR/data.XXXXXX,
# which is otherwise removed at the end: it is made fresh for each run
# and holds gigabytes after a half hour; nothing else is ever removed),
# BENCH_LOADTEST_FLAGS (more loadtest flags), BENCH_LOG_LEVEL (the
# server's log_level, default warn; info adds how a restart read back the
# idempotency keys not yet indexed and its filter, in BENCH_DIR/serve.err,
# but also logs every request, which costs CPU: compare only runs at one
# level),
# BENCH_SERVE_TOML (more serve configuration, placed before the merchant's
# table: top-level keys first, then tables such as [sqlite]),
# BENCH_PAUSE=AT:SECONDS (stop the server with SIGSTOP AT seconds into the
# run, for SECONDS, then SIGCONT: a stall of known length, to measure how
# the server recovers from one; the report's windows show the rest),
# BENCH_HOG=SHARE (a CPU hog beside the server for the whole run: one
# process busy SHARE of each 10 ms and asleep the rest, 0.5 for half a
# core, as a co-tenant or a slower host would take; issue 35's headroom),
# BENCH_KILL=AT[,AT...] (kill -9 the server AT seconds into the run and
# start it again at once on the same data folder, timing from the restart
# to its first 200 from the admin listener's /readyz (the API listener's
# is behind the load's own connections), polled every 10 ms: issue 35's "back
# within a second after a crash mid-event"; the load goes on throughout,
# so its refusals and errors while the server is down are in the report,
# and the server's resources are sampled for the first process only; each
# probe's answer and timing is in BENCH_DIR/LABEL.probes).
# Everything listens on 127.0.0.1; the run is bounded by DURATION. Reports:
# BENCH_DIR/event-RATE-DURATION-PATH.{json,html,txt}, and the server's
# /metrics at the end (.metrics). Needs python3 and curl.
set -euo pipefail

usage="usage: bench/event.sh RATE DURATION [streamlined|standard]"
rate=${1:?$usage}
duration=${2:?$usage}
path=${3:-streamlined}
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"

case $path in
streamlined) merchant=$'processing = "streamlined"\naudit = "minimal"\nanalytics = "off"' ;;
standard) merchant='processing = "standard"' ;;
*)
	echo "unknown path $path; $usage" >&2
	exit 2
	;;
esac
seconds=$(bench_seconds "$duration" "$usage")
bench_workdir event

bench_serve_setup event
[[ -f $dir/keys/settlement.pub ]] || "$bin" keys settlement --out "$dir/keys" >/dev/null

cat >"$dir/event.toml" <<EOF
listen = "127.0.0.1:$port"
admin_listen = "127.0.0.1:$admin"
data_dir = "$data"
log_level = "${BENCH_LOG_LEVEL:-warn}"
${BENCH_SERVE_TOML:-}
[merchants.default]
$merchant
[stage]
public_key_file = "$dir/keys/settlement.pub"
EOF

"$bin" serve --config "$dir/event.toml" >"$dir/serve.out" 2>"$dir/serve.err" &
server=$!
echo $server >"$dir/serve.pid"
cleanup() {
	kill -CONT $server 2>/dev/null || true # gone after a BENCH_KILL
	kill $server 2>/dev/null || true
	wait $server 2>/dev/null || true
	restarted=$(<"$dir/serve.pid")
	if [[ $restarted != "$server" ]]; then
		kill "$restarted" 2>/dev/null || true
		for _ in $(seq 100); do kill -0 "$restarted" 2>/dev/null || break; sleep 0.1; done
	fi
	if [[ -z ${BENCH_KEEP_DATA:-} ]]; then
		rm -rf "$data"
	fi
}
trap cleanup EXIT
for _ in $(seq 150); do
	[[ -s $data/dev-api-key ]] && (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
	kill -0 $server 2>/dev/null || { tail "$dir/serve.err" >&2; exit 1; }
	sleep 0.2
done
idle_rss=$(awk '/VmRSS/ {print $2 * 1024}' "/proc/$server/status")

label=event-$rate-$duration-$path
if [[ -n ${BENCH_PAUSE:-} ]]; then
	if [[ ! $BENCH_PAUSE =~ ^([0-9]+):([0-9]+(\.[0-9]+)?)$ ]]; then
		echo "BENCH_PAUSE $BENCH_PAUSE: want AT:SECONDS, such as 45:2" >&2
		exit 2
	fi
	(sleep "${BASH_REMATCH[1]}" && kill -STOP $server && sleep "${BASH_REMATCH[2]}"; kill -CONT $server) 2>/dev/null &
fi
if [[ -n ${BENCH_HOG:-} ]]; then
	if [[ ! $BENCH_HOG =~ ^(0?\.[0-9]+|1(\.0*)?)$ ]]; then
		echo "BENCH_HOG $BENCH_HOG: want a share of a core, 0 to 1, such as 0.5" >&2
		exit 2
	fi
	# Bounded by the run: it stops itself after DURATION and a minute.
	python3 - "$BENCH_HOG" $((seconds + 60)) <<'PY' &
import sys, time
share, end = float(sys.argv[1]), time.monotonic() + float(sys.argv[2])
period = 0.010
while time.monotonic() < end:
    start = time.monotonic()
    while time.monotonic() - start < share * period:
        pass
    time.sleep(max(0.0, period - (time.monotonic() - start)))
PY
	hog=$!
	trap 'kill $hog 2>/dev/null; cleanup' EXIT
fi
if [[ -n ${BENCH_KILL:-} ]]; then
	if [[ ! $BENCH_KILL =~ ^[0-9]+(,[0-9]+)*$ ]]; then
		echo "BENCH_KILL $BENCH_KILL: want AT[,AT...] in seconds, such as 60,900,1740" >&2
		exit 2
	fi
	: >"$dir/$label.restarts"
	: >"$dir/$label.probes"
	(
		prev=0
		for at in ${BENCH_KILL//,/ }; do
			sleep $((at - prev))
			prev=$at
			pid=$(<"$dir/serve.pid")
			kill -9 "$pid"
			while kill -0 "$pid" 2>/dev/null; do sleep 0.01; done
			start=$(date +%s%N)
			"$bin" serve --config "$dir/event.toml" >>"$dir/serve.out" 2>>"$dir/serve.err" &
			echo $! >"$dir/serve.pid"
			ready=""
			for _ in $(seq 6000); do
				r=$(curl -s -o /dev/null -m 1 -w '%{http_code} connect %{time_connect} s, answered %{time_total} s' \
					"http://127.0.0.1:$admin/readyz" || true)
				echo "kill -9 at ${at} s: probe at $((($(date +%s%N) - start) / 1000000)) ms: $r" >>"$dir/$label.probes"
				if [[ $r == 200* ]]; then
					ready=$((($(date +%s%N) - start) / 1000000))
					break
				fi
				sleep 0.01
			done
			echo "kill -9 at ${at} s: ready ${ready:-never (60 s)} ms after the restart" | tee -a "$dir/$label.restarts" >&2
		done
	) &
fi
# shellcheck disable=SC2086 # BENCH_LOADTEST_FLAGS is a list of flags
SURGEPAY_ADMIN_TOKEN=$(<"$data/admin-token") \
	"$bin" loadtest --url "http://127.0.0.1:$port" --api-key "$(<"$data/dev-api-key")" \
	--scenario streamlined --rate "$rate" --duration "$duration" --quiet \
	--max-iterations $((rate * seconds + rate)) \
	--server-pid $server --server-data-dir "$data" --server-metrics "http://127.0.0.1:$admin/metrics" \
	--out "$dir/$label.json" --html "$dir/$label.html" ${BENCH_LOADTEST_FLAGS:-} >"$dir/$label.txt" 2>&1 || true
cat "$dir/$label.txt"
# The server's /metrics at the end (the writer's commit phases, the filter
# of idempotency keys, shed totals): BENCH_DIR/LABEL.metrics.
curl -s -m 5 -H "Authorization: Bearer $(<"$data/admin-token")" "http://127.0.0.1:$admin/metrics" >"$dir/$label.metrics" || true

python3 - "$dir/$label.json" "$idle_rss" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ms, s = d.get('minutes') or [], d['summary']
refused = sum(m['refused'] for m in ms)
sales = sum(m['sales'] for m in ms)
written = sum(m['server']['write_bytes'] for m in ms if m.get('server') and m['server']['write_bytes'] >= 0)
allocs = [(m['server']['allocs'], m['requests']) for m in ms if m.get('server') and m['server'].get('allocs')]
last = next((m['server'] for m in reversed(ms) if m.get('server')), {})
ws = [m['server']['writer'] for m in ms if m.get('server') and m['server'].get('writer')]
worst = max(ws, key=lambda w: w['stall_max_seconds'], default=None)
print(f"event: {sales} sales in {s['elapsed_seconds']:.0f} s, refused {refused} ({100 * refused / max(1, s['requests']):.3f} %), "
      f"worst minute p99 {max((m['corrected']['p99_ms'] for m in ms), default=0):.1f} ms, "
      f"worst second p99 {max((m['worst_second_p99_ms'] for m in ms), default=0):.1f} ms, "
      f"server RSS idle {int(sys.argv[2]) / 2**20:.0f} MiB max {d['resources']['server']['rss_bytes_max'] / 2**20:.0f} MiB, "
      f"written {written / max(1, sales):.0f} B/sale, data folder {last.get('data_dir_bytes_per_sale', 0):.0f} B/sale, "
      f"server CPU {d['resources']['server']['cpu_percent_avg'] * 10000 / max(1, s['request_rate']):.0f} us/request, "
      + (f"{sum(a for a, _ in allocs) / max(1, sum(r for _, r in allocs)):.1f} allocations/request, " if allocs else "")
      + (f"longest commit {1000 * worst['stall_max_seconds']:.0f} ms at second {worst['stall_max_second']}, "
         f"shed {sum(sum((w.get('shed') or {}).values()) for w in ws)}" if worst else "writer not scraped")
      + (f", host CPU stolen max {h['steal_percent_max']:.1f} % at second {h['steal_max_second']}"
         if (h := d['resources'].get('host')) else ""))
PY
[[ -s $dir/$label.restarts ]] && cat "$dir/$label.restarts"
echo "reports: $dir/$label.json $dir/$label.html"
if [[ -n ${BENCH_KEEP_DATA:-} ]]; then
	echo "data folder (kept): $data"
fi
