#!/usr/bin/env bash
# Install the rhea AMQP 1.0 client exactly as locked (package-lock.json) into tests/interop_amqp/node_modules.
set -euo pipefail
cd "$(dirname "$0")"
npm ci --no-audit --no-fund
