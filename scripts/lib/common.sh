# shellcheck shell=bash
# Helpers shared by scripts/up and scripts/test (sourced, not executed).
#
# Backing services run project-locally on ports nobody else uses (PostgreSQL 55432, Redis 56379, S3 59000),
# with data, logs and pidfiles under .data/. A service that is already running from this checkout is reused
# and left running; only what this invocation started is stopped on exit (stop_started).
# Setting DATABASE_URL, REDIS_URL or S3_URL skips the corresponding local service entirely. scripts/up also starts an
# SMTP sink (59025) unless SMTP_URL is set.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"
DATA_DIR="$ROOT/.data"
LOG_DIR="$DATA_DIR/logs"
RUN_DIR="$DATA_DIR/run"

PG_PORT=55432
REDIS_PORT=56379
S3_PORT=59000
SMTP_PORT=59025
BUN_VERSION=1.4.5

STARTED=()                # services started by this invocation, in start order
declare -A SERVICE_STATE  # name -> started | reused | external (for banners)
CHILD_PID=''              # the foreground program (foreman, bun test) while it runs
BACKGROUND_PIDS=()        # programs start_child started and wait_child has not seen end (each leads its own group)
GOT_SIGNAL=''             # INT / TERM / HUP once one arrived

if [[ -t 2 ]]; then BOLD=$'\033[1m' RED=$'\033[31m' RESET=$'\033[0m'; else BOLD='' RED='' RESET=''; fi
log()  { printf '%s==>%s %s\n' "$BOLD" "$RESET" "$*" >&2; }
warn() { printf '%swarning:%s %s\n' "$RED" "$RESET" "$*" >&2; }
die()  { printf '%serror:%s %s\n' "$RED" "$RESET" "$*" >&2; exit 1; }

# Microseconds since the epoch (EPOCHREALTIME uses the locale's decimal mark, so drop either).
now_us() { local t=${EPOCHREALTIME:-}; [[ -n $t ]] && echo "${t//[.,]/}" || echo $(( $(date +%s%N) / 1000 )); }

# ---------------------------------------------------------------------------------------------------------------
# Processes and ports

