#!/usr/bin/env bash
# Builds the Java shim (adapters/java/target/ackspec-jms-shim.jar) from Maven Central: the JSON-lines
# shim of docs/shim-protocol.md around the Artemis, ActiveMQ Classic and Qpid JMS clients. Idempotent:
# skips the build when the jar is newer than every source file. Needs Java 17 and Maven.
set -euo pipefail
cd "$(dirname "$0")"
jar=target/ackspec-jms-shim.jar
command -v mvn >/dev/null || { echo "adapters/java/build.sh: mvn not found: install Maven (apt-get install maven)" >&2; exit 1; }
if [ -f "$jar" ] && [ -z "$(find pom.xml src -newer "$jar" -type f | head -1)" ]; then
  echo "adapters/java/build.sh: $jar is up to date"
  exit 0
fi
mvn -B -q package >target-build.log 2>&1 || { tail -30 target-build.log >&2; echo "adapters/java/build.sh: mvn package failed (log: adapters/java/target-build.log)" >&2; exit 1; }
rm -f target-build.log
echo "adapters/java/build.sh: built $jar"
