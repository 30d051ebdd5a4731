#!/usr/bin/env bash
# bench/checkout.sh: browser checkout under load. One open-model run of the
# loadtest scenario "browser" (docs/checkout.md, docs/loadtest.md) against
# a fresh `surgepay serve` (embedded SQLite, built-in simulator) at RATE
# checkouts per second for DURATION. Each checkout is three requests, as a
# shop's server and a shopper's card frame make them:
#
#   payment.create_awaiting   POST /v1/payments, secret key, no card
#                             (requires_payment_method + client_secret)
#   checkout.payment_method   POST /v1/checkout/payment_methods, publishable key
#   checkout.confirm          POST /v1/checkout/payments/{id}/confirm,
#                             publishable key (succeeded)
#
#   bench/checkout.sh RATE DURATION        e.g. bench/checkout.sh 300 30s
#
# Prints the loadtest summary, then the server's CPU per checkout and per
# request (its utime + stime from /proc/PID/stat read before and after the
# run: the whole run, drain included, over the checkouts confirmed without
# error), its heap allocations per checkout (go_memstats_mallocs_total from
# the admin /metrics before and after: unlike CPU time they compare across
# machines and days), and p50 / p99 (corrected) of each request type. Both
# include what the server does in the background meanwhile, which a short
# or slow run (20/s for 3 s) does not amortize: measure at 100/s or more
# for 30 s or more. The injector runs on the same machine; read its CPU in
# the summary's resources line.
#
# The publishable key is made on the fresh server through its admin API
# (POST /admin/v1/api_keys, type publishable, for the merchant of the
# dev-api-key), as an operator would. All the load comes from one client
# address, which publishable keys limit (checkout_client_rate, default
# 5/s), so the server's configuration raises it:
#
#   [merchants.default]
#   checkout_client_rate = 1000000
#
# Environment: BENCH_SCENARIO (default browser; checkout: the same three
# requests made by the merchant's server, a customer, a card and a sale,
# measured alike as a baseline), SURGEPAY_BIN (default: build ./cmd/surgepay into the work
# directory), BENCH_DIR (the work directory; default a fresh one,
# mktemp -d /tmp/surgepay-checkout.XXXXXX), BENCH_PORT and
# BENCH_ADMIN_PORT (default: free ports), BENCH_KEEP_DATA=1 (keep the
# run's data folder, BENCH_DIR/data.XXXXXX, otherwise removed at the end),
# BENCH_LOADTEST_FLAGS (more loadtest flags, e.g. "--decline-rate 0.05"),
# BENCH_SERVE_TOML (more serve configuration, placed before the merchant's
# table), BENCH_MERCHANT_TOML (more keys of [merchants.default], e.g.
# 'processing = "streamlined"'). Everything listens on 127.0.0.1 and is
# stopped at the end; the run is bounded by DURATION. Reports:
# BENCH_DIR/checkout-RATE-DURATION.{json,html,txt}. Needs python3 and curl.
set -euo pipefail

usage="usage: bench/checkout.sh RATE DURATION"
rate=${1:?$usage}
duration=${2:?$usage}
if [[ ! $rate =~ ^[0-9]+$ ]] || ((rate < 1)); then
	echo "RATE $rate: want checkouts per second, a positive integer; $usage" >&2
	exit 2
fi
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
seconds=$(bench_seconds "$duration" "$usage")
bench_workdir checkout
bench_serve_setup checkout

cat >"$dir/checkout.toml" <<EOF
listen = "127.0.0.1:$port"
admin_listen = "127.0.0.1:$admin"
data_dir = "$data"
log_level = "warn"
${BENCH_SERVE_TOML:-}
[merchants.default]
checkout_client_rate = 1000000
${BENCH_MERCHANT_TOML:-}
EOF

