#!/usr/bin/env bash
# What the attempt journal costs a sale (issue 34 item 2): a merchant
# routed to two processors records where each authorization goes before
# the call (one write) and reads it (one SELECT); a merchant with one
# processor does neither. One server, one merchant key, dollar sales routed
# to the simulator alone, pound sales to the simulator first and
# stripe-mock second (the sale still goes to the simulator: only the
# journal differs). Phases alternate one / two / one / two, each an open
# model at RATE sales/s for SECONDS; the server's CPU a sale is read from
# /proc for each phase. Everything on 127.0.0.1, bounded in time.
# Usage: bench/attempts.sh [RATE] [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
rate=${1:-1000}; secs=${2:-15}
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
currency = "gbp"
processors = ["default", "stripe_mock"]
TOML
start_serve "$work" "$work/surgepay.toml"
key=$(cat "$work/data/dev-api-key")
ticks=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$SERVE_PID/stat"; }

echo "== $(date -u +%FT%TZ) $(nproc) cores; ${rate}/s sales for ${secs}s a phase"
"$work/overhead" -url "$api" -key "warmup=$key@usd" -key "warmup2=$key@gbp" -rate "$rate" -duration 5s >/dev/null
for phase in one two one two; do
  cur=usd; [ "$phase" = two ] && cur=gbp
  before=$(cpu)
  out=$("$work/overhead" -url "$api" -key "$phase=$key@$cur" -rate "$rate" -duration "${secs}s")
  after=$(cpu)
  line=$(echo "$out" | grep "^$phase ")
  okps=$(echo "$line" | awk '{print $2}')
  us=$(python3 -c "print(round(($after-$before)/$ticks*1e6/($okps*$secs),1))")
  echo "$line | server CPU ${us} us/sale"
done
curl -s -o /dev/null -w '' "$api/healthz"
echo "== statements a sale (Surgepay-Sql), one processor then two"
api() { curl -s -H "Authorization: Bearer $key" -H 'Content-Type: application/json' "$api/v1/$1" -d "$2"; }
cus=$(api customers '{"name":"Ada"}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
pm=$(api payment_methods '{"customer":"'$cus'","card":{"number":"4242424242424242","exp_month":12,"exp_year":2034}}' |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
for cur in usd gbp; do
  curl -s -D - -o /dev/null -H "Authorization: Bearer $key" -H 'Content-Type: application/json' -H "Idempotency-Key: sql-$cur-$RANDOM" \
    "$api/v1/payments" -d '{"amount":1000,"currency":"'$cur'","payment_method":"'$pm'"}' | grep -i '^surgepay-sql' | sed "s/^/$cur: /"
done
