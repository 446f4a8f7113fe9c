#!/bin/sh
# Arguments that start with "-" are options of nats-server.
set -e
case "${1:-}" in
  -*) set -- nats-server "$@" ;;
esac
exec "$@"
