#!/usr/bin/env bash
# A real Apache Kafka on this machine, for trying Tollgate in front of it:
# three KRaft nodes (broker+controller) on 127.0.0.1, ports 29092-29115, from
# Maven Central's jars (fetched once into ~/.cache/tollgate-test; needs Java
# 17+ and Maven). Prints the upstream block for Tollgate's config and runs
# until Ctrl-C.
#
#   scripts/kafka-dev.sh                      # Kafka 4.4.0
#   scripts/kafka-dev.sh -version 3.9.2       # the 3.9 line
#   scripts/kafka-dev.sh -dir ./kafka-data    # keep the data between runs
set -euo pipefail
cd "$(dirname "$0")/.."
for tool in java mvn; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "kafka-dev: $tool is not installed (Kafka needs Java 17+; its jars come with Maven)" >&2
    exit 1
  fi
done
bin=${XDG_CACHE_HOME:-$HOME/.cache}/tollgate-test/bin
mkdir -p "$bin"
go build -o "$bin/kafkadev" ./internal/testkit/kafka/kafkadev
exec "$bin/kafkadev" "$@"
