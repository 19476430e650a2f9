#!/usr/bin/env bash
# Regenerates docs/client-matrix.md: every client library of scripts/clients.list through the client-side
# suite (`ackspec run --client`, against the embedded reference broker or the broker the list names, which must
# be up: bash brokers/start.sh NAME), then `ackspec matrix` over those runs.
#   bash scripts/client-matrix.sh [OUT]      # runs in OUT (default ackspec-out/clients), replaced each time
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-ackspec-out/clients}
rm -rf "$OUT" && mkdir -p "$OUT"
status=0
while read -r name broker client; do
  case "$name" in ''|'#'*) continue ;; esac
  on=()
  [ "$broker" = reference ] || on=(--broker "$broker")  # a broker of brokers/: it must be up
  echo "::: $name ($client against $broker)"
  ackspec run --client "$client" "${on[@]}" --out "$OUT/$name" --no-report </dev/null | tail -n 1 || status=1
done < scripts/clients.list
ackspec matrix "$OUT"/* --out docs/client-matrix.md
exit "$status"
