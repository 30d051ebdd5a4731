#!/usr/bin/env bash
# How many processor operations an event costs, against a double limited
# as Stripe limits an account: the standard path, the streamlined path
# (captures deferred to settle) and processor tokens, each on a fresh
# server, offered the same sales. Usage: bench/processor-calls.sh [RATE]
# [SECONDS] [BUDGET]: RATE sales/s for SECONDS against a budget of BUDGET
# operations/s (Stripe live mode: 100 per account).
set -euo pipefail
cd "$(dirname "$0")/.."
rate=${1:-100}; secs=${2:-10}; budget=${3:-100}
work=$(mktemp -d); trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
# shellcheck source=bench/stripe-mock.sh
. bench/stripe-mock.sh
processor_bench_setup "$work"
start_stripe_mock "$work"
"$work/surgepay" keys settlement --out "$work/keys" >/dev/null

run() { # NAME MERCHANT_SETTINGS OVERHEAD_FLAGS
  rm -rf "$work/data"
  cat > "$work/surgepay.toml" <<TOML
data_dir = "$work/data"
listen = "127.0.0.1:$port"
admin_listen = "127.0.0.1:$admin"
log_level = "error"
[stage]
public_key_file = "$work/keys/settlement.pub"
[processors.stripe_mock]
kind = "stripe"
secret_key = "sk_test_bench"
base_url = "$mock_url"
calls_per_second = $budget
burst = $budget
[merchants.default]
processors = ["stripe_mock"]
$2
TOML
  start_serve "$work" "$work/surgepay.toml"
  local key; key=$(cat "$work/data/dev-api-key")
  echo "== $1"
  "$work/overhead" -url "$api" -key "sales=$key" -rate "$rate" -duration "${secs}s" $3 | tail -n +2
  curl -s -H "Authorization: Bearer $(cat "$work/data/admin-token")" "$admin_url/metrics" | grep -E '^surgepay_processor_(calls|refused)_total\{.*stripe_mock' | grep -v ' 0$' || true
  kill $SERVE_PID; wait $SERVE_PID 2>/dev/null || true
}
echo "$(date -u +%FT%TZ) $(nproc) cores; ${rate} sales/s offered for ${secs}s; budget ${budget} operations/s"
run "standard sale, card data" "" ""
run "streamlined sale, card data" $'processing = "streamlined"\naudit = "minimal"' ""
run "standard sale, processor token" "" "-token stripe_mock:pm_card_visa"
