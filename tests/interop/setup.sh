#!/usr/bin/env bash
# Installs the non-Python STOMP clients used by tests/interop (npm "stompit"; "@stomp/stompjs" with "ws" for
# STOMP over WebSocket), pinned by package-lock.json.
set -euo pipefail
cd "$(dirname "$0")"
npm ci --no-audit --no-fund
