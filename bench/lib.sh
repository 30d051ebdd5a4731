# shellcheck shell=bash
# bench/lib.sh: what the bench scripts that run a fresh `surgepay serve`
# share (bench/event.sh, bench/checkout.sh, bench/pgo.sh, and through
# bench/stripe-mock.sh the processor benchmarks). Sourced by bash, after
# `set -euo pipefail`; each function says what it sets.

# bench_seconds DURATION USAGE: prints DURATION (a Go duration: 30m, 90s,
# 1h30m) in whole seconds; exits 2 naming USAGE if it is under a second.
bench_seconds() {
	local s
	s=$(python3 -c 'import re,sys
total = 0.0
for n, u in re.findall(r"([0-9.]+)(h|ms|m|s)", sys.argv[1]):
    total += float(n) * {"h": 3600, "m": 60, "s": 1, "ms": 0.001}[u]
print(int(total))' "$1")
	if ((s < 1)); then
		echo "DURATION $1: want a Go duration such as 30s or 5m; $2" >&2
		exit 2
	fi
	echo "$s"
}

# bench_workdir NAME: sets dir, the work directory: BENCH_DIR (made if
# missing) or a fresh /tmp/surgepay-NAME.XXXXXX.
bench_workdir() {
	if [[ -n ${BENCH_DIR:-} ]]; then
		dir=$BENCH_DIR
		mkdir -p "$dir"
	else
		dir=$(mktemp -d "/tmp/surgepay-$1.XXXXXX")
	fi
}

# bench_free_ports N: prints N free TCP ports on 127.0.0.1, found with
# all N sockets open so they differ (another process may still take one
# before the caller listens there: servers then fail loudly).
bench_free_ports() {
	python3 -c 'import socket, sys
ss = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in ss: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ss])' "$1"
}

# bench_serve_setup NAME: sets repo, port and admin (BENCH_PORT and
# BENCH_ADMIN_PORT, else two bench_free_ports), bin (SURGEPAY_BIN, else
# ./cmd/surgepay built into $dir) and data, a fresh data folder in $dir
# (mode 0700), which the caller removes at the end unless BENCH_KEEP_DATA
# is set: a script removes only what it made, never a folder it found.
# Exits 1 if a port is already taken.
bench_serve_setup() {
	local free1 free2 p
	read -r free1 free2 < <(bench_free_ports 2)
	port=${BENCH_PORT:-$free1}
	admin=${BENCH_ADMIN_PORT:-$free2}
	repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
	bin=${SURGEPAY_BIN:-}
	if [[ -z $bin ]]; then
		bin=$dir/surgepay
		(cd "$repo" && go build -o "$bin" ./cmd/surgepay)
		# The kernel writes a freshly linked binary back some 30 s later,
		# and that write-back stalls the run's fsyncs for ~100 ms
		# (bench/RESULTS.md#fairness): write it now.
		sync
	fi
	for p in "$port" "$admin"; do
		if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "port $p is already taken; stop what listens there or set BENCH_PORT / BENCH_ADMIN_PORT" >&2
			exit 1
		fi
	done
	data=$(mktemp -d "$dir/data.XXXXXX")
	echo "$1: work directory $dir, data folder $data, ports $port (API) and $admin (admin)" >&2
}
