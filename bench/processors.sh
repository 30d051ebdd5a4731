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
# shellcheck source=bench/stripe-mock.sh
. bench/stripe-mock.sh
processor_bench_setup "$work"
start_stripe_mock "$work"

cat > "$work/surgepay.toml" <<TOML
data_dir = "$work/data"
listen = "127.0.0.1:$port"
admin_listen = "127.0.0.1:$admin"
debug = true
log_level = "warn"
[processors.stripe_mock]
kind = "stripe"
secret_key = "sk_test_bench"
base_url = "$mock_url"
[[merchants.default.routes]]
currency = "eur"
processors = ["stripe_mock"]
TOML
start_serve "$work" "$work/surgepay.toml"
key=$(cat "$work/data/dev-api-key")

echo "== $(date -u +%FT%TZ) $(nproc) cores; open model, ${rate}/s of euro sales through the connector, ${secs}s"
"$work/overhead" -url "$api" -key "stripe=$key@eur" -rate "$rate" -duration "${secs}s"
echo "== the same, dollar sales to the simulator"
"$work/overhead" -url "$api" -key "sim=$key@usd" -rate "$rate" -duration "${secs}s"
echo "== capacity, closed loop, 32 in flight each, both at once, 10s"
"$work/overhead" -url "$api" -key "sim=$key@usd" -key "stripe=$key@eur" -concurrency 32 -duration 10s
curl -s -H "Authorization: Bearer $(cat "$work/data/admin-token")" "$admin_url/metrics" | grep -E '^surgepay_processor_(calls|refused)_total' || true
grep -v '^$' "$work/serve.out" | grep -iv 'created development\|try:\|listening\|sk_' | tail -5 || true
