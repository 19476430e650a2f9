#!/usr/bin/env bash
# Installs the non-Python STOMP client used by tests/interop (npm "stompit", pinned by package-lock.json).
set -euo pipefail
cd "$(dirname "$0")"
npm ci --no-audit --no-fund
