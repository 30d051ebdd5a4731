#!/usr/bin/env bash
# bench/paths.sh: one open-model run of sales on a saved card against a
# fresh `surgepay serve` on SQLite, with the merchant on the path named, and
# one line of figures (latency corrected for coordinated omission, server
# and injector CPU, group-commit batch size).
#
#   bench/paths.sh PATH RATE [DURATION]
#
# PATH is one of
#   streamlined        processing = "streamlined", audit = "minimal",
#                      analytics = "off" (the event set-up of docs/streamlined.md)
#   standard           processing = "standard" with the same switches
#   standard-defaults  processing = "standard", every switch at its default
#
# Environment: SURGEPAY_BIN (default: build ./cmd/surgepay into the work
# directory), BENCH_DIR (default /tmp/surgepay-paths), BENCH_PORT (18280),
# BENCH_ADMIN_PORT (19280). Everything listens on 127.0.0.1; the run is
# bounded by DURATION (default 12s). Needs python3 for the summary line.
#
# BENCH_LOADTEST_FLAGS are more flags for `surgepay loadtest`, e.g.
# "--max-iterations 9500000" for a run longer than its default cap of
# 1,000,000 sales (200 s at 5,000/s).
#
# BENCH_SETTLE, when set (even to ""), runs `surgepay settle` continuously
# beside the server on the same database, started 2 s after it, with the
# flags it holds (e.g. BENCH_SETTLE="--max-rate 1000"; "" for the
# defaults). The provider is then `surgepay simulator` over HTTP on
# BENCH_SIM_PORT (18281), so that settle can capture what serve
# authorized, and the line ends with settle's captures per second.
set -euo pipefail

path=${1:?usage: bench/paths.sh PATH RATE [DURATION]}
rate=${2:?usage: bench/paths.sh PATH RATE [DURATION]}
duration=${3:-12s}
dir=${BENCH_DIR:-/tmp/surgepay-paths}
port=${BENCH_PORT:-18280}
admin=${BENCH_ADMIN_PORT:-19280}
repo=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$dir"

bin=${SURGEPAY_BIN:-}
if [[ -z $bin ]]; then
	bin=$dir/surgepay
	(cd "$repo" && go build -o "$bin" ./cmd/surgepay)
fi
[[ -f $dir/keys/settlement.pub ]] || "$bin" keys settlement --out "$dir/keys" >/dev/null

sim=${BENCH_SIM_PORT:-18281}
with_settle=${BENCH_SETTLE+yes}
for p in "$port" "$admin" $([[ -n $with_settle ]] && echo "$sim"); do
	if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
		echo "port $p is already taken; stop what listens there or set BENCH_PORT / BENCH_ADMIN_PORT" >&2
		exit 1
	fi
done

case $path in
streamlined) merchant=$'processing = "streamlined"\naudit = "minimal"\nanalytics = "off"' ;;
standard) merchant=$'processing = "standard"\naudit = "minimal"\nanalytics = "off"' ;;
standard-defaults) merchant='processing = "standard"' ;;
*)
	echo "unknown path $path (streamlined, standard, standard-defaults)" >&2
	exit 2
	;;
esac

data=$dir/data
rm -rf "$data"
cat >"$dir/run.toml" <<EOF
listen = "127.0.0.1:$port"
admin_listen = "127.0.0.1:$admin"
data_dir = "$data"
log_level = "warn"
debug = true
[merchants.default]
$merchant
[stage]
public_key_file = "$dir/keys/settlement.pub"
EOF

pids=()
trap 'for p in "${pids[@]}"; do kill $p 2>/dev/null || true; wait $p 2>/dev/null || true; done' EXIT
if [[ -n $with_settle ]]; then
	printf '[provider]\nkind = "sim-http"\nurl = "http://127.0.0.1:%s"\n' "$sim" >>"$dir/run.toml"
	"$bin" simulator --listen "127.0.0.1:$sim" >"$dir/sim.out" 2>"$dir/sim.err" &
	pids+=($!)
	for _ in $(seq 50); do
		(exec 3<>"/dev/tcp/127.0.0.1/$sim") 2>/dev/null && break
		sleep 0.1
	done
fi

"$bin" serve --config "$dir/run.toml" >"$dir/serve.out" 2>"$dir/serve.err" &
server=$!
pids=("$server" "${pids[@]}")
for _ in $(seq 150); do
	[[ -s $data/dev-api-key ]] && (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
	kill -0 $server 2>/dev/null || { tail "$dir/serve.err" >&2; exit 1; }
	sleep 0.2
done

label=$path-$rate
if [[ -n $with_settle ]]; then
	label=$label-settle
	# shellcheck disable=SC2086 # BENCH_SETTLE is a list of flags
	(sleep 2 && exec "$bin" settle --config "$dir/run.toml" --private-key "$dir/keys/settlement.key" \
		--report-json "$dir/$label.settle.json" --report-text /dev/null $BENCH_SETTLE) \
		>"$dir/settle.out" 2>"$dir/settle.err" &
	settler=$!
	pids=("$settler" "${pids[@]}")
fi
"$bin" loadtest --url "http://127.0.0.1:$port" --api-key "$(<"$data/dev-api-key")" \
	--scenario streamlined --rate "$rate" --duration "$duration" --quiet \
	--server-pid $server --out "$dir/$label.json" ${BENCH_LOADTEST_FLAGS:-} >/dev/null 2>&1 || true
curl -s -H "Authorization: Bearer $(cat "$data/admin-token")" "http://127.0.0.1:$admin/metrics" | grep -E '^surgepay_groupcommit_batch_size_(sum|count)' >"$dir/$label.metrics" || true

if [[ -n $with_settle ]]; then
	kill -INT "$settler" 2>/dev/null || true
	wait "$settler" 2>/dev/null || true
fi

python3 - "$dir/$label.json" "$dir/$label.metrics" "$label" "$rate" "${with_settle:+$dir/$label.settle.json}" <<'PY'
import json, os, sys
res, met, label, rate, settled = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.argv[5]
d = json.load(open(res))
s, c, r = d['summary'], d['latency']['corrected'], d['resources']
m = {}
for line in open(met):
    k, v = line.split()
    m[k.split('{')[0]] = float(v)
batch = m.get('surgepay_groupcommit_batch_size_sum', 0) / max(1, m.get('surgepay_groupcommit_batch_size_count', 1))
srv = r['server']['cpu_percent_avg']
print(f"{label}: achieved {s['request_rate']:.0f}/s  p50 {c['p50_ms']:.1f}  p95 {c['p95_ms']:.1f}  "
      f"p99 {c['p99_ms']:.1f}  p99.9 {c['p999_ms']:.1f} ms  errors {s['errors']}  dropped {s['dropped']}  "
      f"server CPU {srv:.0f}% ({srv * 10000 / rate:.0f} us/sale)  injector CPU {r['injector']['cpu_percent_avg']:.0f}%  "
      f"batch {batch:.1f}", end="")
if settled:
    if os.path.exists(settled):
        st = json.load(open(settled))
        print(f"  settle captured {st['captured']} ({st['captured'] / max(st['duration_seconds'], 1e-9):.0f}/s)", end="")
    else:
        print("  settle wrote no report (see settle.err)", end="")
print()
PY
