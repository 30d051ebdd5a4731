#!/usr/bin/env bash
# deploy/local/cluster.sh: a highly available surgepay cluster on this
# machine, everything on 127.0.0.1, from a fresh clone, with Debian's
# packages. For development, failover drills and demos; it is NOT a
# production deployment tool (docs/deploy.md says what to use instead).
#
#   deploy/local/cluster.sh up            start everything (refuses if already up)
#   deploy/local/cluster.sh status        each part: pid, port, role, health
#   deploy/local/cluster.sh down          stop everything it started (idempotent)
#   deploy/local/cluster.sh kill-primary  crash the PostgreSQL primary (immediate stop)
#   deploy/local/cluster.sh promote       promote the standby (once the primary is gone)
#   deploy/local/cluster.sh start-node N  start serve node N (1-3) again after a kill
#   deploy/local/cluster.sh restart-node N [BINARY]
#                                         restart node N as a rolling restart does (SIGTERM,
#                                         drained, started, ready); with BINARY, that node
#                                         runs BINARY from then on (a rolling upgrade;
#                                         deploy/local/upgrade.sh)
#   deploy/local/cluster.sh sql SQL       one statement on the primary's surgepay database
#                                         (as its superuser; prints rows unaligned)
#   deploy/local/cluster.sh detach-standby  stop the standby's streaming (it falls behind;
#                                         a synchronous primary's commits then wait)
#   deploy/local/cluster.sh purge         down, then remove the state folder
#
# What `up` starts, in this order:
#   1. PostgreSQL 15: a primary and a standby made by pg_basebackup -R
#      (application_name standby1, a replication slot), synchronous
#      (synchronous_standby_names = 'FIRST 1 (standby1)') unless CLUSTER_SYNC=0;
#      `up` waits until pg_stat_replication shows it streaming and sync.
#   2. Redis: the shared cache and rate limits ([cache.redis] global_addrs).
#   3. NATS: three servers with JetStream in one cluster; the stage stream
#      of streamlined sales has 3 replicas (stage.replicas).
#   4. surgepay: built once from this repo, then three `surgepay serve`
#      nodes with the PostgreSQL multi-host DSN
#      (target_session_attrs=read-write), Redis and the three NATS URLs,
#      all reading one configuration file, $CLUSTER_DIR/surgepay.toml
#      (a change to it reaches every node within a second); the card
#      simulator (CLUSTER_SIMULATOR). One standard and one
#      streamlined merchant, each with an API key and a saved card, in
#      $CLUSTER_DIR/keys.env.
#   5. HAProxy in front (deploy/local/haproxy.cfg), a stats page beside it.
#
# Environment:
#   CLUSTER_DIR        the state folder (default /tmp/surgepay-cluster): data,
#                      configs, logs, pid files, secrets. Everything the
#                      script starts lives there; `down` stops exactly that.
#   CLUSTER_PORT_BASE  first port of the block of 100 it uses (default 15400):
#                      +0 HAProxy, +1 HAProxy stats, +10/+11 PostgreSQL
#                      primary/standby, +20 Redis, +30..32 NATS clients,
#                      +40..42 NATS routes, +50..52 NATS monitoring,
#                      +60..62 node APIs, +70..72 node admin listeners,
#                      +80 the shared simulator (CLUSTER_SIMULATOR=shared).
#   CLUSTER_SYNC       1 (default): the standby is synchronous; 0: asynchronous.
#   CLUSTER_SIMULATOR  shared (default): one `surgepay simulator` process
#                      that every node calls (provider.kind = "sim-http"),
#                      as nodes share one processor, so a payment made on
#                      one node can be captured or refunded through
#                      another, and `surgepay settle` can capture staged
#                      sales; in-process: each node runs the built-in
#                      simulator, its own card network (a capture or
#                      refund then works only on the node that authorized).
#   CLUSTER_WAIT       seconds each wait may take before `up` fails (default 60).
#   SURGEPAY_BIN       a surgepay binary to use instead of building one
#                      (as bench/event.sh); it is copied into the state folder.
#                      A node given its own by restart-node runs that one
#                      ($CLUSTER_DIR/nodeN/surgepay); the CLI, the simulator
#                      and the other nodes keep this one.
#   CLUSTER_PG_BIN     PostgreSQL's binaries (default /usr/lib/postgresql/15/bin,
#                      else the newest /usr/lib/postgresql/*/bin).
#
# Run as root, PostgreSQL runs as the user postgres (initdb refuses root);
# everything else runs as the caller. Needs: go, curl, jq, postgresql,
# redis-server, nats-server, haproxy (apt-get install -y postgresql
# redis-server nats-server haproxy jq curl).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
DIR=${CLUSTER_DIR:-/tmp/surgepay-cluster}
BASE=${CLUSTER_PORT_BASE:-15400}
SYNC=${CLUSTER_SYNC:-1}
SIMULATOR=${CLUSTER_SIMULATOR:-shared}
WAIT=${CLUSTER_WAIT:-60}
MARKER=$DIR/.surgepay-cluster
NODES=(1 2 3)
# Set by provision and cards_and_sales, written to keys.env.
mer_standard="" key_standard="" pm_standard="" mer_streamlined="" key_streamlined="" pm_streamlined=""

# ---------------------------------------------------------------- helpers

log() { printf '%s %s\n' "$(date +%T)" "$*" >&2; }
die() {
	printf 'cluster.sh: %s\n' "$*" >&2
	exit 1
}
# fail PART LOGFILE MESSAGE: the part's error with the end of its log.
fail() {
	local part=$1 logfile=$2
	shift 2
	printf 'cluster.sh: %s: %s (log: %s)\n' "$part" "$*" "$logfile" >&2
	if [[ -f $logfile ]]; then
		printf -- '--- last lines of %s\n' "$logfile" >&2
		tail -n 15 "$logfile" >&2 || true
		printf -- '---\n' >&2
	fi
	exit 1
}

[[ $DIR =~ ^/[A-Za-z0-9._/-]+$ ]] || die "CLUSTER_DIR must be an absolute path of letters, digits and ._/- (got '$DIR')"
# Every command but up works on the cluster as up made it.
if [[ ${1:-} != up && -f $MARKER ]]; then
	BASE=$(sed -n 's/^BASE=\([0-9]*\)$/\1/p' "$MARKER")
	SYNC=$(sed -n 's/^SYNC=\([01]\)$/\1/p' "$MARKER")
	SIMULATOR=$(sed -n 's/^SIMULATOR=\([a-z-]*\)$/\1/p' "$MARKER")
	[[ -n $BASE && -n $SYNC && -n $SIMULATOR ]] || die "$MARKER is damaged; stop the processes by hand (pid files under $DIR)"
fi
if ! [[ $BASE =~ ^[0-9]+$ ]] || ((BASE < 1024 || BASE > 65435)); then
	die "CLUSTER_PORT_BASE must be a number from 1024 to 65435 (got '$BASE')"
