#!/usr/bin/env bash
# Builds node-rdkafka 3.6.1 (which bundles librdkafka 2.12, a KIP-714 client
# that pushes telemetry) into DIR, a cache directory outside the repo, for
# the e2e telemetry test (e2e/telemetry_test.go). Debian's kcat links
# librdkafka 2.0.2, which predates KIP-714.
#
#   scripts/node-rdkafka.sh DIR
#
# DIR is reused when it holds a complete build (DIR/.tollgate-complete). The
# build happens in a temporary directory next to DIR, renamed to DIR only
# once the module loads, so DIR is never half-built. On failure DIR.failed
# is created; either way the build's output is in DIR.log. It runs at nice
# 19: scripts/test.sh starts it in the background, next to the Go tests.
set -euo pipefail
VERSION=3.6.1
dir=${1:?usage: scripts/node-rdkafka.sh DIR}
root=$(dirname "$dir")
mkdir -p "$root"
if [ -f "$dir/.tollgate-complete" ]; then
  exit 0
fi
rm -f "$dir.failed"
log="$dir.log"
: >"$log"
for tool in node npm make g++ python3; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "node-rdkafka build: $tool is not installed (Debian packages nodejs npm make g++ python3)" | tee -a "$log" >&2
    touch "$dir.failed"
    exit 1
  fi
done
# node-gyp builds against the installed Node's headers rather than
# downloading them.
if [ -z "${npm_config_nodedir:-}" ] && [ -f /usr/include/node/node.h ]; then
  export npm_config_nodedir=/usr
fi
# No parallel make: node-rdkafka's gyp actions race (librdkafka's config.h
# is not there yet for the targets that need it).
unset MAKEFLAGS JOBS
tmp=$(mktemp -d "$root/.node-rdkafka-build-XXXXXX")
# Stopped or failed, the partial build goes (a finished one was renamed).
trap 'rm -rf "$tmp"' EXIT
trap 'exit 143' TERM INT
start=$(date +%s)
if (
  cd "$tmp"
  echo '{"name":"tollgate-test-node-rdkafka","version":"0.0.0","private":true}' >package.json
  nice -n 19 npm install --no-audit --no-fund --loglevel=warn "node-rdkafka@$VERSION"
  node -e "const k = require('./node_modules/node-rdkafka'); console.log('node-rdkafka', require('./node_modules/node-rdkafka/package.json').version, 'librdkafka', k.librdkafkaVersion, k.features.join(','))"
) >>"$log" 2>&1; then
  took=$(($(date +%s) - start))
  echo "built in ${took}s" >>"$log"
  echo "$took" >"$tmp/.tollgate-complete"
  rm -rf "$dir"
  mv "$tmp" "$dir"
else
  rm -rf "$tmp"
  touch "$dir.failed"
  echo "node-rdkafka build failed after $(($(date +%s) - start))s; its output: $log" >&2
  tail -n 30 "$log" >&2
  exit 1
fi
