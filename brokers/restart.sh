#!/usr/bin/env bash
# Restarts a broker started by start.sh, keeping its stored messages: a clean shutdown (stop.sh), then
# start.sh without --fresh, which returns once the broker answers a STOMP CONNECT. This is what
# `ackspec run --restart-command "bash brokers/restart.sh NAME"` runs where a test restarts the target.
#
#   brokers/restart.sh NAME     NAME in: rabbitmq activemq artemis activemq6
source "$(dirname "$0")/common.sh"

[[ $# -eq 1 ]] || die "usage: brokers/restart.sh NAME   (NAME: ${ALL_BROKERS[*]})"
check_name "$1"
bash "$(dirname "$0")/stop.sh" "$1" && bash "$(dirname "$0")/start.sh" "$1"
