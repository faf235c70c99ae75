#!/usr/bin/env bash
# The whole test suite: installs what the tests need (kcat), then runs every
# Go test with the race detector, and each fuzz target briefly.
set -euo pipefail
cd "$(dirname "$0")/.."

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
