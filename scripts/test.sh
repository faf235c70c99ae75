#!/usr/bin/env bash
# The whole test suite: installs what the tests need (kcat, chromium, Node.js,
# Java and Maven, and into a cache confluent-kafka and kafkajs), fetches
# Apache Kafka's jars,
# then runs every Go test with the race detector — the broker-facing ones
# against kfake and a real 3-node Kafka 4.4 cluster, then their real rows
# again against Kafka 3.9 while each fuzz target runs briefly beside it.
set -euo pipefail
cd "$(dirname "$0")/.."
# The suite starts its own Kafka clusters: never a developer's
# (scripts/kafka-dev.sh) that this shell may name.
unset TOLLGATE_KAFKA_CLUSTER TOLLGATE_KAFKA_VERSION TOLLGATE_UPSTREAMS

# Node.js and npm for kafkajs (below), and python3 for the confluent-kafka
# client (whose wheel bundles librdkafka: the KIP-714 client of
# e2e/telemetry_test.go, with no build).
missing=
for tool in node npm python3; do command -v "$tool" >/dev/null 2>&1 || missing=1; done
if [ -n "$missing" ]; then
  echo "== installing nodejs, npm, python3 (Debian packages)"
  if [ "$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi
  $SUDO apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq nodejs npm python3 >/dev/null
fi

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

# Apache Kafka's broker, tools and Java client (4.4.0 and 3.9.2) from Maven
# Central, copied once into ${XDG_CACHE_HOME:-~/.cache}/tollgate-test/kafka-*
# (internal/testkit/kafka/pom.xml) and reused. The e2e tests start a 3-node
# KRaft cluster from them.
if ! command -v java >/dev/null 2>&1 || ! command -v mvn >/dev/null 2>&1; then
  echo "== installing Java 17 and Maven (Debian packages, for the real Kafka cluster)"
  if [ "$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi
  $SUDO apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq openjdk-17-jdk-headless maven >/dev/null
fi
# Two more client families, into the same cache: the confluent-kafka Python
# client (PyPI's wheel bundles its librdkafka) in a virtualenv, and kafkajs
# from npm. e2e/clients_test.go runs them (TOLLGATE_REQUIRE_CLIENTS=1:
# a missing one fails the test).
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/tollgate-test
PY_DIR=$CACHE/py-confluent-kafka-2.16.1
if [ ! -f "$PY_DIR/.tollgate-complete" ]; then
  echo "== installing confluent-kafka 2.16.1 (PyPI) into $PY_DIR"
  rm -rf "$PY_DIR"
  if ! python3 -m venv "$PY_DIR" >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi
    $SUDO apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-venv >/dev/null
    python3 -m venv "$PY_DIR"
  fi
  "$PY_DIR/bin/pip" install -q confluent-kafka==2.16.1
  touch "$PY_DIR/.tollgate-complete"
fi
JS_DIR=$CACHE/kafkajs-2.2.4
if [ ! -f "$JS_DIR/.tollgate-complete" ]; then
  echo "== installing kafkajs 2.2.4 (npm) into $JS_DIR"
  mkdir -p "$JS_DIR"
  npm install -s --prefix "$JS_DIR" kafkajs@2.2.4 >/dev/null
  touch "$JS_DIR/.tollgate-complete"
fi
export TOLLGATE_PYTHON=$PY_DIR/bin/python TOLLGATE_KAFKAJS=$JS_DIR TOLLGATE_REQUIRE_CLIENTS=1

echo "== Apache Kafka's jars"
if ! go run ./internal/testkit/kafka/kafkadev -fetch; then
  echo "== could not fetch Apache Kafka's jars from Maven Central (see above); the real-cluster tests need them" >&2
  exit 1
fi

echo "== go vet"
go vet ./...

echo "== go test (race): kfake and Apache Kafka 4.4.0"
go test -race -count=1 -timeout 20m ./...

# The real-cluster rows once more, against the 3.9 line (the tests with no
# real row skip themselves in this pass: they ran above), while the fuzz
# targets run beside it on one worker (the pass mostly waits on the
# brokers). Left out of this pass, having run against 4.4 above: what
# measures Tollgate's own timing, which another line of the broker does not
# change and a busy core would (the broker faults, the real-time rates, the
# wall-time bounds of the principal, mutation, credential and live-quota
# tests, shutdown), and Tollgate's own machinery over plain produce and
# fetch (its cluster, handover, restart, usage ledger, KIP-714 telemetry).
echo "== go test (race): the real-cluster rows against Apache Kafka 3.9.2, beside the fuzz targets"
KAFKA39_LOG=$(mktemp)
TOLLGATE_KAFKA_VERSION=3.9.2 TOLLGATE_UPSTREAMS=kafka go test -race -count=1 -timeout 15m \
  -skip 'TestRealBrokerFaults|RealTime|TestAuthQuotaFollowsPrincipal|TestControllerMutationQuotaStrict|TestCredentialsManagedLive|TestQuotaAPIAuditAndLiveEffect|TestShutdown|TestCluster|TestHandover|TestRestart|TestUsage|TestTelemetry' \
  ./e2e >"$KAFKA39_LOG" 2>&1 &
KAFKA39_PID=$!

fuzz_failed=
echo "== fuzz targets (${FUZZTIME:-30000x} inputs each, one worker)"
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  for f in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
    echo "-- $pkg $f"
    if ! out=$(go test -run '^$' -fuzz "^$f\$" -fuzztime "${FUZZTIME:-30000x}" -parallel 1 "$pkg" 2>&1); then
      echo "$out"; fuzz_failed=1; break 2
    fi
  done
done

kafka39_ok=1
wait "$KAFKA39_PID" || kafka39_ok=
echo "== the Kafka 3.9.2 pass:"
cat "$KAFKA39_LOG"
rm -f "$KAFKA39_LOG"
[ -z "$fuzz_failed" ] || { echo "== a fuzz target FAILED (above)"; exit 1; }
[ -n "$kafka39_ok" ] || { echo "== the Kafka 3.9.2 pass FAILED (above)"; exit 1; }

echo "== all tests passed"
