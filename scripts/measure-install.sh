#!/usr/bin/env bash
# Measures README's install (`pip install -e .`) as a new user meets it: a fresh virtual environment, no pip
# cache. Prints when and where it ran, the load average before and after, the wall time and the venv's size.
#   bash scripts/measure-install.sh [PYTHON]      (default python3; the checkout is installed from where it is)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${1:-python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "started:  $(date -u +%FT%TZ) on $(hostname), $(nproc) cores, $($PYTHON --version 2>&1)"
echo "load:     $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min) before"
start=$SECONDS
"$PYTHON" -m venv "$work/venv"
"$work/venv/bin/pip" install --quiet --no-cache-dir --disable-pip-version-check -e . >"$work/pip.log" 2>&1 || {
  tail -n 20 "$work/pip.log"; echo "install FAILED"; exit 1; }
took=$((SECONDS - start))
echo "load:     $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min) after"
echo "install:  ${took} s ($((took / 60)) min $((took % 60)) s), venv $(du -sh "$work/venv" | cut -f1)"
"$work/venv/bin/ackspec" --version