fi
[[ $SYNC == 0 || $SYNC == 1 ]] || die "CLUSTER_SYNC must be 0 or 1 (got '$SYNC')"
[[ $SIMULATOR == in-process || $SIMULATOR == shared ]] || die "CLUSTER_SIMULATOR must be in-process or shared (got '$SIMULATOR')"
if ! [[ $WAIT =~ ^[0-9]+$ ]] || ((WAIT == 0)); then
	die "CLUSTER_WAIT must be a positive number of seconds (got '$WAIT')"
fi

P_HAPROXY=$BASE
P_STATS=$((BASE + 1))
P_PG=([1]=$((BASE + 10)) [2]=$((BASE + 11)))
P_REDIS=$((BASE + 20))
P_SIM=$((BASE + 80))
p_nats() { echo $((BASE + 29 + $1)); }
p_route() { echo $((BASE + 39 + $1)); }
p_natsmon() { echo $((BASE + 49 + $1)); }
p_api() { echo $((BASE + 59 + $1)); }
p_admin() { echo $((BASE + 69 + $1)); }

all_ports() {
	local i
	echo "$P_HAPROXY" "$P_STATS" "${P_PG[1]}" "${P_PG[2]}" "$P_REDIS"
	for i in "${NODES[@]}"; do echo "$(p_nats "$i")" "$(p_route "$i")" "$(p_natsmon "$i")" "$(p_api "$i")" "$(p_admin "$i")"; done
	[[ $SIMULATOR != shared ]] || echo "$P_SIM"
}

pg_bin() {
	if [[ -n ${CLUSTER_PG_BIN:-} ]]; then
		echo "$CLUSTER_PG_BIN"
	elif [[ -x /usr/lib/postgresql/15/bin/initdb ]]; then
		echo /usr/lib/postgresql/15/bin
	else
		local v
		# shellcheck disable=SC2012 # version folders: plain names
		v=$(ls /usr/lib/postgresql 2>/dev/null | sort -n | tail -1)
		echo "/usr/lib/postgresql/${v:-15}/bin"
	fi
}
PGBIN=$(pg_bin)
PGDIR=$DIR/pg
PGSOCK=$PGDIR/sock

# PostgreSQL refuses to run as root: as root, its commands run as postgres.
if [[ $(id -u) == 0 ]]; then
	# From /: the caller's folder (root's home) may be closed to postgres.
	as_pg() { (cd / && runuser -u postgres -- "$@"); }
else
	as_pg() { "$@"; }
fi

# psql_at PORT SQL: one statement as the superuser over the state folder's
# socket (trust, reachable by the socket folder's owner only); unaligned.
psql_at() { as_pg "$PGBIN/psql" -h "$PGSOCK" -p "$1" -U postgres -d postgres -XAtq -v ON_ERROR_STOP=1 -c "$2"; }

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

secret() { od -An -tx1 -N16 /dev/urandom | tr -d ' \n'; }

