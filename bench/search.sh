#!/usr/bin/env bash
# bench/search.sh: the console's search over a large store, and the API's
# latency while operators search (issue 38 item 4). Two steps of
# bench/searchbench:
#
#   fill  a store of N payments of one merchant (and 1 % as many of a
#         second): templates made through the API of `surgepay serve`
#         (the built-in simulator), multiplied in bulk SQL with the server
#         stopped: N/10 customers with distinct emails, a saved card each
#         (random last 4), ~10 payments each over 30 days (time-ordered
#         IDs, log-normal amounts, 90 % succeeded, 4 % refunded, 4 %
#         failed, 2 % requires_capture in the last 7 days), references of
#         a routed processor, and a sample of idempotency keys. A fill
#         folder with the same store, N, keys and seed is reused.
#   run   `surgepay serve` on it; each kind of console search (payment ID,
#         customer ID, email, last 4, idempotency key, processor
#         reference, status, amount range, date range, last 4 + date
#         range) REQUESTS times, one at a time, over HTTP with the admin
#         token, values drawn from the filled data; then `surgepay
#         loadtest` (sales on a saved card of the second merchant, open
#         model) at RATE for DURATION, without and then with OPERATORS
#         operators searching in a loop. Prints Markdown for
#         bench/RESULTS.md (also in the work folder).
#
#   bench/search.sh [STORE] [N]      # default sqlite 10000000
#
# STORE is sqlite (the embedded default: a data folder `surgepay serve`
# opens) or postgres (SEARCH_PG_URL, default
# postgres://postgres:postgres@127.0.0.1:5432/surgepay_searchbench: the
# fill drops and creates that database, and refuses a name without
# "searchbench").
#
# Environment: SEARCH_FILL_DIR (default /tmp/surgepay-searchbench/STORE-N:
# kept for reuse; SEARCH_FRESH=1 fills it again), SEARCH_KEYS (idempotency
# keys in the sample, default 100000, at most N/10), SEARCH_REQUESTS (200
# a kind), SEARCH_WARMUP (10 a kind, not counted), SEARCH_OPERATORS (1),
# SEARCH_RATE (1000 sales/s), SEARCH_DURATION (30s a load phase),
# SEARCH_FILL_ONLY=1 (fill, no run), SEARCH_FILL_TIMEOUT (default 6h) and
# SEARCH_RUN_TIMEOUT (default 3h) bound each step, SURGEPAY_BIN (a binary
# instead of building ./cmd/surgepay), SEARCH_KEEP_WORK=1 keeps the work
# folder (configs, server logs, loadtest reports). Everything listens on
# 127.0.0.1, on free ports. A 10M fill takes tens of minutes and several
# GB (the fill prints its time and size); needs python3 and go.
set -euo pipefail

usage="usage: bench/search.sh [sqlite|postgres] [N]"
case ${1:-} in -h | --help | help)
	echo "$usage"
	exit 0
	;;
esac
store=${1:-sqlite}
n=${2:-10000000}
case $store in
sqlite | postgres) ;;
*)
	echo "unknown store $store; $usage" >&2
	exit 2
	;;
esac
[[ $n =~ ^[0-9]+$ ]] || {
	echo "N $n: want a whole number; $usage" >&2
	exit 2
}
repo=$(cd "$(dirname "$0")/.." && pwd)
fill_dir=${SEARCH_FILL_DIR:-/tmp/surgepay-searchbench/$store-$n}
pg_url=${SEARCH_PG_URL:-postgres://postgres:postgres@127.0.0.1:5432/surgepay_searchbench?sslmode=disable}
work=$(mktemp -d /tmp/surgepay-search.XXXXXX)
mkdir -p "$fill_dir"
chmod 700 "$fill_dir"

pid=
cleanup() {
	if [[ -n $pid ]]; then
		kill -TERM "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	if [[ -z ${SEARCH_KEEP_WORK:-} ]]; then
		rm -rf "$work"
	else
		echo "search: work folder kept: $work" >&2
	fi
}
trap cleanup EXIT

# Two free ports at once (both sockets open until both are known); serve
# fails loudly if another process takes one meanwhile.
read -r port admin < <(python3 -c 'import socket
ss = [socket.socket() for _ in range(2)]
for s in ss: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ss])')

bin=${SURGEPAY_BIN:-}
if [[ -z $bin ]]; then
	bin=$work/surgepay
	(cd "$repo" && go build -o "$bin" ./cmd/surgepay)
fi
(cd "$repo" && go build -o "$work/searchbench" ./bench/searchbench)
SEARCHBENCH_BUILD=$(git -C "$repo" describe --always --dirty 2>/dev/null || echo unknown)
export SEARCHBENCH_BUILD
[[ -n ${SEARCH_FRESH:-} ]] && rm -f "$fill_dir/fill.json"

flags=(-store "$store" -dir "$fill_dir" -bin "$bin" -work "$work" -port "$port" -admin-port "$admin"
	-n "$n" -keys "${SEARCH_KEYS:-100000}")
[[ $store == postgres ]] && flags+=(-pg-url "$pg_url")
echo "search: $store, N=$n, fill folder $fill_dir, work folder $work, ports $port (API) and $admin (admin)" >&2

# step NAME TIMEOUT FLAGS...: one step of searchbench, bounded in time;
# on TERM it stops the server it started.
step() {
	local name=$1 limit=$2
	shift 2
	timeout --signal=TERM --kill-after=60 "$limit" "$work/searchbench" "$name" "$@" &
	pid=$!
	local rc=0
	wait "$pid" || rc=$?
	pid=
	if ((rc == 124)); then
		echo "search: $name did not end within $limit" >&2
	fi
	return "$rc"
}

step fill "${SEARCH_FILL_TIMEOUT:-6h}" "${flags[@]}"
[[ -n ${SEARCH_FILL_ONLY:-} ]] && exit 0
step run "${SEARCH_RUN_TIMEOUT:-3h}" "${flags[@]}" -requests "${SEARCH_REQUESTS:-200}" \
	-warmup "${SEARCH_WARMUP:-10}" -operators "${SEARCH_OPERATORS:-1}" -rate "${SEARCH_RATE:-1000}" \
	-duration "${SEARCH_DURATION:-30s}"
