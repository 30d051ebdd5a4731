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

for p in "$port" "$admin"; do
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

"$bin" serve --config "$dir/run.toml" >"$dir/serve.out" 2>"$dir/serve.err" &
server=$!
trap 'kill $server 2>/dev/null || true; wait $server 2>/dev/null || true' EXIT
for _ in $(seq 150); do
	[[ -s $data/dev-api-key ]] && (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
	kill -0 $server 2>/dev/null || { tail "$dir/serve.err" >&2; exit 1; }
	sleep 0.2
done

label=$path-$rate
"$bin" loadtest --url "http://127.0.0.1:$port" --api-key "$(<"$data/dev-api-key")" \
	--scenario streamlined --rate "$rate" --duration "$duration" --quiet \
	--server-pid $server --out "$dir/$label.json" >/dev/null 2>&1 || true
curl -s "http://127.0.0.1:$admin/metrics" | grep -E '^surgepay_groupcommit_batch_size_(sum|count)' >"$dir/$label.metrics" || true

python3 - "$dir/$label.json" "$dir/$label.metrics" "$label" "$rate" <<'PY'
import json, sys
res, met, label, rate = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
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
      f"batch {batch:.1f}")
PY