# True when pid runs (a zombie counts as gone).
pid_alive() {
  local pid=$1 state
  [[ -n $pid && -r /proc/$pid/stat ]] || return 1
  state=$(<"/proc/$pid/stat") || return 1
  state=${state##*) }
  [[ ${state:0:1} != Z ]]
}

pid_cmdline() { tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null || true; }

# True when something accepts TCP connections on 127.0.0.1:port.
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# Who listens on a port, for error messages (ss may be missing; then say nothing).
port_owner() {
  command -v ss >/dev/null || return 0
  ss -Hltnp "sport = :$1" 2>/dev/null | sed -n 's/.*users:((\(.*\)))/\1/p' | head -1
}

# True when `GET /` on 127.0.0.1:port gets any HTTP answer (no curl needed).
http_answers() {
  local line
  line=$(exec 3<>"/dev/tcp/127.0.0.1/$1" && printf 'GET / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3 \
    && timeout 2 head -c 12 <&3) 2>/dev/null || return 1
  [[ $line == HTTP/1.* ]]
}

# pid of a service from its pidfile when it is alive and its command line contains `pattern`
# (guards against a recycled pid after a reboot or a crash).
service_pid() {
  local name=$1 pattern=$2 pid
  [[ -r $RUN_DIR/$name.pid ]] || return 1
  pid=$(<"$RUN_DIR/$name.pid")
  pid_alive "$pid" && [[ $(pid_cmdline "$pid") == *"$pattern"* ]] || return 1
  echo "$pid"
}

# Fail with a clear message when a port we want is taken by a process that is not ours.
require_free_port() {
  local port=$1 what=$2 url_var=$3 example=$4 owner
  port_open "$port" || return 0
  owner=$(port_owner "$port")
  die "port $port ($what) is already in use by another process${owner:+ ($owner)}, not by this checkout's
       service (no live pidfile in $RUN_DIR). It may be another checkout's 'scripts/up'.
       Stop that process, or use an existing server instead: $url_var=$example"
}

# Poll `check...` every 0.1 s until it succeeds. Fails early when pid dies; prints the log tail on failure.
wait_until() {
  local what=$1 pid=$2 logfile=$3 timeout_s=$4; shift 4
  local deadline=$(( $(now_us) + timeout_s * 1000000 ))
  until "$@" >/dev/null 2>&1; do
    if ! pid_alive "$pid"; then
      printf '%s exited during startup; last lines of %s:\n' "$what" "$logfile" >&2
      tail -n 20 "$logfile" >&2 || true
      die "$what did not start"
    fi
    if (( $(now_us) > deadline )); then
      printf 'last lines of %s:\n' "$logfile" >&2
      tail -n 20 "$logfile" >&2 || true
      die "$what did not answer within ${timeout_s}s (see $logfile)"
    fi
    sleep 0.1
  done
}

# Start `cmd...` in the background in its own session, cwd /, output to logfile, pid to the pidfile.
# Its own session keeps a terminal Ctrl-C away from it, so services stop after the apps, from stop_started.
# fd 9 (the start lock) must not leak into long-lived children, or the lock would outlive this script.
launch() {
  local name=$1 logfile=$2; shift 2
  ( cd / && exec setsid "$@" ) </dev/null >"$logfile" 2>&1 9>&- &
  echo $! >"$RUN_DIR/$name.pid"
  STARTED+=("$name")
  SERVICE_STATE[$name]=started
}

# Stop one service we started: signal, wait up to 15 s, then SIGKILL.
stop_service() {
  local name=$1 sig=$2 pid i
  [[ -r $RUN_DIR/$name.pid ]] || return 0
  pid=$(<"$RUN_DIR/$name.pid")
  if pid_alive "$pid"; then
    log "stopping $name (pid $pid)"
    kill -s "$sig" "$pid" 2>/dev/null || true
    for (( i = 0; i < 150; i++ )); do pid_alive "$pid" || break; sleep 0.1; done
    if pid_alive "$pid"; then warn "$name did not stop in 15s; killing it"; kill -KILL "$pid" 2>/dev/null || true; fi
  fi
  rm -f "$RUN_DIR/$name.pid"
}

# Stop only what this invocation started (never what it reused), newest first. Safe to call twice.
stop_started() {
  local i name
  for (( i = ${#STARTED[@]} - 1; i >= 0; i-- )); do
    name=${STARTED[i]}
    case $name in
      postgres) stop_service postgres INT ;;   # SIGINT = fast shutdown: disconnects clients instead of waiting
      *) stop_service "$name" TERM ;;
    esac
  done
  STARTED=()
}

# Serialize service start-up between concurrent invocations (e.g. scripts/up and scripts/test at once).
lock_services()   { exec 9>"$RUN_DIR/start.lock"; flock -w 120 9 || die "timed out waiting for $RUN_DIR/start.lock"; }
unlock_services() { flock -u 9; exec 9>&-; }

make_dirs() {
  mkdir -p "$LOG_DIR" "$RUN_DIR" "$DATA_DIR/redis" "$DATA_DIR/s3"
}

# ---------------------------------------------------------------------------------------------------------------
# Tools

ensure_bun() {
  local npm_bin version
  if ! command -v bun >/dev/null; then
    command -v npm >/dev/null || die "bun is not installed and npm is missing to install it (https://bun.sh)"
    npm_bin="$(npm prefix -g)/bin"   # where npm i -g puts bun; not always on PATH
    [[ :$PATH: == *":$npm_bin:"* ]] || export PATH="$npm_bin:$PATH"
    if ! command -v bun >/dev/null; then
      log "installing bun@$BUN_VERSION with npm"
      npm i -g "bun@$BUN_VERSION" >&2
    fi
    command -v bun >/dev/null || die "bun is still not on PATH after npm i -g bun@$BUN_VERSION"
  fi
  if ! bun --version >/dev/null 2>&1; then
    # With install scripts disabled, npm leaves a placeholder binary; the package's installer fetches the real
    # one. It uses paths relative to the package, so run it from there, as npm would.
    log "bun's npm postinstall did not run; running it now"
    (cd "$(npm root -g)/bun" && node install.js) >&2
    bun --version >/dev/null 2>&1 || die "bun does not run (tried $(npm root -g)/bun/install.js)"
  fi
  version=$(bun --version)
  [[ $version == "$BUN_VERSION" ]] || warn "bun $version found; this project pins $BUN_VERSION (bun-types)"
}

# bun install only when package.json, bun.lock or a patch of scripts/patches/ changed since the last successful
# install (a changed patch leaves bun.lock as it was, and Bun applies patches only as it installs).
ensure_deps() {
  local stamp=$ROOT/node_modules/.platform-install-stamp
  if [[ -f $stamp && ! $ROOT/bun.lock -nt $stamp && ! $ROOT/package.json -nt $stamp &&
    -z $(find "$ROOT/scripts/patches" -newer "$stamp" -print -quit 2>/dev/null) ]]; then return 0; fi
  log "bun install --frozen-lockfile"
  (cd "$ROOT" && bun install --frozen-lockfile) >&2
  touch "$stamp"
}

# Newest PostgreSQL server bin directory (Debian layout), or $PG_BIN when set; empty when none.
find_pg_bin() {
  if [[ -n ${PG_BIN:-} ]]; then echo "$PG_BIN"; return 0; fi
  local dir best
  best=$(for dir in /usr/lib/postgresql/*/bin; do [[ ! -x $dir/postgres ]] || echo "$dir"; done | sort -V | tail -1)
  if [[ -z $best ]] && command -v pg_config >/dev/null; then
    dir=$(pg_config --bindir)
    [[ ! -x $dir/postgres ]] || best=$dir
  fi
  echo "$best"
}

# The Debian packages needed for the local services that will actually run (those without a *_URL),
# plus ruby-foreman with `foreman` as argument. With `test`, redis-server always: test/security/revocation.test.ts
# runs a redis-server of its own (to kill it and start it again empty), whatever REDIS_URL says.
required_packages() {
  [[ -n ${DATABASE_URL:-} || -n $(find_pg_bin) ]] || echo postgresql
  # Analytics rollups count distinct identities in HyperLogLog sketches (docs/analytics.md, "Rollups"): the local
  # server needs the hll extension; an existing server (DATABASE_URL) must have it already.
  if [[ -z ${DATABASE_URL:-} ]]; then
    local major=15 bin # Debian bookworm's PostgreSQL, when none is installed yet
    bin=$(find_pg_bin)
    [[ ! $bin =~ /postgresql/([0-9]+)/ ]] || major=${BASH_REMATCH[1]}
    [[ -e /usr/share/postgresql/$major/extension/hll.control ]] || echo "postgresql-$major-hll"
  fi
  if [[ -z ${REDIS_URL:-} || ${1:-} == test ]]; then
    { command -v redis-server >/dev/null && command -v redis-cli >/dev/null; } || echo redis-server
  fi
  if [[ ${1:-} == foreman ]]; then command -v foreman >/dev/null || echo ruby-foreman; fi
  # The console's browser tests drive Debian's Chromium (test/console); playwright-core never downloads a browser.
  if [[ ${1:-} == test ]]; then command -v chromium >/dev/null || echo chromium; fi
}

APT_UPDATED=0
# Install the given Debian packages that are not installed yet (apt-get update once first).
ensure_apt() {
  local missing=() pkg sudo=()
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
  done
  (( ${#missing[@]} )) || return 0
  command -v apt-get >/dev/null || die "missing: ${missing[*]} (no apt-get here: install them yourself)"
  if (( EUID != 0 )); then
    command -v sudo >/dev/null || die "missing Debian packages: ${missing[*]}; run: apt-get install -y ${missing[*]}"
    sudo=(sudo)
  fi
  log "installing Debian packages: ${missing[*]}"
  if (( ! APT_UPDATED )); then "${sudo[@]}" apt-get update -qq >&2; APT_UPDATED=1; fi
  # postgresql's postinst may create and start Debian's own cluster on 5432; harmless, we never use it.
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o Dpkg::Use-Pty=0 --no-install-recommends "${missing[@]}" >&2
}

# ---------------------------------------------------------------------------------------------------------------
# PostgreSQL

# Run a command as the postgres user when we are root (PostgreSQL refuses to run as root).
as_pg() {
  if (( EUID == 0 )); then (cd / && runuser -u postgres -- "$@"); else "$@"; fi
}

# Where the cluster lives. Normally $DATA_DIR/pg; but as root the postgres user must traverse every parent
# of the data dir (a checkout under /root is not traversable) and the socket path must fit the 107-byte
# limit of Unix sockets. When either fails, the cluster goes to /var/tmp/platform-<hash of $ROOT>/pg and
# $DATA_DIR/pg becomes a symlink to it, so it is still found (and deleted) with the checkout's .data.
pg_home() {
  local local_home=$DATA_DIR/pg fallback
  fallback=/var/tmp/platform-$(printf '%s' "$ROOT" | sha256sum | cut -c1-12)/pg
  if [[ -L $local_home ]]; then
    # an earlier run chose the fallback; keep it as long as it is ours
    [[ $(readlink "$local_home") == "$fallback" ]] && { echo "$fallback"; return; }
    rm -f "$local_home"
  fi
  if (( EUID != 0 )) || { chmod o+x "$DATA_DIR" && runuser -u postgres -- test -x "$DATA_DIR"; }; then
    if (( ${#local_home} + 30 < 107 )); then echo "$local_home"; return; fi
  fi
  [[ -d $local_home ]] && die "$local_home exists but PostgreSQL cannot use it (parents not traversable by
       user postgres, or path too long for a socket); move the checkout or delete $local_home"
  install -d -m 755 "$(dirname "$fallback")"
  if (( EUID == 0 )) && ! runuser -u postgres -- test -x "$(dirname "$fallback")"; then
    die "user postgres cannot traverse $(dirname "$fallback") either"
  fi
  ln -sfn "$fallback" "$local_home"
  echo "$fallback"
}

pg_psql() {
  "$(pg_tool psql)" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres "$@"
}

pg_tool() { if [[ -x $PG_BIN/$1 ]]; then echo "$PG_BIN/$1"; else command -v "$1" || die "$1 not found"; fi; }

pg_ready() { "$(pg_tool pg_isready)" -q -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres; }

# start_postgres DBNAME: project-local cluster on 127.0.0.1:55432 with database DBNAME; exports DATABASE_URL.
start_postgres() {
  local db=$1 home pgdata logfile=$LOG_DIR/postgres.log pid
  if [[ -n ${DATABASE_URL:-} ]]; then SERVICE_STATE[postgres]=external; export DATABASE_URL; return 0; fi
  [[ $db =~ ^[a-z_][a-z0-9_]*$ ]] || die "bad database name: $db"
  PG_BIN=$(find_pg_bin)
  [[ -n $PG_BIN ]] || die "PostgreSQL server binaries not found (apt-get install postgresql, or set PG_BIN)"
  if (( EUID == 0 )); then id postgres >/dev/null 2>&1 || die "user 'postgres' is missing (apt-get install postgresql)"; fi

  home=$(pg_home)
  pgdata=$home/data
  if pid=$(service_pid postgres "-D $pgdata "); then
    SERVICE_STATE[postgres]=reused
    log "PostgreSQL: reusing pid $pid on 127.0.0.1:$PG_PORT"
  else
    require_free_port "$PG_PORT" PostgreSQL DATABASE_URL "postgres://user:password@127.0.0.1:5432/$db"
    if (( EUID == 0 )); then install -d -o postgres -g postgres -m 700 "$home" "$home/socket"
    else install -d -m 700 "$home" "$home/socket"; fi
    if [[ ! -f $pgdata/PG_VERSION ]]; then
      log "PostgreSQL: initdb $pgdata"
      # -N: no fsync during initdb; C locale so the cluster does not depend on installed locales
      as_pg "$PG_BIN/initdb" -D "$pgdata" -A trust -U postgres -E UTF8 --locale=C -N >"$LOG_DIR/initdb.log" 2>&1 \
        || { tail -n 20 "$LOG_DIR/initdb.log" >&2; die "initdb failed (see $LOG_DIR/initdb.log)"; }
    fi
    log "PostgreSQL: starting on 127.0.0.1:$PG_PORT ($pgdata)"
    local cmd=("$PG_BIN/postgres" -D "$pgdata" -p "$PG_PORT" -k "$home/socket"
               -c listen_addresses=127.0.0.1 -c synchronous_commit=off)
    if (( EUID == 0 )); then cmd=(setpriv --reuid=postgres --regid=postgres --init-groups "${cmd[@]}"); fi
    launch postgres "$logfile" "${cmd[@]}"
    wait_until PostgreSQL "$(<"$RUN_DIR/postgres.pid")" "$logfile" 30 pg_ready
  fi
  if [[ $(pg_psql -tAc "select 1 from pg_database where datname = '$db'") != 1 ]]; then
    log "PostgreSQL: creating database $db"
    pg_psql -c "create database \"$db\""
  fi
  export DATABASE_URL="postgres://postgres@127.0.0.1:$PG_PORT/$db"
}

# ---------------------------------------------------------------------------------------------------------------
# Redis

redis_ready() { [[ $(redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null) == PONG ]]; }

# start_redis [DB_INDEX]: redis-server on 127.0.0.1:56379 without persistence; exports REDIS_URL.
start_redis() {
  local index=${1:-0} logfile=$LOG_DIR/redis.log pid
  if [[ -n ${REDIS_URL:-} ]]; then SERVICE_STATE[redis]=external; export REDIS_URL; return 0; fi
  # redis-server rewrites its process title to "redis-server 127.0.0.1:56379"
  if pid=$(service_pid redis "redis-server 127.0.0.1:$REDIS_PORT"); then
    SERVICE_STATE[redis]=reused
    log "Redis: reusing pid $pid on 127.0.0.1:$REDIS_PORT"
  else
    require_free_port "$REDIS_PORT" Redis REDIS_URL "redis://127.0.0.1:6379"
    log "Redis: starting on 127.0.0.1:$REDIS_PORT"
    launch redis "$logfile" redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --dir "$DATA_DIR/redis" \
      --save '' --appendonly no --daemonize no
    wait_until Redis "$(<"$RUN_DIR/redis.pid")" "$logfile" 20 redis_ready
  fi
  if (( index )); then export REDIS_URL="redis://127.0.0.1:$REDIS_PORT/$index"
  else export REDIS_URL="redis://127.0.0.1:$REDIS_PORT"; fi
}

# Side redis-servers (no persistence) for the parts of scripts/test's first pass that run beside one another: pub/sub
# channels and CLIENT KILL reach every database of a server, so the parts need a server each, not an index each. The
# second (127.0.0.1:26380) serves the realtime half, the third (127.0.0.1:26381) the files run after the cluster pass.
# Each exports its URL (SECOND_REDIS_URL, THIRD_REDIS_URL); one already set names an existing server instead. With
# REDIS_URL set and the side one's not, none is started (it stays empty): whoever gave a server gets no other.
# Below Linux's ephemeral range (32768 up): on 56380 a client connection's local port once held it at start-up, and the
# run failed before any test (the older services' ports, 55432/56379/59000, are still inside it: docs/setup.md).
SECOND_REDIS_PORT=26380
THIRD_REDIS_PORT=26381
redis_port_ready() { [[ $(redis-cli -h 127.0.0.1 -p "$1" ping 2>/dev/null) == PONG ]]; }

# start_side_redis NAME TITLE PORT URL_VAR
start_side_redis() {
  local name=$1 title=$2 port=$3 var=$4 logfile=$LOG_DIR/$1.log pid
  if [[ -n ${!var:-} ]]; then SERVICE_STATE[$name]=external; export "${var?}"; return 0; fi
  if [[ ${SERVICE_STATE[redis]:-} == external ]]; then printf -v "$var" '%s' ''; return 0; fi
  if pid=$(service_pid "$name" "redis-server 127.0.0.1:$port"); then
    SERVICE_STATE[$name]=reused
    log "$title: reusing pid $pid on 127.0.0.1:$port"
  else
    require_free_port "$port" "$title" "$var" "redis://127.0.0.1:6380"
    log "$title: starting on 127.0.0.1:$port"
    mkdir -p "$DATA_DIR/$name"
    launch "$name" "$logfile" redis-server --bind 127.0.0.1 --port "$port" --dir "$DATA_DIR/$name" \
      --save '' --appendonly no --daemonize no
    wait_until "$title" "$(<"$RUN_DIR/$name.pid")" "$logfile" 20 redis_port_ready "$port"
  fi
  export "$var=redis://127.0.0.1:$port"
}
start_second_redis() { start_side_redis redis-second 'second Redis' "$SECOND_REDIS_PORT" SECOND_REDIS_URL; }
start_third_redis() { start_side_redis redis-third 'third Redis' "$THIRD_REDIS_PORT" THIRD_REDIS_URL; }

# ---------------------------------------------------------------------------------------------------------------
# Redis Cluster (scripts/test's second pass): three masters, no replicas, no persistence. A node's port must be at most
# 55535: its cluster bus listens 10 000 higher. Both below Linux's ephemeral range (32768 up): a port in it can be held
# at that moment by any outgoing connection as its local port, and the node then fails to bind (seen: 55002 taken).
# Below test/cluster/redis-cluster.ts's range too (12000-21999), where the test files start clusters of their own.

REDIS_CLUSTER_PORTS=(22001 22002 22003)

cluster_node_ok() { redis-cli -h 127.0.0.1 -p "$1" cluster info 2>/dev/null | grep -q '^cluster_state:ok'; }
cluster_ok() {
  local port
  for port in "${REDIS_CLUSTER_PORTS[@]}"; do cluster_node_ok "$port" || return 1; done
}

# start_redis_cluster: the three masters on 127.0.0.1:22001-22003 under .data/redis-cluster, joined with
# `redis-cli --cluster create`; exports REDIS_CLUSTER_URL (redis+cluster://...). A REDIS_CLUSTER_URL already set names
# an existing cluster instead. A cluster of this checkout that is up and whole is reused; otherwise every node of it
# is started afresh (a node's cluster config is only worth keeping together with its peers'). None is ever flushed:
# the tests need no empty database, and a given cluster may hold someone's data (docs/setup.md, "Nothing is flushed").
start_redis_cluster() {
  local port pid reused=0 nodes=()
  if [[ -n ${REDIS_CLUSTER_URL:-} ]]; then
    # A plain redis:// URL would run the cluster pass on one Redis again, and report it as the cluster's.
    [[ $REDIS_CLUSTER_URL == redis+cluster://* ]] \
      || die "REDIS_CLUSTER_URL=$(redact_url "$REDIS_CLUSTER_URL") is not a cluster URL (redis+cluster://host:port[,host:port...])"
    SERVICE_STATE[redis-cluster]=external
    export REDIS_CLUSTER_URL
    log "Redis Cluster: $REDIS_CLUSTER_URL as given, not flushed: it must be a cluster for tests only (docs/setup.md)"
    return 0
  fi
  for port in "${REDIS_CLUSTER_PORTS[@]}"; do
    nodes+=("127.0.0.1:$port")
    service_pid "redis-cluster-$port" "redis-server 127.0.0.1:$port" >/dev/null && reused=$(( reused + 1 ))
  done
  if (( reused == ${#REDIS_CLUSTER_PORTS[@]} )) && cluster_ok; then
    SERVICE_STATE[redis-cluster]=reused
    log "Redis Cluster: reusing ${nodes[*]}"
  else
    for port in "${REDIS_CLUSTER_PORTS[@]}"; do
      service_pid "redis-cluster-$port" "redis-server 127.0.0.1:$port" >/dev/null && stop_service "redis-cluster-$port" TERM
      require_free_port "$port" "Redis Cluster node" REDIS_CLUSTER_URL "redis+cluster://127.0.0.1:7000,127.0.0.1:7001"
      require_free_port "$(( port + 10000 ))" "Redis Cluster bus" REDIS_CLUSTER_URL "redis+cluster://127.0.0.1:7000,127.0.0.1:7001"
    done
    log "Redis Cluster: starting ${nodes[*]}"
    rm -rf "$DATA_DIR/redis-cluster"
    for port in "${REDIS_CLUSTER_PORTS[@]}"; do
      mkdir -p "$DATA_DIR/redis-cluster/$port"
      # cluster-require-full-coverage no: the other masters keep serving while one is down (docs/realtime-data-plane.md).
      launch "redis-cluster-$port" "$LOG_DIR/redis-cluster-$port.log" redis-server --bind 127.0.0.1 --port "$port" \
        --dir "$DATA_DIR/redis-cluster/$port" --cluster-enabled yes --cluster-config-file nodes.conf \
        --cluster-require-full-coverage no --save '' --appendonly no --daemonize no
    done
    for port in "${REDIS_CLUSTER_PORTS[@]}"; do
      pid=$(<"$RUN_DIR/redis-cluster-$port.pid")
      wait_until "Redis Cluster node $port" "$pid" "$LOG_DIR/redis-cluster-$port.log" 20 \
        bash -c "[[ \$(redis-cli -h 127.0.0.1 -p $port ping 2>/dev/null) == PONG ]]"
    done
    redis-cli --cluster create "${nodes[@]}" --cluster-replicas 0 --cluster-yes >"$LOG_DIR/redis-cluster-create.log" 2>&1 \
      || { tail -n 20 "$LOG_DIR/redis-cluster-create.log" >&2; die "redis-cli --cluster create failed"; }
    wait_until "Redis Cluster" "$pid" "$LOG_DIR/redis-cluster-create.log" 20 cluster_ok
    SERVICE_STATE[redis-cluster]=started
  fi
  REDIS_CLUSTER_URL="redis+cluster://$(IFS=,; echo "${nodes[*]}")"
  export REDIS_CLUSTER_URL
}

# ---------------------------------------------------------------------------------------------------------------
# S3 (s3rver from node_modules; it runs fine under bun, so no node needed)

s3_ready() { http_answers "$S3_PORT"; }

start_s3() {
  local logfile=$LOG_DIR/s3.log pid bin=$ROOT/node_modules/s3rver/bin/s3rver.js
  if [[ -n ${S3_URL:-} ]]; then SERVICE_STATE[s3]=external; export S3_URL; return 0; fi
  if pid=$(service_pid s3 "s3rver.js -d $DATA_DIR/s3 "); then
    SERVICE_STATE[s3]=reused
    log "S3 (s3rver): reusing pid $pid on 127.0.0.1:$S3_PORT"
  else
    require_free_port "$S3_PORT" S3 S3_URL "http://minioadmin:minioadmin@127.0.0.1:9000"
    [[ -f $bin ]] || die "$bin is missing (bun install)"
    log "S3 (s3rver): starting on 127.0.0.1:$S3_PORT"
    launch s3 "$logfile" "$(command -v bun)" "$bin" -d "$DATA_DIR/s3" -a 127.0.0.1 -p "$S3_PORT"
    wait_until s3rver "$(<"$RUN_DIR/s3.pid")" "$logfile" 30 s3_ready
  fi
  # s3rver's built-in account: access key S3RVER, secret S3RVER
  export S3_URL="http://S3RVER:S3RVER@127.0.0.1:$S3_PORT"
}

# The local SMTP sink (scripts/smtp-sink.ts): the mailer delivers there, and each caught message is kept in .data/mail
# as an .eml file. Only scripts/up starts it (the tests start their own). Exports SMTP_URL.
smtp_ready() { port_open "$SMTP_PORT"; }
start_smtp() {
  local logfile=$LOG_DIR/smtp.log pid
  if [[ -n ${SMTP_URL:-} ]]; then SERVICE_STATE[smtp]=external; export SMTP_URL; return 0; fi
  if pid=$(service_pid smtp "scripts/smtp-sink.ts"); then
    SERVICE_STATE[smtp]=reused
    log "SMTP sink: reusing pid $pid on 127.0.0.1:$SMTP_PORT"
  else
    require_free_port "$SMTP_PORT" SMTP SMTP_URL "smtp://user:password@smtp.example.com:587"
    log "SMTP sink: starting on 127.0.0.1:$SMTP_PORT (caught mail in .data/mail)"
    launch smtp "$logfile" env SMTP_SINK_PORT="$SMTP_PORT" SMTP_SINK_DIR="$DATA_DIR/mail" \
      "$(command -v bun)" run "$ROOT/scripts/smtp-sink.ts"
    wait_until "SMTP sink" "$(<"$RUN_DIR/smtp.pid")" "$logfile" 30 smtp_ready
  fi
  export SMTP_URL="smtp://127.0.0.1:$SMTP_PORT"
}

# ---------------------------------------------------------------------------------------------------------------
# Secrets at rest

# The master key that seals stored secrets (shared/secrets.ts). Unless PLATFORM_SECRET_KEY is already set, use
# .data/secret.key, creating it (32 random bytes, base64, mode 0600) the first time. Exports PLATFORM_SECRET_KEY.
ensure_secret_key() {
  local file=$DATA_DIR/secret.key
  [[ -z ${PLATFORM_SECRET_KEY:-} ]] || { export PLATFORM_SECRET_KEY; return 0; }
  if [[ ! -s $file ]]; then
    log "generating the master key for secrets at rest: .data/secret.key"
    (umask 077 && head -c 32 /dev/urandom | base64 >"$file")
  fi
  chmod 600 "$file"
  PLATFORM_SECRET_KEY=$(<"$file")
  export PLATFORM_SECRET_KEY
}

# ---------------------------------------------------------------------------------------------------------------
# Signals and the foreground program

# INT/TERM/HUP: forward once to the foreground program (it shuts down, then the EXIT trap stops the
# services); with no program running yet, just exit, which runs the EXIT trap.
on_signal() {
  local sig=$1
  # explicit `return 0`: a bare return in a trap reports the interrupted `wait`'s status, and set -e would exit
  if [[ -n $GOT_SIGNAL ]]; then log "still stopping, please wait"; return 0; fi
  GOT_SIGNAL=$sig
  if [[ -n $CHILD_PID ]] && pid_alive "$CHILD_PID"; then
    log "SIG$sig: stopping"
    kill -TERM "$CHILD_PID" 2>/dev/null || true
    stop_background
  elif (( ${#BACKGROUND_PIDS[@]} )); then
    log "SIG$sig: stopping"
    stop_background
  else
    exit $(( 128 + $(kill -l "$sig") ))
  fi
  return 0
}

# SIGTERM to the whole group of every program start_child started (bun test and the workers it spawned); wait_child
# then sees each end and kills what is left.
stop_background() {
  local pid
  for pid in "${BACKGROUND_PIDS[@]}"; do kill -TERM -- "-$pid" 2>/dev/null || true; done
}

on_exit() {
  local rc=$?
  set +e   # clean up as much as possible, whatever fails
  trap - EXIT INT TERM HUP
  if [[ -n $CHILD_PID ]] && pid_alive "$CHILD_PID"; then kill -TERM "$CHILD_PID" 2>/dev/null || true; fi
  stop_background
  stop_started
  [[ -z $GOT_SIGNAL ]] || rc=$(( 128 + $(kill -l "$GOT_SIGNAL") ))
  exit "$rc"
}

install_traps() {
  trap on_exit EXIT
  trap 'on_signal INT' INT
  trap 'on_signal TERM' TERM
  trap 'on_signal HUP' HUP
}

# pids whose process group is pgid
group_pids() {
  local pgid=$1 f stat fields
  for f in /proc/[0-9]*/stat; do
    { stat=$(<"$f"); } 2>/dev/null || continue # gone meanwhile
    read -r -a fields <<<"${stat##*) }"   # state ppid pgrp ...
    [[ ${fields[0]} != Z && ${fields[2]} == "$pgid" ]] && echo "${f//[^0-9]/}"
  done
}

# run_child [--own-group] CMD...: run CMD as a background child and wait for it, so the traps above run
# while it runs (bash defers traps until a foreground command ends). Returns CMD's exit status.
# --own-group: CMD gets its own session (foreman: the terminal's Ctrl-C then reaches only this script, which
# sends foreman exactly one SIGTERM; a second signal would kill foreman before it has stopped its children);
# anything left in that group afterwards is terminated.
run_child() {
  local own=0 rc pid
  if [[ $1 == --own-group ]]; then own=1; shift; fi
  if (( own )); then setsid "$@" 9>&- & else "$@" 9>&- & fi
  pid=$!
  CHILD_PID=$pid
  while :; do
    rc=0; wait "$pid" || rc=$?
    pid_alive "$pid" || break   # wait returns early (>128) when a trapped signal arrives
  done
  CHILD_PID=''
  (( ! own )) || end_group "$pid"
  return "$rc"
}

# end_group PGID: terminates what is left in a finished child's process group (a worker its tests left running).
end_group() {
  [[ -n $(group_pids "$1") ]] || return 0
  warn "terminating leftover processes of group $1: $(group_pids "$1" | tr '\n' ' ')"
  kill -TERM -- "-$1" 2>/dev/null || true
  sleep 1
  kill -KILL -- "-$1" 2>/dev/null || true
}

# start_child CMD...: CMD in the background in a session of its own, as run_child --own-group, but not waited for:
# the caller goes on (runs another child beside it) and later calls wait_child "$STARTED_CHILD". A signal or this
# script's exit stops it meanwhile.
STARTED_CHILD=''
start_child() {
  setsid "$@" 9>&- &
  STARTED_CHILD=$!
  BACKGROUND_PIDS+=("$STARTED_CHILD")
}

# wait_child PID: waits until a child start_child started has ended (through any trapped signal); returns its exit
# status, and terminates what is left in its group.
wait_child() {
  local pid=$1 rc other rest=()
  while :; do
    rc=0; wait "$pid" || rc=$?
    pid_alive "$pid" || break   # wait returns early (>128) when a trapped signal arrives
  done
  for other in "${BACKGROUND_PIDS[@]}"; do [[ $other == "$pid" ]] || rest+=("$other"); done
  BACKGROUND_PIDS=("${rest[@]}")
  end_group "$pid"
  return "$rc"
}

# Print a URL with its password replaced by ***; the user name may be empty (redis://:password@host,
# redis+sentinel://:password@host:port,host:port/name), and a URL with several hosts (h1:p1,h2:p2) keeps them all.
redact_url() { sed -E 's#(://[^:/@]*):[^@/]+@#\1:***@#' <<<"$1"; }

# Print the database a PostgreSQL URL names: its last path segment, without the parameters (target_session_attrs).
database_name() { local name=${1##*/}; printf '%s\n' "${name%%\?*}"; }

# ---------------------------------------------------------------------------------------------------------------
# Composition and timings

# start_backing_services DBNAME [REDIS_DB_INDEX]: PostgreSQL, Redis and S3, each local unless its URL is set.
start_backing_services() {
  make_dirs
  lock_services
  timed postgres start_postgres "$1"
  timed redis start_redis "${2:-0}"
  timed s3 start_s3
  unlock_services
}

TIMINGS=()
# timed LABEL CMD...: run CMD in this shell (so its exports stay) and record how long it took.
timed() {
  local label=$1 t0 us; shift
  t0=$(now_us)
  "$@"
  us=$(( $(now_us) - t0 ))
  TIMINGS+=("$label $(printf '%d.%02d' $(( us / 1000000 )) $(( us % 1000000 / 10000 )))s")
}

# Sum of the recorded timings, in seconds.
timings_total() {
  local t sum=0
  for t in "${TIMINGS[@]}"; do t=${t##* }; t=${t%s}; sum=$(( sum + 10#${t/./} )); done
  printf '%d.%02d' $(( sum / 100 )) $(( sum % 100 ))
}

# Where each backing service is and whether this run started, reused or was given it
# (a given URL may carry a real password: show it redacted).
print_services() {
  local name label url
  for name in postgres redis s3 smtp; do
    case $name in
      postgres) label=PostgreSQL url=$DATABASE_URL ;;
      redis) label=Redis url=$REDIS_URL ;;
      s3) label=S3 url=$S3_URL ;;
      smtp) [[ -n ${SMTP_URL:-} ]] || continue; label=SMTP url=$SMTP_URL ;;
    esac
    [[ ${SERVICE_STATE[$name]:-} != external ]] || url=$(redact_url "$url")
    printf '  %-11s %-50s %s\n' "$label" "$url" "${SERVICE_STATE[$name]:-}"
  done
}
