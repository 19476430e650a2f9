#!/usr/bin/env bash
# Starts one broker on 127.0.0.1 with all its state under .brokers/run/NAME, writes its pid, and
# returns only when its ports accept connections and a STOMP CONNECT is answered with CONNECTED.
#
#   brokers/start.sh NAME [--fresh]     NAME in: rabbitmq activemq artemis activemq6
#
#   --fresh   delete the broker's stored messages and configuration first.
# Ports: see common.sh / brokers/README.md. Deadline: $ACKSPEC_START_DEADLINE seconds (default 60).
source "$(dirname "$0")/common.sh"

[[ $# -ge 1 ]] || die "usage: brokers/start.sh NAME [--fresh]   (NAME: ${ALL_BROKERS[*]})"
name="$1"
shift
check_name "$name"
fresh=0
for arg in "$@"; do
  case "$arg" in
    --fresh) fresh=1 ;;
    *) die "start.sh: unknown option '$arg'" ;;
  esac
done

run="$RUN_HOME/$name"
if pid="$(running_pid "$name")" && [[ -n "$pid" ]]; then
  if stomp_probe "$name" 2>/dev/null; then
    log "$name: already running (pid $pid)"
    exit 0
  fi
  die "$name: pid $pid is alive but STOMP does not answer; run brokers/stop.sh $name first"
fi
if [[ $fresh -eq 1 ]]; then
  log "$name: --fresh: removing ${run#"$REPO_ROOT"/}"
  rm -rf "$run"
fi
mkdir -p "$run/log"

for port in $(broker_ports "$name"); do
  if port_open "$port"; then
    die "$name: port 127.0.0.1:$port is already in use by another process (see: ss -ltnp 'sport = :$port')"
  fi
done

start_rabbitmq() {
  local plugins_dir
  command -v erl >/dev/null || die "rabbitmq: erl not found; run brokers/install.sh rabbitmq"
  [[ -x /usr/lib/rabbitmq/bin/rabbitmq-server ]] || die "rabbitmq: not installed; run brokers/install.sh rabbitmq"
  mkdir -p "$run/home" "$run/mnesia" "$run/log"
  cat >"$run/rabbitmq.conf" <<EOF
listeners.tcp.1 = 127.0.0.1:$RABBITMQ_AMQP_PORT
stomp.listeners.tcp.1 = 127.0.0.1:$RABBITMQ_STOMP_PORT
web_stomp.tcp.ip = 127.0.0.1
web_stomp.tcp.port = $RABBITMQ_WS_PORT
loopback_users.guest = true
stomp.default_vhost = /
log.file.level = info
log.console = false
EOF
  echo '[rabbitmq_stomp,rabbitmq_web_stomp,rabbitmq_amqp1_0].' >"$run/enabled_plugins"
  : >"$run/rabbitmq-env.conf"
  # epmd: reuse one that listens already; otherwise start our own (loopback only) and remember it.
  if port_open "$EPMD_PORT"; then
    log "rabbitmq: epmd already listens on $EPMD_PORT; using it"
    rm -f "$run/epmd.pid"
  else
    ERL_EPMD_ADDRESS=127.0.0.1 setsid epmd -port "$EPMD_PORT" >"$run/log/epmd.log" 2>&1 </dev/null &
    echo $! >"$run/epmd.pid"
    log "rabbitmq: started epmd on 127.0.0.1:$EPMD_PORT (pid $(cat "$run/epmd.pid"))"
  fi
  plugins_dir="$(compgen -G '/usr/lib/rabbitmq/lib/rabbitmq_server-*/plugins' | head -1)"
  env HOME="$run/home" \
    RABBITMQ_NODENAME=rabbit@localhost RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 \
    RABBITMQ_NODE_PORT="$RABBITMQ_AMQP_PORT" RABBITMQ_DIST_PORT="$RABBITMQ_DIST_PORT" \
    ERL_EPMD_ADDRESS=127.0.0.1 ERL_EPMD_PORT="$EPMD_PORT" \
    RABBITMQ_CONFIG_FILE="$run/rabbitmq.conf" RABBITMQ_ENABLED_PLUGINS_FILE="$run/enabled_plugins" \
    RABBITMQ_PLUGINS_DIR="$plugins_dir" \
    RABBITMQ_MNESIA_BASE="$run/mnesia" RABBITMQ_LOG_BASE="$run/log" RABBITMQ_CONF_ENV_FILE="$run/rabbitmq-env.conf" \
    RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}" \
    setsid /usr/lib/rabbitmq/bin/rabbitmq-server >"$run/log/stdout.log" 2>&1 </dev/null &
  echo $! >"$(pid_file rabbitmq)"
}

