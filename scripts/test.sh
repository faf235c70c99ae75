#!/usr/bin/env bash
# The whole test suite: installs what the tests need (kcat, chromium, the
# tools to build node-rdkafka), then runs every Go test with the race
# detector, and each fuzz target briefly.
set -euo pipefail
cd "$(dirname "$0")/.."

# node-rdkafka 3.6.1 (librdkafka 2.12, a KIP-714 client) for
# e2e/telemetry_test.go, built from npm into a cache outside the repo and
# reused once built. A first build takes about 7 minutes: it starts now, in
# the background at nice 19, so that it overlaps go vet and the Go tests;
# the telemetry test waits for it (bounded) and fails when it failed
# (TOLLGATE_REQUIRE_NODE_RDKAFKA=1), showing the end of its log.
NRD_DIR=${TOLLGATE_NODE_RDKAFKA:-${XDG_CACHE_HOME:-$HOME/.cache}/tollgate-test/node-rdkafka-3.6.1}
export TOLLGATE_NODE_RDKAFKA=$NRD_DIR TOLLGATE_REQUIRE_NODE_RDKAFKA=1
NRD_PID=
if [ -f "$NRD_DIR/.tollgate-complete" ]; then
  echo "== node-rdkafka: built in $NRD_DIR"
else
  missing=
  for tool in node npm make g++ python3; do command -v "$tool" >/dev/null 2>&1 || missing=1; done
  if [ -n "$missing" ]; then
    echo "== installing nodejs, npm, make, g++, python3 (Debian packages, to build node-rdkafka)"
    if [ "$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi
    $SUDO apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq nodejs npm make g++ python3 >/dev/null
  fi
  echo "== node-rdkafka: building in the background into $NRD_DIR (log: $NRD_DIR.log)"
  rm -f "$NRD_DIR.failed"
  # Its own process group, so that an early exit can stop the whole build.
  setsid scripts/node-rdkafka.sh "$NRD_DIR" >/dev/null 2>&1 &
  NRD_PID=$!
fi
stop_build() {
  if [ -n "$NRD_PID" ] && kill -0 "$NRD_PID" 2>/dev/null; then
    echo "== stopping the unfinished node-rdkafka build"
    kill -- "-$NRD_PID" 2>/dev/null || true
  fi
}
trap stop_build EXIT

if ! command -v kcat >/dev/null 2>&1; then
  echo "== installing kcat (Debian package)"
  if [ "$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi
  $SUDO apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq kcat >/dev/null
fi

if [ ! -x /usr/bin/chromium ]; then
  echo "== installing chromium (Debian package, for the dashboard test)"
  if [ "$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi
  $SUDO apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi

echo "== go vet"
go vet ./...

echo "== go test (race)"
go test -race -count=1 -timeout 20m ./...

if [ -n "$NRD_PID" ]; then
  # The telemetry test has waited for it; this only says how it went.
  if wait "$NRD_PID"; then
    echo "== node-rdkafka: built in $(cat "$NRD_DIR/.tollgate-complete")s"
  else
    echo "== node-rdkafka build FAILED; the end of $NRD_DIR.log:"
    tail -n 30 "$NRD_DIR.log" || true
    exit 1
  fi
fi

echo "== fuzz targets (100000 inputs each)"
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  for f in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
    echo "-- $pkg $f"
    if ! out=$(go test -run '^$' -fuzz "^$f\$" -fuzztime "${FUZZTIME:-100000x}" "$pkg" 2>&1); then
      echo "$out"; exit 1
    fi
  done
done
echo "== all tests passed"
