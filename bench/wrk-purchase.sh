#!/usr/bin/env bash
# Measures purchases/s with wrk against a running surgepay: creates a
# customer and a saved card, then posts sales with unique Idempotency-Keys.
# Usage: bench/wrk-purchase.sh URL API_KEY [DURATION] [CONNECTIONS]
set -euo pipefail
url=${1:?url}; key=${2:?api key}; dur=${3:-20s}; conns=${4:-64}
cus=$(curl -sf "$url/v1/customers" -H "Authorization: Bearer $key" -H 'Content-Type: application/json' -d '{"name":"bench"}' | sed 's/.*"id":"\([^"]*\)".*/\1/')
pm=$(curl -sf "$url/v1/payment_methods" -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
  -d '{"customer":"'"$cus"'","card":{"number":"4242424242424242","exp_month":12,"exp_year":2030}}' | sed 's/.*"id":"\([^"]*\)".*/\1/')
PM=$pm KEY=$key wrk -t2 -c"$conns" -d"$dur" --latency -s "$(dirname "$0")/purchase.lua" "$url"
