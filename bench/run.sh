#!/usr/bin/env bash
# bench/run.sh: find the capacity of surgepay on this machine.
#
# Builds ./cmd/surgepay, starts `surgepay serve` on loopback, and runs the
# stress profile of `surgepay loadtest` for the checkout and returning
# scenarios and a weighted mix, with the card simulator at 0ms and 1s, on
# embedded storage and, when SURGEPAY_BENCH_POSTGRES_DSN is set, PostgreSQL.
# Every run gets a fresh server and data directory, is bounded by
# BENCH_RUN_DURATION and BENCH_MAX_RATE, and writes JSON and HTML into
# bench/results/, and appends a summary table to bench/results/summary.md
# (gitignored: the figures kept in git are chosen by hand for
# bench/RESULTS.md).
#
# The server is configured by environment only: SURGEPAY_DATA_DIR, SURGEPAY_LISTEN,
# SURGEPAY_ADMIN_LISTEN=off (so runs never collide on the admin port),
# SURGEPAY_STORAGE, SURGEPAY_POSTGRES_DSN, SURGEPAY_POSTGRES_SCHEMA (a fresh
# schema per server, created by the server, so that each starts with no
# merchant and writes a new dev-api-key) and SURGEPAY_SIM_LATENCY. Resources
# are sampled from /proc/PID.
#
# Knobs (environment), all bounded by default:
#   BENCH_PORT            loopback port (default 18181)
#   BENCH_START_RATE      first stress step, iterations/s (default 50)
#   BENCH_STEP_RATE       step increment (default 50)
#   BENCH_STEP_DURATION   step length (default 10s)
#   BENCH_MAX_RATE        last step (default 2000)
#   BENCH_RUN_DURATION    hard cap per run (default 120s)
#   BENCH_SCENARIOS       subset, e.g. "checkout mix" (default "checkout returning mix")
#   BENCH_LATENCIES       simulator latencies (default "0ms 1s")
#   BENCH_BIN             use this surgepay binary instead of building one
#
# Exit status: 0 when every run completed (a breached SLO is the expected end
# of a stress run), 1 when a build, server start or run failed.
set -euo pipefail

cd "$(dirname "$0")/.."
root=$(pwd)
results="$root/bench/results"
summary="$results/summary.md"
mkdir -p "$results"

port=${BENCH_PORT:-18181}
start_rate=${BENCH_START_RATE:-50}
step_rate=${BENCH_STEP_RATE:-50}
step_duration=${BENCH_STEP_DURATION:-10s}
max_rate=${BENCH_MAX_RATE:-2000}
run_duration=${BENCH_RUN_DURATION:-120s}
scenarios=${BENCH_SCENARIOS:-"checkout returning mix"}
latencies=${BENCH_LATENCIES:-"0ms 1s"}
config=${BENCH_CONFIG:-$root/etc/surgepay.toml}
url="http://127.0.0.1:$port"

