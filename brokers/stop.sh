#!/usr/bin/env bash
# Stops brokers started by start.sh: a clean shutdown first, SIGKILL after $ACKSPEC_STOP_DEADLINE
# seconds (default 20). Also stops the epmd that start.sh launched for RabbitMQ (never another one).
#
#   brokers/stop.sh NAME...     NAME in: rabbitmq activemq artemis activemq6, or 'all'
# Stopping a broker that is not running is not an error.
source "$(dirname "$0")/common.sh"

[[ $# -ge 1 ]] || die "usage: brokers/stop.sh NAME... | all   (NAME: ${ALL_BROKERS[*]})"
names=("$@")
[[ "${names[0]}" == all ]] && names=("${ALL_BROKERS[@]}")
for name in "${names[@]}"; do check_name "$name"; done

# The pid and its descendants (the rabbitmq-server wrapper runs erl as a child), deepest first.
process_tree() {
  local pid="$1" child
  for child in $(ps -o pid= --ppid "$pid" 2>/dev/null); do
    process_tree "$child"
  done
  echo "$pid"
}

wait_gone() {
  local deadline=$(( $(date +%s) + $2 )) pid
  while (( $(date +%s) < deadline )); do
    local alive=0
    for pid in $1; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [[ $alive -eq 0 ]] && return 0
    sleep 0.2
  done
  return 1
}

stop_one() {
  local name="$1" run="$RUN_HOME/$1" pid tree t0 t1
  pid="$(running_pid "$name")"
  if [[ -z "$pid" ]]; then
    log "$name: not running"
  else
    t0=$(date +%s.%N)
    tree="$(process_tree "$pid" | tr '\n' ' ')"
    log "$name: stopping (pid $pid)"
    if [[ "$name" == rabbitmq ]]; then
      HOME="$run/home" ERL_EPMD_PORT="$EPMD_PORT" timeout "$STOP_DEADLINE" \
        /usr/lib/rabbitmq/bin/rabbitmqctl -n rabbit@localhost shutdown >"$run/log/shutdown.log" 2>&1 \
        || { log "$name: rabbitmqctl shutdown failed (see $run/log/shutdown.log); sending SIGTERM"; kill -TERM "$pid" 2>/dev/null || true; }
    else
      # The JVM brokers stop cleanly on SIGTERM through their shutdown hooks.
      kill -TERM "$pid" 2>/dev/null || true
    fi
    if ! wait_gone "$tree" "$STOP_DEADLINE"; then
      log "$name: still alive after ${STOP_DEADLINE}s; SIGKILL to $tree"
      # shellcheck disable=SC2086
      kill -KILL $tree 2>/dev/null || true
      wait_gone "$tree" 5 || die "$name: processes $tree survived SIGKILL"
    fi
    t1=$(date +%s.%N)
    log "$name: stopped in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s"
  fi
  rm -f "$(pid_file "$name")"
  if [[ "$name" == rabbitmq && -f "$run/epmd.pid" ]]; then
    pid="$(cat "$run/epmd.pid")"
    if kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid" 2>/dev/null || true
      wait_gone "$pid" 5 || kill -KILL "$pid" 2>/dev/null || true
      log "rabbitmq: stopped the epmd we started (pid $pid)"
    fi
    rm -f "$run/epmd.pid"
  fi
}

for name in "${names[@]}"; do stop_one "$name"; done
