#!/usr/bin/env bash
# Makes sure the services the tests need are installed and running; run by CI before the tests.
# Idempotent: what is already there is left alone. Prints one line per service.
#
#   redis      redis-server + redis-cli on PATH (the test harness starts extra nodes itself,
#              see test/support/redis-servers.ts) and a Redis answering on 127.0.0.1:6379
#              (ENSURE_REDIS_PORT overrides the port, for trying this script out).
#   zookeeper  the Debian package zookeeper (/usr/share/java/zookeeper.jar) and java; no server
#              is started here: tests start their own (see test/support/zk-servers.ts).
#   postgres, mariadb: hooks below, not implemented yet.
set -euo pipefail

STATE_DIR="${TMPDIR:-/tmp}/nestjs-distributed-lock-services"
REDIS_PORT="${ENSURE_REDIS_PORT:-6379}"
APT_UPDATED=0

is_root() { [[ "$(id -u)" -eq 0 ]]; }

# Installs Debian packages when running as root (apt-get update at most once per run);
# otherwise prints what to install and exits 1. Usage: apt_install <service> <package>...
apt_install() {
  local service="$1"
  shift
  if ! is_root; then
    echo "$service: missing; install it with: sudo apt-get install -y $*" >&2
    exit 1
  fi
  if [[ "$APT_UPDATED" -eq 0 ]]; then
    apt-get update -qq
    APT_UPDATED=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# Waits up to $2 seconds (default 10) for command $1 (a function name) to succeed.
wait_for() {
  local check="$1" seconds="${2:-10}" i
  for ((i = 0; i < seconds * 10; i++)); do
    if "$check"; then return 0; fi
    sleep 0.1
  done
  return 1
}

# --- Redis -------------------------------------------------------------------------------------

redis_version() { redis-server --version | sed -n 's/.* v=\([^ ]*\).*/\1/p'; }
redis_answers() { [[ "$(redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null)" == "PONG" ]]; }

ensure_redis() {
  local binaries
  if command -v redis-server >/dev/null && command -v redis-cli >/dev/null; then
    binaries="found redis-server $(redis_version)"
  else
    apt_install redis redis-server
    binaries="installed redis-server $(redis_version) (Debian package redis-server)"
  fi

  if redis_answers; then
    echo "redis: $binaries; 127.0.0.1:$REDIS_PORT already answers PONG"
    return
  fi
  mkdir -p "$STATE_DIR"
  local data_dir="$STATE_DIR" log="$STATE_DIR/redis-$REDIS_PORT.log"
  if [[ -d /var/lib/redis && -w /var/lib/redis ]]; then data_dir=/var/lib/redis; fi
  redis-server --daemonize yes --bind 127.0.0.1 --port "$REDIS_PORT" --save "" --appendonly no \
    --dir "$data_dir" --logfile "$log"
  if wait_for redis_answers 10; then
    echo "redis: $binaries; started one on 127.0.0.1:$REDIS_PORT (no persistence, log $log)"
  else
    echo "redis: $binaries; started one but 127.0.0.1:$REDIS_PORT does not answer PING; log:" >&2
    tail -n 20 "$log" >&2 || true
    exit 1
  fi
}

# --- ZooKeeper ---------------------------------------------------------------------------------

ZK_JAR=/usr/share/java/zookeeper.jar

zookeeper_version() { dpkg-query -W -f='${Version}' zookeeper 2>/dev/null || echo "?"; }
java_version() { java -version 2>&1 | sed -n '1s/.*version "\([^"]*\)".*/\1/p'; }

# Tests start their own ZooKeeper servers (java ... QuorumPeerMain, see test/support/zk-servers.ts),
# so this only makes sure the server jar (Debian package zookeeper, 3.8.x) and java are there.
ensure_zookeeper() {
  local how="found"
  if [[ ! -f "$ZK_JAR" ]]; then
    apt_install zookeeper zookeeper
    how="installed"
  fi
  if ! command -v java >/dev/null; then
    apt_install zookeeper default-jre-headless
    how="installed"
  fi
  if [[ ! -f "$ZK_JAR" ]] || ! command -v java >/dev/null; then
    echo "zookeeper: $ZK_JAR or java still missing after installing the package zookeeper" >&2
    exit 1
  fi
  echo "zookeeper: $how zookeeper $(zookeeper_version) ($ZK_JAR), java $(java_version);" \
    "tests start their own servers"
}

# --- Hooks for later backends (not implemented yet) --------------------------------------------

# HOOK(postgres): to install PostgreSQL and ensure a server with the test database.
ensure_postgres() {
  echo "postgres: not checked (hook not implemented yet)"
}

# HOOK(mariadb): to install MariaDB and ensure a server with the test database.
ensure_mariadb() {
  echo "mariadb: not checked (hook not implemented yet)"
}

ensure_redis
ensure_zookeeper
ensure_postgres
ensure_mariadb
