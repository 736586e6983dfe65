#!/bin/sh
# A consumer `matchcast verify` can grade, in shell: mosquitto_sub reads the stream, jq keeps
# each match's score and status from the events (consumer.jq), mosquitto_pub reports each
# change, retained. See docs/verify.md.
#
#   examples/verify/consumer.sh --port 1883 --id sh-example &
#   matchcast verify --consumer sh-example --broker mqtt://127.0.0.1:1883
set -eu
host=127.0.0.1 port=1883 root=matchcast-verify id=sh-example
while [ $# -gt 1 ]; do
    case $1 in
        --host) host=$2 ;; --port) port=$2 ;; --root) root=$2 ;; --id) id=$2 ;;
        *) echo "usage: $0 [--host H] [--port P] [--root R] [--id ID]" >&2; exit 2 ;;
    esac
    shift 2
done

mosquitto_sub -h "$host" -p "$port" -q 1 -F '%J' \
    -t "$root/matches/+/events" -t "$root/matches/+/state" 2>/dev/null |
jq -n -r --unbuffered --arg prefix "$root/consumers/$id/state/" -f "$(dirname "$0")/consumer.jq" |
while read -r topic report; do
    mosquitto_pub -h "$host" -p "$port" -q 1 -r -t "$topic" -m "$report"
done
