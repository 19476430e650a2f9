#!/usr/bin/env bash
# Lists the brokers started by start.sh: pid, resident memory, ports and whether STOMP answers.
#
#   brokers/status.sh [NAME...]      exit 0 always (a report, not a check)
source "$(dirname "$0")/common.sh"

names=("$@")
[[ ${#names[@]} -eq 0 ]] && names=("${ALL_BROKERS[@]}")
for name in "${names[@]}"; do check_name "$name"; done

# Resident memory of a pid and its descendants, in MiB.
tree_rss_mib() {
  local pid="$1" total=0 child rss
  rss="$(ps -o rss= -p "$pid" 2>/dev/null | tr -d ' ')"
  total=$(( ${rss:-0} ))
  for child in $(ps -o pid= --ppid "$pid" 2>/dev/null); do
    total=$(( total + $(tree_rss_mib "$child") * 1024 ))
  done
  echo $(( total / 1024 ))
}

printf '%-10s %-8s %-9s %-8s %s\n' NAME STATE PID RSS PORTS
for name in "${names[@]}"; do
  pid="$(running_pid "$name")"
  ports=""
  for port in $(broker_ports "$name"); do
    if port_open "$port"; then ports+="$port:open "; else ports+="$port:closed "; fi
  done
  if [[ -z "$pid" ]]; then
    printf '%-10s %-8s %-9s %-8s %s\n' "$name" stopped - - "$ports"
    continue
  fi
  state=running
  stomp_probe "$name" >/dev/null 2>&1 || state=no-stomp
  printf '%-10s %-8s %-9s %-8s %s\n' "$name" "$state" "$pid" "$(tree_rss_mib "$pid")M" "$ports"
done
