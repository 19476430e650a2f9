# Shared definitions for brokers/*.sh: the port table, versions, paths and helpers.
# Sourced, never run. Everything a broker writes lives under $BROKERS_HOME (.brokers/ in the
# repository root, git-ignored); nothing here listens anywhere but 127.0.0.1.

set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BROKERS_SRC="$REPO_ROOT/brokers"
BROKERS_HOME="${ACKSPEC_BROKERS_HOME:-$REPO_ROOT/.brokers}"
RUN_HOME="$BROKERS_HOME/run"
DIST_HOME="$BROKERS_HOME/dist"

ALL_BROKERS=(rabbitmq activemq artemis activemq6)

# ---- versions -----------------------------------------------------------------------------------
# Debian packages: whatever bookworm ships (rabbitmq-server 3.10.x, activemq 5.17.x).
# Maven Central: the newest versions whose artifacts are actually fetchable from the registry
# (the registry's metadata lists newer Artemis versions whose -bin.tar.gz is absent; see README).
ARTEMIS_VERSION="${ARTEMIS_VERSION:-2.40.0}"
ACTIVEMQ6_VERSION="${ACTIVEMQ6_VERSION:-6.1.8}"
ACTIVEMQ6_SPRING_VERSION="${ACTIVEMQ6_SPRING_VERSION:-6.1.21}"
ACTIVEMQ6_LOG4J_VERSION="${ACTIVEMQ6_LOG4J_VERSION:-2.25.2}"
ACTIVEMQ6_JETTY_VERSION="${ACTIVEMQ6_JETTY_VERSION:-11.0.26}"  # the Jetty activemq-http 6.1.x is built on (ws://)

# ---- port table (keep in sync with src/ackspec/brokers.py; tests/brokers checks it) -------------
ACTIVEMQ_STOMP_PORT=61613
ACTIVEMQ_OPENWIRE_PORT=61616
RABBITMQ_STOMP_PORT=61614
RABBITMQ_AMQP_PORT=5672
RABBITMQ_WS_PORT=15674
RABBITMQ_DIST_PORT=25672
EPMD_PORT=4369
ARTEMIS_STOMP_PORT=61617
ARTEMIS_AMQP_PORT=5673
ARTEMIS_CORE_PORT=61620
ACTIVEMQ6_STOMP_PORT=61618
ACTIVEMQ6_AMQP_PORT=5674
ACTIVEMQ6_OPENWIRE_PORT=61619
ACTIVEMQ6_WS_PORT=61621

START_DEADLINE="${ACKSPEC_START_DEADLINE:-60}"
STOP_DEADLINE="${ACKSPEC_STOP_DEADLINE:-20}"
JAVA_HEAP="${ACKSPEC_JAVA_HEAP:-512m}"

log() { printf '[brokers] %s\n' "$*"; }
die() { printf '[brokers] ERROR: %s\n' "$*" >&2; exit 1; }

check_name() {
  local name="$1" known
  for known in "${ALL_BROKERS[@]}"; do
    [[ "$name" == "$known" ]] && return 0
  done
  die "unknown broker '$name' (known: ${ALL_BROKERS[*]})"
}

# The ports a broker must accept connections on before start.sh returns.
broker_ports() {
  case "$1" in
    rabbitmq) echo "$RABBITMQ_STOMP_PORT $RABBITMQ_AMQP_PORT $RABBITMQ_WS_PORT" ;;
    activemq) echo "$ACTIVEMQ_STOMP_PORT $ACTIVEMQ_OPENWIRE_PORT" ;;
    artemis) echo "$ARTEMIS_STOMP_PORT $ARTEMIS_AMQP_PORT $ARTEMIS_CORE_PORT" ;;
    activemq6) echo "$ACTIVEMQ6_STOMP_PORT $ACTIVEMQ6_AMQP_PORT $ACTIVEMQ6_OPENWIRE_PORT $ACTIVEMQ6_WS_PORT" ;;
  esac
}

broker_stomp_port() {
  case "$1" in
    rabbitmq) echo "$RABBITMQ_STOMP_PORT" ;;
    activemq) echo "$ACTIVEMQ_STOMP_PORT" ;;
    artemis) echo "$ARTEMIS_STOMP_PORT" ;;
    activemq6) echo "$ACTIVEMQ6_STOMP_PORT" ;;
  esac
}

# STOMP CONNECT credentials and the host header (RabbitMQ needs host = vhost '/').
broker_stomp_login() {
  case "$1" in
    rabbitmq) echo "guest guest /" ;;
    artemis) echo "admin admin 127.0.0.1" ;;
    *) echo "admin admin 127.0.0.1" ;;
  esac
}

pid_file() { echo "$RUN_HOME/$1/broker.pid"; }

# Prints the pid of a running broker, or nothing.
running_pid() {
  local file pid
  file="$(pid_file "$1")"
  [[ -f "$file" ]] || return 0
  pid="$(cat "$file")"
  if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
    echo "$pid"
  fi
}

port_open() {
  # bash's /dev/tcp: succeeds when something accepts on 127.0.0.1:$1.
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# A real STOMP CONNECT -> CONNECTED exchange (python stdlib only, see stomp_probe.py).
stomp_probe() {
  local name="$1" port login passcode host
  port="$(broker_stomp_port "$name")"
  read -r login passcode host <<<"$(broker_stomp_login "$name")"
  python3 "$BROKERS_SRC/stomp_probe.py" --port "$port" --login "$login" --passcode "$passcode" --host "$host" --quiet
}
