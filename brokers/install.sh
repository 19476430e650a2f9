#!/usr/bin/env bash
# Installs real brokers for the conformance runs, idempotently, from package registries only.
#
#   brokers/install.sh [NAME...]      NAME in: rabbitmq activemq artemis activemq6 (default: all)
#
#   rabbitmq   Debian's rabbitmq-server (3.10.x); plugins are enabled per run by start.sh through our
#              own enabled_plugins file, so nothing system-wide is changed.
#   activemq   Debian's activemq (5.17.x; no AMQP module in that build).
#   artemis    apache-artemis-<ver>-bin.tar.gz from Maven Central (mvn dependency:copy), unpacked
#              under .brokers/dist/.
#   activemq6  ActiveMQ Classic 6.x: the apache-activemq -bin.tar.gz is not in the registry, so the
#              broker's own modules (broker, stomp, amqp, http for ws://, kahadb, spring, console) are fetched with
#              mvn dependency:copy-dependencies into .brokers/dist/activemq6-<ver>/lib.
# Needs root for apt-get (Debian packages), Java 17 and Maven for the others.
source "$(dirname "$0")/common.sh"

names=("$@")
[[ ${#names[@]} -eq 0 ]] && names=("${ALL_BROKERS[@]}")
for name in "${names[@]}"; do check_name "$name"; done

mkdir -p "$DIST_HOME"
apt_updated=0

apt_install() {
  local pkg="$1"
  if dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q '^install ok installed$'; then
    log "$pkg: already installed ($(dpkg-query -W -f='${Version}' "$pkg"))"
    return 0
  fi
  command -v apt-get >/dev/null || die "$pkg: apt-get not found (Debian/Ubuntu needed)"
  [[ $(id -u) -eq 0 ]] || die "$pkg: installing Debian packages needs root"
  if [[ $apt_updated -eq 0 ]]; then
    log "apt-get update"
    apt-get update -q >/dev/null || die "apt-get update failed"
    apt_updated=1
  fi
  log "$pkg: apt-get install"
  # policy-rc.d on containers refuses to start services; we never use the packaged service anyway.
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$pkg" >/dev/null \
    || die "$pkg: apt-get install failed"
  log "$pkg: installed ($(dpkg-query -W -f='${Version}' "$pkg"))"
}

need_maven() {
  command -v mvn >/dev/null || die "mvn not found: install Maven (apt-get install maven)"
  command -v java >/dev/null || die "java not found: install a JDK 17 (apt-get install openjdk-17-jdk-headless)"
}

install_artemis() {
  local dir="$DIST_HOME/apache-artemis-$ARTEMIS_VERSION" tmp
  if [[ -x "$dir/bin/artemis" ]]; then
    log "artemis: $ARTEMIS_VERSION already unpacked in ${dir#"$REPO_ROOT"/}"
    return 0
  fi
  need_maven
  tmp="$DIST_HOME/download"
  mkdir -p "$tmp"
  log "artemis: mvn dependency:copy org.apache.activemq:apache-artemis:$ARTEMIS_VERSION:tar.gz:bin"
  mvn -B -q org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy \
    -Dartifact="org.apache.activemq:apache-artemis:$ARTEMIS_VERSION:tar.gz:bin" \
    -DoutputDirectory="$tmp" -Dmdep.overWriteReleases=true >"$tmp/mvn-artemis.log" 2>&1 \
    || { tail -20 "$tmp/mvn-artemis.log" >&2; die "artemis: mvn dependency:copy failed (log: $tmp/mvn-artemis.log)"; }
  log "artemis: unpacking"
  tar -xzf "$tmp/apache-artemis-$ARTEMIS_VERSION-bin.tar.gz" -C "$DIST_HOME" || die "artemis: unpack failed"
  [[ -x "$dir/bin/artemis" ]] || die "artemis: $dir/bin/artemis missing after unpack"
  rm -f "$tmp/apache-artemis-$ARTEMIS_VERSION-bin.tar.gz"
  log "artemis: $ARTEMIS_VERSION installed in ${dir#"$REPO_ROOT"/}"
}

install_activemq6() {
  local dir="$DIST_HOME/activemq6-$ACTIVEMQ6_VERSION"
  # activemq-http: an install from before the ws:// connector lacks it and is redone
  if [[ -f "$dir/lib/activemq-broker-$ACTIVEMQ6_VERSION.jar" && -f "$dir/lib/activemq-http-$ACTIVEMQ6_VERSION.jar" \
        && -f "$dir/.complete" ]]; then
    log "activemq6: $ACTIVEMQ6_VERSION already in ${dir#"$REPO_ROOT"/}"
    return 0
  fi
  need_maven
  mkdir -p "$dir"
  sed -e "s/@ACTIVEMQ6_VERSION@/$ACTIVEMQ6_VERSION/" \
      -e "s/@SPRING_VERSION@/$ACTIVEMQ6_SPRING_VERSION/" \
      -e "s/@LOG4J_VERSION@/$ACTIVEMQ6_LOG4J_VERSION/" \
      -e "s/@JETTY_VERSION@/$ACTIVEMQ6_JETTY_VERSION/" \
      "$BROKERS_SRC/activemq6/runtime-pom.xml" >"$dir/pom.xml"
  log "activemq6: mvn dependency:copy-dependencies (activemq-broker/stomp/amqp/http/kahadb-store/spring/console $ACTIVEMQ6_VERSION)"
  rm -rf "$dir/lib"
  mvn -B -q -f "$dir/pom.xml" org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies \
    -DoutputDirectory="$dir/lib" -DincludeScope=runtime >"$dir/mvn.log" 2>&1 \
    || { tail -20 "$dir/mvn.log" >&2; die "activemq6: mvn dependency:copy-dependencies failed (log: $dir/mvn.log)"; }
  # spring-jcl replaces commons-logging; both on the class path only produce a warning.
  rm -f "$dir"/lib/commons-logging-*.jar
  [[ -f "$dir/lib/activemq-broker-$ACTIVEMQ6_VERSION.jar" ]] || die "activemq6: activemq-broker jar missing"
  [[ -f "$dir/lib/activemq-http-$ACTIVEMQ6_VERSION.jar" ]] || die "activemq6: activemq-http jar (ws://) missing"
  touch "$dir/.complete"
  log "activemq6: $ACTIVEMQ6_VERSION installed in ${dir#"$REPO_ROOT"/} ($(find "$dir/lib" -name '*.jar' | wc -l) jars)"
}

for name in "${names[@]}"; do
  case "$name" in
    rabbitmq)
      apt_install rabbitmq-server
      for plugin in rabbitmq_stomp rabbitmq_web_stomp rabbitmq_amqp1_0; do
        compgen -G "/usr/lib/rabbitmq/lib/rabbitmq_server-*/plugins/$plugin-*" >/dev/null \
          || die "rabbitmq: plugin $plugin not shipped by the installed package"
      done
      ;;
    activemq)
      apt_install activemq
      [[ -f /usr/share/activemq/bin/activemq.jar ]] || die "activemq: /usr/share/activemq/bin/activemq.jar missing"
      ;;
    artemis) install_artemis ;;
    activemq6) install_activemq6 ;;
  esac
done
log "install done: ${names[*]}"
