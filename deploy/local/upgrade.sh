#!/usr/bin/env bash
# deploy/local/upgrade.sh: a rolling upgrade across a schema migration,
# under load, on the local cluster (docs/upgrade.md says why each step is
# safe and what to do in production).
#
#   deploy/local/upgrade.sh OLD_REF
#
# OLD_REF is a git ref of this repository: the release running before the
# upgrade. The new release is this working tree as it is (uncommitted
# changes included). The script:
#
#   1. builds both surgepay binaries: OLD_REF's from `git archive` into a
#      temporary folder (the repository is not touched), this tree's
#      beside it, each with its commit in `surgepay version`;
#   2. starts deploy/local/cluster.sh with the OLD binary (SURGEPAY_BIN):
#      the database is migrated to OLD_REF's schema, and the nodes, the
#      CLI and the card simulator run OLD_REF;
#   3. runs deploy/local/faultclient through HAProxy (SMOKE's merchant: a
#      steady open-model rate of sales, half streamlined, refunds,
#      webhooks; every answer acted on as a merchant would), and meanwhile,
#      one phase each:
#        steady       the old release;
#        expand       the NEW binary's `surgepay migrate` on the cluster's
#                     database, while the old nodes serve;
#        old-restart  node1 restarted with the OLD binary on the migrated
#                     schema (as an orchestrator may reschedule an old pod
#                     mid-roll, and as a rollback runs it): it must start;
#        upgrade-nodeN  node N (1, 2, 3 in turn) replaced by the new
#                     binary: SIGTERM, its exit once drained, the new
#                     binary started, /readyz 200, HAProxy taking it back
#                     (cluster.sh restart-node N BINARY);
#        after        the new release on every node;
#   4. settles the streamlined sales' staged captures with the NEW binary,
#      then `faultclient check`: every answer in every phase a 200 (-clean),
#      and the books (every sale answered 200 stored once, refunds, the
#      card network's amounts, staged captures, webhooks).
#
# Exit 0 when all hold, 1 otherwise; the cluster is stopped at the end
# either way, its state folder removed on success (kept, with its logs, on
# failure); the build folder is always removed.
#
# Environment: CLUSTER_DIR (default: a fresh mktemp -d
# /tmp/surgepay-upgrade.XXXXXX), CLUSTER_PORT_BASE (default 15700), and the
# rest of cluster.sh's; UPGRADE_PHASE (seconds of load in the steady,
# expand, old-restart and after phases, default 4); UPGRADE_RATE (sales a
# second, default 40).
# Needs what cluster.sh needs (PostgreSQL, Redis, NATS, HAProxy, jq, curl),
# git and Go.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
log() { printf '%s upgrade: %s\n' "$(date +%T)" "$*" >&2; }
die() {
	printf 'upgrade.sh: %s\n' "$*" >&2
	exit 1
}

