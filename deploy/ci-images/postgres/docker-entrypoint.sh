#!/bin/bash
# Entrypoint of the stand-in Postgres image: on the first start (empty
# $PGDATA) it creates the cluster with the superuser $POSTGRES_USER (default
# postgres) and password $POSTGRES_PASSWORD, the database $POSTGRES_DB
# (default: the user's name), runs /docker-entrypoint-initdb.d/*.sql|*.sh on
# a server that listens on its socket only, then starts the real server.
set -euo pipefail

if [ "${1:0:1}" = "-" ]; then set -- postgres "$@"; fi

if [ "$1" = "postgres" ] && [ "$(id -u)" = "0" ]; then
  mkdir -p "$PGDATA"
  chown -R postgres:postgres "$PGDATA" /var/run/postgresql
  chmod 700 "$PGDATA"
  exec setpriv --reuid=postgres --regid=postgres --init-groups "${BASH_SOURCE[0]}" "$@"
fi

if [ "$1" = "postgres" ] && [ ! -s "$PGDATA/PG_VERSION" ]; then
  user="${POSTGRES_USER:-postgres}"
  db="${POSTGRES_DB:-$user}"
  method="${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}"
  if [ -z "${POSTGRES_PASSWORD:-}" ] && [ "$method" != "trust" ]; then
    echo "error: POSTGRES_PASSWORD is not set (set POSTGRES_HOST_AUTH_METHOD=trust to allow connections without one)" >&2
    exit 1
  fi
  pwfile="$(mktemp)"
  printf '%s' "${POSTGRES_PASSWORD:-}" > "$pwfile"
  initdb --username="$user" --pwfile="$pwfile" --encoding=UTF8 --locale=C.UTF-8 \
    --auth-local=trust --auth-host="$method" -D "$PGDATA" > /dev/null
  rm -f "$pwfile"
  echo "host all all all $method" >> "$PGDATA/pg_hba.conf"
  echo "listen_addresses = '*'" >> "$PGDATA/postgresql.conf"
  pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start
  if [ "$db" != "postgres" ]; then
    psql -v ON_ERROR_STOP=1 --username "$user" --dbname postgres -q -c "CREATE DATABASE \"$db\""
  fi
  for f in /docker-entrypoint-initdb.d/*; do
    case "$f" in
      *.sh) echo "running $f"; . "$f" ;;
      *.sql) echo "running $f"; psql -v ON_ERROR_STOP=1 --username "$user" --dbname "$db" -f "$f" ;;
      *) ;;
    esac
  done
  pg_ctl -D "$PGDATA" -m fast -w stop
  echo "PostgreSQL init process complete; ready for start up."
fi

exec "$@"
