# shellcheck shell=bash
# Sourced by the processor benchmarks (bench/attempts.sh, processors.sh,
# processor-calls.sh), from the repository's root, after
# `set -euo pipefail`.
# shellcheck source=bench/lib.sh
. bench/lib.sh

# processor_bench_setup WORKDIR: builds surgepay and bench/overhead into
# WORKDIR and writes them to disk (see bench_serve_setup), and sets three
# free ports: port and admin for serve (api, its base URL; admin_url),
# mock_port for stripe-mock (mock_url), so that two runs on one machine do
# not collide.
# shellcheck disable=SC2034 # the variables are the callers'
processor_bench_setup() {
  go build -o "$1/surgepay" ./cmd/surgepay
  go build -o "$1/overhead" ./bench/overhead
  sync
  read -r port admin mock_port < <(bench_free_ports 3)
  api=http://127.0.0.1:$port
  admin_url=http://127.0.0.1:$admin
  mock_url=http://127.0.0.1:$mock_port
}

# start_stripe_mock WORKDIR starts stripe-mock on mock_port with its
# PaymentIntent fixture patched to "succeeded" (so sales succeed; every
# request is still checked against Stripe's OpenAPI) and waits until it
# answers. The caller's EXIT trap kills its jobs.
start_stripe_mock() {
  local work=$1 mock
  mock=$(command -v stripe-mock || echo "$(go env GOPATH)/bin/stripe-mock")
  "$mock" -http-addr "127.0.0.1:$mock_port" >/dev/null 2>&1 &
  local pid=$!
  for _ in $(seq 1 100); do curl -s -o /dev/null "$mock_url/" && break; sleep 0.1; done
  for r in "payment_intents -d amount=1000 -d currency=eur" "payment_methods -d type=card" "refunds -d payment_intent=pi_1" "customers"; do
    # shellcheck disable=SC2086 # r is the path and its curl flags, split
    set -- $r; local path=$1; shift
    curl -s -u sk_test_bench: -X POST "$mock_url/v1/$path" "$@" > "$work/$path.json"
  done
  kill $pid; wait $pid 2>/dev/null || true
  python3 - "$work" <<'PY'
import json, sys
w = sys.argv[1]
pi = json.load(open(f"{w}/payment_intents.json")); pi["status"] = "succeeded"; pi["amount_received"] = pi["amount"]
res = {"payment_intent": pi, "payment_method": json.load(open(f"{w}/payment_methods.json")), "refund": json.load(open(f"{w}/refunds.json")),
       "customer": json.load(open(f"{w}/customers.json"))}
json.dump({"resources": res}, open(f"{w}/fixtures.json", "w"))
PY
  "$mock" -http-addr "127.0.0.1:$mock_port" -fixtures "$work/fixtures.json" >/dev/null 2>&1 &
  # Wait until it answers: the first calls of an event refused by a double
  # still loading would open the processor's breaker (5 failures in a row),
  # and its 5 s of 503s would be in the figures.
  for _ in $(seq 1 100); do curl -s -o /dev/null -u sk_test_bench: "$mock_url/v1/payment_intents/pi_1" && break; sleep 0.1; done
}

# start_serve WORKDIR CONFIG starts surgepay serve (CONFIG listens on
# port, its admin on admin) and waits for it; the dev key is in
# WORKDIR/data.
# shellcheck disable=SC2034 # SERVE_PID is the caller's
start_serve() {
  "$1/surgepay" serve --config "$2" > "$1/serve.out" 2>&1 &
  SERVE_PID=$!
  for _ in $(seq 1 100); do curl -sf "$api/healthz" >/dev/null && break; sleep 0.2; done
}
