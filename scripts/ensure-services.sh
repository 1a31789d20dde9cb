#!/usr/bin/env bash
# Makes sure the services the tests need are installed and running; run by CI before the tests.
# Idempotent: what is already there is left alone. Prints one line per service.
#
#   redis      redis-server + redis-cli on PATH (the test harness starts extra nodes itself,
#              see servers/redis-servers.ts) and a Redis answering on 127.0.0.1:6379
#              (ENSURE_REDIS_PORT overrides the port, for trying this script out).
#   zookeeper  the Debian package zookeeper (/usr/share/java/zookeeper.jar) and java; no server
#              is started here: tests start their own (see servers/zk-servers.ts).
#   faketime   the Debian package faketime (libfaketime), for the chaos matrix's clock jumps;
#              iproute2 (`ip netns`) for its partitions (root only).
#   postgres   PostgreSQL answering on 127.0.0.1:5432 (started with pg_ctlcluster when down,
#              Debian package postgresql installed as root when missing) and a database locktest
#              that user postgres reaches over TCP without a password (or with PGPASSWORD).
#   mariadb    MariaDB answering on 127.0.0.1:3306 (started with start-stop-daemon when down,
#              Debian package mariadb-server installed as root when missing) and a database
#              locktest that root reaches over TCP with an empty password (or MYSQL_PASSWORD).
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

# Tests start their own ZooKeeper servers (java ... QuorumPeerMain, see servers/zk-servers.ts),
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

# --- libfaketime and iproute2 (chaos matrix) ---------------------------------------------------

FAKETIME_LIB=/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1

# The chaos matrix jumps one worker's wall clock with LD_PRELOAD=libfaketime and partitions one
# worker with `ip netns` (which needs root: without it, partitions are skipped with a reason).
ensure_chaos_tools() {
  local how="found"
  if [[ ! -f "$FAKETIME_LIB" ]]; then
    apt_install faketime faketime
    how="installed"
  fi
  if [[ ! -f "$FAKETIME_LIB" ]]; then
    echo "faketime: $FAKETIME_LIB still missing after installing the package faketime" >&2
    exit 1
  fi
  if ! command -v ip >/dev/null && [[ $(id -u) -eq 0 ]]; then apt_install iproute2 iproute2; fi
  echo "chaos tools: $how libfaketime ($FAKETIME_LIB); ip: $(command -v ip || echo 'missing: partitions skipped')"
}

# --- PostgreSQL --------------------------------------------------------------------------------

PG_PORT=5432
TEST_DB=locktest