# write_activemq_xml BROKER_NAME EXTRA_XML NAME=URI...: $run/conf/activemq.xml for ActiveMQ Classic (5 and 6):
# persistent (KahaDB under $run/data), no JMX, no scheduler, EXTRA_XML (whole lines) after the persistence
# adapter, and one transport connector per NAME=URI.
write_activemq_xml() {
  local broker="$1" extra="$2" connectors="" connector
  shift 2
  for connector in "$@"; do
    connectors+="      <transportConnector name=\"${connector%%=*}\" uri=\"${connector#*=}\"/>"$'\n'
  done
  mkdir -p "$run/conf" "$run/data"
  cat >"$run/conf/activemq.xml" <<EOF
<beans xmlns="http://www.springframework.org/schema/beans"
       xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
       xsi:schemaLocation="http://www.springframework.org/schema/beans http://www.springframework.org/schema/beans/spring-beans.xsd
                           http://activemq.apache.org/schema/core http://activemq.apache.org/schema/core/activemq-core.xsd">
  <broker xmlns="http://activemq.apache.org/schema/core" brokerName="$broker" useJmx="false"
          dataDirectory="$run/data" persistent="true" schedulerSupport="false">
    <persistenceAdapter><kahaDB directory="$run/data/kahadb"/></persistenceAdapter>
${extra}    <transportConnectors>
${connectors}    </transportConnectors>
  </broker>
</beans>
EOF
}

start_activemq() {
  [[ -f /usr/share/activemq/bin/activemq.jar ]] || die "activemq: not installed; run brokers/install.sh activemq"
  write_activemq_xml ackspec-activemq "" \
    "openwire=tcp://127.0.0.1:$ACTIVEMQ_OPENWIRE_PORT" "stomp=stomp://127.0.0.1:$ACTIVEMQ_STOMP_PORT"
  # Debian's build logs through log4j 1.2.
  cat >"$run/conf/log4j.properties" <<EOF
log4j.rootLogger=INFO, logfile
log4j.appender.logfile=org.apache.log4j.FileAppender
log4j.appender.logfile.file=$run/log/activemq.log
log4j.appender.logfile.layout=org.apache.log4j.PatternLayout
log4j.appender.logfile.layout.ConversionPattern=%d | %-5p | %m | %c | %t%n
EOF
  setsid java -Xms128m -Xmx"$JAVA_HEAP" \
    --add-reads=java.xml=java.logging \
    --add-opens java.base/java.security=ALL-UNNAMED --add-opens java.base/java.net=ALL-UNNAMED \
    --add-opens java.base/java.lang=ALL-UNNAMED --add-opens java.base/java.util=ALL-UNNAMED \
    --add-opens java.naming/javax.naming.spi=ALL-UNNAMED --add-opens java.rmi/sun.rmi.transport.tcp=ALL-UNNAMED \
    --add-opens java.base/java.util.concurrent=ALL-UNNAMED --add-opens java.base/java.util.concurrent.atomic=ALL-UNNAMED \
    -Dlog4j.configuration="file:$run/conf/log4j.properties" \
    -Dactivemq.classpath="$run/conf" -Dactivemq.home=/usr/share/activemq -Dactivemq.base="$run" \
    -Dactivemq.conf="$run/conf" -Dactivemq.data="$run/data" \
    -jar /usr/share/activemq/bin/activemq.jar start "xbean:file:$run/conf/activemq.xml" \
    >"$run/log/stdout.log" 2>&1 </dev/null &
  echo $! >"$(pid_file activemq)"
}

start_artemis() {
  local home="$DIST_HOME/apache-artemis-$ARTEMIS_VERSION" inst="$run/instance"
  [[ -x "$home/bin/artemis" ]] || die "artemis: $ARTEMIS_VERSION not installed; run brokers/install.sh artemis"
  if [[ ! -f "$inst/etc/broker.xml" ]]; then
    log "artemis: creating instance in ${inst#"$REPO_ROOT"/}"
    "$home/bin/artemis" create "$inst" --silent --force --allow-anonymous --user admin --password admin \
      --host 127.0.0.1 --default-port "$ARTEMIS_CORE_PORT" --no-web --no-autotune --nio \
      --no-amqp-acceptor --no-stomp-acceptor --no-mqtt-acceptor --no-hornetq-acceptor \
      --java-memory "${JAVA_HEAP^^}" >"$run/log/create.log" 2>&1 \
      || { tail -20 "$run/log/create.log" >&2; die "artemis: 'artemis create' failed"; }
    # Core only on the default acceptor; STOMP and AMQP each on their own port, with /queue/ and
    # /topic/ prefixes meaning anycast (queue) and multicast (topic), as on the other brokers.
    python3 - "$inst/etc/broker.xml" "$ARTEMIS_STOMP_PORT" "$ARTEMIS_AMQP_PORT" <<'PY'
import re, sys
path, stomp, amqp = sys.argv[1], sys.argv[2], sys.argv[3]
xml = open(path, encoding="utf-8").read()
xml, n = re.subn(r"protocols=[A-Z,]+", "protocols=CORE", xml, count=1)
prefixes = "anycastPrefix=/queue/;multicastPrefix=/topic/"
extra = (
    f'         <acceptor name="stomp">tcp://127.0.0.1:{stomp}?protocols=STOMP;useEpoll=true;{prefixes}</acceptor>\n'
    f'         <acceptor name="amqp">tcp://127.0.0.1:{amqp}?protocols=AMQP;useEpoll=true;amqpCredits=1000;'
    f'amqpLowCredits=300;amqpDuplicateDetection=true;{prefixes}</acceptor>\n'
)
xml = xml.replace("      </acceptors>", extra + "      </acceptors>", 1)
if n != 1 or extra not in xml:
    sys.exit("could not rewrite the acceptors in " + path)
open(path, "w", encoding="utf-8").write(xml)
PY
  fi
  setsid "$inst/bin/artemis" run >"$run/log/stdout.log" 2>&1 </dev/null &
  echo $! >"$(pid_file artemis)"
}

