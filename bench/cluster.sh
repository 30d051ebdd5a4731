#!/usr/bin/env bash
# bench/cluster.sh: what a sale costs on the highly available cluster
# (issue 37 item 7), against the embedded default in the same run. It
# starts deploy/local/cluster.sh in a fresh state folder and runs
# `surgepay loadtest` (open model, sales on a saved card of the standard
# merchant) through HAProxy at RATE for DURATION, once with the three
# nodes, then with two and with one (the others stopped), then stops the
# cluster and runs bench/event.sh RATE DURATION standard (one embedded
# `serve`, the same sale). For each cluster run it prints the CPU of
# every part a sale (the nodes, the PostgreSQL primary and its standby
# with their backends, NATS, Redis, HAProxy, the shared simulator:
# /proc/PID/stat utime + stime before and after), PostgreSQL's WAL bytes
# and transactions a sale (pg_stat_wal, pg_stat_database), and the
# loadtest's p50/p99 and statuses.
#
#   bench/cluster.sh [RATE] [DURATION]      # default 500 30s
#
# On 2 cores everything shares the same two: the point is the cost a sale
# and that a node more or less changes nothing in correctness, not peak
# rate. Environment: CLUSTER_DIR (default a fresh mktemp -d
# /tmp/surgepay-bench-cluster.XXXXXX), CLUSTER_PORT_BASE (default 15600),
# SURGEPAY_BIN (a binary instead of a build), BENCH_PG_FLUSH (a list of
# postgres.flush_interval values, default "0s": the three-node run is
# made with each, the nodes restarted in between, and the two- and
# one-node runs with the last). Needs what cluster.sh needs.
# Everything listens on 127.0.0.1; each run is bounded by DURATION.
set -euo pipefail

rate=${1:-500}
duration=${2:-30s}
root=$(cd "$(dirname "$0")/.." && pwd)
export CLUSTER_DIR=${CLUSTER_DIR:-$(mktemp -d /tmp/surgepay-bench-cluster.XXXXXX)}
export CLUSTER_PORT_BASE=${CLUSTER_PORT_BASE:-15600}
cluster() { "$root/deploy/local/cluster.sh" "$@"; }
trap 'cluster down >/dev/null 2>&1 || true' EXIT
seconds=${duration%s}
[[ $seconds =~ ^[0-9]+$ ]] || {
	echo "DURATION $duration: want whole seconds, such as 30s" >&2
	exit 2
}

cluster up >/dev/null
# shellcheck disable=SC1091 # written by cluster.sh up
. "$CLUSTER_DIR/keys.env"
bin=$CLUSTER_DIR/surgepay
hz=$(getconf CLK_TCK)

# pids PART: the processes of a part, children included (PostgreSQL's
# backends are its postmaster's children).
pids() {
	local pid
	case $1 in
	postgres1 | postgres2)
		pid=$(head -1 "$CLUSTER_DIR/pg/data${1#postgres}/postmaster.pid")
		# shellcheck disable=SC2046 # one pid a word
		echo "$pid" $(pgrep -P "$pid" || true)
		;;
	*) cat "$CLUSTER_DIR/$1/pid" ;;
	esac
}
parts=(node1 node2 node3 postgres1 postgres2 nats1 nats2 nats3 redis haproxy simulator)
# ticks PART: the CPU ticks its processes have used (live ones).
ticks() {
	local t=0 p
	for p in $(pids "$1"); do
		[[ -r /proc/$p/stat ]] || continue
		t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat")))
	done
	echo "$t"
}
sql() { cluster sql "$1"; }