pg_answers() { pg_isready -q -h 127.0.0.1 -p "$PG_PORT" >/dev/null 2>&1; }
# The newest cluster version under /etc/postgresql (usually the only one), empty if none.
pg_cluster_version() {
  local conf
  for conf in /etc/postgresql/*/main/postgresql.conf; do
    if [[ -f "$conf" ]]; then basename "$(dirname "$(dirname "$conf")")"; fi
  done | sort -V | tail -n 1
}
# psql as user postgres over TCP on the test server; extra arguments follow.
pg_sql() { psql -X -q -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -v ON_ERROR_STOP=1 "$@"; }

ensure_postgres() {
  local server version out
  if ! command -v pg_isready >/dev/null || ! command -v psql >/dev/null; then
    apt_install postgres postgresql
  fi

  if pg_answers; then
    server="127.0.0.1:$PG_PORT already accepting connections"
  else
    version="$(pg_cluster_version)"
    if [[ -z "$version" ]] || ! command -v pg_ctlcluster >/dev/null; then
      apt_install postgres postgresql
      version="$(pg_cluster_version)"
    fi
    if [[ -z "$version" ]]; then
      echo "postgres: no cluster under /etc/postgresql after installing postgresql;" \
        "create one with: pg_createcluster --start <version> main" >&2
      exit 1
    fi
    if ! is_root; then
      echo "postgres: 127.0.0.1:$PG_PORT does not answer; start it with:" \
        "sudo pg_ctlcluster --skip-systemctl-redirect $version main start" >&2
      exit 1
    fi
    # The package's postinst may already have started it.
    if ! pg_answers; then
      pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
    fi
    if ! wait_for pg_answers 20; then
      echo "postgres: started cluster $version/main but 127.0.0.1:$PG_PORT does not accept" \
        "connections; log:" >&2
      tail -n 20 "/var/log/postgresql/postgresql-$version-main.log" >&2 || true
      exit 1
    fi
    server="started cluster $version/main on 127.0.0.1:$PG_PORT"
  fi

  if ! out="$(pg_sql -Atc "SELECT 1 FROM pg_database WHERE datname = '$TEST_DB'" 2>&1)"; then
    echo "postgres: $server, but user postgres cannot log in over TCP: $out" >&2
    echo "  allow it in pg_hba.conf (host all all 127.0.0.1/32 trust) or set PGPASSWORD" >&2
    exit 1
  fi
  local version db
  version="$(pg_sql -Atc "SHOW server_version" | cut -d' ' -f1)"
  if [[ "$out" == "1" ]]; then
    db="database $TEST_DB exists"
  else
    pg_sql -c "CREATE DATABASE $TEST_DB" >/dev/null
    db="created database $TEST_DB"
  fi
  echo "postgres: PostgreSQL $version; $server; $db"
}

# --- MariaDB -----------------------------------------------------------------------------------

MARIADB_PORT=3306
MARIADBD=/usr/sbin/mariadbd

# `mariadb-admin ping` succeeds whenever the server runs, even if the login is refused.
mariadb_answers() { mariadb-admin -h 127.0.0.1 -P "$MARIADB_PORT" -u root ping >/dev/null 2>&1; }
# mariadb as root over TCP (MYSQL_PASSWORD if set, else an empty password); extra arguments follow.
mariadb_sql() {
  MYSQL_PWD="${MYSQL_PASSWORD:-}" mariadb -h 127.0.0.1 -P "$MARIADB_PORT" -u root -N -B "$@"
}

ensure_mariadb() {
  local server out log="$STATE_DIR/mariadbd.out"
  if [[ ! -x "$MARIADBD" ]] || ! command -v mariadb >/dev/null ||
    ! command -v mariadb-admin >/dev/null; then
    apt_install mariadb mariadb-server
  fi

  if mariadb_answers; then
    server="127.0.0.1:$MARIADB_PORT already answers"
  else
    if ! is_root; then
      echo "mariadb: 127.0.0.1:$MARIADB_PORT does not answer; start it with: sudo" \
        "start-stop-daemon --start --oknodo --background --exec $MARIADBD" >&2
      exit 1
    fi
    mkdir -p "$STATE_DIR"
    # /run is a tmpfs: without systemd nobody recreates the socket/pid dir after a reboot.
    if [[ ! -d /run/mysqld ]] && id mysql >/dev/null 2>&1; then
      install -d -o mysql -g mysql -m 755 /run/mysqld
    fi
    start-stop-daemon --start --oknodo --background --output "$log" --exec "$MARIADBD"
    if ! wait_for mariadb_answers 20; then
      echo "mariadb: started $MARIADBD but 127.0.0.1:$MARIADB_PORT does not answer; output:" >&2
      tail -n 20 "$log" >&2 || true
      tail -n 20 /var/log/mysql/error.log >&2 2>/dev/null || true
      exit 1
    fi
    server="started $MARIADBD on 127.0.0.1:$MARIADB_PORT (output $log)"
  fi

  if ! out="$(mariadb_sql -e "SHOW DATABASES LIKE '$TEST_DB'" 2>&1)"; then
    echo "mariadb: $server, but root cannot log in over TCP: $out" >&2
    echo "  allow it (e.g. as root: mariadb -e \"ALTER USER root@localhost IDENTIFIED BY ''\")" \
      "or set MYSQL_PASSWORD" >&2
    exit 1
  fi
  local version db
  version="$(mariadb_sql -e "SELECT VERSION()" | cut -d- -f1)"
  if [[ "$out" == "$TEST_DB" ]]; then
    db="database $TEST_DB exists"
  else
    mariadb_sql -e "CREATE DATABASE IF NOT EXISTS $TEST_DB" >/dev/null
    db="created database $TEST_DB"
  fi
  echo "mariadb: MariaDB $version; $server; $db"
}

ensure_redis
ensure_zookeeper
ensure_chaos_tools
ensure_postgres
ensure_mariadb