# ours PID: the process exists and is one this script started (its command
# line names the state folder, or it runs in it: redis-server rewrites its
# command line), so a recycled pid is never signalled.
ours() {
	local pid=$1
	[[ $pid =~ ^[0-9]+$ ]] && alive "$pid" || return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "$DIR/" && return 0
	[[ $(readlink "/proc/$pid/cwd" 2>/dev/null) == "$DIR"/* ]]
}

# alive PID: the process exists and has not exited (an exited one stays a
# zombie until its parent, init once up has returned, reaps it).
alive() { [[ -d /proc/$1 ]] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null; }

# pid_of PIDFILE: the pid in the file if that process is ours and alive.
pid_of() {
	local f=$1 pid
	[[ -f $f ]] || return 1
	pid=$(head -1 "$f" 2>/dev/null) || return 1
	ours "$pid" || return 1
	echo "$pid"
}

# start_bg PIDFILE LOG COMMAND...: run COMMAND in its own session (a ^C in
# the caller's terminal does not reach it), output to LOG, its pid (the
# very process: exec) in PIDFILE.
start_bg() {
	local pidfile=$1 logfile=$2
	shift 2
	rm -f "$pidfile"
	# shellcheck disable=SC2016 # expanded by the inner bash
	setsid bash -c 'echo $$ >"$0"; exec "$@"' "$pidfile" "$@" >>"$logfile" 2>&1 </dev/null &
	local i
	for ((i = 0; i < 50; i++)); do
		[[ -s $pidfile ]] && return 0
		sleep 0.1
	done
	return 1
}

# wait_until PART LOGFILE PIDFILE DESCRIPTION COMMAND...: poll COMMAND every
# 0.2 s until it succeeds; fail naming the part and its log after WAIT
# seconds, or at once if the part's process is gone (PIDFILE, or - for none).
wait_until() {
	local part=$1 logfile=$2 pidfile=$3 what=$4
	shift 4
	local deadline=$((SECONDS + WAIT))
	while ! "$@" >/dev/null 2>&1; do
		if [[ $pidfile != - ]] && ! pid_of "$pidfile" >/dev/null; then
			fail "$part" "$logfile" "exited while waiting for $what"
		fi
		((SECONDS < deadline)) || fail "$part" "$logfile" "$what: not within ${WAIT}s (CLUSTER_WAIT)"
		sleep 0.2
	done
}

# stop_pid NAME PIDFILE GRACE: SIGTERM, then SIGKILL after GRACE seconds.
stop_pid() {
	local name=$1 pidfile=$2 grace=$3 pid
	if pid=$(pid_of "$pidfile"); then
		kill -TERM "$pid" 2>/dev/null || true
		wait_exit "$name" "$pid" "$grace"
	fi
	rm -f "$pidfile"
}

# wait_exit NAME PID GRACE: wait for a signalled process to exit; SIGKILL
# after GRACE seconds.
wait_exit() {
	local name=$1 pid=$2 grace=$3 i
	for ((i = 0; i < grace * 10; i++)); do
		alive "$pid" || break
		sleep 0.1
	done
	if alive "$pid"; then
		log "$name (pid $pid) still running after ${grace}s: SIGKILL"
		kill -KILL "$pid" 2>/dev/null || true
		for ((i = 0; i < 50; i++)); do
			alive "$pid" || break
			sleep 0.1
		done
	fi
	log "stopped $name (pid $pid)"
}

# pg_pid N: the postmaster of instance N, if it runs.
pg_pid() { pid_of "$PGDIR/data$1/postmaster.pid"; }
pg_role() { psql_at "${P_PG[$1]}" "SELECT CASE WHEN pg_is_in_recovery() THEN 'standby' ELSE 'primary' END" 2>/dev/null; }

http_code() { curl -s -o /dev/null -m 2 -w '%{http_code}' "$1" 2>/dev/null || true; }

# ------------------------------------------------------------------- up

preflight() {
	local missing=() t
	for t in curl jq redis-server redis-cli nats-server haproxy setsid od; do
		command -v "$t" >/dev/null 2>&1 || missing+=("$t")
	done
	[[ -n ${SURGEPAY_BIN:-} ]] || command -v go >/dev/null 2>&1 || missing+=(go)
	[[ $(id -u) != 0 ]] || command -v runuser >/dev/null 2>&1 || missing+=(runuser)
	[[ -x $PGBIN/initdb ]] || missing+=("PostgreSQL in $PGBIN (CLUSTER_PG_BIN)")
	((${#missing[@]} == 0)) || die "missing: ${missing[*]}; on Debian: apt-get install -y postgresql redis-server nats-server haproxy jq curl (and Go 1.26 from go.dev)"
	if [[ $(id -u) == 0 ]]; then
		id postgres >/dev/null 2>&1 || die "running as root, PostgreSQL must run as the user postgres, which does not exist (apt-get install -y postgresql makes it)"
	fi
	local busy=() p
	for p in $(all_ports); do port_open "$p" && busy+=("$p"); done
	((${#busy[@]} == 0)) || die "ports in use: ${busy[*]} (the block $BASE-$((BASE + 99))); stop what listens there or set CLUSTER_PORT_BASE"
}

# refuse_if_up: `up` never starts a second cluster in the same folder, nor
# takes a folder it did not make.
refuse_if_up() {
	[[ -e $DIR ]] || return 0
	[[ -f $MARKER ]] || [[ -z $(ls -A "$DIR") ]] || die "$DIR exists and is not a cluster folder of this script; choose another CLUSTER_DIR"
	local running
	running=$(running_parts)
	[[ -z $running ]] || die "already up (running: $running; state in $DIR); \`$0 status\` shows it, \`$0 down\` stops it"
}

prepare_dir() {
	if [[ -e $DIR ]]; then
		log "removing the stopped cluster's state in $DIR"
		rm -rf "$DIR"
	fi
	mkdir -p "$DIR"
	# Traversable by postgres (its folder below is its own, 0700); every
	# secret is a 0600 file or in the 0700 secrets folder.
	chmod 755 "$DIR"
	umask 077
	mkdir -p "$DIR/secrets" "$DIR/redis" "$DIR/haproxy" "$DIR/cli"
	# What up was started with: status, down and the failover commands
	# read it, whatever their own environment says.
	cat >"$MARKER" <<EOF
# surgepay local cluster (deploy/local/cluster.sh up, $(date -u +%FT%TZ), from $repo)
BASE=$BASE
SYNC=$SYNC
SIMULATOR=$SIMULATOR
EOF
}

build() {
	if [[ -n ${SURGEPAY_BIN:-} ]]; then
		[[ -x $SURGEPAY_BIN ]] || die "SURGEPAY_BIN=$SURGEPAY_BIN is not an executable"
		log "using SURGEPAY_BIN=$SURGEPAY_BIN (no build)"
		cp "$SURGEPAY_BIN" "$DIR/surgepay"
		return 0
	fi
	log "building surgepay (go build -v: each package named as it compiles; the first build downloads modules and takes minutes)"
	(cd "$repo" && go build -v -o "$DIR/surgepay" ./cmd/surgepay) 2>&1 | tee "$DIR/build.log" >&2 ||
		die "go build failed (log: $DIR/build.log)"
	[[ -x $DIR/surgepay ]] || die "go build left no binary (log: $DIR/build.log)"
}

make_secrets() {
	secret >"$DIR/secrets/pg-surgepay-password"
	secret >"$DIR/secrets/pg-replicator-password"
	secret >"$DIR/secrets/redis-password"
	"$DIR/surgepay" keys settlement --out "$DIR/secrets" >"$DIR/secrets/settlement.out"
}

pg_up() {
	local logfile=$PGDIR/data1.log
	mkdir -p "$PGDIR/sock"
	chmod 700 "$PGDIR" "$PGDIR/sock"
	[[ $(id -u) != 0 ]] || chown -R postgres: "$PGDIR"
	local repl_pw
	repl_pw=$(<"$DIR/secrets/pg-replicator-password")
	# The replication password, for pg_basebackup and the standby's
	# primary_conninfo (passfile): readable by PostgreSQL's user only.
	# shellcheck disable=SC2016 # expanded by the inner bash
	as_pg bash -c 'umask 077; cat >"$0"' "$PGDIR/pgpass" <<<"127.0.0.1:*:replication:replicator:$repl_pw"

	log "PostgreSQL primary: initdb into $PGDIR/data1, port ${P_PG[1]}"
	as_pg "$PGBIN/initdb" -D "$PGDIR/data1" -U postgres -E UTF8 --locale=C --auth-local=trust \
		--auth-host=scram-sha-256 --no-instructions >"$PGDIR/initdb.log" 2>&1 ||
		fail "postgres primary" "$PGDIR/initdb.log" "initdb failed"
	as_pg tee -a "$PGDIR/data1/postgresql.conf" >/dev/null <<EOF

# --- deploy/local/cluster.sh (the standby's copy comes from pg_basebackup)
listen_addresses = '127.0.0.1'
unix_socket_directories = '$PGSOCK'
unix_socket_permissions = 0700
shared_buffers = 64MB
max_connections = 100
wal_level = replica
max_wal_senders = 5
max_replication_slots = 5
wal_keep_size = 128MB
hot_standby = on
synchronous_commit = on
log_line_prefix = '%m [%p] %q%a '
# Per instance: port, cluster_name, synchronous_standby_names.
include 'instance.conf'
EOF
	# synchronous_standby_names lives in instance.conf so that the standby
	# does not inherit it: once promoted, a new primary that waited for a
	# standby named standby1 (itself) would hang every commit. Empty until
	# the standby streams: before, every commit (CREATE ROLE too) would wait
	# for a standby that does not exist yet.
	pg_instance_conf 1 "''"
	as_pg tee "$PGDIR/data1/pg_hba.conf" >/dev/null <<EOF
# deploy/local/cluster.sh: the socket (its folder is 0700) for the superuser;
# TCP on loopback with passwords only.
local   all          all                         trust
host    replication  replicator  127.0.0.1/32    scram-sha-256
host    all          all         127.0.0.1/32    scram-sha-256
EOF
	as_pg "$PGBIN/pg_ctl" start -D "$PGDIR/data1" -l "$logfile" -w -t "$WAIT" >/dev/null ||
		fail "postgres primary" "$logfile" "pg_ctl start failed or did not finish within ${WAIT}s"
	local app_pw
	app_pw=$(<"$DIR/secrets/pg-surgepay-password")
	psql_at "${P_PG[1]}" "CREATE ROLE replicator WITH REPLICATION LOGIN PASSWORD '$repl_pw'" >/dev/null
	psql_at "${P_PG[1]}" "CREATE ROLE surgepay WITH LOGIN PASSWORD '$app_pw'" >/dev/null
	psql_at "${P_PG[1]}" "CREATE DATABASE surgepay OWNER surgepay" >/dev/null

	log "PostgreSQL standby: pg_basebackup -R into $PGDIR/data2, port ${P_PG[2]}"
	logfile=$PGDIR/data2.log
	as_pg env PGPASSFILE="$PGDIR/pgpass" "$PGBIN/pg_basebackup" -h 127.0.0.1 -p "${P_PG[1]}" -U replicator \
		-D "$PGDIR/data2" -X stream -C -S standby1 -R -c fast >"$PGDIR/basebackup.log" 2>&1 ||
		fail "postgres standby" "$PGDIR/basebackup.log" "pg_basebackup failed"
	pg_instance_conf 2 "''"
	# After -R's own line: the later setting wins. application_name is the
	# name synchronous_standby_names waits for.
	as_pg tee -a "$PGDIR/data2/postgresql.auto.conf" >/dev/null <<EOF
primary_conninfo = 'host=127.0.0.1 port=${P_PG[1]} user=replicator passfile=$PGDIR/pgpass application_name=standby1'
primary_slot_name = 'standby1'
EOF
	as_pg "$PGBIN/pg_ctl" start -D "$PGDIR/data2" -l "$logfile" -w -t "$WAIT" >/dev/null ||
		fail "postgres standby" "$logfile" "pg_ctl start failed or did not finish within ${WAIT}s"
	wait_until "postgres standby" "$logfile" "$PGDIR/data2/postmaster.pid" \
		"pg_stat_replication on the primary to show standby1 streaming" repl_is "streaming async"
	local want=async
	if [[ $SYNC == 1 ]]; then
		want=sync
		pg_instance_conf 1 "'FIRST 1 (standby1)'"
		psql_at "${P_PG[1]}" "SELECT pg_reload_conf()" >/dev/null
		wait_until "postgres standby" "$logfile" "$PGDIR/data2/postmaster.pid" \
			"pg_stat_replication on the primary to show standby1 streaming, sync" repl_is "streaming sync"
	fi
	log "PostgreSQL: standby1 streaming, $want"
}
# pg_instance_conf N SYNC_NAMES: instance N's own settings.
pg_instance_conf() {
	as_pg tee "$PGDIR/data$1/instance.conf" >/dev/null <<EOF
port = ${P_PG[$1]}
cluster_name = 'pg$1'
synchronous_standby_names = $2
EOF
}
repl_is() { [[ $(psql_at "${P_PG[1]}" "SELECT state || ' ' || sync_state FROM pg_stat_replication WHERE application_name = 'standby1'") == "$1" ]]; }

redis_up() {
	log "Redis on port $P_REDIS"
	local logfile=$DIR/redis/redis.log
	cat >"$DIR/redis/redis.conf" <<EOF
# deploy/local/cluster.sh: the cluster's shared cache and rate limits.
bind 127.0.0.1
port $P_REDIS
protected-mode yes
daemonize no
dir $DIR/redis
logfile ""
save ""
appendonly no
maxmemory 128mb
maxmemory-policy allkeys-lru
requirepass $(<"$DIR/secrets/redis-password")
EOF
	start_bg "$DIR/redis/pid" "$logfile" redis-server "$DIR/redis/redis.conf" || fail redis "$logfile" "did not start"
	wait_until redis "$logfile" "$DIR/redis/pid" "PING to answer PONG" redis_ping
}
redis_ping() { [[ $(REDISCLI_AUTH=$(<"$DIR/secrets/redis-password") redis-cli -h 127.0.0.1 -p "$P_REDIS" ping 2>/dev/null) == PONG ]]; }

nats_up() {
	local i j routes
	for i in "${NODES[@]}"; do
		mkdir -p "$DIR/nats$i/js"
		routes=""
		for j in "${NODES[@]}"; do
			[[ $j == "$i" ]] || routes+="    nats-route://127.0.0.1:$(p_route "$j")"$'\n'
		done
		cat >"$DIR/nats$i/nats.conf" <<EOF
# deploy/local/cluster.sh: NATS server $i of 3, JetStream on.
server_name: nats$i
listen: 127.0.0.1:$(p_nats "$i")
http: 127.0.0.1:$(p_natsmon "$i")
jetstream {
  store_dir: "$DIR/nats$i/js"
}
cluster {
  name: surgepay
  listen: 127.0.0.1:$(p_route "$i")
  routes: [
$routes  ]
}
EOF
		log "NATS server nats$i: client $(p_nats "$i"), route $(p_route "$i"), monitoring $(p_natsmon "$i")"
		start_bg "$DIR/nats$i/pid" "$DIR/nats$i/nats.log" nats-server -c "$DIR/nats$i/nats.conf" ||
			fail "nats$i" "$DIR/nats$i/nats.log" "did not start"
	done
	for i in "${NODES[@]}"; do
		wait_until "nats$i" "$DIR/nats$i/nats.log" "$DIR/nats$i/pid" \
			"2 routes and a JetStream meta leader (/routez, /jsz, /healthz on $(p_natsmon "$i"))" nats_formed "$i"
	done
	log "NATS: cluster formed, JetStream meta leader $(curl -s -m 2 "http://127.0.0.1:$(p_natsmon 1)/jsz" | jq -r '.meta_cluster.leader // "?"')"
}
nats_formed() {
	local mon
	mon=http://127.0.0.1:$(p_natsmon "$1")
	[[ $(curl -s -m 2 "$mon/routez" | jq -r '.num_routes') == 2 ]] &&
		[[ -n $(curl -s -m 2 "$mon/jsz" | jq -r '.meta_cluster.leader // empty') ]] &&
		[[ $(http_code "$mon/healthz") == 200 ]]
}

simulator_up() {
	[[ $SIMULATOR == shared ]] || return 0
	log "shared card simulator on port $P_SIM (surgepay simulator)"
	mkdir -p "$DIR/simulator"
	start_bg "$DIR/simulator/pid" "$DIR/simulator/simulator.log" \
		"$DIR/surgepay" simulator --listen "127.0.0.1:$P_SIM" --records-max 1000000 ||
		fail simulator "$DIR/simulator/simulator.log" "did not start"
	wait_until simulator "$DIR/simulator/simulator.log" "$DIR/simulator/pid" "its port $P_SIM to listen" port_open "$P_SIM"
}

# common_toml DATA_DIR: the settings every node and the CLI share.
common_toml() {
	local nats="" i
	for i in "${NODES[@]}"; do nats+="${nats:+,}nats://127.0.0.1:$(p_nats "$i")"; done
	local provider='kind = "sim"'
	[[ $SIMULATOR != shared ]] || provider=$'kind = "sim-http"\nurl = "http://127.0.0.1:'$P_SIM'"'
	cat <<EOF
data_dir = "$1"
storage = "postgres"
# One keyring and one admin token for every node: API keys are hashed
# under the keyring's API-key secret, and cards sealed under its keys, so
# every node sharing the database needs the same keyring.
keyring_file = "$DIR/secrets/keyring.json"
admin_token_file = "$DIR/secrets/admin-token"

[postgres]
# Both hosts: pgx tries them in order and keeps the one that takes writes,
# so a promoted standby is found without reconfiguring the nodes.
dsn = "postgres://surgepay:$(<"$DIR/secrets/pg-surgepay-password")@127.0.0.1:${P_PG[1]},127.0.0.1:${P_PG[2]}/surgepay?target_session_attrs=read-write&sslmode=disable&connect_timeout=2"
pool_conns_max = 16

[provider]
$provider

[stage]
public_key_file = "$DIR/secrets/settlement.pub"
kind = "jetstream"
nats_url = "$nats"
replicas = 3
fallback = "capture"

[cache.redis]
global_addrs = ["127.0.0.1:$P_REDIS"]
password = "$(<"$DIR/secrets/redis-password")"

# Shared through Redis; not the idempotency records, which each node
# keeps (a retry on another node reads its answer from PostgreSQL, the
# SELECT every new key costs anyway): through Redis they cost a round
# trip and a write a sale (docs/cache.md).
[cache.entities.api_keys]
scope = "global"
[cache.entities.customers]
scope = "global"
[cache.entities.payment_methods]
scope = "global"
EOF
}

# surgepay_cli ARGS...: the surgepay CLI on the shared database.
surgepay_cli() { "$DIR/surgepay" "$@" --config "$DIR/cli/surgepay.toml"; }

provision() {
	common_toml "$DIR/cli" >"$DIR/cli/surgepay.toml"
	log "migrations (surgepay migrate)"
	surgepay_cli migrate >"$DIR/cli/cli.log" 2>&1 || fail "surgepay migrate" "$DIR/cli/cli.log" "failed"
	local kind name out
	for kind in standard streamlined; do
		name="Local $kind merchant"
		out=$(surgepay_cli merchants create "$name" 2>>"$DIR/cli/cli.log") ||
			fail "surgepay merchants create" "$DIR/cli/cli.log" "failed"
		echo "$out" >>"$DIR/cli/cli.log"
		local mer
		mer=$(grep -o 'mer_[A-Za-z0-9]*' <<<"$out" | head -1)
		[[ -n $mer ]] || fail "surgepay merchants create" "$DIR/cli/cli.log" "no merchant ID in its output"
		out=$(surgepay_cli keys create --merchant "$mer" 2>>"$DIR/cli/cli.log") ||
			fail "surgepay keys create" "$DIR/cli/cli.log" "failed"
		local key
		key=$(grep -o 'sk_[A-Za-z0-9_-]*' <<<"$out" | tail -1)
		[[ -n $key ]] || fail "surgepay keys create" "$DIR/cli/cli.log" "no key in its output"
		echo "API key for $mer made (secret in keys.env)" >>"$DIR/cli/cli.log"
		printf -v "mer_$kind" %s "$mer"
		printf -v "key_$kind" %s "$key"
		log "merchant $mer ($kind) and its API key"
	done
}

# nodes_up: one configuration file, $DIR/surgepay.toml, for the three
# nodes, as one Kubernetes ConfigMap is for a Deployment's pods: what
# differs by node (its addresses, its data folder) is in its environment
# (SURGEPAY_LISTEN, SURGEPAY_ADMIN_LISTEN, SURGEPAY_DATA_DIR). Each node
# watches the file, so a change to a merchant's settings written there
# reaches the three within a second (docs/deploy.md).
nodes_up() {
	local i
	for i in "${NODES[@]}"; do mkdir -p "$DIR/node$i/data"; done
	{
		echo "# deploy/local/cluster.sh: the nodes' configuration, shared by all three;"
		echo "# each node's addresses and data folder are in its environment."
		echo "# On SIGTERM, /readyz answers 503 this long before a node stops taking"
		echo "# requests: HAProxy's inter (1s) x fall (2) plus a second, so that it has"
		echo "# stopped sending there (docs/configuration.md)."
		echo "shutdown_delay = \"3s\""
		echo "# HAProxy (option forwardfor) names each client in X-Forwarded-For. Here it"
		echo "# shares 127.0.0.1 with every local client, which may then name any address"
		echo "# it likes; in production list only the proxies' own addresses."
		echo "trusted_proxies = [\"127.0.0.1\"]"
		common_toml "$DIR/node1/data"
		cat <<EOF

[webhooks]
# The merchants' webhook receivers are on this host (deploy/local/smoke.sh).
allow_private_networks = true

# The standard merchant takes [merchants.default]; this one the
# streamlined path (docs/streamlined.md): captures sealed and staged in
# JetStream (3 replicas), settled by \`surgepay settle\`.
[merchants."$mer_streamlined"]
processing = "streamlined"
audit = "minimal"
EOF
	} >"$DIR/surgepay.toml"
	# Node 1 first: it creates the admin token the others read.
	node_start 1
	node_wait 1
	node_start 2
	node_start 3
	node_wait 2
	node_wait 3
}
node_start() {
	log "surgepay node $1: API $(p_api "$1"), admin $(p_admin "$1")"
	SURGEPAY_LISTEN="127.0.0.1:$(p_api "$1")" SURGEPAY_ADMIN_LISTEN="127.0.0.1:$(p_admin "$1")" \
		SURGEPAY_DATA_DIR="$DIR/node$1/data" \
		start_bg "$DIR/node$1/pid" "$DIR/node$1/serve.log" "$(node_bin "$1")" serve --config "$DIR/surgepay.toml" ||
		fail "node$1" "$DIR/node$1/serve.log" "did not start"
}
# node_bin N: node N's own binary if restart-node gave it one, else the
# cluster's.
node_bin() {
	if [[ -x $DIR/node$1/surgepay ]]; then echo "$DIR/node$1/surgepay"; else echo "$DIR/surgepay"; fi
}
# bin_commit BINARY: the commit `surgepay version` names ("unknown" for a
# build without version flags or VCS information).
bin_commit() { "$1" version 2>/dev/null | awk '$1 == "commit" {print $2}'; }
node_wait() {
	wait_until "node$1" "$DIR/node$1/serve.log" "$DIR/node$1/pid" "/readyz on $(p_admin "$1") to answer 200" \
		node_ready "$1"
}
node_ready() { [[ $(http_code "http://127.0.0.1:$(p_admin "$1")/readyz") == 200 ]]; }

haproxy_up() {
	log "HAProxy on port $P_HAPROXY, stats on $P_STATS"
	local servers="" i
	for i in "${NODES[@]}"; do
		servers+="    server node$i 127.0.0.1:$(p_api "$i") check port $(p_admin "$i")"$'\n'
	done
	local tmpl
	tmpl=$(<"$here/haproxy.cfg")
	tmpl=${tmpl//@DIR@/$DIR}
	tmpl=${tmpl//@HAPROXY_PORT@/$P_HAPROXY}
	tmpl=${tmpl//@STATS_PORT@/$P_STATS}
	tmpl=${tmpl//@SERVERS@/${servers%$'\n'}}
	printf '%s\n' "$tmpl" >"$DIR/haproxy/haproxy.cfg"
	haproxy -c -f "$DIR/haproxy/haproxy.cfg" >"$DIR/haproxy/haproxy.log" 2>&1 ||
		fail haproxy "$DIR/haproxy/haproxy.log" "haproxy -c refused $DIR/haproxy/haproxy.cfg"
	start_bg "$DIR/haproxy/pid" "$DIR/haproxy/haproxy.log" haproxy -db -f "$DIR/haproxy/haproxy.cfg" ||
		fail haproxy "$DIR/haproxy/haproxy.log" "did not start"
	wait_until haproxy "$DIR/haproxy/haproxy.log" "$DIR/haproxy/pid" "its stats to show node1, node2 and node3 UP" \
		haproxy_all_up
}
# haproxy_servers: "name status" for each node, from the stats CSV.
haproxy_servers() {
	curl -s -m 2 "http://127.0.0.1:$P_STATS/;csv" | awk -F, '$1 == "surgepay" && $2 ~ /^node/ {print $2, $18}'
}
haproxy_all_up() { [[ $(haproxy_servers | grep -c ' UP$') == "${#NODES[@]}" ]]; }

# api METHOD PATH KEY [BODY]: a request through HAProxy; the body on
# stdout, fails on a non-2xx (its body on stderr).
api() {
	local method=$1 path=$2 key=$3 body=${4:-} out
	local args=(-sS -m 35 --fail-with-body -X "$method" -H "Authorization: Bearer $key")
	[[ -z $body ]] || args+=(-H 'Content-Type: application/json' -H "Idempotency-Key: cluster-up-$(date +%s%N)" -d "$body")
	out=$(curl "${args[@]}" "http://127.0.0.1:$P_HAPROXY$path") || {
		printf '%s\n' "$out" >&2
		return 1
	}
	printf '%s\n' "$out"
}

cards_and_sales() {
	local kind key cus pm pay status
	for kind in standard streamlined; do
		key=key_$kind
		key=${!key}
		cus=$(api POST /v1/customers "$key" '{"name":"Local cluster customer","email":"ada@example.com"}' | jq -r .id) ||
			fail "sale through HAProxy" "$DIR/haproxy/haproxy.log" "creating a customer for the $kind merchant failed"
		pm=$(api POST /v1/payment_methods "$key" \
			'{"customer":"'"$cus"'","card":{"number":"4242424242424242","exp_month":12,"exp_year":2030,"cvc":"123"}}' | jq -r .id) ||
			fail "sale through HAProxy" "$DIR/haproxy/haproxy.log" "saving a card for the $kind merchant failed"
		pay=$(api POST /v1/payments "$key" '{"amount":1000,"currency":"usd","payment_method":"'"$pm"'"}') ||
			fail "sale through HAProxy" "$DIR/haproxy/haproxy.log" "a sale of the $kind merchant failed"
		status=$(jq -r .status <<<"$pay")
		[[ $status == succeeded ]] || fail "sale through HAProxy" "$DIR/haproxy/haproxy.log" "a sale of the $kind merchant answered status $status"
		log "$kind merchant: customer $cus, card $pm, a sale $(jq -r .id <<<"$pay") $status"
		printf -v "pm_$kind" %s "$pm"
	done
}

write_keys_env() {
	cat >"$DIR/keys.env" <<EOF
# deploy/local/cluster.sh: the local cluster's endpoints and credentials.
# Source it: . $DIR/keys.env
SURGEPAY_URL=http://127.0.0.1:$P_HAPROXY
SURGEPAY_STATS_URL=http://127.0.0.1:$P_STATS/
# the standard path (everything synchronous)
STANDARD_MERCHANT=$mer_standard
STANDARD_KEY=$key_standard
STANDARD_PM=$pm_standard
# the streamlined path (capture staged in JetStream, settled by surgepay settle)
STREAMLINED_MERCHANT=$mer_streamlined
STREAMLINED_KEY=$key_streamlined
STREAMLINED_PM=$pm_streamlined
# the shared card simulator (CLUSTER_SIMULATOR=shared): its books at \$SURGEPAY_SIMULATOR_URL/v1/effects
SURGEPAY_SIMULATOR_URL=$([[ $SIMULATOR == shared ]] && echo "http://127.0.0.1:$P_SIM")
# the nodes' admin listeners ($(for i in "${NODES[@]}"; do printf '%s ' "http://127.0.0.1:$(p_admin "$i")"; done)) take this token
SURGEPAY_ADMIN_TOKEN_FILE=$DIR/secrets/admin-token
EOF
	chmod 600 "$DIR/keys.env"
}

cmd_up() {
	refuse_if_up
	preflight
	prepare_dir
	# Whatever stops up half-way (a failed wait says more): what runs stays.
	trap 'rc=$?; ((rc == 0)) || printf "cluster.sh: up did not finish; what started still runs: \"%s status\" shows it, \"%s down\" stops it\n" "$0" "$0" >&2' EXIT
	build
	make_secrets
	pg_up
	redis_up
	nats_up
	simulator_up
	provision
	nodes_up
	haproxy_up
	cards_and_sales
	write_keys_env
	cat <<EOF

surgepay cluster up (state, logs and pid files in $DIR):
  API through HAProxy   http://127.0.0.1:$P_HAPROXY
  HAProxy stats         http://127.0.0.1:$P_STATS/
  API keys, cards       $DIR/keys.env  (mode 0600; source it)
  admin token           $DIR/secrets/admin-token

A sale through HAProxy:
  . $DIR/keys.env; curl -sS "\$SURGEPAY_URL/v1/payments" -H "Authorization: Bearer \$STANDARD_KEY" -H 'Content-Type: application/json' -H "Idempotency-Key: order-\$(date +%s%N)" -d '{"amount":2000,"currency":"usd","payment_method":"'\$STANDARD_PM'"}'

$0 status | kill-primary | promote | down
EOF
}

# ----------------------------------------------------------------- status

running_parts() {
	local parts=() i
	for i in 1 2; do pg_pid "$i" >/dev/null && parts+=("postgres$i"); done
	pid_of "$DIR/redis/pid" >/dev/null && parts+=(redis)
	for i in "${NODES[@]}"; do pid_of "$DIR/nats$i/pid" >/dev/null && parts+=("nats$i"); done
	pid_of "$DIR/simulator/pid" >/dev/null && parts+=(simulator)
	for i in "${NODES[@]}"; do pid_of "$DIR/node$i/pid" >/dev/null && parts+=("node$i"); done
	pid_of "$DIR/haproxy/pid" >/dev/null && parts+=(haproxy)
	echo "${parts[*]}"
}

row() { printf '%-11s %-8s %-6s %s\n' "$@"; }

cmd_status() {
	[[ -f $MARKER ]] || die "no cluster in $DIR (CLUSTER_DIR)"
	local i pid role detail
	row PART PID PORT "ROLE / STATE"
	for i in 1 2; do
		if pid=$(pg_pid "$i"); then
			role=$(pg_role "$i") || role="not answering"
			detail=""
			if [[ $role == primary ]]; then
				detail=$(psql_at "${P_PG[$i]}" "SELECT coalesce(string_agg(application_name || ' ' || state || ' ' || sync_state || ', replay lag ' || pg_wal_lsn_diff(sent_lsn, replay_lsn) || ' bytes', '; '), 'no standby connected') FROM pg_stat_replication" 2>/dev/null || true)
				role="primary: $detail; synchronous_standby_names '$(psql_at "${P_PG[$i]}" "SHOW synchronous_standby_names" 2>/dev/null || true)'"
			elif [[ $role == standby ]]; then
				detail=$(psql_at "${P_PG[$i]}" "SELECT coalesce((SELECT status || ' from port ' || sender_port FROM pg_stat_wal_receiver), 'no WAL receiver')" 2>/dev/null || true)
				role="standby: $detail"
			fi
			row "postgres$i" "$pid" "${P_PG[$i]}" "$role"
		else
			row "postgres$i" - "${P_PG[$i]}" "not running"
		fi
	done
	if pid=$(pid_of "$DIR/redis/pid"); then
		role=$(REDISCLI_AUTH=$(<"$DIR/secrets/redis-password") redis-cli -h 127.0.0.1 -p "$P_REDIS" info replication 2>/dev/null | tr -d '\r' | awk -F: '$1 == "role" {print $2}')
		redis_ping && detail=PONG || detail="no PONG"
		row redis "$pid" "$P_REDIS" "${role:-?}, $detail"
	else
		row redis - "$P_REDIS" "not running"
	fi
	# Server IDs to names, for the routes (2.9's /routez names IDs only).
	local ids='{}' stream=""
	for i in "${NODES[@]}"; do
		local varz
		varz=$(curl -s -m 2 "http://127.0.0.1:$(p_natsmon "$i")/varz" 2>/dev/null) || continue
		ids=$(jq -c --argjson m "$ids" '$m + {(.server_id): .server_name}' <<<"$varz" 2>/dev/null) || ids='{}'
	done
	for i in "${NODES[@]}"; do
		if pid=$(pid_of "$DIR/nats$i/pid"); then
			local mon routes leader
			mon=http://127.0.0.1:$(p_natsmon "$i")
			routes=$(curl -s -m 2 "$mon/routez" | jq -r --argjson m "$ids" \
				'"\(.num_routes) routes (" + ([.routes[]? | $m[.remote_id] // .remote_id] | join(", ")) + ")"' 2>/dev/null || echo "routes ?")
			leader=$(curl -s -m 2 "$mon/jsz" | jq -r '.meta_cluster.leader // "none"' 2>/dev/null || echo "?")
			row "nats$i" "$pid" "$(p_nats "$i")" "$routes; JetStream meta leader $leader; /healthz $(http_code "$mon/healthz")"
			# The stream as its leader sees it (a server lists its peers, not itself).
			if [[ -z $stream ]]; then
				local sleader
				sleader=$(curl -s -m 2 "$mon/jsz?streams=true" | jq -r '.account_details[]?.stream_detail[]? | .cluster.leader // empty' 2>/dev/null | head -1)
				if [[ $sleader =~ ^nats([0-9])$ ]]; then
					stream=$(curl -s -m 2 "http://127.0.0.1:$(p_natsmon "${BASH_REMATCH[1]}")/jsz?streams=true&config=true" | jq -r '.account_details[]?.stream_detail[]? |
						"stream \(.name): \(.config.num_replicas) replicas, leader \(.cluster.leader // "none"); followers current: \([.cluster.replicas[]? | select(.current) | .name] | join(" ") | if . == "" then "none" else . end), not current: \([.cluster.replicas[]? | select(.current | not) | .name] | join(" ") | if . == "" then "none" else . end); \(.state.messages) captures staged"' 2>/dev/null || true)
				fi
			fi
		else
			row "nats$i" - "$(p_nats "$i")" "not running"
		fi
	done
	row stage - - "${stream:-stream: none (made by the first node that starts)}"
	if [[ $SIMULATOR == shared ]] || [[ -f $DIR/simulator/pid ]]; then
		if pid=$(pid_of "$DIR/simulator/pid"); then row simulator "$pid" "$P_SIM" "shared card simulator (sim-http)"; else row simulator - "$P_SIM" "not running"; fi
	fi
	local stats=""
	stats=$(haproxy_servers 2>/dev/null || true)
	for i in "${NODES[@]}"; do
		local lb
		lb=$(awk -v n="node$i" '$1 == n {print $2}' <<<"$stats")
		local own=""
		[[ ! -x $DIR/node$i/surgepay ]] || own=", own binary (commit $(bin_commit "$DIR/node$i/surgepay"))"
		if pid=$(pid_of "$DIR/node$i/pid"); then
			row "node$i" "$pid" "$(p_api "$i")" "admin $(p_admin "$i"), /readyz $(http_code "http://127.0.0.1:$(p_admin "$i")/readyz"), HAProxy ${lb:-?}$own"
		else
			row "node$i" - "$(p_api "$i")" "not running; HAProxy ${lb:-?}"
		fi
	done
	if pid=$(pid_of "$DIR/haproxy/pid"); then
		row haproxy "$pid" "$P_HAPROXY" "stats http://127.0.0.1:$P_STATS/; $(grep -c ' UP$' <<<"$stats" || true) of ${#NODES[@]} nodes UP"
	else
		row haproxy - "$P_HAPROXY" "not running"
	fi
}

# ------------------------------------------------------------------- down

pg_stop() {
	local n=$1 pid
	pid=$(pg_pid "$n") || return 0
	if ! as_pg "$PGBIN/pg_ctl" stop -D "$PGDIR/data$n" -m fast -w -t 30 >/dev/null 2>&1; then
		as_pg "$PGBIN/pg_ctl" stop -D "$PGDIR/data$n" -m immediate -w -t 10 >/dev/null 2>&1 || true
	fi
	if alive "$pid" && ours "$pid"; then kill -KILL "$pid" 2>/dev/null || true; fi
	log "stopped postgres$n (pid $pid)"
}

cmd_down() {
	if [[ ! -e $DIR ]]; then
		log "nothing to stop: no $DIR"
		return 0
	fi
	[[ -f $MARKER ]] || die "$DIR is not a cluster folder of this script; nothing stopped"
	local i
	stop_pid haproxy "$DIR/haproxy/pid" 10
	# All nodes at once: each waits shutdown_delay, then drains for up to 30 s.
	local pids=() pid
	for i in "${NODES[@]}"; do
		pids[i]=""
		if pid=$(pid_of "$DIR/node$i/pid"); then
			kill -TERM "$pid" 2>/dev/null || true
			pids[i]=$pid
		fi
	done
	for i in "${NODES[@]}"; do
		[[ -z ${pids[i]} ]] || wait_exit "node$i" "${pids[i]}" 40
		rm -f "$DIR/node$i/pid"
	done
	stop_pid simulator "$DIR/simulator/pid" 10
	for i in "${NODES[@]}"; do stop_pid "nats$i" "$DIR/nats$i/pid" 15; done
	stop_pid redis "$DIR/redis/pid" 10
	pg_stop 2
	pg_stop 1
	local left
	left=$(running_parts)
	[[ -z $left ]] || die "still running: $left"
	[[ ${1:-} == quiet ]] || log "stopped; state and logs kept in $DIR (the next up removes them; '$0 purge' now)"
}

cmd_purge() {
	cmd_down quiet
	if [[ -f $MARKER ]]; then
		rm -rf "$DIR"
		log "removed $DIR"
	fi
}

# ------------------------------------------------------------- failover

cmd_kill_primary() {
	[[ -f $MARKER ]] || die "no cluster in $DIR (CLUSTER_DIR)"
	local i pid
	for i in 1 2; do
		pid=$(pg_pid "$i") || continue
		[[ $(pg_role "$i") == primary ]] || continue
		log "postgres$i (pid $pid, port ${P_PG[$i]}) is the primary: immediate stop (a crash: no checkpoint, every connection cut)"
		as_pg "$PGBIN/pg_ctl" stop -D "$PGDIR/data$i" -m immediate -w -t 10 >/dev/null 2>&1 || kill -KILL "$pid" 2>/dev/null || true
		log "postgres$i stopped; writes now fail until '$0 promote'"
		return 0
	done
	die "no running primary"
}

cmd_promote() {
	[[ -f $MARKER ]] || die "no cluster in $DIR (CLUSTER_DIR)"
	local i standby="" role
	for i in 1 2; do
		pg_pid "$i" >/dev/null || continue
		role=$(pg_role "$i") || continue
		if [[ $role == primary ]]; then
			die "postgres$i on ${P_PG[$i]} is still a running primary: promoting the standby now would make two primaries (the nodes would go on writing to the first host of their DSN that takes writes). Stop it first: $0 kill-primary"
		fi
		[[ $role == standby ]] && standby=$i
	done
	[[ -n $standby ]] || die "no running standby to promote"
	log "promoting postgres$standby (port ${P_PG[$standby]}): pg_ctl promote"
	as_pg "$PGBIN/pg_ctl" promote -D "$PGDIR/data$standby" -w -t "$WAIT" >/dev/null ||
		fail "postgres$standby" "$PGDIR/data$standby.log" "pg_ctl promote failed"
	wait_until "postgres$standby" "$PGDIR/data$standby.log" "$PGDIR/data$standby/postmaster.pid" "pg_is_in_recovery() to be false" \
		pg_is_primary "$standby"
	log "postgres$standby is the primary, with no standby (synchronous_standby_names=''): commits are not replicated until a new standby is built (down and up)"
	log "the nodes reconnect on their own (multi-host DSN, target_session_attrs=read-write); HAProxy takes them back as their /readyz answers 200"
}
pg_is_primary() { [[ $(pg_role "$1") == primary ]]; }

# start-node N: start a stopped or killed serve node again, same config.
cmd_start_node() {
	[[ -f $MARKER ]] || die "no cluster in $DIR (CLUSTER_DIR)"
	local n=${1:-}
	[[ $n =~ ^[1-3]$ ]] || die "usage: $0 start-node 1|2|3"
	[[ -f $DIR/surgepay.toml && -d $DIR/node$n/data ]] || die "node$n was never configured (up did not get that far)"
	! pid_of "$DIR/node$n/pid" >/dev/null || die "node$n is running (pid $(pid_of "$DIR/node$n/pid"))"
	node_start "$n"
	node_wait "$n"
	log "node$n ready; HAProxy takes it back after two successful checks"
}

# restart-node N [BINARY]: what a rolling restart does to one node:
# SIGTERM (its /readyz answers 503 at once, HAProxy stops sending to it
# within two checks, it serves on for shutdown_delay, then drains), wait
# for its exit (SIGKILL after 40 s, as down), start it again and wait for
# /readyz. With BINARY the node runs BINARY from then on: it is copied to
# $DIR/nodeN/surgepay before the node is signalled (a rename, so that a
# binary in use is never overwritten), as a rolling upgrade replaces one
# node's release at a time.
cmd_restart_node() {
	[[ -f $MARKER ]] || die "no cluster in $DIR (CLUSTER_DIR)"
	local n=${1:-} bin=${2:-} pid
	[[ $n =~ ^[1-3]$ ]] || die "usage: $0 restart-node 1|2|3 [BINARY]"
	[[ -f $DIR/surgepay.toml && -d $DIR/node$n/data ]] || die "node$n was never configured (up did not get that far)"
	if [[ -n $bin ]]; then
		[[ -x $bin ]] || die "$bin is not an executable"
		cp "$bin" "$DIR/node$n/surgepay.new"
	fi
	if pid=$(pid_of "$DIR/node$n/pid"); then
		log "node$n (pid $pid): SIGTERM; it drains after shutdown_delay"
		kill -TERM "$pid" 2>/dev/null || true
		wait_exit "node$n" "$pid" 40
	fi
	rm -f "$DIR/node$n/pid"
	if [[ -n $bin ]]; then
		mv -f "$DIR/node$n/surgepay.new" "$DIR/node$n/surgepay"
		log "node$n now runs $bin (commit $(bin_commit "$DIR/node$n/surgepay"))"
	fi
	node_start "$n"
	node_wait "$n"
	log "node$n ready; HAProxy takes it back after two successful checks"
}

# sql SQL: one statement on whichever instance is the primary now, in
# the surgepay database (smoke.sh checks the promoted database with it).
cmd_sql() {
	[[ -f $MARKER ]] || die "no cluster in $DIR (CLUSTER_DIR)"
	[[ -n ${1:-} ]] || die "usage: $0 sql 'SELECT ...'"
	local i
	for i in 1 2; do
		if pg_pid "$i" >/dev/null && pg_is_primary "$i"; then
			as_pg "$PGBIN/psql" -h "$PGSOCK" -p "${P_PG[$i]}" -U postgres -d surgepay -XAtq -v ON_ERROR_STOP=1 -c "$1"
			return
		fi
	done
	die "no PostgreSQL instance is the primary"
}

# detach-standby: the standby stops receiving WAL (primary_conninfo
# emptied and reloaded), as a standby cut off by the network would: with
# CLUSTER_SYNC=0 the primary goes on acknowledging commits the standby
# does not have; with a synchronous standby its commits wait. The next up
# builds a fresh pair.
cmd_detach_standby() {
	[[ -f $MARKER ]] || die "no cluster in $DIR (CLUSTER_DIR)"
	if ! pg_pid 2 >/dev/null || pg_is_primary 2; then
		die "postgres2 is not a running standby"
	fi
	psql_at "${P_PG[2]}" "ALTER SYSTEM SET primary_conninfo = ''" >/dev/null
	psql_at "${P_PG[2]}" "SELECT pg_reload_conf()" >/dev/null
	log "postgres2 detached: it receives no more WAL from postgres1"
}

# ------------------------------------------------------------------- main

usage() {
	sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
}

case ${1:-} in
up) cmd_up ;;
status) cmd_status ;;
down) cmd_down ;;
purge) cmd_purge ;;
kill-primary) cmd_kill_primary ;;
promote) cmd_promote ;;
start-node) cmd_start_node "${2:-}" ;;
restart-node) cmd_restart_node "${2:-}" "${3:-}" ;;
sql) cmd_sql "${2:-}" ;;
detach-standby) cmd_detach_standby ;;
-h | --help | help) usage ;;
*)
	usage >&2
	exit 2
	;;
esac
