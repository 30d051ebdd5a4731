#!/usr/bin/env bash
# bench/linger.sh: what the writer's linger costs a closed loop (issue 35
# item 2). For each sqlite.flush_interval given (default: 8ms, the
# default, and 0s, no linger), a fresh `surgepay serve` (embedded SQLite,
# built-in simulator, standard path) takes sales on a saved card from wrk
# with 1, 8, 32 and 64 connections, each sending its next sale when its
# last is answered, for DURATION each; the settings alternate over ROUNDS
# rounds so that both meet the same minutes of the machine. Prints one
# line per run: flush_interval, connections, sales a second, p50 and p99.
#
#   bench/linger.sh [DURATION] [ROUNDS] [FLUSH...]
#
# FLUSH "default" leaves flush_interval unset (the server's default).
# Environment: LINGER_CONNS (the connection counts, default "1 8 32 64"),
# SURGEPAY_BIN (default: build ./cmd/surgepay into the work
# directory, a fresh mktemp -d /tmp/surgepay-linger.XXXXXX). Everything
# listens on 127.0.0.1; each run is bounded by DURATION. Needs wrk.
set -euo pipefail
duration=${1:-10s}
rounds=${2:-2}
shift $(($# < 2 ? $# : 2))
flushes=("$@")
((${#flushes[@]})) || flushes=(8ms 0s)
repo=$(cd "$(dirname "$0")/.." && pwd)
dir=$(mktemp -d /tmp/surgepay-linger.XXXXXX)
bin=${SURGEPAY_BIN:-$dir/surgepay}
[[ -n ${SURGEPAY_BIN:-} ]] || (cd "$repo" && go build -o "$bin" ./cmd/surgepay)
server=
trap '[[ -n $server ]] && kill $server 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"/data.*' EXIT

run() { # flush
	local flush=$1 port admin data
	read -r port admin < <(python3 -c 'import socket
ss = [socket.socket() for _ in range(2)]
for s in ss: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ss])')
	data=$(mktemp -d "$dir/data.XXXXXX")
	cat >"$dir/serve.toml" <<TOML
listen = "127.0.0.1:$port"
admin_listen = "127.0.0.1:$admin"
data_dir = "$data"
log_level = "warn"
TOML
	[[ $flush == default ]] || printf '[sqlite]\nflush_interval = "%s"\n' "$flush" >>"$dir/serve.toml"
	"$bin" serve --config "$dir/serve.toml" >"$dir/serve.out" 2>"$dir/serve.err" &
	server=$!
	for _ in $(seq 150); do
		[[ -s $data/dev-api-key ]] && (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
		sleep 0.2
	done
	local url=http://127.0.0.1:$port key cus pm
	key=$(<"$data/dev-api-key")
	cus=$(curl -sf "$url/v1/customers" -H "Authorization: Bearer $key" -H 'Content-Type: application/json' -d '{"name":"bench"}' | sed 's/.*"id":"\([^"]*\)".*/\1/')
	pm=$(curl -sf "$url/v1/payment_methods" -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
		-d '{"customer":"'"$cus"'","card":{"number":"4242424242424242","exp_month":12,"exp_year":2030}}' | sed 's/.*"id":"\([^"]*\)".*/\1/')
	for c in ${LINGER_CONNS:-1 8 32 64}; do
		PM=$pm KEY=$key wrk -t"$((c < 2 ? 1 : 2))" -c"$c" -d"$duration" --latency -s "$repo/bench/purchase.lua" "$url" 2>/dev/null |
			awk -v f="$flush" -v c="$c" '/Requests\/sec/ {rate=$2} /^ +50%/ {p50=$2} /^ +99%/ {p99=$2}
				END {printf "flush_interval %-5s connections %2d  %8.0f sales/s  p50 %-8s p99 %s\n", f, c, rate, p50, p99}'
	done
	kill $server
	wait $server 2>/dev/null || true
	server=
	rm -rf "$data"
}

for _ in $(seq "$rounds"); do
	for f in "${flushes[@]}"; do run "$f"; done
done
