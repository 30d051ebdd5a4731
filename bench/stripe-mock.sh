# Sourced by the processor benchmarks: start_stripe_mock WORKDIR starts
# stripe-mock on 127.0.0.1:12111 with its PaymentIntent fixture patched to
# "succeeded" (so sales succeed; every request is still checked against
# Stripe's OpenAPI) and waits until it answers. The caller's EXIT trap
# kills its jobs.
start_stripe_mock() {
  local work=$1 mock
  mock=$(command -v stripe-mock || echo "$(go env GOPATH)/bin/stripe-mock")
  "$mock" -http-addr 127.0.0.1:12111 >/dev/null 2>&1 &
  local pid=$!
  for _ in $(seq 1 100); do curl -s -o /dev/null http://127.0.0.1:12111/ && break; sleep 0.1; done
  for r in "payment_intents -d amount=1000 -d currency=eur" "payment_methods -d type=card" "refunds -d payment_intent=pi_1"; do
    set -- $r; local path=$1; shift
    curl -s -u sk_test_bench: -X POST "http://127.0.0.1:12111/v1/$path" "$@" > "$work/$path.json"
  done
  kill $pid; wait $pid 2>/dev/null || true
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
}

# start_serve WORKDIR CONFIG starts surgepay serve on 127.0.0.1:18080
# (admin 19090) and waits for it; the dev key is in WORKDIR/data.
start_serve() {
  "$1/surgepay" serve --config "$2" > "$1/serve.out" 2>&1 &
  SERVE_PID=$!
  for _ in $(seq 1 100); do curl -sf http://127.0.0.1:18080/healthz >/dev/null && break; sleep 0.2; done
}
