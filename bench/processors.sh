#!/usr/bin/env bash
# Sales through the Stripe connector next to the simulator, in one run of
# one server, and surgepay's own time on top of the processor's.
#
# stripe-mock stands in for Stripe (it checks every request against
# Stripe's OpenAPI; its fixture for a PaymentIntent is patched to
# "succeeded" so sales succeed). One merchant's euro sales are routed to
# it, its dollar sales to the simulator. Everything on 127.0.0.1, bounded
# in time. Usage: bench/processors.sh [RATE] [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
rate=${1:-1000}; secs=${2:-20}
work=$(mktemp -d); trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
go build -o "$work/surgepay" ./cmd/surgepay
go build -o "$work/overhead" ./bench/overhead
mock=$(command -v stripe-mock || echo "$(go env GOPATH)/bin/stripe-mock")

# stripe-mock's own answers, with the PaymentIntent succeeded.
"$mock" -http-addr 127.0.0.1:12111 >/dev/null 2>&1 &
for _ in $(seq 1 100); do curl -s -o /dev/null http://127.0.0.1:12111/ && break; sleep 0.1; done
for r in "payment_intents -d amount=1000 -d currency=eur" "payment_methods -d type=card" "refunds -d payment_intent=pi_1"; do
  set -- $r; path=$1; shift
  curl -s -u sk_test_bench: -X POST "http://127.0.0.1:12111/v1/$path" "$@" > "$work/$path.json"
done
kill %1; wait %1 2>/dev/null || true
python3 - "$work" <<'PY'
import json, sys
w = sys.argv[1]
pi = json.load(open(f"{w}/payment_intents.json")); pi["status"] = "succeeded"; pi["amount_received"] = pi["amount"]
res = {"payment_intent": pi, "payment_method": json.load(open(f"{w}/payment_methods.json")), "refund": json.load(open(f"{w}/refunds.json"))}
json.dump({"resources": res}, open(f"{w}/fixtures.json", "w"))
PY
"$mock" -http-addr 127.0.0.1:12111 -fixtures "$work/fixtures.json" >/dev/null 2>&1 &
# Wait until it answers: the first calls of an event refused by a double
# still loading would open the processor's breaker (5 failures in a row),
# and its 5 s of 503s would be in the figures.
for _ in $(seq 1 100); do curl -s -o /dev/null -u sk_test_bench: http://127.0.0.1:12111/v1/payment_intents/pi_1 && break; sleep 0.1; done

cat > "$work/surgepay.toml" <<TOML
data_dir = "$work/data"
listen = "127.0.0.1:18080"
admin_listen = "127.0.0.1:19090"
debug = true
log_level = "warn"
[processors.stripe_mock]
kind = "stripe"
secret_key = "sk_test_bench"
base_url = "http://127.0.0.1:12111"
[[merchants.default.routes]]
currency = "eur"
processors = ["stripe_mock"]
TOML
"$work/surgepay" serve --config "$work/surgepay.toml" > "$work/serve.out" 2>&1 &
for _ in $(seq 1 100); do curl -sf http://127.0.0.1:18080/healthz >/dev/null && break; sleep 0.2; done
key=$(cat "$work/data/dev-api-key")

echo "== $(date -u +%FT%TZ) $(nproc) cores; open model, ${rate}/s of euro sales through the connector, ${secs}s"
"$work/overhead" -url http://127.0.0.1:18080 -key "stripe=$key@eur" -rate "$rate" -duration "${secs}s"
echo "== the same, dollar sales to the simulator"
"$work/overhead" -url http://127.0.0.1:18080 -key "sim=$key@usd" -rate "$rate" -duration "${secs}s"
echo "== capacity, closed loop, 32 in flight each, both at once, 10s"
"$work/overhead" -url http://127.0.0.1:18080 -key "sim=$key@usd" -key "stripe=$key@eur" -concurrency 32 -duration 10s
curl -s http://127.0.0.1:19090/metrics | grep -E '^surgepay_processor_(calls|refused)_total' || true
grep -v '^$' "$work/serve.out" | grep -iv 'created development\|try:\|listening\|sk_' | tail -5 || true
