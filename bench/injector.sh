#!/usr/bin/env bash
# Is the injector the bottleneck? Runs `surgepay loadtest` and k6 one after
# the other against the same trivial handler (the simulator's /healthz) at
# the same rates, and prints each tool's achieved rate and CPU seconds per
# 1,000 requests (user+sys from /usr/bin/time).
# Usage: bench/injector.sh [RATES...]   (default: 5000 10000 15000)
# Needs: k6 on PATH (go install go.k6.io/k6@latest), /usr/bin/time.
set -euo pipefail
cd "$(dirname "$0")/.."
rates=${*:-5000 10000 15000}
duration=${DURATION:-15s}
bin=${BENCH_BIN:-/tmp/surgepay-injector}
go build -o "$bin" ./cmd/surgepay
"$bin" simulator --listen 127.0.0.1:18181 >/dev/null 2>&1 &
sim=$!
trap 'kill $sim 2>/dev/null' EXIT
sleep 1
url=http://127.0.0.1:18181/healthz
secs=${duration%s}
printf '| tool | offered/s | achieved/s | p99 ms | CPU s | CPU µs per request |\n|---|---|---|---|---|---|\n'
for r in $rates; do
  out=$(mktemp)
  /usr/bin/time -f '%U %S' -o "$out.time" "$bin" loadtest --url http://127.0.0.1:18181 --scenario get --path /healthz \
    --rate "$r" --duration "$duration" --quiet --out "$out.json" >/dev/null 2>&1 || true
  read -r u s <"$out.time"
  python3 - "$out.json" "$r" "$u" "$s" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); r = sys.argv[2]; cpu = float(sys.argv[3]) + float(sys.argv[4])
n = d["summary"]["requests"]; p99 = d["latency"]["corrected"]["p99_ms"] if "corrected" in d["latency"] else d["latency"]["p99_ms"]
print(f"| surgepay loadtest | {r} | {d['summary']['request_rate']:.0f} | {p99:.2f} | {cpu:.2f} | {cpu*1e6/max(n,1):.1f} |")
PY
  /usr/bin/time -f '%U %S' -o "$out.time" k6 run --quiet --summary-export "$out.k6.json" \
    -e RATE="$r" -e DURATION="$duration" -e URL="$url" bench/injector.js >/dev/null 2>&1 || true
  read -r u s <"$out.time"
  python3 - "$out.k6.json" "$r" "$u" "$s" "$secs" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); r = sys.argv[2]; cpu = float(sys.argv[3]) + float(sys.argv[4])
m = d["metrics"]; n = m["http_reqs"]["count"]; rate = m["http_reqs"]["rate"]
dur = m["http_req_duration"]; p99 = dur.get("p(99)", dur.get("p(95)", 0))
print(f"| k6 | {r} | {rate:.0f} | {p99:.2f} | {cpu:.2f} | {cpu*1e6/max(n,1):.1f} |")
PY
  rm -f "$out" "$out".*
done