work=$(mktemp -d)
server_pid=""
cleanup() {
	stop_server
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

log() { printf 'bench: %s\n' "$*" >&2; }

if [[ -n ${BENCH_BIN:-} ]]; then
	cp "$BENCH_BIN" "$work/surgepay"
else
	log "building ./cmd/surgepay"
	go build -o "$work/surgepay" ./cmd/surgepay
fi

# The mix: mostly returning customers, some new checkouts and refunds.
cat >"$work/mix.toml" <<'EOF'
[[scenario]]
name = "returning"
weight = 60
[[scenario]]
name = "checkout"
weight = 25
[[scenario]]
name = "refund"
weight = 10
[[scenario]]
name = "crud"
weight = 5
EOF

# start_server STORAGE LATENCY: starts a fresh server and waits for its key.
start_server() {
	local storage=$1 latency=$2 data="$work/data-$1-$2"
	rm -rf "$data" && mkdir -p "$data"
	# Another process on the port would answer the runs in our place.
	if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
		log "port $port is already taken; stop what listens there or set BENCH_PORT"
		return 1
	fi
	local args=(serve)
	[[ -f $config ]] && args+=(--config "$config")
	server_count=$((server_count + 1))
	SURGEPAY_DATA_DIR="$data" \
		SURGEPAY_LISTEN="127.0.0.1:$port" \
		SURGEPAY_ADMIN_LISTEN=off \
		SURGEPAY_STORAGE="$storage" \
		SURGEPAY_POSTGRES_DSN="${SURGEPAY_BENCH_POSTGRES_DSN:-}" \
		SURGEPAY_POSTGRES_SCHEMA="bench_${stamp,,}_$server_count" \
		SURGEPAY_SIM_LATENCY="$latency" \
		"$work/surgepay" "${args[@]}" >"$work/server-$storage-$latency.log" 2>&1 &
	server_pid=$!
	local deadline=$((SECONDS + 30))
	until [[ -s $data/dev-api-key ]] && (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
		if ! kill -0 "$server_pid" 2>/dev/null || ((SECONDS > deadline)); then
			log "server ($storage, sim $latency) did not start; its log:"
			tail -n 30 "$work/server-$storage-$latency.log" >&2 || true
			server_pid=""
			return 1
		fi
		sleep 0.2
	done
	api_key=$(<"$data/dev-api-key")
}

stop_server() {
	if [[ -n $server_pid ]]; then
		kill "$server_pid" 2>/dev/null || true
		wait "$server_pid" 2>/dev/null || true
		server_pid=""
	fi
}

# run_stress STORAGE LATENCY SCENARIO: one bounded stress run.
run_stress() {
	local storage=$1 latency=$2 scenario=$3
	local name="$stamp-$storage-sim$latency-$scenario"
	local pick=(--scenario "$scenario")
	[[ $scenario == mix ]] && pick=(--scenario-file "$work/mix.toml")
	# The SLO allows the simulator's own latency on top of 250ms.
	local slo="p99<250ms,errors<1%"
	# With the simulator at 1 s an iteration makes up to two provider calls
	# (returning: authorize, capture), so the floor is 2 s.
	[[ $latency == 1s ]] && slo="p99<2250ms,errors<1%"
	log "stress $name (slo $slo)"
	local code=0
	SURGEPAY_API_KEY="$api_key" "$work/surgepay" loadtest \
		--url "$url" "${pick[@]}" --profile stress \
		--start-rate "$start_rate" --step-rate "$step_rate" --step-duration "$step_duration" \
		--max-rate "$max_rate" --duration "$run_duration" --slo "$slo" \
		--server-pid "$server_pid" --quiet \
		--out "$results/$name.json" --html "$results/$name.html" || code=$?
	# 0 and 2 (thresholds) both leave a result; 1 is a usage or set-up error.
	if ((code != 0 && code != 2)); then
		log "run $name failed with exit code $code"
		return 1
	fi
	rows+=("$results/$name.json")
}

stamp=$(date -u +%Y%m%dT%H%M%SZ)
storages=(sqlite)
[[ -n ${SURGEPAY_BENCH_POSTGRES_DSN:-} ]] && storages+=(postgres)
rows=()
failed=0
server_count=0
for storage in "${storages[@]}"; do
	for latency in $latencies; do
		if ! start_server "$storage" "$latency"; then
			failed=1
			continue
		fi
		for scenario in $scenarios; do
			run_stress "$storage" "$latency" "$scenario" || failed=1
		done
		stop_server
	done
done

if ((${#rows[@]} > 0)); then
	{
		printf '\n## %s on %s (%s cores)\n\n' "$stamp" "$(uname -n)" "$(nproc)"
		printf 'Stress %s→%s/s by %s every %s; capacity is the highest step that held the SLO.\n\n' \
			"$start_rate" "$max_rate" "$step_rate" "$step_duration"
		"$work/surgepay" loadtest table --header "${rows[@]}"
	} >>"$summary"
	log "appended ${#rows[@]} rows to $summary"
fi
exit "$failed"