[[ $# == 1 && -n $1 && $1 != -* ]] || die "usage: $0 OLD_REF (a git ref of this repository: the release before the upgrade)"
old_ref=$1
old_commit=$(git -C "$repo" rev-parse --verify --quiet "$old_ref^{commit}") || die "$old_ref is not a commit of $repo"
new_commit=$(git -C "$repo" rev-parse HEAD)
new_label=$(git -C "$repo" rev-parse --short=12 HEAD)
[[ -z $(git -C "$repo" status --porcelain --untracked-files=no) ]] || new_label+=-dirty
old_label=$(git -C "$repo" rev-parse --short=12 "$old_commit")
[[ $old_commit != "$new_commit" ]] || log "warning: OLD_REF is HEAD: the roll crosses no change but the working tree's"

phase_s=${UPGRADE_PHASE:-4}
rate=${UPGRADE_RATE:-40}
[[ $phase_s =~ ^[0-9]+$ ]] || die "UPGRADE_PHASE must be a whole number of seconds (got '$phase_s')"
export CLUSTER_DIR=${CLUSTER_DIR:-$(mktemp -d /tmp/surgepay-upgrade.XXXXXX)}
export CLUSTER_PORT_BASE=${CLUSTER_PORT_BASE:-15700}
# The phases in which every answer must be a 200: all of them (nothing
# fails in a rolling upgrade done right).
phases=steady,expand,old-restart,upgrade-node1,upgrade-node2,upgrade-node3,after

cluster() { "$here/cluster.sh" "$@"; }
# Outside CLUSTER_DIR: cluster.sh up empties that folder.
build=$(mktemp -d /tmp/surgepay-upgrade-build.XXXXXX)
work=$CLUSTER_DIR/upgrade
client_pid=
fail=0
up=0
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
	if [[ -n $client_pid ]]; then
		kill "$client_pid" 2>/dev/null || true
		wait "$client_pid" 2>/dev/null || true
	fi
	((up == 0)) || cluster down >/dev/null 2>&1 || true
	rm -rf "$build"
	if ((fail == 0)) && [[ -f $work/passed ]]; then
		rm -rf "$CLUSTER_DIR"
	elif [[ -d $CLUSTER_DIR ]]; then
		log "state and logs kept in $CLUSTER_DIR"
	fi
}
trap cleanup EXIT

# build_at SRC OUT COMMIT: go build ./cmd/surgepay in SRC, the commit in
# `surgepay version` (builds here have no VCS information: -buildvcs=false).
build_at() {
	(cd "$1" && go build -ldflags "-X main.commit=$3" -o "$2" ./cmd/surgepay) >"$2.log" 2>&1 || {
		tail -20 "$2.log" >&2
		die "go build in $1 failed (log above)"
	}
}
log "building OLD_REF $old_ref ($old_label) from git archive, and this tree ($new_label)"
mkdir -p "$build/old"
git -C "$repo" archive "$old_commit" | tar -x -C "$build/old"
build_at "$build/old" "$build/surgepay-old" "$old_label"
rm -rf "$build/old"
build_at "$repo" "$build/surgepay-new" "$new_label"
(cd "$repo" && go build -o "$build/faultclient" ./deploy/local/faultclient)

up=1
SURGEPAY_BIN=$build/surgepay-old cluster up
mkdir -p "$work"
set -a
# shellcheck disable=SC1091 # written by cluster.sh up
. "$CLUSTER_DIR/keys.env"
set +a
dsn=$(sed -n 's/^dsn = "\(.*\)"$/\1/p' "$CLUSTER_DIR/surgepay.toml" | head -1)
schema_version() { cluster sql "SELECT max(version) FROM schema_migrations"; }
phase() {
	echo "$1" >"$work/phase"
	log "phase $1"
}
# lb_up N: HAProxy's stats show node N UP (it sends it requests again).
lb_up() {
	curl -s -m 2 "http://127.0.0.1:$((CLUSTER_PORT_BASE + 1))/;csv" |
		awk -F, -v n="node$1" '$1 == "surgepay" && $2 == n {print $18}' | grep -qx UP
}
wait_lb_up() {
	local i
	for ((i = 0; i < 150; i++)); do
		lb_up "$1" && return 0
		sleep 0.2
	done
	log "FAIL: HAProxy did not take node$1 back within 30 s"
	fail=1
}

schema_old=$(schema_version)
log "the old release's schema: migration $schema_old"
echo steady >"$work/phase"
"$build/faultclient" run -url "$SURGEPAY_URL" -dir "$work" -rate "$rate" >"$work/report.txt" 2>"$work/client.log" &
client_pid=$!
for ((i = 0; i < 300; i++)); do
	[[ -f $work/ready ]] && break
	kill -0 "$client_pid" 2>/dev/null || break
	sleep 0.1
done
if [[ ! -f $work/ready ]]; then
	log "FAIL: the client did not start sending within 30 s"
	cat "$work/client.log" >&2
	fail=1
	exit 1
fi
phase steady
sleep "$phase_s"

# Expand: the new release's migrations, while the old release serves.
phase expand
t0=$(date +%s%N)
"$build/surgepay-new" migrate --config "$CLUSTER_DIR/cli/surgepay.toml" >"$work/migrate.out" 2>&1 || {
	cat "$work/migrate.out" >&2
	fail=1
	die "the new binary's surgepay migrate failed"
}
migrate_ms=$((($(date +%s%N) - t0) / 1000000))
schema_new=$(schema_version)
log "surgepay migrate (new binary): migration $schema_old -> $schema_new in $migrate_ms ms, the old nodes serving"
sleep "$phase_s"

# An old node restarted on the migrated schema must start and serve.
phase old-restart
cluster restart-node 1
wait_lb_up 1
sleep "$phase_s"

# The roll: one node at a time, each back in HAProxy before the next.
for n in 1 2 3; do
	phase "upgrade-node$n"
	cluster restart-node "$n" "$build/surgepay-new"
	wait_lb_up "$n"
done

phase after
sleep "$phase_s"
touch "$work/stop"
for ((i = 0; i < 3000; i++)); do
	[[ -f $work/stopped ]] && break
	kill -0 "$client_pid" 2>/dev/null || break
	sleep 0.1
done
if [[ ! -f $work/stopped ]]; then
	log "FAIL: the client did not finish its sales within 5 minutes of the last phase"
	cat "$work/client.log" >&2
	fail=1
	exit 1
fi
cat "$work/report.txt" >&2
cluster status >&2 || true
log "leases after the roll (the new release's background work): $(cluster sql "SELECT string_agg(name || ' held by ' || holder, '; ' ORDER BY name) FROM leases" || true)"

# The new release settles what both staged.
"$build/surgepay-new" settle --until-empty --config "$CLUSTER_DIR/surgepay.toml" \
	--private-key "$CLUSTER_DIR/secrets/settlement.key" >"$work/settle.out" 2>&1 ||
	{
		log "FAIL: settle --until-empty (new binary) failed:"
		tail -5 "$work/settle.out" >&2
		fail=1
	}
if ! "$build/faultclient" check -dir "$work" -dsn "$dsn" -simulator "$SURGEPAY_SIMULATOR_URL" -clean "$phases"; then
	fail=1
fi
kill "$client_pid" 2>/dev/null || true
if ! wait "$client_pid"; then
	log "FAIL: the client's webhook receiver refused a delivery (client.log):"
	tail -3 "$work/client.log" >&2
	fail=1
fi
client_pid=
paid=$(jq '.sales | length' "$work/ledger.json")
if ((paid < 10)); then
	log "FAIL: only $paid sales answered 200: the load did not run"
	fail=1
fi
log "old $old_ref ($old_label, schema $schema_old) -> new $new_label (schema $schema_new): $paid sales answered 200"
if ((fail == 0)); then
	touch "$work/passed"
	log "ok"
fi
exit "$fail"
