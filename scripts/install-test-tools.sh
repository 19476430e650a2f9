#!/usr/bin/env bash
# Installs the non-Python tools some tests drive: Debian's Chromium (the report page is checked in a
# headless browser) and the Node clients we did not write (STOMP: stompit; AMQP 1.0: rhea), pinned by
# their committed package-lock.json files. Idempotent; needs root for apt-get and the npm registry.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v chromium >/dev/null 2>&1; then
  echo "install-test-tools: installing Debian's chromium"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi

for dir in tests/interop tests/interop_amqp; do
  if [ -f "$dir/package-lock.json" ]; then
    echo "install-test-tools: npm ci in $dir"
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
  fi
done

# the Java shim around the real JMS clients (Artemis, ActiveMQ Classic, Qpid JMS), from Maven Central
echo "install-test-tools: building the Java JMS shim (adapters/java)"
bash adapters/java/build.sh

# the class-data sharing archive of small Spark sessions (ackspec.pipeline.class_cache), so that the machine's
# first `ackspec report --engine spark` starts its JVM as fast as later ones (a minute of CPU here, once)
echo "install-test-tools: writing the Spark class archive"
python3 -m ackspec.pipeline.warmup
