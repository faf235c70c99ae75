#!/usr/bin/env bash
# Builds every release artifact into dist/ (or the directory given with
# -out): static binaries and archives for linux/amd64, linux/arm64,
# darwin/amd64 and darwin/arm64, shell completions, the OCI image
# (dist/image, plus a `docker load` tarball per architecture), .deb and .rpm
# packages, and SHA256SUMS. Needs only Go: no Docker daemon, no nfpm or
# rpmbuild. Flags are those of packaging/build (-targets, -version, -out).
set -euo pipefail
cd "$(dirname "$0")/.."
exec go run ./packaging/build "$@"
