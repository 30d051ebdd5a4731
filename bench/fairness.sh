#!/bin/sh
# bench/fairness.sh: issue 34 item 10, fairness under a reconnect flood.
# Merchant B sends sales at a steady rate on keep-alive connections while
# merchant A floods slow-body connections that reconnect at once after
# each answer, then after 2 s; prints B's p50/p99 in each phase, in one
# run, and the ratio to the phase without the flood
# (api/fairness_reconnect_test.go, TestFairnessReconnectFlood).
#
#   bench/fairness.sh [RUNS]     # default 1; each run is ~40 s
#
# Knobs: SURGEPAY_FAIRNESS_PHASE (10s), SURGEPAY_FAIRNESS_RATE (100 sales/s),
# SURGEPAY_FAIRNESS_FLOOD (192 connections), SURGEPAY_FAIRNESS_CONNS
# (connections_max, 128); TMPDIR, where the test's database lives.
#
# The test binary is built and the disk synced before the runs: the
# kernel writes a freshly linked binary's pages back about 30 s later,
# and that write-back stalled the sales' fsync for ~100 ms in whichever
# phase was running then (bench/RESULTS.md#fairness).
set -eu
cd "$(dirname "$0")/.."
runs=${1:-1}
mkdir -p bench/results
go test -c -o bench/results/api.test ./api/
sync
i=0
while [ "$i" -lt "$runs" ]; do
	sync
	(cd api && SURGEPAY_FAIRNESS_BENCH=1 ../bench/results/api.test -test.count=1 \
		-test.run '^TestFairnessReconnectFlood$' -test.v) | grep -E 'baseline|reconnect'
	i=$((i + 1))
done