# No web console, no JMX: the broker alone, STOMP + AMQP + OpenWire on loopback.
ACTIVEMQ6_SYSTEM_USAGE='    <systemUsage><systemUsage>
      <memoryUsage><memoryUsage percentOfJvmHeap="70"/></memoryUsage>
      <storeUsage><storeUsage limit="4 gb"/></storeUsage>
      <tempUsage><tempUsage limit="1 gb"/></tempUsage>
    </systemUsage></systemUsage>
'

start_activemq6() {
  local home="$DIST_HOME/activemq6-$ACTIVEMQ6_VERSION"
  [[ -f "$home/.complete" ]] || die "activemq6: $ACTIVEMQ6_VERSION not installed; run brokers/install.sh activemq6"
  write_activemq_xml ackspec-activemq6 "$ACTIVEMQ6_SYSTEM_USAGE" \
    "openwire=tcp://127.0.0.1:$ACTIVEMQ6_OPENWIRE_PORT" "stomp=stomp://127.0.0.1:$ACTIVEMQ6_STOMP_PORT" \
    "amqp=amqp://127.0.0.1:$ACTIVEMQ6_AMQP_PORT" "ws=ws://127.0.0.1:$ACTIVEMQ6_WS_PORT"
  cat >"$run/conf/log4j2.properties" <<EOF
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
appender.file.type = File
appender.file.name = file
appender.file.fileName = $run/log/activemq.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{ISO8601} %-5p %c{1} - %m%n
EOF
  setsid java -Xms128m -Xmx"$JAVA_HEAP" \
    -Dlog4j2.configurationFile="$run/conf/log4j2.properties" \
    -Dactivemq.home="$home" -Dactivemq.base="$run" -Dactivemq.conf="$run/conf" -Dactivemq.data="$run/data" \
    -cp "$home/lib/*" org.apache.activemq.console.command.ShellCommand start "xbean:file:$run/conf/activemq.xml" \
    >"$run/log/stdout.log" 2>&1 </dev/null &
  echo $! >"$(pid_file activemq6)"
}

t0=$(date +%s.%N)
log "$name: starting (ports: $(broker_ports "$name"); state: ${run#"$REPO_ROOT"/})"
"start_$name"
pid="$(cat "$(pid_file "$name")")"
deadline=$(( $(date +%s) + START_DEADLINE ))
last="no port open yet"
while :; do
  if ! kill -0 "$pid" 2>/dev/null; then
    log "$name: process $pid exited during start-up; last lines of its logs:" >&2
    tail -n 25 "$run"/log/*.log >&2 || true
    rm -f "$(pid_file "$name")"
    die "$name: failed to start"
  fi
  ready=1
  for port in $(broker_ports "$name"); do
    if ! port_open "$port"; then ready=0; last="127.0.0.1:$port not accepting yet"; break; fi
  done
  if [[ $ready -eq 1 ]]; then
    if probe_out="$(stomp_probe "$name" 2>&1)"; then
      break
    fi
    last="STOMP probe: $probe_out"
  fi
  if (( $(date +%s) >= deadline )); then
    log "$name: not ready after ${START_DEADLINE}s ($last); last lines of its logs:" >&2
    tail -n 25 "$run"/log/*.log >&2 || true
    die "$name: start timed out (the process $pid is left running; brokers/stop.sh $name stops it)"
  fi
  sleep 0.2
done
t1=$(date +%s.%N)
log "$name: ready in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s (pid $pid; STOMP CONNECTED on 127.0.0.1:$(broker_stomp_port "$name"))"