server=""
cleanup() {
	if [[ -n $server ]]; then
		kill "$server" 2>/dev/null || true
		wait "$server" 2>/dev/null || true
	fi
	if [[ -z ${BENCH_KEEP_DATA:-} ]]; then
		rm -rf "$data"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
"$bin" serve --config "$dir/checkout.toml" >"$dir/serve.out" 2>"$dir/serve.err" &
server=$!
up=""
for _ in $(seq 150); do
	if [[ -s $data/dev-api-key && -s $data/admin-token ]] &&
		(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && (exec 3<>"/dev/tcp/127.0.0.1/$admin") 2>/dev/null; then
		up=yes
		break
	fi
	kill -0 "$server" 2>/dev/null || break
	sleep 0.2
done
if [[ -z $up ]]; then
	echo "serve did not start in 30 s; its stderr:" >&2
	tail "$dir/serve.err" >&2
	exit 1
fi

# The publishable key of the dev-api-key's merchant (the only one on a
# fresh data folder), through the admin API.
token=$(<"$data/admin-token")
adminapi() {
	curl -sS -m 10 -H "Authorization: Bearer $token" -H 'Content-Type: application/json' "$@"
}
merchant=$(adminapi "http://127.0.0.1:$admin/admin/v1/merchants" |
	python3 -c 'import json, sys; ms = json.load(sys.stdin)["data"]; assert len(ms) == 1, ms; print(ms[0]["id"])')
pk=$(adminapi -X POST "http://127.0.0.1:$admin/admin/v1/api_keys" -d "{\"merchant\":\"$merchant\",\"type\":\"publishable\"}" |
	python3 -c 'import json, sys; k = json.load(sys.stdin); print(k.get("secret") or sys.exit(f"no publishable key: {k}"))')

# cpu_ticks PID: the process's utime + stime in clock ticks.
cpu_ticks() { awk '{sub(/.*\) /, ""); print $12 + $13}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
# mallocs: the server's heap objects allocated so far (0 if unreadable).
mallocs() {
	{ adminapi "http://127.0.0.1:$admin/metrics" || true; } | awk '$1 == "go_memstats_mallocs_total" {printf "%d", $2; found = 1} END {if (!found) print 0}'
}

# BENCH_SCENARIO=checkout measures the same three requests' server-side
# counterpart in the same way, as a baseline: a customer, a card sent by
# the merchant's server, a sale (one write each, no client secret).
scenario=${BENCH_SCENARIO:-browser}
label=$scenario-$rate-$duration
allocs_before=$(mallocs)
before=$(cpu_ticks "$server")
code=0
# shellcheck disable=SC2086 # BENCH_LOADTEST_FLAGS is a list of flags
SURGEPAY_API_KEY=$(<"$data/dev-api-key") SURGEPAY_PUBLISHABLE_KEY=$pk \
	"$bin" loadtest --url "http://127.0.0.1:$port" --scenario "$scenario" \
	--rate "$rate" --duration "$duration" --quiet --max-iterations $((rate * seconds + rate)) \
	--server-pid "$server" --out "$dir/$label.json" --html "$dir/$label.html" \
	${BENCH_LOADTEST_FLAGS:-} >"$dir/$label.txt" 2>&1 || code=$?
after=$(cpu_ticks "$server")
allocs_after=$(mallocs)
cat "$dir/$label.txt"
# 0 and 2 (thresholds, drops) leave a result; 1 is a usage or set-up error.
if ((code != 0 && code != 2)) || [[ ! -s $dir/$label.json ]]; then
	echo "loadtest exited $code; see serve.err in $dir" >&2
	exit 1
fi

allocs=$((allocs_before > 0 && allocs_after > 0 ? allocs_after - allocs_before : 0))
python3 - "$dir/$label.json" $((after - before)) "$hz" "$allocs" "$scenario" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
cpu_us = int(sys.argv[2]) * 1e6 / int(sys.argv[3])
allocs = int(sys.argv[4])
scenario = sys.argv[5]
types, s = d["request_types"], d["summary"]
if scenario == "browser":
    confirm = types.get("checkout.confirm", {"requests": 0, "errors": 0, "declines": 0})
    checkouts = confirm["requests"] - confirm["errors"] - confirm["declines"]
else:  # the baseline: iterations without a failure
    sc = d["scenarios"].get(scenario, {"iterations": 0, "failed": 0})
    checkouts = sc["iterations"] - sc["failed"]
print(f"server CPU per checkout ({scenario}): {cpu_us / max(1, checkouts):.0f} µs (3 requests)  "
      f"per request: {cpu_us / max(1, s['requests']):.0f} µs  "
      f"({cpu_us / 1e6:.2f} s CPU, {checkouts} checkouts confirmed, {s['requests']} requests, {s['errors']} errors)")
if allocs:
    print(f"server heap allocations per checkout: {allocs / max(1, checkouts):.0f} (one /metrics scrape included)")
for name in ("payment.create_awaiting", "checkout.payment_method", "checkout.confirm",
             "customer.create", "payment_method.create", "payment.create"):
    t = types.get(name)
    if t:
        c = t["corrected"]
        print(f"  {name:<24} p50 {c['p50_ms']:8.2f} ms  p99 {c['p99_ms']:8.2f} ms  ({t['requests']} requests, {t['errors']} errors)")
sc = d["scenarios"].get(scenario)
if sc:
    print(f"  {'checkout (3 requests)':<24} p50 {sc['corrected']['p50_ms']:8.2f} ms  p99 {sc['corrected']['p99_ms']:8.2f} ms")
PY
echo "reports: $dir/$label.json $dir/$label.html $dir/$label.txt"
if [[ -n ${BENCH_KEEP_DATA:-} ]]; then
	echo "data folder (kept): $data"
fi
