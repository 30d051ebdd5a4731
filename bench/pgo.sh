#!/usr/bin/env bash
# bench/pgo.sh: refresh cmd/surgepay/default.pgo, the CPU profile that `go
# build` uses to optimise the surgepay binary (profile-guided optimisation:
# -pgo=auto picks a main package's default.pgo, so `go build`, `go run`
# and `make build` need no flag).
#
#   bench/pgo.sh [RATE] [DURATION]
#
# Runs the event (bench/event.sh RATE DURATION, streamlined; default 5000
# and 30m) and takes three 30 s CPU profiles from the server's admin
# listener: after the first 30 s, at the middle, and 90 s before the end,
# so that the merged profile weighs a fresh database and a grown one alike.
# The merged profile replaces cmd/surgepay/default.pgo (PGO_OUT to write it
# elsewhere); the event's reports are in BENCH_DIR as event.sh leaves them,
# with the three profiles (cpu-*.pprof). Same environment as event.sh
# (SURGEPAY_BIN, BENCH_DIR, BENCH_ADMIN_PORT, ...; a fresh BENCH_DIR and a
# free admin port unless given). Run it on an otherwise
# idle machine, and commit the new profile with the figures it gave
# (bench/RESULTS.md): a profile of a different workload, or of a machine
# busy with something else, optimises for the wrong code.
set -euo pipefail

rate=${1:-5000}
duration=${2:-30m}
repo=$(cd "$(dirname "$0")/.." && pwd)
# event.sh's work directory and admin port, chosen here to reach its
# server's profiler.
export BENCH_DIR=${BENCH_DIR:-$(mktemp -d /tmp/surgepay-pgo.XXXXXX)}
export BENCH_ADMIN_PORT=${BENCH_ADMIN_PORT:-$(python3 -c 'import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}
dir=$BENCH_DIR
admin=$BENCH_ADMIN_PORT
out=${PGO_OUT:-$repo/cmd/surgepay/default.pgo}
# shellcheck source=bench/lib.sh
source "$repo/bench/lib.sh"
seconds=$(bench_seconds "$duration" "bench/pgo.sh RATE DURATION")
if ((seconds < 240)); then
	echo "DURATION $duration: want at least 4m (three 30 s profiles apart)" >&2
	exit 2
fi
mkdir -p "$dir"
rm -f "$dir"/cpu-*.pprof
# event.sh makes a fresh data folder, BENCH_DIR/data.XXXXXX: the one with
# an admin token newer than this marker.
marker=$dir/.pgo-started
touch "$marker"
token_file=

# profile AFTER NAME: a 30 s CPU profile, AFTER seconds from now.
profile() {
	local at=$1 name=$2 token
	sleep "$at"
	token=$(<"$token_file")
	curl -sf -m 60 -H "Authorization: Bearer $token" \
		"http://127.0.0.1:$admin/debug/pprof/profile?seconds=30" -o "$dir/cpu-$name.pprof"
}

(
	# Wait for event.sh's fresh server (its data folder's admin token).
	for _ in $(seq 600); do
		token_file=$(find "$dir" -maxdepth 2 -path "$dir/data.*/admin-token" -newer "$marker" -size +0 | head -n 1)
		[[ -n $token_file ]] && break
		sleep 0.1
	done
	profile 30 start                   # seconds 30-60
	profile $((seconds / 2 - 60)) middle  # from the middle
	profile $((seconds / 2 - 120)) end    # from 90 s before the end
) &
profiler=$!
trap 'kill $profiler 2>/dev/null || true' EXIT

bash "$repo/bench/event.sh" "$rate" "$duration"
wait $profiler
trap - EXIT

profiles=("$dir"/cpu-start.pprof "$dir"/cpu-middle.pprof "$dir"/cpu-end.pprof)
for p in "${profiles[@]}"; do
	[[ -s $p ]] || { echo "missing profile $p" >&2; exit 1; }
done
(cd "$repo" && go tool pprof -proto "${profiles[@]}" >"$out.new")
mv "$out.new" "$out"
echo "profile: $out ($(wc -c <"$out") bytes) from ${profiles[*]}"