run() {
	local label=$1 file
	file=${label//[^A-Za-z0-9.-]/_}
	declare -A before
	local part
	for part in "${parts[@]}"; do before[$part]=$(ticks "$part"); done
	local wal0 xact0
	wal0=$(sql "SELECT wal_bytes FROM pg_stat_wal")
	xact0=$(sql "SELECT xact_commit FROM pg_stat_database WHERE datname = 'surgepay'")
	"$bin" loadtest --url "$SURGEPAY_URL" --api-key "$STANDARD_KEY" --scenario streamlined \
		--rate "$rate" --duration "$duration" --quiet --max-iterations $((rate * seconds + rate)) \
		--out "$CLUSTER_DIR/$file.json" >"$CLUSTER_DIR/$file.txt" 2>&1 || true
	local sales
	sales=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["status_codes"].get("200",0))' "$CLUSTER_DIR/$file.json" 2>/dev/null || echo 0)
	local wal1 xact1
	wal1=$(sql "SELECT wal_bytes FROM pg_stat_wal")
	xact1=$(sql "SELECT xact_commit FROM pg_stat_database WHERE datname = 'surgepay'")
	echo "== $label: $rate/s for $duration through HAProxy, $sales sales answered 200"
	grep -E '^ +all |^status codes' "$CLUSTER_DIR/$file.txt" || true
	if ((sales == 0)); then
		echo "   no sales: see $CLUSTER_DIR/$file.txt"
		return
	fi
	local total=0 d
	for part in "${parts[@]}"; do
		d=$(($(ticks "$part") - before[$part]))
		total=$((total + d))
		awk -v p="$part" -v d="$d" -v hz="$hz" -v n="$sales" 'BEGIN { printf "   %-10s %8.1f µs a sale\n", p, d * 1e6 / hz / n }'
	done
	awk -v d="$total" -v hz="$hz" -v n="$sales" 'BEGIN { printf "   %-10s %8.1f µs a sale\n", "all", d * 1e6 / hz / n }'
	awk -v w="$((wal1 - wal0))" -v x="$((xact1 - xact0))" -v n="$sales" \
		'BEGIN { printf "   PostgreSQL: %.0f WAL bytes, %.2f commits a sale\n", w / n, x / n }'
}

# Loadtest's own set-up (a customer and a saved card) happens in the
# first run's first second; a warm-up run keeps it out of the figures.
"$bin" loadtest --url "$SURGEPAY_URL" --api-key "$STANDARD_KEY" --scenario streamlined \
	--rate "$rate" --duration 5s --quiet --max-iterations $((rate * 6)) >/dev/null 2>&1 || true

stop_node() {
	local pid
	pid=$(cat "$CLUSTER_DIR/node$1/pid")
	kill -TERM "$pid"
	while kill -0 "$pid" 2>/dev/null; do sleep 0.2; done
}
# flush INTERVAL: postgres.flush_interval in the nodes' shared file, the
# nodes restarted one by one to take it (it is read at start).
flush() {
	local toml=$CLUSTER_DIR/surgepay.toml n
	sed -i '/^flush_interval = /d' "$toml"
	sed -i "/^\[postgres\]$/a flush_interval = \"$1\"" "$toml"
	for n in 1 2 3; do
		stop_node "$n"
		cluster start-node "$n" >/dev/null
	done
	sleep 3 # HAProxy takes the last one back after two good checks
}
for f in ${BENCH_PG_FLUSH:-0s}; do
	flush "$f"
	run "three-nodes, postgres.flush_interval $f"
done
stop_node 3
sleep 2
run two-nodes
stop_node 2
sleep 2
run one-node
cluster down >/dev/null
trap - EXIT

echo "== the embedded default, same rate (bench/event.sh $rate $duration standard):"
SURGEPAY_BIN=$bin BENCH_DIR=$CLUSTER_DIR/embedded "$root/bench/event.sh" "$rate" "$duration" standard 2>&1 |
	grep -E '^status codes|^ +all ' || true
python3 - "$CLUSTER_DIR"/embedded/event-*.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ms = [m["server"]["cpu_us_per_request"] for m in d.get("minutes", []) if m.get("server")]
print("   serve      %8.1f µs a sale (its minutes: %s)" % (sum(ms) / len(ms), ", ".join("%.1f" % m for m in ms)))
PY
