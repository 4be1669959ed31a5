#!/usr/bin/env bash
# Build Jaeger v2 (the `jaeger` binary of github.com/jaegertracing/jaeger/cmd/jaeger) that the end-to-end tests
# run, once, and print the binary's path; the same scheme as build.sh for the Collector.
#
#   bash tests/collector/build-jaeger.sh          # build (or reuse) and print the path on stdout
#   export LOOPGUARD_JAEGER="$(bash tests/collector/build-jaeger.sh)"
#
# jaeger/go.mod pins Jaeger's Go module at v1.76.0, the module version of the Jaeger v2.13.0 release (Jaeger
# tags each v2 release with a v1 module version as well), with go.sum committed: a build needs only Go and the
# Go module proxy. A module build has no UI assets (the release binaries embed them); the tests use the HTTP API.
#
# Cache: ${LOOPGUARD_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/otel-loopguard}/jaeger-v1.76.0-<first 16 hex
# digits of the SHA-256 of jaeger/go.mod and jaeger/go.sum>; tests/support/jaeger.py computes the same path.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
SRC="$HERE/jaeger"
RELEASE="v1.76.0"
# The sources whose digest names the cached binary, in this order (tests/support/jaeger.py: SOURCE_FILES).
SOURCES=(go.mod go.sum)

log() { printf 'build-jaeger.sh: %s\n' "$*" >&2; }

# shellcheck source=gobuild.sh
source "$HERE/gobuild.sh"
go_environment "the Jaeger tests"
binary="$(cached_binary "jaeger-$RELEASE" "$SRC" "${SOURCES[@]}")"

if [[ -x "$binary" ]]; then
  log "up to date: $binary"
  printf '%s\n' "$binary"
  exit 0
fi

build_cached "$binary" "$SRC" version github.com/jaegertracing/jaeger/cmd/jaeger
printf '%s\n' "$binary"
